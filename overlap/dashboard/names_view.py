"""The run view's "Did each name offload?" card: the result's `offload_by_name` (defined in
`overlap.analysis.names`) as a table, one row per checkpoint name and direction, then the
shared and other rows and each name's flag. Renders only; the numbers are the section's."""

from __future__ import annotations

from typing import Any

from dash import html

from overlap.analysis.overlap import DIRECTIONS, format_ps
from overlap.report.names_text import compiled_bytes  # (the report's cell, as it shows it)

_HEAD = ("name", "asked", "dir", "compiled ops", "bytes / execution", "seen", "bytes",
         "in flight", "exposed", "hidden")


def _bytes(n: int) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def _yes(v: bool | None) -> str:
    return "-" if v is None else "yes" if v else "no"


def _seen(b: dict[str, Any]) -> list[str]:
    r = b.get("overlap_ratio")
    return [str(b["count"]), _bytes(b["bytes"]), format_ps(b["span_ps"]),
            format_ps(b["exposed_ps"]), "-" if r is None else f"{r:.1%}"]


def _row(cells: list[str], cls: str, flagged: bool = False) -> html.Tr:
    return html.Tr([html.Td(c, style={"textAlign": "right"} if i >= 3 else {})
                    for i, c in enumerate(cells)], className=cls,
                   style={"color": "#B00020"} if flagged else {})


def cards(result: dict[str, Any], style: dict[str, Any]) -> list:
    """One card where the result has an `offload_by_name` section with rows; none otherwise
    (a CPU capture, a plan, a capture with no host copies and no names asked for)."""
    sec = result.get("offload_by_name")
    if not isinstance(sec, dict):
        return []
    rows = []
    for r in sec.get("names") or []:
        for d in DIRECTIONS:
            c, s = r["compiled"][d], r["seen"][d]
            if d == "H2D" and not c["count"] and not s["count"]:
                continue  # one row is enough for a name nothing compiled
            rows.append(_row([r["name"], _yes(r["asked"]), d, str(c["count"]),
                              compiled_bytes(c), *_seen(s)],
                             "name-row", bool(r.get("flag"))))
    for s in sec.get("shared") or []:
        for d in DIRECTIONS:
            b = s["by_direction"][d]
            if b["count"]:
                rows.append(_row(["+".join(s["names"]) + " (shared)", "", d, "", "",
                                  *_seen(b)], "shared-row"))
    for o in sec.get("other") or []:
        rows.append(_row([o["label"], "", "", "", "", *_seen(o)], "other-row"))
    if not rows:
        return []
    notes = [html.Li(f"{r['name']}: {r['flag']}", className="name-flag")
             for r in sec.get("names") or [] if r.get("flag")]
    notes += [html.Li(f"shared {'+'.join(s['names'])}: {s['why']}")
              for s in sec.get("shared") or []]
    notes += [html.Li(n) for n in sec.get("notes") or []]
    return [html.Div(id="run-names", style=style, children=[
        html.B("Did each name offload? "),
        html.Span("(per checkpoint_name: asked by the run's policy, compiled into host copies, "
                  "seen in the trace; overlap.analysis.names)", style={"color": "#666"}),
        html.Table([html.Tr([html.Th(h) for h in _HEAD]), *rows],
                   style={"borderSpacing": "8px 2px"}),
        *([html.Ul(notes, style={"fontSize": "85%", "color": "#444"})] if notes else [])])]
