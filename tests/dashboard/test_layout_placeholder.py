"""The layout's "Loading..." figures (issue 32): built once per process, not once per graph
and page load (eight graphs, ~20 ms of plotly.py each, on the way to the runs table). Each
graph still holds exactly the figure `figures.empty_figure("Loading...")` builds, as its own
dict, and the page's layout JSON is what it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from overlap.dashboard import app as dashboard_app
from overlap.dashboard.app import create_app
from overlap.report import figures

LOGDIR = Path(__file__).resolve().parents[2] / "sample_traces" / "cpu-scan"
GRAPHS = ("fig-timeline", "fig-histogram", "fig-bandwidth", "fig-hosts", "fig-memory",
          "fig-step-time", "fig-peak-memory", "fig-overlap")


@pytest.fixture()
def app(tmp_path, monkeypatch):
    monkeypatch.setenv("OVERLAP_CACHE_DIR", str(tmp_path / "cache"))
    return create_app([LOGDIR])


def _graphs(node, out):
    """Every dcc.Graph in a layout JSON tree, by id."""
    if isinstance(node, dict):
        if node.get("type") == "Graph" and isinstance(node.get("props"), dict):
            out[node["props"].get("id")] = node["props"]
        for v in node.values():
            _graphs(v, out)
    elif isinstance(node, list):
        for v in node:
            _graphs(v, out)
    return out


def test_each_graph_holds_the_loading_figure(app):
    client = app.server.test_client()
    graphs = _graphs(json.loads(client.get("/_dash-layout").data), {})
    want = json.loads(json.dumps(figures.empty_figure("Loading...").to_plotly_json()))
    assert set(GRAPHS) <= set(graphs)
    for g in GRAPHS:
        assert graphs[g]["figure"] == want, g
        assert graphs[g]["figure"]["layout"]["annotations"][0]["text"] == "Loading..."
        assert "template" in graphs[g]["figure"]["layout"]  # the plotly_white look kept


def test_placeholder_built_once_per_process(app, monkeypatch):
    calls = []
    real = figures.empty_figure

    def counted(*a, **k):
        calls.append(a)
        return real(*a, **k)

    monkeypatch.setattr(figures, "empty_figure", counted)
    dashboard_app._placeholder_json.cache_clear()
    client = app.server.test_client()
    for _ in range(3):  # three page loads
        assert client.get("/_dash-layout").status_code == 200
    assert [a for a in calls if a == ("Loading...",)] == [("Loading...",)]


def test_graphs_do_not_share_one_figure_dict():
    a = dashboard_app._graph("a", "a").figure
    b = dashboard_app._graph("b", "b").figure
    assert a == b and a is not b
    a["layout"]["annotations"][0]["text"] = "changed"
    assert b["layout"]["annotations"][0]["text"] == "Loading..."
    assert dashboard_app._graph("c", "c").figure["layout"]["annotations"][0]["text"] == \
        "Loading..."
