"""Pure figure builders: analysis results and aggregated tables in, plotly Figures out.

No I/O, no Dash, no global state: the Dash callbacks, the static HTML report
(`overlap.report.html`) and the unit tests all call these same functions. Inputs are integer
picoseconds and bytes; this is the layer that converts to ms, GB/s and GiB for display.
Anything drawn from a SYNTHETIC capture says so in its title.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from overlap.report import aggregate

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


def _layout(fig: go.Figure, title: str, synthetic: bool, **kw) -> go.Figure:
    fig.update_layout(title=_title(title, synthetic), template="plotly_white",
                      margin=dict(l=60, r=20, t=60, b=50), legend=dict(orientation="h", y=-0.2),
                      **kw)
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
    if not len(seg):
        return empty_figure("No device events in this step.", title, synthetic)
    fig = go.Figure()
    x0 = seg["start_ps"].to_numpy() - tl.start_ps
    dur = (seg["end_ps"] - seg["start_ps"]).to_numpy()
    for kind, width in (("compute", 0.7), ("D2H", 0.7), ("H2D", 0.7), ("exposed", 0.35)):
        m = (seg["kind"] == kind).to_numpy()
        if not m.any():
            continue
        s = seg[m]
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
    return fig


def _segment_hover(s: pd.DataFrame, dur_ps: np.ndarray) -> list[str]:
    """Hover text per segment; segments are capped, so this is at most a few thousand strings."""
    ms = pd.Series(dur_ps / PS_PER_MS, index=s.index).map("{:.4f} ms".format)
    text = s["kind"].astype(str) + " " + ms
    merged = s["count"] > 1
    text = text.where(~merged, text + " (" + s["count"].astype(str) + " events merged)")
    single = (~merged) & s["hlo_op"].notna()
    if single.any():
        ratio = s["ratio"].map(lambda r: "n/a" if pd.isna(r) else f"{100 * r:.0f}%")
        detail = ("<br>" + s["hlo_op"].astype(str) + "<br>hidden " + ratio + ", exposed "
                  + (s["exposed_ps"] / PS_PER_MS).map("{:.4f} ms".format) + "<br>"
                  + (s["bytes"] / 2**20).map("{:.2f} MiB".format))
        text = text.where(~single, text + detail)
    return text.tolist()


def overlap_histogram_figure(hist: pd.DataFrame, synthetic: bool = False) -> go.Figure:
    """Per-transfer overlap ratios of the whole run: transfers per 10% bin, per direction."""
    title = "Per-transfer overlap ratio (whole run)"
    if not len(hist) or hist["count"].sum() == 0:
        return empty_figure("No timed transfers in this run.", title, synthetic)
    fig = go.Figure()
    for d in aggregate.DIRECTIONS:
        h = hist[hist["direction"] == d]
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


def bandwidth_figure(points: pd.DataFrame, total: int, by_direction: dict[str, Any],
                     synthetic: bool = False) -> go.Figure:
    """Achieved bandwidth of each transfer in the step over time; colour = direction.

    The legend gives each direction's whole-run mean in-flight bandwidth (bytes / span).
    """
    title = "Achieved bandwidth per transfer (this step)"
    if total > len(points):
        title += f": {len(points)} of {total} transfers shown (every k-th)"
    if not len(points):
        return empty_figure("No transfers start in this step.", title, synthetic)
    fig = go.Figure()
    for d in aggregate.DIRECTIONS:
        p = points[points["direction"] == d]
        if not len(p):
            continue
        mean = (by_direction.get(d) or {}).get("bandwidth_Bps")
        name = d + (f" (run mean {mean / 1e9:.1f} GB/s)" if mean else "")
        ratio = p["overlap_ratio"].to_numpy(dtype=float)
        fig.add_trace(go.Scatter(
            name=name, x=p["start_ps"] / PS_PER_MS, y=p["bandwidth_Bps"] / 1e9, mode="markers",
            marker=dict(color=COLORS[d], size=7), text=p["hlo_op"].astype(str),
            customdata=np.c_[100 * np.nan_to_num(ratio), p["bytes"] / 2**20],
            hovertemplate="%{text}<br>%{y:.2f} GB/s, %{customdata[1]:.2f} MiB"
                          "<br>%{customdata[0]:.0f}% hidden<extra>" + d + "</extra>"))
    return _layout(fig, title, synthetic, xaxis_title="ms since step start",
                   yaxis_title="GB/s", height=340)


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
    syn = data.synthetic
    figs: dict[str, go.Figure] = {}
    if step is None:
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


def _bars(rows: list[dict[str, Any]], key: str, title: str, ytitle: str, synthetic: bool,
          scale: float = 1.0) -> go.Figure:
    have = [r for r in rows if r.get(key) is not None]
    if not have:
        return empty_figure(f"No {ytitle} for these runs.", title, synthetic)
    fig = go.Figure(go.Bar(
        x=[r["run"] for r in have], y=[r[key] / scale for r in have],
        marker_color=[COLORS["baseline"] if r["baseline"] else COLORS["compute"] for r in have],
        hovertemplate="%{x}: %{y:.3f} " + ytitle + "<extra></extra>"))
    return _layout(fig, title, synthetic, yaxis_title=ytitle, height=320, showlegend=False)


def step_time_figure(rows: list[dict[str, Any]], synthetic: bool = False) -> go.Figure:
    """Step time per run (ps in `step_ps`: `overlap.analysis.steps.run_step_time`'s median,
    its source in `step_source`); the baseline bar is dark."""
    sources = sorted({str(r.get("step_source")) for r in rows if r.get("step_ps") is not None})
    title = "Median step time (baseline dark)" + (
        f"<br><sup>{'; '.join(sources)}</sup>" if sources else "")
    return _bars(rows, "step_ps", title, "ms", synthetic, PS_PER_MS)


def peak_memory_figure(rows: list[dict[str, Any]], synthetic: bool = False) -> go.Figure:
    """Peak device memory per run (bytes in `peak_bytes`); the baseline bar is dark."""
    from overlap.report.units import byte_unit

    unit, scale = byte_unit(max((r["peak_bytes"] for r in rows if r.get("peak_bytes")),
                                default=0))
    sources = sorted({str(r.get("peak_source")) for r in rows if r.get("peak_bytes")})
    title = "Peak device memory (baseline dark)" + (
        f"<br><sup>{'; '.join(sources)}</sup>" if sources else "")
    return _bars(rows, "peak_bytes", title, unit, synthetic, scale)


def direction_overlap_figure(rows: list[dict[str, Any]], synthetic: bool = False) -> go.Figure:
    """Duration-weighted overlap ratio per direction per run (`D2H`/`H2D` ratios or None)."""
    title = "Transfer time hidden, per direction"
    fig = go.Figure()
    for d in aggregate.DIRECTIONS:
        have = [r for r in rows if r.get(d) is not None]
        if have:
            fig.add_trace(go.Bar(name=d, x=[r["run"] for r in have],
                                 y=[100 * r[d] for r in have], marker_color=COLORS[d],
                                 hovertemplate="%{x}: %{y:.1f}% hidden<extra>" + d + "</extra>"))
    if not fig.data:
        return empty_figure("No timed transfers in these runs.", title, synthetic)
    fig.update_yaxes(range=[0, 100])
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
        rows.append({
            "run": name, "baseline": name == baseline,
            "step_ps": step_ps, "step_source": step_source,
            "peak_bytes": peak, "peak_source": source,
            **{k: r.get("by_direction", {}).get(k, {}).get("overlap_ratio")
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
            missing.append(name)
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
    fig = go.Figure(go.Bar(
        x=[r["host"] for r in rows], y=[r["exposed_per_step_ps"] / PS_PER_MS for r in rows],
        marker_color=[COLORS["exposed"] if r["host"] == worst else COLORS["compute"]
                      for r in rows],
        hovertemplate="%{x}: %{y:.3f} ms exposed per step<extra></extra>"))
    med = sv.get("median_exposed_per_step_ps")
    if med is not None:
        fig.add_hline(y=med / PS_PER_MS, line_dash="dash",
                      annotation_text="median host", annotation_position="top left")
    return _layout(fig, f"{title}<br><sup>{sv['verdict']}</sup>", synthetic,
                   yaxis_title="ms exposed per step", height=320, showlegend=False)
