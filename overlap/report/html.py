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
import threading
from pathlib import Path
from typing import Any

PAGE_STYLE = """
body { font-family: sans-serif; margin: 16px 24px; color: #222; }
.card { border: 1px solid #ddd; border-radius: 6px; padding: 8px 12px; margin: 8px 0; }
.synthetic { border-color: #F58518; background: #fff4e5; }
table { border-collapse: collapse; font-size: 13px; width: 100%; table-layout: auto; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left;
         overflow-wrap: anywhere; word-break: break-word; }
body { overflow-wrap: anywhere; }
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
    ~2.0 MB instead of ~4.8 MB (fixed gzip header time, so the page is reproducible). Made
    once per plotly.js on this machine and kept in overlap's cache (`overlap.cache`, keyed on
    plotly.js's own bytes): its level-9 compression was ~0.19 s of every page. Where
    `prefetch_plotly_js` started making it, what its thread made (or raised)."""
    from overlap.cache import keep

    if _AHEAD:
        ahead = _AHEAD.pop()
        ahead.join()
        if ahead.error is not None:
            raise ahead.error
        path, value = ahead.made
    else:
        path, value = _made_plotly_gz_b64()
    if path is not None:
        # made now: kept by the thread that writes the page (a process that ends before its
        # page is made leaves no entry half written)
        keep(path, value)
    return value.decode("ascii")


def _made_plotly_gz_b64() -> tuple[Any, bytes]:
    """(None where the value was read from the cache, else the cache's place for it, None
    without a cache; plotly.js gzip-compressed and base64-encoded)."""
    import hashlib

    from overlap.cache import lookup

    raw = _plotly_js_bytes()
    path, got = lookup("plotly-js", f"plotly.min.js gzip 9 base64 1 "
                                    f"{hashlib.sha256(raw).hexdigest()}")
    return (None, got) if got is not None else (path, _gz_b64(raw))


class _Ahead(threading.Thread):
    """`_made_plotly_gz_b64` in a thread (`prefetch_plotly_js`): what it made, or raised."""

    def __init__(self) -> None:
        super().__init__(name="overlap-plotly-js", daemon=True)
        self.made: tuple[Any, bytes] = (None, b"")
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.made = _made_plotly_gz_b64()
        except BaseException as e:  # noqa: BLE001 - raised where the page asks for it
            self.error = e


_AHEAD: list[_Ahead] = []  # the thread `prefetch_plotly_js` started, until the page takes it


def prefetch_plotly_js() -> None:
    """Start making the page's plotly.js (`_plotly_gz_b64`) in a thread now. Its compression,
    hashes and file reads let go of the interpreter's lock, so where a second core is free the
    page's other work (reading, analysing, the figures) goes on beside it: ~0.19 s of a page
    on a machine that has made none yet (a CI runner's). What it needs is imported here
    first: the thread imports nothing while this one does."""
    if _AHEAD or _plotly_gz_b64.cache_info().currsize:
        return
    import base64  # noqa: F401
    import gzip  # noqa: F401
    import hashlib  # noqa: F401
    import hmac  # noqa: F401

    import plotly  # noqa: F401

    import overlap.cache  # noqa: F401

    ahead = _Ahead()
    ahead.start()
    _AHEAD.append(ahead)


def _plotly_js_bytes() -> bytes:
    """plotly.min.js as `plotly.offline.get_plotlyjs()` gives it, UTF-8 encoded: the file the
    package ships, read as bytes (its 4.8 MB of text decoded and encoded again were ~25 ms of
    a page), else, where it is not at that place, `get_plotlyjs()`'s text."""
    import plotly

    try:
        return (Path(plotly.__file__).parent / "package_data" / "plotly.min.js").read_bytes()
    except (OSError, TypeError):  # (TypeError: a namespace package has no __file__)
        from plotly.offline import get_plotlyjs

        return get_plotlyjs().encode("utf-8")


def _gz_b64(raw: bytes) -> bytes:
    """`raw` gzip-compressed at level 9 with a zero header time, base64-encoded."""
    import base64
    import gzip

    return base64.b64encode(gzip.compress(raw, compresslevel=9, mtime=0))


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


def _pct_cell(f: Any) -> str:
    return "-" if f is None else f"{100 * f:.0f}%"


def _rate_cell(bps: Any, moved: Any = None) -> str:
    from overlap.report.units import format_rate

    if bps is not None:
        return format_rate(bps)
    return "-" if not moved else "never (nothing beside a copy hides it)"


def _plan_model_lines(m: dict[str, Any]) -> list[str]:
    """The prediction's model and assumptions, in words with units (one line each)."""
    from overlap.report.units import format_bytes, format_ps, format_rate

    est = m.get("estimate") or {}
    model = est.get("model") or {}
    budget = m.get("memory_budget") or {}
    lines = ["Device peak = the compiler's memory_analysis: temp + arguments + outputs - "
             "aliases (compiled, exact for this program)."]
    if budget.get("bytes") is not None:
        lines.append(f"Memory budget {format_bytes(budget['bytes'])}: {budget.get('source')}.")
    if model:
        parts = []
        if model.get("hbm_Bps"):
            parts.append(f"device memory {format_rate(model['hbm_Bps'])}")
        if model.get("peak_flops_bf16"):
            parts.append(f"bf16 {model['peak_flops_bf16'] / 1e12:.0f} TFLOP/s")
        if model.get("peak_flops_f32"):
            parts.append(f"f32 {model['peak_flops_f32'] / 1e12:.0f} TFLOP/s")
        if model.get("host_link_Bps"):
            link = f"host link {format_rate(model['host_link_Bps'])}"
            h2d = model.get("h2d_link_Bps")
            if h2d and h2d != model["host_link_Bps"]:
                link += f" D2H, {format_rate(h2d)} H2D"
            parts.append(link + (f" ({model['host_link']})" if model.get("host_link") else ""))
        if model.get("kernel_floor_ps"):
            parts.append(f"each kernel at least {format_ps(model['kernel_floor_ps'])}")
        lines.append(f"Machine model ({model.get('target', '?')}): " + ", ".join(parts)
                     + (f". Source: {model['source']}." if model.get("source") else "."))
    lines += [f"Assumes: {a}." if not str(a).endswith(".") else f"Assumes: {a}"
              for a in est.get("assumptions") or []]
    lines.append("Transfer hiding and step time are PREDICTED from the compiled schedule "
                 "(a roofline estimate), never measured: a capture of this program on the "
                 "target (`overlap report CAPTURE --predict`) says how far off it is.")
    return lines


def write_plan_html(plans: list[dict[str, Any]], path: str | os.PathLike,
                    baseline: dict[str, Any] | None = None) -> Path:
    """One page for a plan run (compiled for a target, never run): verdict, the model and what
    it assumes, device memory over program order against the remat baseline plan, the plans
    and the planned transfers in human units. Every heading says it is compiled, not
    measured; tables wrap (no horizontal scroll)."""
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
    est = plans[0].get("estimate") or {}
    hf = main["predicted_hidden_fraction"]
    moved = (main["d2h_per_step"] or 0) + (main["h2d_per_step"] or 0)
    fit = ("" if main["fits"] is None else
           f" ({'fits' if main['fits'] else 'does NOT fit'} the "
           f"{format_bytes(main['memory_budget_bytes'] or main['device_memory_bytes'])} "
           "budget)")
    verdict = (f"PLAN, compiled for {main['target']}, not run: device peak "
               f"{format_bytes(main['device_peak_bytes'])}{fit}; "
               + ("no planned host transfers" if not moved else
                  f"moves {format_bytes(main['d2h_per_step'])} D2H and "
                  f"{format_bytes(main['h2d_per_step'])} H2D per step; predicted "
                  f"{_pct_cell(hf)} hidden")
               + (f"; predicted step {format_ps(est['step_ps'])}" if est.get("step_ps")
                  else "") + " (roofline estimate).")
    ops = [{"Copy (HLO op)": o["op"], "Direction": o["direction"],
            "Size": format_bytes(o.get("layout_bytes") or o["bytes"]),
            "Times per step": o["executions"],
            "Transfer time (pred.)": format_ps(o["transfer_ps"]),
            "In flight (pred.)": format_ps(o["duration_ps"]),
            "Compute beside it (pred.)": format_ps(o["compute_ps"]),
            "Hidden (pred.)": _pct_cell(o["hidden_fraction"]),
            "Hides at host link of at least": _rate_cell(o.get("break_even_Bps"), 1)}
           for o in (est.get("ops") or [])]
    rows = []
    for m in ([baseline] if baseline else []) + plans:
        r = plan_row(m)
        mv = (r["d2h_per_step"] or 0) + (r["h2d_per_step"] or 0)
        rows.append({
            "Plan": r["label"], "Policy": r["policy"],
            "Status": {"ok": "compiled", "does_not_fit": "out of memory"}.get(
                str(r["status"]), f"error: {r['error'] or ''}"[:200]),
            "Device peak": format_bytes(r["device_peak_bytes"]),
            "Fits budget": {True: "yes", False: "NO", None: "-"}[r["fits"]],
            "Temp": format_bytes(r["temp_bytes"]),
            "Arguments": format_bytes(r["argument_bytes"]),
            "Host temp": format_bytes(r["host_temp_bytes"]),
            "D2H per step": format_bytes(r["d2h_per_step"]),
            "H2D per step": format_bytes(r["h2d_per_step"]),
            "Hidden (pred.)": _pct_cell(r["predicted_hidden_fraction"]) if mv else "-",
            "Exposed per step (pred.)": format_ps(r["predicted_exposed_ps"]) if mv else "-",
            "Step (pred.)": format_ps((m.get("estimate") or {}).get("step_ps")),
            "Every copy hides at host link of at least": _rate_cell(r["break_even_Bps"], mv),
        })
    notes = list(plans[0].get("notes") or []) + _plan_model_lines(plans[0])
    page = page_html(f"overlap plan: {plans[0].get('label')} (compiled for {main['target']}, "
                     "not run)", {"verdict": verdict, "notes": notes},
                     figs, tables={"Plans (compiled, not run)": rows,
                                   "Planned transfers (predicted by the roofline estimate)": ops})
    return _write_page(path, page)
