"""The `offload_by_name` section (`overlap.analysis.names`) as terminal text: one row per
checkpoint name and direction, then one line per flag. Numbers are the section's; this module
converts units only."""

from __future__ import annotations

from typing import Any

from overlap.analysis.overlap import DIRECTIONS, format_ps
from overlap.report.text import _bytes, _ratio, _table


def _yes(v: bool | None) -> str:
    return "-" if v is None else "yes" if v else "no"


def compiled_bytes(c: dict[str, Any]) -> str:
    """A name's compiled bytes per step (`overlap.analysis.names`' `executed_bytes`), or,
    where several programs hold its copies (a step runs one of them), the least to the most
    one program moves (`executed_bytes_range`) and how many programs."""
    if not c["count"]:
        return "-"
    lo_hi = c.get("executed_bytes_range")
    if lo_hi:
        return f"{_bytes(lo_hi[0])}-{_bytes(lo_hi[1])} ({c['programs']} programs)"
    return _bytes(c["executed_bytes"])


def render_offload_by_name(section: dict[str, Any]) -> list[str]:
    """Lines for `overlap report` (empty when the section has nothing to show)."""
    rows: list[list[str]] = []
    for r in section.get("names", []):
        for d in DIRECTIONS:
            c, s = r["compiled"][d], r["seen"][d]
            if not c["count"] and not s["count"] and d == "H2D":
                continue  # one row is enough for a name nothing compiled
            rows.append([r["name"], _yes(r["asked"]), d, str(c["count"]),
                         compiled_bytes(c), str(s["count"]),
                         _bytes(s["bytes"]), format_ps(s["span_ps"]), format_ps(s["exposed_ps"]),
                         _ratio(s["overlap_ratio"])])
    for s in section.get("shared", []):
        for d in DIRECTIONS:
            b = s["by_direction"][d]
            if b["count"]:
                rows.append(["+".join(s["names"]) + " (shared)", "", d, "", "", str(b["count"]),
                             _bytes(b["bytes"]), format_ps(b["span_ps"]),
                             format_ps(b["exposed_ps"]), _ratio(b["overlap_ratio"])])
    for o in section.get("other", []):
        rows.append([o["label"], "", "", "", "", str(o["count"]), _bytes(o["bytes"]),
                     format_ps(o["span_ps"]), format_ps(o["exposed_ps"]),
                     _ratio(o["overlap_ratio"])])
    if not rows:
        return []
    out = ["did each name offload? (compiled: host-copy instructions and bytes per program "
           "execution; seen: copies in the trace)"]
    out += _table(["name", "asked", "dir", "compiled", "bytes/step", "seen", "bytes",
                   "in flight", "exposed", "hidden"], rows, "<<<>>>>>>>")
    for r in section.get("names", []):
        if r.get("flag"):
            out.append(f"  ! {r['name']}: {r['flag']}")
    for s in section.get("shared", []):
        out.append(f"  shared {'+'.join(s['names'])} ({', '.join(s['ops'])}): {s['why']}")
    out += [f"  note: {n}" for n in section.get("notes", [])]
    return out
