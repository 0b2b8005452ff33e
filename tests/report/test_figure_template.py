"""The figures' template is attached without plotly.py's per-figure copy and validation
(`figures._set_template`, issue 32), and what users get is unchanged: the JSON of every figure
the dashboard and `report --html` build, byte for byte, against the same figures built the old
way (`update_layout(template="plotly_white")`, plotly.py validating a deep copy per figure), on
the real H100/H200 corpus, the shipped sample captures, SYNTHETIC traces and inline plan data;
the JSON the dashboard's Run callback sends; a written HTML report.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio
import pytest
from dash._utils import to_json as dash_to_json

from overlap.dashboard import data
from overlap.report import figures
from overlap.trace.synthetic import gpu_offload_scenario, many_ops_scenario
from tests.conftest import SAMPLE_TRACES


def _old_layout(fig: go.Figure, title: str, synthetic: bool, **kw) -> go.Figure:
    # `figures._layout` as it was before issue 32's round 10: the template by name, which
    # plotly.py deep-copies and validates for each figure
    tl = figures._title_layout(figures._title(title, synthetic))
    fig.update_layout(title=tl["title"], template="plotly_white",
                      margin=dict(l=60, r=20, t=tl["margin_t"], b=50),
                      legend=dict(orientation="h", y=-0.2), **kw)
    return fig


def _figs(d: data.RunData, name: str) -> list[go.Figure]:
    """Every figure the dashboard and the HTML report draw for one run."""
    figs = list(figures.run_figures(d, data.default_step(d)).values())
    if d.result.get("status") != "PLAN":
        figs.append(figures.hosts_figure(d.result, d.synthetic))
    figs += figures.compare_figures([(name, d)], name).values()
    return figs


def _json_old_and_new(build) -> tuple[list[str], list[str]]:
    new = [pio.to_json(f, validate=False) for f in build()]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(figures, "_layout", _old_layout)
        old = [pio.to_json(f, validate=False) for f in build()]
    return old, new


def _check_same(build, what: str) -> int:
    old, new = _json_old_and_new(build)
    assert len(old) == len(new) and old, what
    white = pio.templates["plotly_white"].to_plotly_json()
    for i, (a, b) in enumerate(zip(old, new)):
        assert a == b, f"{what}: figure {i} differs"
        # the comparison sees the template: plotly_white's, not plotly's default
        assert json.loads(b)["layout"]["template"] == white, f"{what}: figure {i}"
    return len(new)


def _runs(root: Path) -> list[data.Run]:
    runs = data.discover_runs([root])
    assert runs, root
    return runs


def _check_runs(runs: list[data.Run]) -> int:
    n = 0
    for run in runs:
        try:
            d = data.load_run(run)
        except data.RunLoadError:
            continue
        n += _check_same(lambda d=d, name=run.name: _figs(d, name), run.name)
    return n


def test_figures_on_the_real_gpu_corpus_are_unchanged(gpu_corpus):
    assert _check_runs(_runs(gpu_corpus)) >= 38 * 7


def test_figures_on_the_sample_captures_are_unchanged():
    runs = [r for sub in sorted(SAMPLE_TRACES.iterdir()) if sub.is_dir()
            for r in data.discover_runs([sub])]
    assert len(runs) >= 6
    assert _check_runs(runs) >= 6 * 7


def _with_memory(t):
    t.allocation(3_000_000, bytes_allocated=2**30)
    t.allocation(900_000_000, kind="free", bytes_allocated=2**29)
    return t


@pytest.mark.parametrize("make", [
    lambda: [gpu_offload_scenario(steps=3, layers=2, hidden_fraction=0.5)],
    lambda: [many_ops_scenario(steps=3, clocked=True)],
    lambda: [_with_memory(gpu_offload_scenario(steps=2, layers=1, hidden_fraction=0.0))],
    # two hosts: the straggler view has bars and a median line
    lambda: [gpu_offload_scenario(steps=2, layers=2, hidden_fraction=f, host=f"host{i}")
             for i, f in enumerate((1.0, 0.5, 0.25))],
], ids=["gpu", "tpu-many-ops", "gpu-memory", "three-hosts"])
def test_figures_of_synthetic_traces_are_unchanged(make, tmp_path):
    for t in make():
        t.write_session(tmp_path / "run")  # SYNTHETIC
    [run] = _runs(tmp_path)
    d = data.load_run(run)
    assert d.synthetic
    assert _check_same(lambda: _figs(d, run.name), "synthetic") == 8


PARTS = [{"is_entry": True, "computation": "main", "total_ps": 5_000_000,
          "compute": [(0, 2_000_000), (3_000_000, 5_000_000)],
          "copies": [{"direction": "D2H", "op": "copy-start.1", "issue_ps": 1_000_000,
                      "end_ps": 2_500_000, "hidden_ps": 1_000_000, "exposed_ps": 500_000,
                      "bytes": 2**20}]}]
PLAN = {"memory_budget_bytes": 2**34, "device_peak_bytes": 2**30, "target": "h100",
        "memory_budget_source": "inline test plan"}
OPS = [{"op": "copy-start.1", "direction": "D2H", "bytes": 2**20, "executions": 2,
        "duration_ps": 1_500_000, "hidden_ps": 1_000_000, "exposed_ps": 500_000,
        "hidden_fraction": 2 / 3}]


def test_plan_and_compare_figures_from_inline_data_are_unchanged():
    import numpy as np

    mem = {"index": np.arange(100), "bytes": (np.arange(100) % 7) * 2**26}
    rows: list[dict[str, Any]] = [
        {"run": "a/remat", "baseline": True, "step_ps": 3 * 10**9, "step_source": "steps",
         "peak_bytes": 3 * 2**30, "peak_source": "allocator", "predicted": False,
         "D2H": 0.5, "H2D": None},
        {"run": "b/offload", "baseline": False, "step_ps": None, "step_source": None,
         "peak_bytes": None, "peak_source": None, "predicted": True, "D2H": 0.9, "H2D": 0.1}]
    curves = [{"run": "a/remat", "device": "GPU:0", "x": np.arange(5) * 10**9,
               "y": np.arange(5) * 2**30, "baseline": True}]
    _check_same(lambda: [figures.plan_timeline_figure(PARTS, "h100"),
                         figures.plan_timeline_figure([], "h100"),
                         figures.plan_memory_figure(mem, PLAN),
                         figures.plan_memory_figure(None, PLAN),
                         figures.plan_ops_figure(OPS), figures.plan_ops_figure([]),
                         figures.memory_figure(curves, "time", ["c"], True),
                         figures.memory_figure([], "program"),
                         figures.step_time_figure(rows), figures.peak_memory_figure(rows),
                         figures.direction_overlap_figure(rows),
                         figures.empty_figure("nothing", "a title", True)], "inline")


def test_each_figure_has_its_own_template_and_the_registered_one_is_untouched():
    before = pio.templates["plotly_white"].to_plotly_json()
    a, b = figures.empty_figure("a"), figures.empty_figure("b")
    a.update_layout(template_layout_font_size=30)
    a.layout.template.layout.paper_bgcolor = "black"
    assert b.layout.template.layout.font.size is None
    assert b.layout.template.layout.paper_bgcolor == "white"
    assert figures.empty_figure("c").to_plotly_json()["layout"]["template"] == before
    assert pio.templates["plotly_white"].to_plotly_json() == before


def test_the_json_the_dashboard_sends_for_a_run_is_unchanged(gpu_corpus):
    """The Run view's callback answer through the real app (Flask test client), byte for
    byte, for each run of one real multi-run logdir."""
    from overlap.dashboard.app import create_app

    root = gpu_corpus / "gpu-h100" / "transformer-h100"
    app = create_app([root])
    client = app.server.test_client()
    assert client.get("/").status_code == 200
    key, cb = next((k, c) for k, c in app.callback_map.items() if "fig-timeline.figure" in k)
    names = [r.name for r in data.discover_runs([root])]
    assert len(names) >= 2

    def answers() -> list[bytes]:
        out = []
        for name in names:
            body = {"output": key,
                    "outputs": [{"id": o.component_id, "property": o.component_property}
                                for o in cb["output"]],
                    "inputs": [{"id": i["id"], "property": i["property"],
                                "value": name if i["id"] == "run-select" else None}
                               for i in cb["inputs"]],
                    "state": [{"id": s["id"], "property": s["property"], "value": None}
                              for s in cb["state"]],
                    "changedPropIds": ["run-select.value"]}
            r = client.post("/_dash-update-component", json=body)
            assert r.status_code == 200, name
            assert b"fig-timeline" in r.data
            out.append(r.data)
        return out

    new = answers()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(figures, "_layout", _old_layout)
        old = answers()
    assert old == new
    # what Dash serialises is what plotly.py's own encoder makes of the figures
    d = data.load_run(data.find_run(data.discover_runs([root]), names[0]))
    fig = figures.run_figures(d, data.default_step(d))["timeline"]
    assert json.loads(dash_to_json(fig)) == json.loads(pio.to_json(fig, validate=False))


def test_the_html_report_is_unchanged(tmp_path):
    from overlap.analysis import overlap as analysis
    from overlap.report.html import write_html
    from overlap.trace import read_trace

    run = tmp_path / "run"
    gpu_offload_scenario(steps=3, layers=2, hidden_fraction=0.5).write_session(run)  # SYNTHETIC
    trace = read_trace(run)
    result = analysis.analyze(trace)
    new = write_html(result, trace, tmp_path / "new.html").read_bytes()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(figures, "_layout", _old_layout)
        old = write_html(result, trace, tmp_path / "old.html").read_bytes()
    assert old == new and b"plotly-graph-div" in new
