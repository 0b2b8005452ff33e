"""A click on a row of the Runs table opens that run in the Run tab (`open_run`). The row of the
run the Run view is already on, at the step a pick would choose (its median step), or with that
view still on its way (the page's first answer not in: no step, no status cards), only opens the
tab: issue 32, when the dashboard opened on the one capture it was given, a click on its row
drew it all again (a second answer and plot of the same figures while plotly.js started). Any
other case picks the run again, as before: its steps, its median step, its figures. A run
without steps (a capture made without step annotations) has one view, its whole capture:
a click on its row only opens the tab while that view holds the run's verdict (round 36: it
was picked again on every click, its figures answered and drawn twice). The real app's
callback through Flask's test client, on SYNTHETIC runs."""

from __future__ import annotations

import json

import pytest

from overlap.dashboard import data
from overlap.dashboard.app import create_app
from overlap.trace.synthetic import SyntheticTrace
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


def _click(client, name: str, current, step, status,
           rows=({"run": "remat_full"}, {"run": "qkv_offloaded"}, {"run": "broken_capture"}),
           ) -> dict:
    rows = list(rows)
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


@pytest.fixture(scope="module")
def stepless(tmp_path_factory):
    """An app on two SYNTHETIC runs without step annotations: transfers and compute, no step."""
    logdir = tmp_path_factory.mktemp("stepless") / "runs"
    for name in ("no_steps", "other_no_steps"):
        t = SyntheticTrace()
        g = t.gpu(0)
        for i in range(4):
            g.kernel(10_000_000 + i * 4_000_000, 2_000_000)
            g.memcpy("D2H", 11_000_000 + i * 4_000_000, 2_000_000, 1 << 20)
        run = logdir / name
        t.write(run / "plugins" / "profile" / "2026_11_29_00_00_00" / "h.xplane.pb")
        (run / "run.json").write_text(json.dumps({"policy": "qkv_proj_offloaded"}))
    data.clear_cache()
    c = create_app([logdir]).server.test_client()
    assert c.get("/").status_code == 200
    return c


STEPLESS_ROWS = ({"run": "no_steps"}, {"run": "other_no_steps"})


def test_a_run_without_steps_shown_only_opens_the_tab(stepless):
    step, status = _picked(stepless, "no_steps")
    assert step is None and status  # its one view: the whole capture, its status cards
    tab = {"tabs": {"value": "run"}}
    assert _click(stepless, "no_steps", "no_steps", None, status, STEPLESS_ROWS) == tab
    # the page's first answer not in yet: it brings this very view
    assert _click(stepless, "no_steps", "no_steps", None, None, STEPLESS_ROWS) == tab


@pytest.mark.parametrize("status", ["card", [{"props": {"id": "other"}}], [{"props": 5}], 7,
                                    {"props": {"className": "error-card"}}])
def test_a_run_without_steps_not_shown_is_picked_again(stepless, status):
    want = {"run-select": {"value": "no_steps"}, "tabs": {"value": "run"}}
    # the view holds no verdict of it (an error card, or whatever the browser sent): read again
    assert _click(stepless, "no_steps", "no_steps", None, status, STEPLESS_ROWS) == want
    # another run shown
    _, shown = _picked(stepless, "other_no_steps")
    assert _click(stepless, "no_steps", "other_no_steps", None, shown, STEPLESS_ROWS) == want
