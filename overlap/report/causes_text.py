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
            hlo = hlo_text(c)
            if hlo:
                evidence.append(f"    HLO: {hlo}")
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


def hlo_text(cause: dict[str, Any]) -> str | None:
    """The HLO first-use sentence of one cause row (`overlap.analysis.first_use`: only
    `device_waits` has one, and only where `overlap report` read the program)."""
    h = (cause.get("evidence") or {}).get("hlo")
    return h.get("text") if isinstance(h, dict) else None


def summary(result: dict[str, Any], d: str) -> str | None:
    """`cause share, cause share` of one direction, largest first; None where nothing is
    exposed or the result has no causes."""
    b = (result.get("by_direction") or {}).get(d) or {}
    causes = b.get("exposure_causes")
    if not causes or not b.get("exposed_ps"):
        return None
    return ", ".join(f"{c['cause']} {_share(c['exposed_ps'], b['exposed_ps'])}" for c in causes)


def markdown_lines(result: dict[str, Any], escape) -> list[str]:
    """The causes as a GitHub-flavoured Markdown table (one row per direction and cause, its
    short evidence), for the step summary; `escape` escapes a table cell."""
    rows = []
    for d in DIRECTIONS:
        b = (result.get("by_direction") or {}).get(d) or {}
        if not b.get("exposed_ps"):
            continue
        for c in b.get("exposure_causes") or []:
            ev = c.get("evidence") or {}
            cell = ev.get("short") or ev.get("text") or ""
            hlo = hlo_text(c)
            if hlo:
                cell += f"<br>HLO: {hlo}"
            rows.append(f"| {d} | `{c['cause']}` | {format_ps(c['exposed_ps'])} | "
                        f"{_share(c['exposed_ps'], b['exposed_ps'])} | {escape(cell)} |")
    if not rows:
        return []
    return ["", "Why exposed (each exposed ps has one cause; overlap.analysis.causes):", "",
            "| direction | cause | exposed | share | evidence |", "|---|---|---:|---:|---|",
            *rows]
