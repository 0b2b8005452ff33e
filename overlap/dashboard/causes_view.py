"""The run view's "why exposed" card: each direction's `exposure_causes` (defined in
`overlap.analysis.causes`) as a table with a bar per cause and its evidence. Renders only."""

from __future__ import annotations

from typing import Any

from dash import html

from overlap.analysis.overlap import DIRECTIONS, format_ps

# one colour per cause, the same in every run
COLOURS = {"pageable_memory": "#8e44ad", "shares_stream_with_compute": "#c0392b",
           "queued_behind_same_direction": "#d68910", "device_waits": "#2874a6",
           "unknown": "#7f8c8d"}


def _bar(share: float, cause: str) -> html.Div:
    return html.Div(style={"background": "#eee", "width": "160px", "height": "12px"},
                    children=html.Div(style={"background": COLOURS.get(cause, "#555"),
                                             "width": f"{share * 100:.1f}%", "height": "12px"}))


def cards(result: dict[str, Any], style: dict[str, Any]) -> list:
    """One card with a row per (direction, cause) holding exposed time; none where nothing is
    exposed or the result carries no causes."""
    rows = []
    for d in DIRECTIONS:
        b = (result.get("by_direction") or {}).get(d) or {}
        for c in b.get("exposure_causes") or []:
            share = c["exposed_ps"] / b["exposed_ps"] if b.get("exposed_ps") else 0.0
            ev = c.get("evidence") or {}
            hlo = (ev.get("hlo") or {}).get("text")  # device_waits: what the program says
            said = ev.get("text", "") + (f" HLO: {hlo}" if hlo else "")
            rows.append(html.Tr([
                html.Td(d), html.Td(c["cause"], className="cause"),
                html.Td(format_ps(c["exposed_ps"]), style={"textAlign": "right"}),
                html.Td(f"{share:.0%}", style={"textAlign": "right"}),
                html.Td(_bar(share, c["cause"])),
                html.Td(said, title=said,
                        style={"fontSize": "85%", "color": "#444"})]))
    if not rows:
        return []
    head = html.Tr([html.Th(h) for h in ("dir", "cause", "exposed", "share", "", "evidence")])
    return [html.Div(id="run-causes", style=style, children=[
        html.B("Why exposed "),
        html.Span("(each exposed picosecond has one cause: overlap.analysis.causes)",
                  style={"color": "#666"}),
        html.Table([head, *rows], style={"borderSpacing": "8px 2px"})])]
