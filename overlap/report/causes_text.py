"""The "why exposed" section of the terminal report: `exposure_causes` of an analysis result
(defined in `overlap.analysis.causes`) as text. Renders only; computes nothing but shares."""

from __future__ import annotations

from typing import Any

from overlap.analysis.overlap import DIRECTIONS, format_ps

_OPS = 5  # ops named in the per-op line


def _share(part: int, whole: int) -> str:
    return "-" if whole <= 0 else f"{part / whole * 100:.1f}%"


def lines(result: dict[str, Any]) -> list[str]:
    """Per direction: each cause's exposed time and share, then its evidence in one line;
    then the most exposing ops' main cause. Empty where nothing is exposed (or the result
    predates the causes)."""
    out: list[str] = []
    rows: list[list[str]] = []
    evidence: list[str] = []
    for d in DIRECTIONS:
        b = result["by_direction"][d]
        causes = b.get("exposure_causes")
        if not causes or b["exposed_ps"] <= 0:
            continue
        for i, c in enumerate(causes):
            rows.append([d if i == 0 else "", c["cause"], format_ps(c["exposed_ps"]),
                         _share(c["exposed_ps"], b["exposed_ps"])])
            evidence.append(f"  {d} {c['cause']}: {c['evidence'].get('text', '')}")
    if not rows:
        return out
    widths = [max(len(r[i]) for r in rows + [["direction", "cause", "exposed", "share"]])
              for i in range(4)]
    head = ["direction", "cause", "exposed", "share"]
    out.append("why exposed (each exposed ps has one cause; overlap.analysis.causes):")
    for r in [head] + rows:
        out.append(f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:>{widths[2]}}  "
                   f"{r[3]:>{widths[3]}}".rstrip())
    out += evidence
    ops = [r for r in result["by_hlo_op"]["records"]
           if r["exposed_ps"] > 0 and r.get("exposure_causes")][:_OPS]
    if ops:
        parts = []
        for r in ops:
            c = max(r["exposure_causes"].items(), key=lambda kv: kv[1])
            parts.append(f"{r['hlo_op']} {r['direction']} {c[0]} "
                         f"({_share(c[1], r['exposed_ps'])})")
        out.append("  by op (main cause): " + "; ".join(parts))
    return out
