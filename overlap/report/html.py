"""`overlap report PATH --html FILE`: one self-contained HTML page with the dashboard's figures.

The figures come from the same pure builders as the dashboard (`dashboard.figures`) on the same
compact data (`dashboard.data.run_data`), so the page and the Run view always agree. plotly.js
is inlined once, gzip-compressed (the page unpacks it with the browser's DecompressionStream),
so the file opens offline, can be attached to a CI run, and weighs about 2 MB instead of 5
(plotly.js is 4.8 MB unpacked). SYNTHETIC captures are labelled in the page header and in every
figure title.
"""

from __future__ import annotations

import functools
import html
import os
from pathlib import Path
from typing import Any

PAGE_STYLE = """
body { font-family: sans-serif; margin: 16px 24px; color: #222; }
.card { border: 1px solid #ddd; border-radius: 6px; padding: 8px 12px; margin: 8px 0; }
.synthetic { border-color: #F58518; background: #fff4e5; }
table { border-collapse: collapse; font-size: 13px; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; }
"""


def _table_html(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "<p>(none)</p>"
    cols = list(rows[0])
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in cols)
    body = "".join("<tr>" + "".join(
        f"<td>{html.escape('' if r.get(c) is None else str(r.get(c)))}</td>" for c in cols)
        + "</tr>" for r in rows)  # rows are summary rows (top-k), never events
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def page_html(title: str, result: dict[str, Any] | None, figs: list,
              tables: dict[str, list[dict[str, Any]]] | None = None) -> str:
    """A complete HTML page: header (verdict, SYNTHETIC warning), figures, tables."""
    import plotly.io as pio

    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}"
             f"</title><style>{PAGE_STYLE}</style></head><body><h1>{html.escape(title)}</h1>"]
    if result is not None:
        if result.get("synthetic"):
            parts.append("<div class='card synthetic'><b>SYNTHETIC</b>: this capture was "
                         "written by overlap.trace.synthetic, not measured.</div>")
        parts.append(f"<div class='card'><b>Verdict:</b> "
                     f"{html.escape(str(result.get('verdict', '')))}</div>")
        for note in result.get("notes", []):
            parts.append(f"<div class='card'>{html.escape(note)}</div>")
    if figs:
        parts.append(_plotly_loader())
    for i, fig in enumerate(figs):
        # Each figure as JSON, drawn once the one plotly.js of the page is unpacked.
        spec = pio.to_json(fig, validate=False).replace("</", "<\\/")
        height = fig.layout.height or 450
        parts.append(f"<div id='fig-{i}' class=\"plotly-graph-div\" style='height:{height}px'>"
                     f"</div><script type='application/json' id='fig-{i}-spec'>{spec}</script>"
                     f"<script>overlapPlot('fig-{i}')</script>")
    for name, rows in (tables or {}).items():
        parts.append(f"<h3>{html.escape(name)}</h3>{_table_html(rows)}")
    parts.append("</body></html>")
    return "\n".join(parts)


@functools.lru_cache(maxsize=1)
def _plotly_gz_b64() -> str:
    """plotly.min.js (the copy the `plotly` package ships), gzip-compressed and base64-encoded:
    ~2.0 MB instead of ~4.8 MB (fixed gzip header time, so the page is reproducible)."""
    import base64
    import gzip

    from plotly.offline import get_plotlyjs

    raw = get_plotlyjs().encode("utf-8")
    return base64.b64encode(gzip.compress(raw, compresslevel=9, mtime=0)).decode("ascii")


def _plotly_loader() -> str:
    """plotly.js once per page, self-contained: unpacked in the browser with the standard
    DecompressionStream (Chrome 80+, Firefox 113+, Safari 16.4+), no network; each figure's
    `overlapPlot(id)` draws it when plotly is ready. An older browser gets a one-line notice."""
    return ("<script type='application/octet-stream' id='plotly-js-gz'>" + _plotly_gz_b64()
            + "</script><script>" + _LOADER_JS + "</script>")


_LOADER_JS = """
window.overlapPlotly = (async function () {
  if (typeof DecompressionStream === 'undefined') {
    document.body.insertAdjacentHTML('afterbegin', "<div class='card'>This browser cannot "
      + "unpack the page's plotly.js (no DecompressionStream): open it in a current "
      + "browser.</div>");
    throw new Error('no DecompressionStream');
  }
  const b = atob(document.getElementById('plotly-js-gz').textContent);
  const bytes = new Uint8Array(b.length);
  for (let i = 0; i < b.length; i++) bytes[i] = b.charCodeAt(i);
  const js = await new Response(new Blob([bytes]).stream()
    .pipeThrough(new DecompressionStream('gzip'))).text();
  (0, eval)(js);
  return window.Plotly;
})();
function overlapPlot(id) {
  window.overlapPlotly.then(function (P) {
    const spec = JSON.parse(document.getElementById(id + '-spec').textContent);
    P.newPlot(id, spec.data, spec.layout, {displaylogo: false, responsive: true});
  });
}
"""


def _result_row(name: str, result: dict[str, Any], baseline: bool,
                manifest: dict | None = None) -> dict[str, Any]:
    from overlap.analysis.steps import run_step_time_ps

    bd = result.get("by_direction", {})
    step_ps, step_source = run_step_time_ps(manifest, result.get("steps"))
    return {"run": name, "baseline": baseline, "step_ps": step_ps, "step_source": step_source,
            "peak_bytes": None,
            "D2H": bd.get("D2H", {}).get("overlap_ratio"),
            "H2D": bd.get("H2D", {}).get("overlap_ratio")}


def _run_name(trace, manifest: dict | None, fallback: str) -> str:
    """What a person calls the run: its label, else its run/log directory, else the file."""
    if manifest and manifest.get("label"):
        return str(manifest["label"])
    src = Path(str(trace.sources[0])) if getattr(trace, "sources", None) else None
    if src is None:
        return fallback
    if src.parent.parent.name == "profile" and src.parent.parent.parent.name == "plugins":
        return src.parents[3].name
    return src.name[: -len(".xplane.pb")] if src.name.endswith(".xplane.pb") else src.name


def _write_page(path: str | os.PathLike, page: str) -> Path:
    """Write the page; a path that cannot take it is one line (exit 2), never a traceback."""
    from overlap.errors import UsageError

    out = Path(path)
    if out.is_dir():
        raise UsageError(f"--html {out}: is a directory; give a file name")
    try:
        out.write_text(page, encoding="utf-8")
    except OSError as e:
        raise UsageError(f"--html {out}: cannot write: {e.strerror or e}") from None
    return out


def write_html(result: dict[str, Any], trace, path: str | os.PathLike,
               baseline: dict[str, Any] | None = None, *, manifest: dict | None = None,
               baseline_trace=None, baseline_manifest: dict | None = None) -> Path:
    """Write the report page for `result` (from `analyze(trace)`) to `path`.

    Args:
      result: the analysis result of `trace`.
      trace: the `overlap.trace.reader.Trace` it came from (the timeline needs its events).
      path: the HTML file to write.
      baseline: optionally a baseline's analysis result (e.g. `overlap report --json` of the
        remat run); adds step-time and per-direction overlap bars against it.
      manifest: this run's run.json, when the capture is a run directory.
      baseline_trace, baseline_manifest: the baseline's capture itself (a run directory given
        as the baseline); then device memory is drawn against the baseline's too (over time
        where both have allocator events, over program order otherwise) with peak-memory bars.

    Returns the path written.
    """
    from overlap.report import aggregate, figures
    from overlap.report import rundata as data

    name = _run_name(trace, manifest, "this run")
    scope = getattr(trace, "compute_scope", "all")
    if scope != "all":  # a multi-host read (overlap.analysis.pod): say what the figures hold
        result = {**result, "notes": [*result.get("notes", []), scope]}
    d = data.run_data(trace, result, manifest)
    step = data.default_step(d)
    figs = figures.run_figures(d, step)
    page_figs = [figs["timeline"], figs["histogram"], figs["bandwidth"]]
    if result.get("stragglers"):
        page_figs.append(figures.hosts_figure(result, d.synthetic))
    if baseline_trace is not None and baseline is not None:
        bd = data.run_data(baseline_trace, baseline, baseline_manifest)
        bname = _run_name(baseline_trace, baseline_manifest, "baseline")
        if bname == name:
            bname = f"{bname} (baseline)"
        cmp = figures.compare_figures([(bname, bd), (name, d)], bname)
        page_figs += [cmp["memory"], cmp["step_time"], cmp["peak_memory"], cmp["overlap"]]
    else:
        curves = [{"run": name, "device": dev, "x": x, "y": y, "baseline": False}
                  for dev, (x, y) in aggregate.memory_curves(d.memory).items()]
        if curves:
            page_figs.append(figures.memory_figure(curves, "time", synthetic=d.synthetic))
    if baseline is not None and baseline_trace is None:
        rows = [_result_row("baseline", baseline, True),
                _result_row(name, result, False, manifest)]
        syn = d.synthetic or bool(baseline.get("synthetic"))
        page_figs += [figures.step_time_figure(rows, syn),
                      figures.direction_overlap_figure(rows, syn)]
    title = f"overlap report: {name}"
    page = page_html(title, result, page_figs,
                     tables={"Most exposed transfers": figures.top_exposed_rows(result)})
    return _write_page(path, page)


def write_plan_html(plans: list[dict[str, Any]], path: str | os.PathLike,
                    baseline: dict[str, Any] | None = None) -> Path:
    """One page for a plan run (compiled for a target, never run): verdict, device memory over
    program order against the remat baseline plan, and the planned transfers with the
    estimate. Every heading says it is compiled, not measured."""
    import numpy as np

    from overlap.analysis.plans import plan_row
    from overlap.report import figures
    from overlap.report.units import format_bytes, format_ps

    curves = []
    for m in ([baseline] if baseline else []) + plans:
        live = m.get("_program_memory")
        if live:
            y = np.asarray(live, dtype=np.int64)
            curves.append({"run": str(m.get("label")), "device": "", "x": np.arange(y.size),
                           "y": y, "baseline": m is baseline})
    figs = [figures.memory_figure(curves, "program")] if curves else []
    main = plan_row(plans[0])
    hf = main["predicted_hidden_fraction"]
    verdict = (f"PLAN, compiled for {main['target']}, not run: device peak "
               f"{format_bytes(main['device_peak_bytes'])} (memory_analysis); "
               + ("no planned host transfers" if hf is None else
                  f"moves {format_bytes(main['d2h_per_step'])} D2H and "
                  f"{format_bytes(main['h2d_per_step'])} H2D per step; estimated "
                  f"{100 * hf:.0f}% hidden (roofline estimate)"))
    ops = [{"op": o["op"], "direction": o["direction"], "bytes": format_bytes(o["bytes"]),
            "per step": o["executions"], "transfer (est.)": format_ps(o["transfer_ps"]),
            "compute beside it (est.)": format_ps(o["compute_ps"]),
            "hidden (est.)": f"{100 * o['hidden_fraction']:.0f}%"}
           for o in ((plans[0].get("estimate") or {}).get("ops") or [])]
    rows = [{k: (format_bytes(v) if k.endswith("bytes") or k.endswith("per_step") and
                 isinstance(v, int) else v)
             for k, v in plan_row(m).items() if k not in ("error", "device_peak_source")}
            for m in ([baseline] if baseline else []) + plans]
    page = page_html(f"overlap plan: {plans[0].get('label')} (compiled for {main['target']}, "
                     "not run)", {"verdict": verdict, "notes": plans[0].get("notes") or []},
                     figs, tables={"Plans (compiled, not run)": rows,
                                   "Planned transfers (roofline estimate)": ops})
    return _write_page(path, page)
