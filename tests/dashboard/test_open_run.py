"""A click on a row of the Runs table opens that run in the Run tab (`open_run`). The row of the
run the Run view is already on, at the step a pick would choose (its median step), or with that
view still on its way (the page's first answer not in: no step, no status cards), only opens the
tab: issue 32, when the dashboard opened on the one capture it was given, a click on its row
drew it all again (a second answer and plot of the same figures while plotly.js started). Any
other case picks the run again, as before: its steps, its median step, its figures. The real
app's callback through Flask's test client, on SYNTHETIC runs."""

from __future__ import annotations

import json

import pytest

from overlap.dashboard import data
from overlap.dashboard.app import create_app
from tests.dashboard.dashboard_support import RUN_VIEW, make_logdir, run_picked
from tests.dashboard.test_dashboard_security import _post

OPEN = "..run-select.value...tabs.value.."


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    root = tmp_path_factory.mktemp("open")  # the session's private cache (tests/conftest.py)
    data.clear_cache()
    c = create_app([make_logdir(root)]).server.test_client()
    assert c.get("/").status_code == 200
    return c


def _picked(client, name: str) -> tuple:
    """(step value, status cards) the Run view shows once `name` is picked."""
    r = _post(client, RUN_VIEW, run_picked(name))
    got = json.loads(r.get_data(as_text=True))["response"]
    return got["step-select"]["value"], got["run-status"]["children"]


def _click(client, name: str, current, step, status) -> dict:
    rows = [{"run": "remat_full"}, {"run": "qkv_offloaded"}, {"run": "broken_capture"}]
    row = next(i for i, r in enumerate(rows) if r["run"] == name)
    r = _post(client, OPEN, [{"id": "runs-table", "property": "active_cell",
                              "value": {"row": row, "column": 0}}],
              [{"id": "runs-table", "property": "derived_viewport_data", "value": rows},
               {"id": "run-select", "property": "value", "value": current},
               {"id": "step-select", "property": "value", "value": step},
               {"id": "run-status", "property": "children", "value": status}])
    assert r.status_code == 200
    return json.loads(r.get_data(as_text=True))["response"]


def test_the_open_run_at_its_median_step_only_opens_the_tab(client):
    step, status = _picked(client, "qkv_offloaded")
    assert step and status
    assert _click(client, "qkv_offloaded", "qkv_offloaded", step, status) == {
        "tabs": {"value": "run"}}
    # the page's first answer not in yet: it brings this very view
    assert _click(client, "qkv_offloaded", "qkv_offloaded", None, None) == {
        "tabs": {"value": "run"}}


def test_any_other_click_picks_the_run_again(client):
    step, status = _picked(client, "qkv_offloaded")
    other = step.rsplit("|", 1)[0] + "|" + ("0" if not step.endswith("|0") else "1")
    want = {"run-select": {"value": "qkv_offloaded"}, "tabs": {"value": "run"}}
    # another step shown: picked again, back to its median step (as before)
    assert _click(client, "qkv_offloaded", "qkv_offloaded", other, status) == want
    # another run shown
    assert _click(client, "qkv_offloaded", "remat_full", step, status) == want
    # the view said it could not read the run: picked again (read again)
    assert _click(client, "qkv_offloaded", "qkv_offloaded", None, "card") == want
    # a run that cannot be read is always picked again
    assert _click(client, "broken_capture", "broken_capture", None, None) == {
        "run-select": {"value": "broken_capture"}, "tabs": {"value": "run"}}
