"""The overlap dashboard: Runs, Run and Compare views over the runs under some log directories.

`create_app(logdirs)` builds a `dash.Dash` app (a factory, so tests and the CLI each get their
own). Three tabs:

* **Runs**: one row per complete run (backend, device, workload, policy, step time, peak memory,
  D2H/H2D overlap, verdict; a plan's D2H/H2D are its predicted hidden shares). Click a row to
  open it in the Run tab. Above the tabs, the measured (not synthetic, not planned) run that
  moved the most bytes between device and host, with its verdict: the first screen shows real
  transfers when there are any.
* **Run**: opens on that run, on its median step (`rundata.default_step`); the step's timeline
  (lanes per device stream, exposed transfer time in red; the whole capture when it has no step
  annotations), the per-transfer overlap-ratio histogram, bandwidth per transfer, and the most
  exposed transfers. A plan run shows what its plan predicts instead, labelled PREDICTED: the
  estimate's step timeline, memory over program order with the device peak and budget, hidden
  vs exposed per planned copy, and the planned-copies table.
* **Compare**: like with like. Runs are grouped by program, device and how they were made (XLA
  flags and jax/jaxlib versions: command buffers on and off are two experiments;
  `overlap.report.groups`); it opens on the newest group of two or more runs with that group's
  remat run as baseline (`data.default_baseline`), and a run of another group added by hand is
  listed with what differs, never judged. A "Same answer?" card holds each run's loss and
  gradient fingerprint against the baseline's (`overlap.analysis.answers`), red when one
  differs beyond float tolerance (shown only where runs recorded them). One verdict sentence on top
  (`groups.group_verdict`: does offload pay here, and if not why not, first), then memory
  curves of the runs over the baseline's (each run's own program), step-time and
  peak-memory bars, overlap per direction.

Callbacks are thin: they look a run name up in the discovered-runs table (`data.find_run`; a
name is never turned into a path), take its cached `RunData`, and call the pure builders in
`dashboard.figures`. The browser only ever receives figures built from aggregated data and
summary rows. The run list is re-discovered on page load and on the Refresh button, so new runs
appear and half-written ones (no run.json yet) do not.

Exports: every graph's modebar has plotly's PNG download; each view has a "Download HTML"
button (one self-contained page, `overlap.report.html.page_html`); tables export CSV.
"""

from __future__ import annotations

import functools
import json
import os
import threading
from collections.abc import Sequence
from typing import Any

import dash
from dash import Dash, Input, Output, State, dash_table, dcc, html

from overlap.dashboard import causes_view, names_view, plotlyjs
from overlap.dashboard import data as rundata
from overlap.report import figures
from overlap.report import groups as rgroups
from overlap.report.text import vendor_line
from overlap.report.units import format_bytes

RUN_COLUMNS = [
    ("run", "run"), ("backend", "backend"), ("device", "device"), ("workload", "workload"),
    ("policy", "policy"), ("step_ms", "step (ms)"), ("step_source", "step from"),
    ("peak", "peak memory"),
    ("peak_source", "peak from"),
    ("d2h_overlap", "D2H hidden %"), ("h2d_overlap", "H2D hidden %"), ("verdict", "verdict"),
    ("synthetic", "data"),
]
TOP_COLUMNS = [
    ("hlo_op", "HLO op"), ("direction", "dir"), ("device", "device"), ("start_ms", "start (ms)"),
    ("span_ms", "span (ms)"), ("exposed_ms", "exposed (ms)"), ("hidden_pct", "hidden %"),
    ("MiB", "MiB"), ("GB_s", "GB/s"),
]
PLAN_COPY_COLUMNS = [("op", "planned copy"), ("direction", "dir"), ("bytes", "bytes"),
                     ("per_step", "executions per step"), ("duration_us", "in flight (us, pred.)"),
                     ("hidden_pct", "hidden % (predicted)")]
COMPARE_COLUMNS = [("run", "run"), ("baseline", "baseline"), ("step_ms", "step (ms)"),
                   ("step_source", "step from"),
                   ("peak", "peak memory"), ("peak_source", "peak from"),
                   ("D2H", "D2H hidden %"), ("H2D", "H2D hidden %"),
                   # a plan of the run's program (dashboard.predicted), labelled in each cell
                   ("predicted_plan", "hidden, predicted (plan)")]

CARD = {"border": "1px solid #ddd", "borderRadius": "6px", "padding": "8px 12px",
        "margin": "8px 0"}
ERROR_CARD = {**CARD, "borderColor": "#E45756", "background": "#fdecea", "color": "#8a1c1c"}
PLAN_CARD = {**CARD, "borderColor": "#4C78A8", "background": "#eef4fb", "fontStyle": "italic"}
SYNTHETIC_CARD = {**CARD, "borderColor": "#F58518", "background": "#fff4e5"}
TABLE_STYLE = dict(style_table={"overflowX": "auto"},
                   style_cell={"fontFamily": "sans-serif", "fontSize": "13px",
                               "textAlign": "left", "maxWidth": "520px",
                               "whiteSpace": "normal", "height": "auto"},
                   style_header={"fontWeight": "bold"})


def _table(id_: str, columns: list[tuple[str, str]], **kw) -> Any:
    # DataTable is generated at import time: dash's type information does not list it.
    table: Any = dash_table
    return table.DataTable(id=id_, columns=[{"id": c, "name": n} for c, n in columns],
                           data=[], export_format="csv", sort_action="native",
                           page_size=25, **TABLE_STYLE, **kw)


@functools.cache
def _placeholder_json() -> str:
    """The "Loading..." figure every graph holds until its callback answers, as JSON, built
    once per process. The layout is built at every page load with eight graphs: building
    each placeholder through plotly.py (validating its layout and template) took ~20 ms of
    the server's CPU apiece, ~0.15-0.2 s of every page's layout request, on the way to the
    runs table (issue 32)."""
    return json.dumps(figures.empty_figure("Loading...").to_plotly_json())


def _graph(id_: str, filename: str) -> dcc.Graph:
    config: Any = {**figures.GRAPH_CONFIG,
              "toImageButtonOptions": {**figures.GRAPH_CONFIG["toImageButtonOptions"],
                                       "filename": filename}}
    # a fresh dict per graph (Dash or a test may change one figure): the same JSON as the
    # figure itself
    return dcc.Graph(id=id_, config=config, figure=json.loads(_placeholder_json()))


def _toolbar(children: list[Any], wrap: bool = False) -> html.Div:
    """A row of labels, dropdowns and buttons above a tab's content."""
    style = {"display": "flex", "gap": "8px", "alignItems": "center", "margin": "8px 0"}
    if wrap:
        style["flexWrap"] = "wrap"
    return html.Div(style=style, children=children)


def _side_by_side(*graphs: tuple[str, str]) -> html.Div:
    """Figures (id, download filename) in one row, sharing its width equally."""
    return html.Div(style={"display": "flex"},
                    children=[html.Div(_graph(id_, name), style={"flex": 1})
                              for id_, name in graphs])


class _RunTable:
    """The latest discovery result, shared by the callbacks of one app."""

    def __init__(self, logdirs: list[str]):
        self.logdirs = logdirs
        self._lock = threading.Lock()
        self._runs: list[rundata.Run] = []

    def refresh(self) -> list[rundata.Run]:
        runs = rundata.discover_runs(self.logdirs)
        with self._lock:
            self._runs = runs
        return runs

    def runs(self) -> list[rundata.Run]:
        with self._lock:
            return list(self._runs)

    def find(self, name: Any) -> rundata.Run | None:
        return rundata.find_run(self.runs(), name)

    def loaded(self, name: Any) -> tuple[rundata.Run, rundata.RunData] | None:
        """Run `name` and its data, or None where it is unknown or cannot be read (for the
        callbacks that then change nothing: the run's error card already says why)."""
        run = self.find(name)
        if run is None:
            return None
        try:
            return run, rundata.load_run(run)
        except rundata.RunLoadError:
            return None


LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})


def _host_name(header: str) -> str:
    """`Host` header -> host name without the port (`[::1]:8050` -> `[::1]`)."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[: header.find("]") + 1] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def _guard_framework_routes(app: Dash) -> None:
    """Malformed requests to Dash's own routes get 400 (a callback request of the wrong shape
    or for no callback) or 404 (a component file that does not exist), not a 500: the client
    is wrong, not the server. An exception inside one of our callbacks stays a 500."""
    from flask import abort, request
    from werkzeug.exceptions import HTTPException

    views = app.server.view_functions
    update, suites = "/_dash-update-component", next(
        (k for k in views if k.startswith("/_dash-component-suites/")), None)

    def well_formed(body: Any) -> bool:
        return (isinstance(body, dict) and isinstance(body.get("output"), str)
                and body["output"] in app.callback_map
                and isinstance(body.get("outputs"), (list, dict))
                and isinstance(body.get("inputs"), list)
                and all(isinstance(i, dict) and "id" in i and "property" in i
                        for i in body["inputs"] + list(body.get("state") or []))
                and isinstance(body.get("state", []), list)
                and isinstance(body.get("changedPropIds", []), list)
                and matches_definition(body, app.callback_map[body["output"]]))

    if update in views:
        dispatch = views[update]

        def checked_dispatch(*a: Any, **k: Any) -> Any:
            if request.method == "POST":
                try:
                    body = request.get_json(silent=True)
                except RecursionError:  # nested past the parser's depth (silent misses it)
                    abort(400)
                if not well_formed(body):
                    abort(400)
            return dispatch(*a, **k)

        views[update] = checked_dispatch
    if suites is not None:
        serve = views[suites]

        def checked_serve(*a: Any, **k: Any) -> Any:
            try:
                return serve(*a, **k)
            except HTTPException:
                raise
            except Exception:  # noqa: BLE001 - serving a static file: only a missing one fails
                abort(404)

        views[suites] = checked_serve


def _slots(items: list) -> list[tuple[Any, Any]]:
    """(id, property) of each of a callback request's inputs, state or outputs."""
    return [(i.get("id"), i.get("property")) if isinstance(i, dict) else (None, None)
            for i in items]


def matches_definition(body: dict, cb: dict) -> bool:
    """Whether a callback request names exactly the inputs, state and outputs its callback
    was defined with, in order (Dash itself raises, a 500, on one input fewer or more, state
    missing or extra, or outputs of another shape). Pattern-matching ids (dicts) are not used
    by this app: any such slot must match as written."""
    want_in = [(i["id"], i["property"]) for i in cb.get("inputs") or []]
    want_state = [(i["id"], i["property"]) for i in cb.get("state") or []]
    if _slots(body["inputs"]) != want_in or _slots(body.get("state") or []) != want_state:
        return False
    out = cb.get("output")
    outs = body["outputs"]
    if isinstance(out, (list, tuple)):  # a multi-output callback: a list of the same outputs
        want_out = [(o.component_id, o.component_property) for o in out]
        return isinstance(outs, list) and _out_slots(outs) == want_out
    return isinstance(outs, dict) and _out_slots([outs]) == [
        (getattr(out, "component_id", None), getattr(out, "component_property", None))]


def _out_slots(items: list) -> list[tuple[Any, Any]]:
    # Dash's renderer names an `allow_duplicate` output's property `prop@<hash of inputs>`;
    # Dash itself reads the part before "@" (dash._utils.clean_property_name), so do we.
    return [(i, p.split("@", 1)[0] if isinstance(p, str) else p) for i, p in _slots(items)]


# The page's own style, in its <head>. `scrollbar-gutter: stable`: the room of the page's
# scroll bar is kept from the start, so a figure is laid out at the width it keeps. Without it
# the Run tab's figures were laid out before the page grew past the window, its scroll bar
# then narrowed every one by its width, and Dash's graphs drew each again at the new width
# (round 36: the public v6e capture's timeline, 1352 -> 1337 px, ~0.3 s more of the browser's
# main thread after it first showed). Where scroll bars overlay the page (macOS) it changes
# nothing.
PAGE_STYLE = "<style>html { scrollbar-gutter: stable; }</style>"


def create_app(logdirs: Sequence[str | os.PathLike], host: str = "127.0.0.1",
               allowed_hosts: frozenset[str] | None = None) -> Dash:
    """A Dash app serving the runs under `logdirs` (see the module docstring).

    Bound to a loopback address (the default), it answers only requests whose `Host` header
    names a loopback host: a web page the user visits cannot reach the traces through DNS
    rebinding (its requests carry the attacker's host name). `allowed_hosts` (host names
    without port, e.g. from `overlap.dashboard.serve`) replaces that set, whatever `host`."""
    from overlap.trace import files

    # A server reads captures that other processes may rewrite: never through a mapping a
    # truncation would turn into SIGBUS for every user (`files.use_mapping`).
    files.use_mapping(False)
    table = _RunTable([os.fspath(d) for d in logdirs])
    app = Dash(__name__, title="overlap dashboard", suppress_callback_exceptions=True)
    # plotly.js starts once the layout is in the page (the server has read the runs), compiled
    # off the main thread (`plotlyjs`)
    plotlyjs.install(app, after="#runs-count")
    app.index_string = app.index_string.replace("</head>", PAGE_STYLE + "\n    </head>", 1)
    allowed = frozenset(allowed_hosts) if allowed_hosts is not None else (
        LOOPBACK_HOSTS if host in LOOPBACK_HOSTS else None)
    if allowed is not None:
        from flask import abort, request

        @app.server.before_request
        def _known_hosts_only():
            if _host_name(request.headers.get("Host", "")) not in allowed:
                abort(403)
    _guard_framework_routes(app)

    def layout() -> html.Div:
        # Runs at every page load: a reload shows runs that appeared since.
        runs = table.refresh()
        options = [{"label": r.name, "value": r.name} for r in runs]
        items = _loaded(runs)
        grps = rgroups.groups(items)
        real = _first_real(items)
        first = real[0] if real else (runs[0].name if runs else None)
        group_runs = grps[0]["runs"] if grps else []
        in_group = [r for r in runs if r.name in group_runs]
        return html.Div(style={"fontFamily": "sans-serif", "margin": "0 16px"}, children=[
            html.Div(style={"display": "flex", "alignItems": "center", "gap": "16px"}, children=[
                html.H2("overlap: does host offloading pay off?"),
                html.Button("Refresh runs", id="refresh"),
                html.Span("logdirs: " + ", ".join(table.logdirs), style={"color": "#666"}),
                # An empty hidden graph, in the page from the start: Dash's graph code (its
                # async-graph chunk) and plotly.js's first plot run before the user picks a
                # run, not after (plotly.js itself is started from <head>, `plotlyjs`). Issue
                # 32, the user reading the runs table 2 s first: without it the run's figures
                # came 0.00-0.04 s later (round 10); as a callback's answer it cost a round trip.
                dcc.Graph(id="plotly-preload", figure={"data": [], "layout": {}},
                          config={"displayModeBar": False, "staticPlot": True},
                          style={"display": "none"}),
                # what the Compare tab shows now (`_drawn_key`): drawn when first opened, not
                # again on every visit
                dcc.Store(id="compare-drawn"),
            ]),
            html.Div(_headline(real), id="headline"),
            dcc.Tabs(id="tabs", value="runs", children=[
                dcc.Tab(label="Runs", value="runs", children=[
                    _toolbar([
                        html.Span(id="runs-count"),
                    ]),
                    _table("runs-table", RUN_COLUMNS, row_selectable=False,
                           style_data_conditional=[
                               {"if": {"filter_query": '{verdict} contains "ERROR"'},
                                "backgroundColor": "#fdecea"}]),
                    html.P("Click a row to open that run in the Run tab.",
                           style={"color": "#666"}),
                ]),
                dcc.Tab(label="Run", value="run", children=[
                    _toolbar([
                        html.Label("Run:", htmlFor="run-select"),
                        dcc.Dropdown(id="run-select", options=options, value=first,
                                     clearable=False, style={"width": "420px"}),
                        html.Label("Step:", htmlFor="step-select"),
                        dcc.Dropdown(id="step-select", clearable=False,
                                     placeholder="type a step number",
                                     style={"width": "300px"}),
                        html.Button("Download HTML", id="run-html-button"),
                        dcc.Download(id="run-html"),
                    ]),
                    html.Div(id="run-status"),
                    _graph("fig-timeline", "overlap-timeline"),
                    _side_by_side(("fig-histogram", "overlap-ratios"),
                                  ("fig-bandwidth", "overlap-bandwidth")),
                    _graph("fig-hosts", "overlap-hosts"),
                    html.H4("Most exposed transfers (whole run)", id="run-table-title"),
                    _table("top-exposed", TOP_COLUMNS),
                ]),
                dcc.Tab(label="Compare", value="compare", children=[
                    html.Div(id="compare-verdict", style={**CARD, "fontWeight": "bold"}),
                    _toolbar(wrap=True, children=[
                        html.Label("Program and device:", htmlFor="compare-group"),
                        dcc.Dropdown(id="compare-group", options=_group_options(grps),
                                     value=grps[0]["key"] if grps else None, clearable=False,
                                     style={"minWidth": "420px"}),
                        html.Label("Baseline:", htmlFor="baseline"),
                        dcc.Dropdown(id="baseline",
                                     options=[{"label": n, "value": n} for n in group_runs],
                                     value=rundata.default_baseline(in_group), clearable=False,
                                     style={"width": "300px"}),
                    ]),
                    _toolbar([
                        html.Label("Runs:", htmlFor="compare-select"),
                        dcc.Dropdown(id="compare-select", options=options,
                                     value=group_runs, multi=True,
                                     style={"minWidth": "520px"}),
                        html.Button("Download HTML", id="compare-html-button"),
                        dcc.Download(id="compare-html"),
                    ]),
                    html.Div(id="compare-status"),
                    _graph("fig-memory", "overlap-memory"),
                    _side_by_side(("fig-step-time", "overlap-step-time"),
                                  ("fig-peak-memory", "overlap-peak-memory"),
                                  ("fig-overlap", "overlap-per-direction")),
                    _table("compare-table", COMPARE_COLUMNS),
                ]),
            ]),
        ])

    app.layout = layout

    @app.callback(
        Output("runs-table", "data"), Output("runs-count", "children"),
        Output("run-select", "options"), Output("compare-select", "options"),
        Output("compare-group", "options"),
        Input("refresh", "n_clicks"))
    def refresh_runs(n_clicks):
        runs = table.refresh() if n_clicks else table.runs()
        options = [{"label": r.name, "value": r.name} for r in runs]
        rows = [rundata.safe_run_row(r) for r in runs]
        return (rows, f"{len(rows)} run(s)", options, options,
                _group_options(rgroups.groups(_loaded(runs))))

    @app.callback(Output("compare-select", "value"), Input("compare-group", "value"),
                  prevent_initial_call=True)
    def choose_group(key):
        # A group picks its runs; the baseline follows (choose_baseline).
        grp = next((g for g in rgroups.groups(_loaded(table.runs())) if g["key"] == key), None)
        return dash.no_update if grp is None else grp["runs"]

    @app.callback(Output("baseline", "options"), Output("baseline", "value"),
                  Input("compare-select", "value"), State("baseline", "value"),
                  prevent_initial_call=True)
    def choose_baseline(names, current):
        # The baseline is one of the compared runs: the current one if still chosen, else the
        # remat run among them.
        names = [n for n in (names if isinstance(names, list) else []) if isinstance(n, str)]
        opts = [{"label": n, "value": n} for n in names]
        if current in names:
            return opts, current
        chosen = [r for r in table.runs() if r.name in names]
        return opts, rundata.default_baseline(chosen)

    @app.callback(Output("run-select", "value"), Output("tabs", "value"),
                  Input("runs-table", "active_cell"), State("runs-table", "derived_viewport_data"),
                  State("run-select", "value"), State("step-select", "value"),
                  State("run-status", "children"), prevent_initial_call=True)
    def open_run(cell, rows, current, step_value, status):
        # Payloads come from the browser: anything malformed is answered like no selection.
        if not isinstance(cell, dict) or not isinstance(rows, list):
            return dash.no_update, dash.no_update
        i = cell.get("row")
        if not isinstance(i, int) or not 0 <= i < len(rows) or not isinstance(rows[i], dict) \
                or not isinstance(rows[i].get("run"), str):
            return dash.no_update, dash.no_update
        name = rows[i]["run"]
        if name == current and _shown_as_picked(table, name, step_value, status):
            return dash.no_update, "run"  # the tab only: nothing to draw again
        return name, "run"

    @app.callback(Output("step-select", "options", allow_duplicate=True),
                  Input("step-select", "search_value"), State("run-select", "value"),
                  State("step-select", "value"), prevent_initial_call=True)
    def find_steps(search, name, value):
        # A run with more steps than the dropdown lists (`rundata.STEP_OPTIONS_LIMIT`): what
        # the user types is looked up among all of them here, not only among those listed.
        got = table.loaded(name) if isinstance(search, str) else None
        if got is None:
            return dash.no_update
        d = got[1]
        if len(d.result.get("steps", [])) <= rundata.STEP_OPTIONS_LIMIT:
            return dash.no_update  # every step is listed already
        return rundata.step_options(d, search=search or None,
                                    keep=value if isinstance(value, str) else None)

    @app.callback(Output("step-select", "options"), Output("step-select", "value"),
                  Output("run-status", "children"),
                  Output("fig-timeline", "figure"), Output("fig-histogram", "figure"),
                  Output("fig-bandwidth", "figure"), Output("top-exposed", "data"),
                  Output("fig-hosts", "figure"), Output("top-exposed", "columns"),
                  Output("run-table-title", "children"),
                  Input("run-select", "value"), Input("step-select", "value"))
    def show_run(name, step_value):
        # A run picked: its steps (its median step chosen), its status cards and that step's
        # figures; a step picked: that step's figures. One callback, so a run picked is one
        # round trip (issue 32: its steps, then its figures, were two in a row). Drawn at page
        # load although the Runs tab shows (unlike the Compare tab's figures): the run the
        # page opens on is ready when the user opens it.
        if _triggered() == {"step-select.value"}:
            head: tuple = (dash.no_update,) * 3
        else:
            head, step_value = _run_head(table, name)
        return (*head, *_run_views(table, name, step_value))

    @app.callback(Output("fig-memory", "figure"), Output("fig-step-time", "figure"),
                  Output("fig-peak-memory", "figure"), Output("fig-overlap", "figure"),
                  Output("compare-table", "data"), Output("compare-status", "children"),
                  Output("compare-verdict", "children"), Output("compare-drawn", "data"),
                  Input("compare-select", "value"), Input("baseline", "value"),
                  Input("tabs", "value"), State("compare-drawn", "data"))
    def draw_compare(names, baseline, tab, drawn):
        # Drawn when the Compare tab is open (issue 32: at page load these figures took ~0.4
        # s of the server's CPU for a 1M-event run, while the browser started plotly.js and
        # the user picked a run), once per what it shows (not again on every visit).
        key = _drawn_key(names, baseline)
        if tab not in (None, "compare") or (key == drawn and _triggered() == {"tabs.value"}):
            return (dash.no_update,) * 8
        return (*_compare_views(names, baseline), key)

    def _compare_views(names, baseline):
        datas, errors = _load_many(table, names, baseline)
        datas, others = _like_baseline(datas, baseline)
        figs = figures.compare_figures(datas, baseline)
        rows = [{**r, "baseline": "yes" if r["baseline"] else "",
                 "step_ms": None if r["step_ps"] is None else round(r["step_ps"] / 1e9, 3),
                 "peak": None if r["peak_bytes"] is None else format_bytes(r["peak_bytes"]),
                 **{k: None if r[k] is None else round(100 * r[k], 1) for k in ("D2H", "H2D")}}
                for r in figures.compare_rows(datas, baseline)]
        from overlap.dashboard.predicted import predicted_cells

        pred = predicted_cells(datas, table.runs())
        rows = [{**r, "predicted_plan": pred.get(r["run"], "")} for r in rows]
        status = [_error_card(e) for e in errors]
        if others:
            status.append(html.Div(
                [html.B(f"Not compared with {baseline} (another program, device or way of "
                        "making it): "),
                 "; ".join(f"{n}: {why}" for n, why in others)],
                className="other-program-card", style={**CARD, "borderColor": "#F58518"}))
        same_answer = answer_card(datas, baseline)
        if same_answer is not None:
            status.append(same_answer)
        if any(d.synthetic for _, d in datas):
            status.append(html.Div("SYNTHETIC data in this comparison: written by "
                                   "overlap.trace.synthetic, not measured.", style=SYNTHETIC_CARD))
        verdict = [html.Span("Verdict: "), rgroups.group_verdict(datas, baseline)] \
            if datas else "Choose runs to compare."
        return (figs["memory"], figs["step_time"], figs["peak_memory"], figs["overlap"], rows,
                status, verdict)

    @app.callback(Output("run-html", "data"), Input("run-html-button", "n_clicks"),
                  State("run-select", "value"), State("step-select", "value"),
                  prevent_initial_call=True)
    def download_run(_, name, step_value):
        from overlap.report.html import page_html

        got = table.loaded(name)
        if got is None:
            return dash.no_update
        run, d = got
        figs = figures.run_figures(d, rundata.parse_step(step_value, d))
        tables = ({"Planned copies (PREDICTED by the roofline estimate; compiled, not run)":
                   figures.planned_copies_rows(d.result.get("planned_copies") or [])}
                  if d.result.get("status") == "PLAN" else
                  {"Most exposed transfers": figures.top_exposed_rows(d.result)})
        page = page_html(f"overlap: {run.name}", d.result, list(figs.values()), tables=tables)
        return dict(content=page, filename=f"overlap-{_safe(run.name)}.html")

    @app.callback(Output("compare-html", "data"), Input("compare-html-button", "n_clicks"),
                  State("compare-select", "value"), State("baseline", "value"),
                  prevent_initial_call=True)
    def download_compare(_, names, baseline):
        from overlap.report.html import page_html

        datas, _errors = _load_many(table, names, baseline)
        datas, _others = _like_baseline(datas, baseline)
        figs = figures.compare_figures(datas, baseline)
        page = page_html("overlap: compare runs", None, list(figs.values()))
        return dict(content=page, filename="overlap-compare.html")

    return app


def _triggered() -> set[str]:
    """The inputs ("id.property") that triggered this callback; {"."} on its initial call."""
    return {t["prop_id"] for t in dash.callback_context.triggered}


def _shown_as_picked(table: _RunTable, name: Any, step_value: Any, status: Any) -> bool:
    """Whether the Run view, on run `name`, shows what picking `name` again would (its
    default step), or is about to (the page's first answer for it not in yet: no step, no
    status cards). A click on that run's row then only opens the tab (issue 32: when the
    dashboard opened on the one run it was given, a click on its row drew it all again).

    A run without steps (a capture made without step annotations, such as the public v6e
    sample, or a plan) has one view, its whole capture: shown where the view has no step and
    holds the run's verdict card (`_status_cards`), not an error card. Such runs were picked
    again on every click (round 36: a 1M-copy capture's view, ~0.75 s of the server's CPU
    while the browser started plotly.js, then drawn twice)."""
    got = table.loaded(name)
    if got is None:  # unreadable: picked again (read again), as before
        return False
    step = rundata.default_step(got[1])
    if step is None:
        return step_value is None and (status is None or _has_verdict(status))
    return step_value == f"{step[0]}|{step[1]}" or (step_value is None and status is None)


def _has_verdict(status: Any) -> bool:
    """Whether the Run view's status, as the browser sends it back (any JSON: untrusted),
    holds a run's verdict card (`id="run-verdict"`, `_status_cards`)."""
    items = status if isinstance(status, list) else [status]
    return any(isinstance(c, dict) and isinstance(c.get("props"), dict)
               and c["props"].get("id") == "run-verdict" for c in items)


def _run_head(table: _RunTable, name: Any) -> tuple[tuple, str | None]:
    """(step options, step value, status cards) of run `name` picked, and that step value:
    its median step (`rundata.default_step`), or an error card where it is unknown or cannot
    be read."""
    run = table.find(name)
    if run is None:
        return ([], None, _error_card(f"Unknown run {name!r}: pick one from the list."
                                      if name else "No runs found under the logdirs.")), None
    try:
        d = rundata.load_run(run)
    except rundata.RunLoadError as e:
        return ([], None, _error_card(f"This run could not be read: {e}")), None
    step = rundata.default_step(d)
    value = None if step is None else f"{step[0]}|{step[1]}"
    return (rundata.step_options(d), value, _status_cards(d)), value


def _run_views(table: _RunTable, name: Any, step_value: Any) -> tuple:
    """The Run view's figures, top table (rows, columns) and its title, for run `name` at
    step `step_value` ("host|step")."""
    run = table.find(name)
    msg = "No run selected." if run is None else None
    if run is not None:
        try:
            d = rundata.load_run(run)
        except rundata.RunLoadError:
            msg = "Could not read this run (the error card above says why)."
    top_cols = [{"id": c, "name": n} for c, n in TOP_COLUMNS]
    if msg:
        empty = figures.empty_figure(msg)
        return empty, empty, empty, [], empty, top_cols, "Most exposed transfers (whole run)"
    figs = figures.run_figures(d, rundata.parse_step(step_value, d))
    if d.result.get("status") == "PLAN":  # what the plan knows: its planned copies
        return (figs["timeline"], figs["histogram"], figs["bandwidth"],
                figures.planned_copies_rows(d.result.get("planned_copies") or []),
                figures.empty_figure("A plan is compiled for one device: no hosts.")
                .update_layout(height=160),
                [{"id": c, "name": n} for c, n in PLAN_COPY_COLUMNS],
                "Planned copies (PREDICTED by the roofline estimate; compiled, not run)")
    return (figs["timeline"], figs["histogram"], figs["bandwidth"],
            figures.top_exposed_rows(d.result), figures.hosts_figure(d.result, d.synthetic),
            top_cols, "Most exposed transfers (whole run)")


def _drawn_key(*inputs: Any) -> str:
    """What a tab's figures were drawn from (its inputs), hashed: what the browser keeps."""
    import hashlib

    return hashlib.sha256(json.dumps(inputs, default=str).encode()).hexdigest()[:32]


def _safe(name: str) -> str:
    """A download file name from a run name (which may contain slashes)."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:100]


def _load_many(table: _RunTable, names, baseline) -> tuple[list, list[str]]:
    """(name, RunData) for the chosen runs, baseline first; load errors as messages."""
    names = [n for n in (names if isinstance(names, list) else []) if isinstance(n, str)]
    if isinstance(baseline, str) and baseline not in names:
        names = [baseline, *names]
    names.sort(key=lambda n: n != baseline)
    datas, errors = [], []
    for n in names[:20]:  # a comparison of more runs is unreadable anyway
        run = table.find(n)
        if run is None:
            errors.append(f"Unknown run {n!r}.")
            continue
        try:
            datas.append((n, rundata.load_run(run)))
        except rundata.RunLoadError as e:
            errors.append(f"Left out, could not be read: {e}")
    return datas, errors


def _loaded(runs: list[rundata.Run]) -> list[tuple[str, Any, float]]:
    """(name, RunData, newest file mtime) of every run that loads (errors left out)."""
    out = []
    for r in runs:
        try:
            d = rundata.load_run(r)
        except rundata.RunLoadError:
            continue
        except Exception:  # noqa: BLE001 - a run that breaks grouping is left out of groups
            continue
        # When the run was made: run.json's creation time, else its files' newest mtime.
        made = (d.manifest or {}).get("created_unix_ns")
        mt = made if isinstance(made, int) and not isinstance(made, bool) else \
            max((p[1] or 0 for p in r.fingerprint()), default=0)
        out.append((r.name, d, float(mt)))
    return out


def prefetch(logdirs: Sequence[str | os.PathLike]) -> threading.Thread:
    """Read every run under `logdirs` into the run cache (`rundata.load_run`) in a daemon
    thread, started by `overlap dashboard` as the server starts.

    Why: the page's first request builds the layout, which reads every run; a user who opens
    the printed URL at once waited for the read after the click (issue 32: a 1M-event capture
    is 0.5-1 s of it). Started with the server, the read is done or under way when that
    request comes: `load_run`'s per-run lock makes the request wait for the same read, never
    a second one. The cache holds what the layout would have loaded anyway; what fails to
    read is left to the page, which says why."""
    dirs = [os.fspath(d) for d in logdirs]

    def work() -> None:
        try:
            _loaded(rundata.discover_runs(dirs))
        except Exception:  # noqa: BLE001 - the page's own load reports what is wrong
            pass

    thread = threading.Thread(target=work, name="overlap-dashboard-prefetch", daemon=True)
    thread.start()
    return thread


def _first_real(items: list[tuple[str, Any, float]]) -> tuple[str, Any] | None:
    """The measured (not synthetic, not a plan) run that moved the most bytes between device
    and host, if any: what the dashboard opens on, so the first screen shows real transfers."""
    real = [(int((d.result.get("summary") or {}).get("bytes") or 0), name, d)
            for name, d, _ in items
            if not d.synthetic and d.result.get("status") != "PLAN"
            and (d.result.get("summary") or {}).get("transfers")]
    if not real:
        return None
    _, name, d = min(real, key=lambda x: (-x[0], x[1]))
    return name, d


def _headline(real: tuple[str, Any] | None) -> Any:
    if real is None:
        return None
    name, d = real
    where = ", ".join(d.device_names) or d.backend
    return html.Div([html.B(f"Measured transfers in {name} ({where}): "),
                     str(d.result.get("verdict", ""))], style={**CARD, "background": "#f4f8fc"})


def _group_options(grps: list[dict[str, Any]]) -> list[dict[str, str]]:
    return [{"label": g["label"], "value": g["key"]} for g in grps]


def _like_baseline(datas: list, baseline) -> tuple[list, list[tuple[str, str]]]:
    """Split (name, RunData) into the runs of the baseline's group and (name, what differs)
    for the others, which are flagged instead of judged."""
    base = next((d for n, d in datas if n == baseline), None)
    if base is None:
        return datas, []
    key = rgroups.group_key(base)
    same = [(n, d) for n, d in datas if rgroups.group_key(d) == key]
    others = [(n, rgroups.what_differs(d, base)) for n, d in datas
              if rgroups.group_key(d) != key]
    return same, others


def answer_card(datas: list, baseline) -> html.Div | None:
    """Same answer? Each run's loss and gradient fingerprint against the baseline's
    (`overlap.analysis.answers`), red where one differs beyond float tolerance; None where no
    run recorded one (captures made before overlap recorded answers: nothing to say)."""
    from overlap.analysis import answers

    base = next((d for n, d in datas if n == baseline), None)
    if base is None or not any((d.manifest or {}).get("answer") for _, d in datas):
        return None
    lines, differs = [], False
    for n, d in datas:
        if d is base or d.result.get("status") == "PLAN":
            continue
        chk = answers.check((d.manifest or {}).get("answer"),
                            (base.manifest or {}).get("answer"))
        differs |= chk["status"] == answers.DIFFERS
        lines.append(html.Li(f"{n}: {chk['text']}", style={"color": "#B00020"} if
                             chk["status"] == answers.DIFFERS else {}))
    if not lines:
        return None
    head = (f"Same answer? NO: a policy's loss or gradients differ from {baseline}'s"
            if differs else f"Same answer? Loss and gradients against {baseline}'s")
    return html.Div([html.B(head), html.Ul(lines, style={"margin": "4px 0"})],
                    className="answer-mismatch-card" if differs else "answer-card",
                    style={**CARD, "borderColor": "#B00020"} if differs else CARD)


def _error_card(message: str) -> html.Div:
    return html.Div(message, className="error-card", style=ERROR_CARD)


def _status_cards(d: rundata.RunData) -> list:
    r = d.result
    cards = []
    if r.get("status") == "PLAN":
        cards.append(html.Div("PLAN: compiled for a target by its real compiler, never run. "
                              "Memory is the compiler's; transfer hiding is a roofline estimate.",
                              style=PLAN_CARD, className="plan-card"))
    if d.synthetic:
        cards.append(html.Div("SYNTHETIC: this capture was written by overlap.trace.synthetic, "
                              "not measured.", style=SYNTHETIC_CARD, className="synthetic-card"))
    cards.append(html.Div([html.B("Verdict: "), r.get("verdict", "")], id="run-verdict",
                          style=CARD))
    cards += causes_view.cards(r, CARD)  # why the exposed time is exposed
    cards += names_view.cards(r, CARD)  # did each checkpoint name offload
    vl = vendor_line(r)  # which vendor's devices, and any shape the reader cannot read
    if vl:
        cards.append(html.Div(vl, id="run-vendor", style=CARD))
    for note in r.get("notes", []):
        cards.append(html.Div(note, style={**CARD, "color": "#555"}))
    return cards
