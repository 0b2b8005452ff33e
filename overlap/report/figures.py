"""Pure figure builders: analysis results and aggregated tables in, plotly Figures out.

No I/O, no Dash, no global state: the Dash callbacks, the static HTML report
(`overlap.report.html`) and the unit tests all call these same functions. Inputs are integer
picoseconds and bytes; this is the layer that converts to ms, GB/s and GiB for display.
Anything drawn from a SYNTHETIC capture says so in its title.
"""

from __future__ import annotations

import functools
import math
import os
from typing import Any

import numpy as np
import plotly.graph_objects as go

from overlap.report import aggregate
from overlap.trace.tables import n_rows, take

PS_PER_MS = 1e9
GIB = 2**30

COLORS = {"compute": "#4C78A8", "D2H": "#F58518", "H2D": "#54A24B", "exposed": "#E45756",
          "baseline": "#222222"}
SYNTHETIC_PREFIX = "SYNTHETIC · "
# SVG traces only (no Scattergl): point counts are capped server-side, and WebGL is missing in
# headless browsers and some remote desktops. Modebar: PNG export with a useful file name;
# plotly's logo link is noise offline.
GRAPH_CONFIG: dict[str, Any] = {"displaylogo": False,
                                "toImageButtonOptions": {"format": "png", "scale": 2}}


def _title(text: str, synthetic: bool) -> str:
    return f"{SYNTHETIC_PREFIX}{text}" if synthetic else text


# Room above a title for plotly's modebar (its buttons are ~28 px tall at the top right): the
# title starts below it, so the modebar never covers a title however narrow the figure is.
MODEBAR_PX = 36
TITLE_LINE_PX = 22


def _sup(text: str, width: int = 60) -> str:
    """A subtitle as `<br><sup>` lines of at most about `width` characters (plotly never wraps
    a title: a long one is cut at the figure's edge)."""
    import textwrap

    return "".join(f"<br><sup>{line}</sup>" for line in textwrap.wrap(text, width) or [""])


def _title_layout(text: str) -> dict[str, Any]:
    """`title` and `margin.t` for a title of any number of `<br>` lines, placed under the
    modebar, left-aligned."""
    lines = 1 + text.count("<br>")
    # plotly anchors a title of several lines by its first line: each further line would move
    # its top up by about 6 px, into the modebar, without this extra pad.
    pad = MODEBAR_PX + 8 * (lines - 1)
    return {"title": dict(text=text, x=0, xref="paper", xanchor="left", yref="container",
                          y=1, yanchor="top", pad=dict(t=pad)),
            "margin_t": pad + TITLE_LINE_PX * lines + 12}


TEMPLATE = "plotly_white"


@functools.cache
def _template_json() -> str:
    """plotly.py's own validated copy of `TEMPLATE`, as JSON, made once per plotly on this
    machine and kept in overlap's cache (`overlap.cache.derived`, keyed on plotly's version
    and place): validating the defaults it holds for every trace type was ~0.2 s of every
    `report --html` (and of a dashboard process' first figures, built ahead of the click)."""
    import plotly

    from overlap.cache import derived

    where = os.path.dirname(str(getattr(plotly, "__file__", None) or ""))
    key = f"template 1 {TEMPLATE} plotly {plotly.__version__} {where}"
    return derived("plotly-template", key, lambda: _validated_template().encode()).decode()


def _validated_template() -> str:
    import json

    return json.dumps(go.Figure().update_layout(template=TEMPLATE).layout.template
                      .to_plotly_json())


def _set_template(fig: go.Figure) -> None:
    """`fig.update_layout(template=TEMPLATE)` without its cost: plotly.py deep-copies and
    re-validates the whole template (~7 KB of JSON, every trace type's defaults) for each
    figure it is set on, ~10 ms a figure and about half of `run_figures` (issue 32). The
    validated copy is made once; each figure gets its own plain dict of it (a json.loads,
    ~0.1 ms), set with validation off (as plotly.py sets its default template), so the figure
    and its JSON are the same as before (tests/report/test_figure_template.py). The figure's
    layout already holds plotly's default template from `go.Figure()`: the key keeps its place."""
    import json

    lay = fig.layout
    lay._validate = False
    try:
        lay.template = json.loads(_template_json())
    finally:
        lay._validate = True


def _layout(fig: go.Figure, title: str, synthetic: bool, **kw) -> go.Figure:
    tl = _title_layout(_title(title, synthetic))
    _set_template(fig)
    fig.update_layout(title=tl["title"], margin=dict(l=60, r=20, t=tl["margin_t"], b=50),
                      legend=dict(orientation="h", y=-0.2), **kw)
    return fig


def _retitle(fig: go.Figure, text: str) -> go.Figure:
    """Replace a figure's title (and the room above the plot for it)."""
    tl = _title_layout(text)
    fig.update_layout(title=tl["title"], margin_t=tl["margin_t"])
    return fig


def empty_figure(message: str, title: str = "", synthetic: bool = False) -> go.Figure:
    """A figure with no data and `message` in the middle (never a blank box)."""
    fig = go.Figure()
    fig.add_annotation(text=message, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper",
                       font=dict(size=14))
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return _layout(fig, title, synthetic)


# ---------------------------------------------------------------------------------------------
# Run view


def timeline_figure(tl: aggregate.Timeline, synthetic: bool = False) -> go.Figure:
    """Step timeline: one row per lane, compute and transfers as bars, exposed parts in red.

    x is ms since the step's start. A transfer bar's hover gives its HLO op, overlap ratio and
    bytes; a merged bar (lane over its cap) says how many events it stands for.
    """
    seg = tl.segments
    title = f"Step {tl.step} on {tl.host}: compute, transfers, exposed time"
    if not n_rows(seg):
        return empty_figure("No device events in this step.", title, synthetic)
    fig = go.Figure()
    x0 = seg["start_ps"] - tl.start_ps
    dur = seg["end_ps"] - seg["start_ps"]
    for kind, width in (("compute", 0.7), ("D2H", 0.7), ("H2D", 0.7), ("exposed", 0.35)):
        m = seg["kind"] == kind
        if not m.any():
            continue
        s = take(seg, m)
        hover = _segment_hover(s, dur[m])
        fig.add_trace(go.Bar(
            name="exposed (no compute)" if kind == "exposed" else kind,
            orientation="h", y=s["lane"], base=x0[m] / PS_PER_MS, x=dur[m] / PS_PER_MS,
            width=width, marker_color=COLORS[kind], hovertext=hover, hoverinfo="text",
            marker_line_width=0))
    note = ""
    if tl.merged_lanes:
        note = f" (lanes over their bar budget merged across short gaps: {len(tl.merged_lanes)})"
    _layout(fig, title + note, synthetic, barmode="overlay",
            height=max(260, 70 + 45 * len(tl.lanes)), xaxis_title="ms since step start", bargap=0.1)
    fig.update_yaxes(categoryorder="array", categoryarray=list(reversed(tl.lanes)))
    fig.update_xaxes(range=[0, (tl.end_ps - tl.start_ps) / PS_PER_MS])
    # Room for the lane names up front: the template's automargin widens a margin too narrow
    # for its tick labels after the first layout and then draws the whole figure again
    # (round 36: every timeline's names, "GPU:0 compute stream 7", need ~150 px against the
    # default 60; the public v6e capture's 5,920 bars were laid out twice, ~0.42 -> ~0.22 s
    # in headless Chromium). Wide enough for Verdana (the widest of plotly's default fonts);
    # a name wider still is left to automargin, as before.
    longest = max((len(lane) for lane in tl.lanes), default=0)
    fig.update_layout(margin_l=max(60, LANE_MARGIN_PX + math.ceil(LANE_CHAR_PX * longest)))
    return fig


# The timeline's left margin for its lane names (`timeline_figure`): pixels per character of
# the longest, 12 px tick labels in Verdana (~7 px a lowercase letter, ~8 a digit or capital),
# and the tick labels' padding.
LANE_CHAR_PX = 7.5
LANE_MARGIN_PX = 12


def _segment_hover(s: aggregate.Table, dur_ps: np.ndarray) -> list[str]:
    """Hover text per segment; segments are capped, so this is at most a few thousand strings.

    A merged segment says how many events it stands for; a single transfer (an op named) its
    op, hidden share ("n/a" without one), exposed time and size."""
    out = []
    for kind, ms, count, op, ratio, exposed, nbytes in zip(
            s["kind"].tolist(), (dur_ps / PS_PER_MS).tolist(), s["count"].tolist(),
            s["hlo_op"].tolist(), s["ratio"].tolist(), (s["exposed_ps"] / PS_PER_MS).tolist(),
            (s["bytes"] / 2**20).tolist()):
        text = f"{kind} {ms:.4f} ms"
        if count > 1:
            text += f" ({count} events merged)"
        elif not (op is None or op != op):  # (an op named: None and NaN are none)
            share = "n/a" if ratio != ratio else f"{100 * ratio:.0f}%"
            text += f"<br>{op}<br>hidden {share}, exposed {exposed:.4f} ms<br>{nbytes:.2f} MiB"
        out.append(text)
    return out


def overlap_histogram_figure(hist: aggregate.Table, synthetic: bool = False) -> go.Figure:
    """Per-transfer overlap ratios of the whole run: transfers per 10% bin, per direction."""
    title = "Per-transfer overlap ratio (whole run)"
    if not n_rows(hist) or hist["count"].sum() == 0:
        return empty_figure("No timed transfers in this run.", title, synthetic)
    fig = go.Figure()
    for d in aggregate.DIRECTIONS:
        h = take(hist, hist["direction"] == d)
        if h["count"].sum() == 0:
            continue
        labels = [f"{100 * lo:.0f}-{100 * hi:.0f}%" for lo, hi in zip(h["bin_lo"], h["bin_hi"])]
        fig.add_trace(go.Bar(
            name=d, x=labels, y=h["count"], marker_color=COLORS[d],
            customdata=np.c_[h["span_ps"] / PS_PER_MS, h["exposed_ps"] / PS_PER_MS],
            hovertemplate="%{x}: %{y} transfers<br>in flight %{customdata[0]:.3f} ms, "
                          "exposed %{customdata[1]:.3f} ms<extra>" + d + "</extra>"))
    return _layout(fig, title, synthetic, barmode="group", xaxis_title="share of transfer hidden",
                   yaxis_title="transfers", height=340)


def bandwidth_figure(points: aggregate.Table, total: int, by_direction: dict[str, Any],
                     synthetic: bool = False) -> go.Figure:
    """Achieved bandwidth of each transfer in the step over time; colour = direction.

    The legend gives each direction's whole-run mean in-flight bandwidth (bytes / span).

    Robust axis: one mis-timed copy (the TPU v6e sample has one at 39,494 GB/s among 2,399 at
    7-59 GB/s) would squash every other point onto the floor. A point above `BANDWIDTH_FENCE`
    times the 99th percentile of the plotted bandwidths (numpy's "lower" method, so on fewer
    than 101 points the largest is never its own reference) is an outlier: the axis ends just
    above the highest other point, and outliers are drawn as triangles at that top edge, in
    their own legend entry that counts them and names the largest, with their true value on
    hover; the title counts them too. Nothing is dropped.
    """
    title = "Achieved bandwidth per transfer (this step)"
    shown = n_rows(points)
    if total > shown:
        title += f": {shown} of {total} transfers shown (every k-th)"
    if not shown:
        return empty_figure("No transfers start in this step.", title, synthetic)
    gbs_all = points["bandwidth_Bps"].astype(float) / 1e9
    finite = gbs_all[np.isfinite(gbs_all)]
    fence: float | None = None
    top = 0.0
    if finite.size >= 2:
        ref = float(np.percentile(finite, 99, method="lower"))
        if ref > 0 and finite.max() > BANDWIDTH_FENCE * ref:
            fence = BANDWIDTH_FENCE * ref
            # The axis ends just above the highest point kept on it, where the others sit.
            top = 1.1 * float(finite[finite <= fence].max())
    fig = go.Figure()
    above_total = 0
    for d in aggregate.DIRECTIONS:
        p = take(points, points["direction"] == d)
        n = n_rows(p)
        if not n:
            continue
        mean = (by_direction.get(d) or {}).get("bandwidth_Bps")
        name = d + (f" (run mean {mean / 1e9:.1f} GB/s)" if mean else "")
        ratio = p["overlap_ratio"].astype(float)
        gbs = p["bandwidth_Bps"].astype(float) / 1e9
        high = (gbs > fence) if fence is not None else np.zeros(n, dtype=bool)
        custom = np.c_[100 * np.nan_to_num(ratio), p["bytes"] / 2**20, gbs]
        # each op's name as text; a transfer without one NaN (drawn as no text)
        ops = np.array([np.nan if v is None or v != v else str(v)
                        for v in p["hlo_op"].tolist()], dtype=object)
        x = p["start_ps"].astype(float) / PS_PER_MS
        fig.add_trace(go.Scatter(
            name=name, x=x[~high], y=gbs[~high], mode="markers",
            marker=dict(color=COLORS[d], size=7), text=ops[~high], customdata=custom[~high],
            hovertemplate="%{text}<br>%{y:.2f} GB/s, %{customdata[1]:.2f} MiB"
                          "<br>%{customdata[0]:.0f}% hidden<extra>" + d + "</extra>"))
        if high.any():
            above_total += int(high.sum())
            fig.add_trace(go.Scatter(
                name=f"{d}: {int(high.sum())} above the axis (up to {gbs[high].max():,.0f} "
                     "GB/s), drawn at its top edge",
                x=x[high], y=np.full(int(high.sum()), top), mode="markers",
                marker=dict(color=COLORS[d], size=11, symbol="triangle-up",
                            line=dict(color="#222222", width=1)),
                text=ops[high], customdata=custom[high],
                hovertemplate="%{text}<br>%{customdata[2]:,.2f} GB/s (above the axis), "
                              "%{customdata[1]:.2f} MiB<br>%{customdata[0]:.0f}% hidden"
                              "<extra>" + d + "</extra>"))
    ytitle = "GB/s"
    if fence is not None:
        title += (f" · {above_total} transfer{'s' if above_total != 1 else ''} above "
                  f"{fence:,.0f} GB/s drawn at the top edge")
        ytitle = f"GB/s (▲ above {BANDWIDTH_FENCE:g}x the 99th percentile)"
    fig = _layout(fig, title, synthetic, xaxis_title="ms since step start",
                  yaxis_title=ytitle, height=340)
    if fence is not None:
        fig.update_yaxes(range=[0, top * 1.05])
    return fig


# The bandwidth axis stops at this multiple of the plotted points' 99th percentile: a point
# further out is not one of the link's speeds but a copy whose timing or size is off (a
# different order of magnitude), and drawing it to scale would hide the others.
BANDWIDTH_FENCE = 4.0


def top_exposed_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The analysis's most exposed transfers, in display units, for a table."""
    rows = []
    for r in result.get("top_exposed", {}).get("records", []):  # at most `top` rows
        rows.append({
            "hlo_op": r["hlo_op"], "direction": r["direction"], "device": r["device"],
            "host": r["host"], "start_ms": round(r["start_ps"] / PS_PER_MS, 4),
            "span_ms": round(r["span_ps"] / PS_PER_MS, 4),
            "exposed_ms": round(r["exposed_ps"] / PS_PER_MS, 4),
            "hidden_pct": None if r["ratio"] is None else round(100 * r["ratio"], 1),
            "MiB": round(r["bytes"] / 2**20, 3),
            "GB_s": None if r["bandwidth_Bps"] is None else round(r["bandwidth_Bps"] / 1e9, 2),
        })
    return rows


def run_figures(data, step: tuple[str, int] | None) -> dict[str, go.Figure]:
    """Every figure of the Run view for `data` (a RunData) and `step` (host, step) or None."""
    if data.result.get("status") == "PLAN":  # compiled, never run: what the plan predicts
        return plan_figures(data)
    syn = data.synthetic
    figs: dict[str, go.Figure] = {}
    if step is None and data.transfers["start_ps"].size:
        # No step annotations (e.g. a capture made without StepTraceAnnotation): the whole
        # capture of the first host with transfers, as one window, so the transfers still show.
        import dataclasses

        t = data.transfers
        host = str(sorted(set(t["host"].tolist()))[0])
        on = t["host"] == host
        c = data.compute
        lo = int(min(t["start_ps"][on].min(), c["start_ps"][c["host"] == host].min(initial=
                 t["start_ps"][on].min())))
        hi = int(max(t["end_ps"][on].max(), c["end_ps"][c["host"] == host].max(initial=0)))
        whole = dataclasses.replace(data, result={**data.result, "steps": [
            {"host": host, "step": 0, "start_ps": lo, "end_ps": hi, "duration_ps": hi - lo,
             "exposed_wall_ps": 0}]})
        tl = aggregate.step_timeline(whole, host, 0)
        figs["timeline"] = timeline_figure(tl, syn)
        _retitle(figs["timeline"], _title(
            f"Whole capture on {host} (no step annotations): compute, transfers, exposed time",
            syn))
        figs["timeline"].update_xaxes(title="ms since the capture's first event")
        pts, total = aggregate.step_transfers(whole, host, 0)
        figs["bandwidth"] = bandwidth_figure(pts, total, data.result.get("by_direction", {}), syn)
        _retitle(figs["bandwidth"], _title(
            "Achieved bandwidth per transfer (whole capture" + (
                f": {n_rows(pts)} of {total} shown" if total > n_rows(pts)
                else "") + ")", syn))
        figs["bandwidth"].update_xaxes(title="ms since the capture's first event")
    elif step is None:
        msg = ("No step annotations in this capture." if data.transfers["start_ps"].size
               else data.result.get("reason", "No transfers."))
        figs["timeline"] = empty_figure(msg, "Step timeline", syn)
        figs["bandwidth"] = empty_figure(msg, "Achieved bandwidth per transfer", syn)
    else:
        tl = aggregate.step_timeline(data, *step)
        figs["timeline"] = timeline_figure(tl, syn)
        pts, total = aggregate.step_transfers(data, *step)
        figs["bandwidth"] = bandwidth_figure(pts, total, data.result.get("by_direction", {}), syn)
    figs["histogram"] = overlap_histogram_figure(aggregate.overlap_histogram(data.transfers), syn)
    return figs


# ---------------------------------------------------------------------------------------------
# Compare view


def memory_figure(curves: list[dict[str, Any]], axis: str, missing: list[str] | None = None,
                  synthetic: bool = False) -> go.Figure:
    """Device memory in use per run, overlaid on the baseline.

    `curves`: dicts with `run`, `device`, `x` (ps since capture start for axis "time", or
    program position for axis "program"), `y` (bytes) and `baseline` (bool). `missing` names
    runs that have no memory data on this axis.
    """
    title = ("Device memory over time" if axis == "time"
             else "Device memory over program order (HLO live bytes)")
    if not curves:
        return empty_figure("No allocator events or HLO memory data in these runs.", title,
                            synthetic)
    from overlap.report.units import byte_unit

    unit, scale = byte_unit(max((float(np.max(c["y"])) for c in curves if len(c["y"])),
                                default=0))
    fig = go.Figure()
    for c in sorted(curves, key=lambda c: not c["baseline"]):  # baseline drawn first, under
        x = np.asarray(c["x"])
        fig.add_trace(go.Scatter(
            name=f"{c['run']} {c['device']}" + (" (baseline)" if c["baseline"] else ""),
            x=x / PS_PER_MS if axis == "time" else x, y=np.asarray(c["y"]) / scale,
            mode="lines", line=dict(shape="hv", width=3 if c["baseline"] else 1.5,
                                    dash="dash" if c["baseline"] else "solid",
                                    **({"color": COLORS["baseline"]} if c["baseline"] else {}))))
    if missing:
        fig.add_annotation(text="no data on this axis: " + ", ".join(missing), showarrow=False,
                           x=0, y=1.05, xref="paper", yref="paper", xanchor="left")
    return _layout(fig, title, synthetic, height=380,
                   xaxis_title="ms since capture start" if axis == "time" else "HLO position",
                   yaxis_title=f"{unit} in use")


def axis_names(names: list[str], width: int = 16) -> list[str]:
    """Bar-axis labels for run names that stay readable when long: the shortest tails of the
    names' `/` paths that still tell them apart, broken onto lines of about `width` characters
    at `/`, `_` and `-` (the full name is in each bar's hover)."""
    import re

    parts = [n.split("/") for n in names]
    tails = list(names)
    for k in range(1, max((len(p) for p in parts), default=1) + 1):
        cand = ["/".join(p[-k:]) for p in parts]
        if len(set(cand)) == len(set(names)):
            tails = cand
            break
    out = []
    for t in tails:
        lines, cur = [], ""
        for piece in re.split(r"(?<=[/_-])", t):
            if cur and len(cur) + len(piece) > width:
                lines.append(cur)
                cur = ""
            cur += piece
        out.append("<br>".join([*lines, cur]))
    return out


def _bars(rows: list[dict[str, Any]], key: str, title: str, ytitle: str, synthetic: bool,
          scale: float = 1.0) -> go.Figure:
    have = [r for r in rows if r.get(key) is not None]
    if not have:
        why = (" (plans are compiled, never run)" if rows and key == "step_ps"
               and all(r.get("predicted") for r in rows) else "")
        return empty_figure(f"No {'step times' if key == 'step_ps' else ytitle} for these "
                            f"runs{why}.", title, synthetic)
    fig = go.Figure(go.Bar(
        x=axis_names([r["run"] for r in have]), y=[r[key] / scale for r in have],
        customdata=[r["run"] for r in have],
        marker_color=[COLORS["baseline"] if r["baseline"] else COLORS["compute"] for r in have],
        hovertemplate="%{customdata}: %{y:.3f} " + ytitle + "<extra></extra>"))
    fig.update_xaxes(automargin=True, tickangle=0)  # wrapped names (axis_names), not slanted
    return _layout(fig, title, synthetic, yaxis_title=ytitle, height=320, showlegend=False)


def step_time_figure(rows: list[dict[str, Any]], synthetic: bool = False) -> go.Figure:
    """Step time per run (ps in `step_ps`: `overlap.analysis.steps.run_step_time`'s median,
    its source in `step_source`); the baseline bar is dark."""
    sources = sorted({str(r.get("step_source")) for r in rows if r.get("step_ps") is not None})
    title = "Median step time (baseline dark)" + (
        _sup("; ".join(sources)) if sources else "")
    return _bars(rows, "step_ps", title, "ms", synthetic, PS_PER_MS)


def peak_memory_figure(rows: list[dict[str, Any]], synthetic: bool = False) -> go.Figure:
    """Peak device memory per run (bytes in `peak_bytes`); the baseline bar is dark."""
    from overlap.report.units import byte_unit

    unit, scale = byte_unit(max((r["peak_bytes"] for r in rows if r.get("peak_bytes")),
                                default=0))
    sources = sorted({str(r.get("peak_source")) for r in rows if r.get("peak_bytes")})
    title = "Peak device memory (baseline dark)" + (
        _sup("; ".join(sources)) if sources else "")
    return _bars(rows, "peak_bytes", title, unit, synthetic, scale)


def direction_overlap_figure(rows: list[dict[str, Any]], synthetic: bool = False) -> go.Figure:
    """Duration-weighted overlap ratio per direction per run (`D2H`/`H2D` ratios or None)."""
    title = "Transfer time hidden, per direction"
    if any(r.get("predicted") and (r.get("D2H") is not None or r.get("H2D") is not None)
           for r in rows):
        title += _sup("plans (hatched): PREDICTED by the roofline estimate, not measured")
    fig = go.Figure()
    label = dict(zip([r["run"] for r in rows], axis_names([r["run"] for r in rows])))
    for d in aggregate.DIRECTIONS:
        have = [r for r in rows if r.get(d) is not None]
        if have:
            fig.add_trace(go.Bar(name=d, x=[label[r["run"]] for r in have],
                                 customdata=[r["run"] for r in have],
                                 y=[100 * r[d] for r in have], marker_color=COLORS[d],
                                 marker_pattern_shape=["/" if r.get("predicted") else ""
                                                       for r in have],
                                 hovertemplate="%{customdata}: %{y:.1f}% hidden<extra>" + d
                                 + "</extra>"))
    if not fig.data:
        return empty_figure("No timed transfers in these runs.", title, synthetic)
    fig.update_yaxes(range=[0, 100])
    fig.update_xaxes(automargin=True, tickangle=0)
    return _layout(fig, title, synthetic, barmode="group", yaxis_title="% hidden", height=320)


def compare_rows(datas: list[tuple[str, Any]], baseline: str | None) -> list[dict[str, Any]]:
    """Per run (name, RunData): step time, peak memory, per-direction overlap (raw units)."""
    from overlap.analysis.memory import peak_memory_bytes
    from overlap.analysis.steps import run_step_time_ps

    rows = []
    for name, d in datas:  # one per compared run
        r = d.result
        peak, source = peak_memory_bytes(d)
        step_ps, step_source = run_step_time_ps(d.manifest, r.get("steps"))
        plan = r.get("plan") if r.get("status") == "PLAN" else None
        rows.append({
            "run": name, "baseline": name == baseline,
            "step_ps": step_ps, "step_source": step_source,
            "peak_bytes": peak, "peak_source": source,
            # a plan's hidden shares are the roofline estimate's (`predicted` says so)
            "predicted": plan is not None,
            **{k: ((plan or {}).get(f"{k.lower()}_predicted_hidden_fraction") if plan
                   else r.get("by_direction", {}).get(k, {}).get("overlap_ratio"))
               for k in aggregate.DIRECTIONS}})
    return rows


def compare_figures(datas: list[tuple[str, Any]], baseline: str | None) -> dict[str, go.Figure]:
    """Every figure of the Compare view for runs `datas` [(name, RunData)], baseline first."""
    syn = any(d.synthetic for _, d in datas)
    with_time = [n for n, d in datas if d.memory["time_ps"].size]
    with_prog = [n for n, d in datas if d.program_memory is not None]
    # One axis for all curves: time when the allocator saw most runs, program order otherwise.
    axis = "time" if len(with_time) >= len(with_prog) else "program"
    curves, missing = [], []
    for name, d in datas:
        if axis == "time" and d.memory["time_ps"].size:
            for dev, (x, y) in aggregate.memory_curves(d.memory).items():
                curves.append({"run": name, "device": dev, "x": x, "y": y,
                               "baseline": name == baseline})
        elif axis == "program" and d.program_memory is not None:
            x, y = aggregate.downsample_minmax(d.program_memory["index"],
                                               d.program_memory["bytes"])
            curves.append({"run": name, "device": "", "x": x, "y": y,
                           "baseline": name == baseline})
        else:
            # Why there is no program-order curve, when the capture could not name the program
            # that ran (several compiles of one name): said, never guessed.
            how = str(((d.result or {}).get("program") or {}).get("how") or "")
            missing.append(f"{name} ({how.split(' (')[0]})" if axis == "program"
                           and how.startswith("cannot tell") else name)
    rows = compare_rows(datas, baseline)
    return {"memory": memory_figure(curves, axis, missing, syn),
            "step_time": step_time_figure(rows, syn),
            "peak_memory": peak_memory_figure(rows, syn),
            "overlap": direction_overlap_figure(rows, syn)}


def hosts_figure(result: dict[str, Any], synthetic: bool = False) -> go.Figure:
    """Exposed transfer time per step, one bar per host, the median dashed: the straggler."""
    title = "Exposed transfer time per step, by host (straggler view)"
    sv = result.get("stragglers")
    if not sv:
        return empty_figure("Single-host capture: no other host to compare with.", title,
                            synthetic)
    rows = [r for r in sv["hosts"] if r["exposed_per_step_ps"] is not None]
    if not rows:
        return empty_figure("No host has transfers.", title, synthetic)
    worst = sv.get("worst_host")
    # without step annotations the hosts' exposed time is the capture's, not a step's
    unit = "per step" if all(r.get("per_step", True) for r in rows) else "in the capture"
    title = f"Exposed transfer time {unit}, by host (straggler view)"
    fig = go.Figure(go.Bar(
        x=[r["host"] for r in rows], y=[r["exposed_per_step_ps"] / PS_PER_MS for r in rows],
        marker_color=[COLORS["exposed"] if r["host"] == worst else COLORS["compute"]
                      for r in rows],
        hovertemplate="%{x}: %{y:.3f} ms exposed " + unit + "<extra></extra>"))
    med = sv.get("median_exposed_per_step_ps")
    if med is not None:
        fig.add_hline(y=med / PS_PER_MS, line_dash="dash",
                      annotation_text="median host", annotation_position="top left")
    return _layout(fig, f"{title}{_sup(str(sv['verdict']), 120)}", synthetic,
                   yaxis_title=f"ms exposed {unit}", height=320, showlegend=False)


# ---------------------------------------------------------------------------------------------
# Plan runs (compiled for a target, never run): what the plan knows, labelled PREDICTED


PREDICTED_PREFIX = "PREDICTED (compiled, not run; roofline estimate) · "


def _part_label(part: dict[str, Any]) -> str:
    if part.get("is_entry"):
        return "step"
    n = part.get("executions") or 1
    return f"loop body {part['computation']} (1 of {n} per step)"


def plan_timeline_figure(parts: list[dict[str, Any]], target: str = "") -> go.Figure:
    """The plan's predicted timeline (`overlap.hlo.schedule.predicted_timeline`): the compute
    stream as the estimate walks the schedule, each planned copy from its start op to its
    completion, exposed parts (no compute beside them) in red. Computations that hold copies
    are drawn one after another (a scan's copies live in its loop bodies: one iteration each).
    """
    title = PREDICTED_PREFIX + "step timeline" + (f" for {target}" if target else "")
    if not parts:
        return empty_figure("This plan has no planned host transfers (or no HLO to walk).",
                            title)
    from overlap.analysis.overlap import subtract_intervals

    rows: list[dict[str, Any]] = []
    lanes: list[str] = []
    x0 = 0
    gap = max(max(int(p["total_ps"]) for p in parts) // 20, 1)
    for p in parts:
        label = _part_label(p)
        lane = f"{label}: compute"
        lanes.append(lane)
        cs = np.asarray([a for a, _ in p["compute"]], np.int64)
        ce = np.asarray([b for _, b in p["compute"]], np.int64)
        for a, b in zip(cs.tolist(), ce.tolist()):
            rows.append({"lane": lane, "kind": "compute", "start_ps": x0 + a, "end_ps": x0 + b,
                         "count": 1, "hlo_op": None, "ratio": None, "bytes": None,
                         "exposed_ps": None})
        for c in p["copies"]:
            lane = f"{label}: {c['direction']} {c['op']}"
            lanes.append(lane)
            span = int(c["end_ps"]) - int(c["issue_ps"])
            rows.append({"lane": lane, "kind": c["direction"], "start_ps": x0 + c["issue_ps"],
                         "end_ps": x0 + c["end_ps"], "count": 1, "hlo_op": c["op"],
                         "ratio": 1.0 if span <= 0 else c["hidden_ps"] / span,
                         "bytes": c["bytes"], "exposed_ps": c["exposed_ps"]})
            es, ee = subtract_intervals(np.asarray([c["issue_ps"]], np.int64),
                                        np.asarray([c["end_ps"]], np.int64), cs, ce)
            for a, b in zip(es.tolist(), ee.tolist()):
                rows.append({"lane": lane, "kind": "exposed", "start_ps": x0 + a,
                             "end_ps": x0 + b, "count": 1, "hlo_op": None, "ratio": None,
                             "bytes": None, "exposed_ps": None})
        x0 += int(p["total_ps"]) + gap
    seg = _records_table(rows)
    tl = aggregate.Timeline(host=target or "plan", step=0, start_ps=0, end_ps=max(x0 - gap, 1),
                            lanes=lanes, segments=seg)
    fig = timeline_figure(tl)
    _retitle(fig, title + _sup("each copy from its start op to its completion; red: no "
                               "compute beside it (exposed); computations side by side", 120))
    fig.update_xaxes(title="ms (predicted)")
    return fig


def _records_table(records: list[dict[str, Any]]) -> aggregate.Table:
    """`aggregate.SEGMENT_COLUMNS` of `records` as columns, typed as a DataFrame of them was:
    numbers int64, or float64 with NaN where a value is None; anything else objects."""
    out: aggregate.Table = {}
    for c in aggregate.SEGMENT_COLUMNS:
        vals = [r[c] for r in records]
        known = [v for v in vals if v is not None]
        if known and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                         for v in known):
            out[c] = (np.array(vals, np.int64) if len(known) == len(vals) else
                      np.array([np.nan if v is None else v for v in vals], np.float64))
        elif known and all(isinstance(v, (int, float, np.integer, np.floating))
                           and not isinstance(v, bool) for v in known):
            out[c] = np.array([np.nan if v is None else v for v in vals], np.float64)
        else:
            out[c] = np.array(vals, dtype=object)
    return out


def plan_memory_figure(program_memory: dict[str, np.ndarray] | None, plan: dict[str, Any]
                       ) -> go.Figure:
    """Live temp bytes over program order (the compiler's heap simulation) with the device
    peak (`memory_analysis`) and the memory budget the plan was checked against as lines."""
    from overlap.report.units import byte_unit

    title = "Device memory over program order" + _sup(
        "PREDICTED: the compiler's heap simulation and memory_analysis (compiled, not run)")
    budget = int(plan["memory_budget_bytes"]) if plan.get("memory_budget_bytes") else None
    peak = int(plan["device_peak_bytes"]) if plan.get("device_peak_bytes") else None
    if program_memory is None or not len(program_memory["bytes"]):
        return empty_figure("No heap-simulator data for this plan.", title)
    x, y = aggregate.downsample_minmax(program_memory["index"], program_memory["bytes"])
    ymax = max([float(np.max(y))] + [float(peak or 0)])
    top = max([ymax] + [float(v) for v in (budget,) if v])
    # A budget far above the program's memory would flatten the curve: log scale then.
    log = budget is not None and ymax > 0 and budget > 10 * ymax
    unit, scale = byte_unit(top if not log else ymax)
    fig = go.Figure(go.Scatter(x=x, y=np.asarray(y) / scale, mode="lines", line=dict(shape="hv"),
                               name="live temp buffers (heap simulator)"))
    # Lines as traces (named in the legend): they stay right on a log axis too.
    x_ends = [float(np.min(x)), float(np.max(x))]
    if peak:
        fig.add_trace(go.Scatter(x=x_ends, y=[peak / scale] * 2, mode="lines",
                                 line=dict(dash="dot", color=COLORS["D2H"]),
                                 name="device peak (memory_analysis: temp + args + outputs)"))
    if budget:
        src = str(plan.get("memory_budget_source") or "")
        fig.add_trace(go.Scatter(x=x_ends, y=[budget / scale] * 2, mode="lines",
                                 line=dict(dash="dash", color=COLORS["exposed"]),
                                 name="memory budget" + (f" ({src[:60]})" if src else ""),
                                 hovertext=src, hoverinfo="text+y"))
    if log and budget is not None:
        pos = np.asarray(y)[np.asarray(y) > 0]
        lo = float(pos.min()) / scale if pos.size else ymax / scale / 1e3
        fig.update_yaxes(type="log", range=[np.log10(lo / 2), np.log10(budget / scale * 2)])
    _layout(fig, title, False, height=400, xaxis_title="HLO position (program order)",
            yaxis_title=f"{unit}" + (" (log scale)" if log else ""))
    fig.update_layout(legend=dict(orientation="h", y=-0.3, yanchor="top"))  # under the x title
    return fig


def planned_copies_rows(ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The estimate's planned transfers for a table (display units; hidden is PREDICTED)."""
    from overlap.report.units import format_bytes

    return [{"op": o.get("op"), "direction": o.get("direction"),
             "bytes": format_bytes(o.get("bytes") or 0),
             "per_step": o.get("executions"),
             "duration_us": None if o.get("duration_ps") is None
             else round(o["duration_ps"] / 1e6, 3),
             "hidden_pct": None if o.get("hidden_fraction") is None
             else round(100 * o["hidden_fraction"], 1)}
            for o in ops]


def plan_ops_figure(ops: list[dict[str, Any]]) -> go.Figure:
    """Predicted hidden and exposed time per step of each planned copy (executions included)."""
    title = "Hidden vs exposed per planned copy" + _sup(
        "PREDICTED by the roofline estimate (compiled, not run), per step")
    if not ops:
        return empty_figure("No planned host transfers.", title)
    names = [f"{o['direction']} {o['op']}" for o in ops]
    fig = go.Figure()
    for key, name, color in (("hidden_ps", "hidden (predicted)", COLORS["compute"]),
                             ("exposed_ps", "exposed (predicted)", COLORS["exposed"])):
        fig.add_trace(go.Bar(name=name, x=names,
                             y=[(o.get(key) or 0) * (o.get("executions") or 1) / PS_PER_MS
                                for o in ops], marker_color=color,
                             hovertemplate="%{x}: %{y:.4f} ms per step<extra>" + name +
                             "</extra>"))
    return _layout(fig, title, False, barmode="stack", yaxis_title="ms per step", height=340)


def plan_figures(data) -> dict[str, go.Figure]:
    """The Run view of a plan run: predicted timeline, memory with the budget, copies."""
    r = data.result
    plan = r.get("plan") or {}
    return {"timeline": plan_timeline_figure(r.get("plan_timeline") or [], plan.get("target", "")),
            "histogram": plan_memory_figure(data.program_memory, plan),
            "bandwidth": plan_ops_figure(r.get("planned_copies") or [])}
