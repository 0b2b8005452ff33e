"""The Compare tab draws its figures when it is open, once per what it shows (issue 32: at page
load they cost the server ~0.4 s of CPU for a 1M-event run while the browser started plotly.js
and the user picked a run). The Run tab's are drawn at page load for the run the page opens on
(ready when the user opens it). The real app's callbacks through Flask's test client, on
SYNTHETIC runs."""

from __future__ import annotations

import json

import pytest

from overlap.dashboard import data
from overlap.dashboard.app import create_app
from tests.dashboard.dashboard_support import RUN_VIEW, make_logdir


@pytest.fixture
def client_and_map(tmp_path, monkeypatch):
    monkeypatch.setenv("OVERLAP_CACHE_DIR", str(tmp_path / "cache"))
    data.clear_cache()
    app = create_app([make_logdir(tmp_path)])
    client = app.server.test_client()
    assert client.get("/").status_code == 200
    return client, app.callback_map


def _call(client, cmap, prefix: str, values: list, state: list, changed: list[str]):
    key = next(k for k in cmap if k.startswith(prefix))
    cb = cmap[key]
    outs = [{"id": o.component_id, "property": o.component_property} for o in cb["output"]]
    body = {"output": key, "outputs": outs,
            "inputs": [{**i, "value": v} for i, v in zip(cb["inputs"], values)],
            "state": [{**s, "value": v} for s, v in zip(cb["state"], state)],
            "changedPropIds": changed}
    r = client.post("/_dash-update-component", data=json.dumps(body),
                    content_type="application/json")
    assert r.status_code in (200, 204)
    # what the callback updated ({} for no update: Dash 4 answers 200 with no outputs)
    return (r.get_json() or {}).get("response", {}) if r.status_code == 200 else {}


COMPARE = "..fig-memory.figure"


def test_compare_figures_wait_for_the_compare_tab(client_and_map):
    client, cmap = client_and_map
    names = ["remat_full", "qkv_offloaded"]
    got = _call(client, cmap, COMPARE, [names, "remat_full", "runs"], [None],
                    ["compare-select.value", "baseline.value", "tabs.value"])
    assert got == {}
    got = _call(client, cmap, COMPARE, [names, "remat_full", "compare"], [None],
                      ["tabs.value"])
    assert len(got["fig-memory"]["figure"]["data"]) == 2
    key = got["compare-drawn"]["data"]
    got = _call(client, cmap, COMPARE, [names, "remat_full", "compare"], [key],
                    ["tabs.value"])
    assert got == {}
    got = _call(client, cmap, COMPARE, [names, "qkv_offloaded", "compare"], [key],
                      ["baseline.value"])
    assert got["compare-drawn"]["data"] != key


def test_run_figures_are_drawn_for_the_run_the_page_opens_on(client_and_map):
    client, cmap = client_and_map
    got = _call(client, cmap, RUN_VIEW, ["qkv_offloaded", None], [],
                ["run-select.value", "step-select.value"])
    assert got["fig-timeline"]["figure"]["data"]
