"""The step dropdown of a run with many steps (issue 32: the dashboard opens a 1M-event capture
within 2 s; a browser spent ~0.6 s laying out 7,353 options). Up to `STEP_OPTIONS_LIMIT` steps
are all listed; beyond, a spread of them, and what the user types is looked up among all steps
on the server (`find_steps`)."""

from __future__ import annotations

import json
import time

import pytest

from overlap.dashboard import data
from overlap.dashboard.app import create_app
from overlap.report.rundata import STEP_OPTIONS_LIMIT, RunData, default_step, step_options
from overlap.trace.synthetic import gpu_offload_scenario
from tests.dashboard.dashboard_support import RUN_VIEW, chrome_available, duo, run_picked  # noqa: F401
from tests.dashboard.test_dashboard_security import _post


def _run(n: int, hosts: int = 1) -> RunData:
    """A run of `n` steps of known durations and exposure: step i lasts 1000 + (i % 7) ps and
    exposes i ps, except step 5 which exposes the most."""
    steps = [{"host": "h", "step": i, "start_ps": 10_000 * i, "duration_ps": 1000 + i % 7,
              "exposed_wall_ps": 10**9 if i == 5 else i} for i in range(n)]
    return RunData(result={"steps": steps, "hosts": ["h"] * hosts}, backend="gpu",
                   synthetic=True, compute={}, transfers={}, memory={},
                   program_memory=None, device_names=[])


def _steps(opts) -> list[int]:
    return [int(o["value"].split("|")[1]) for o in opts]


def test_every_step_listed_up_to_the_limit():
    d = _run(STEP_OPTIONS_LIMIT)
    opts = step_options(d)
    assert _steps(opts) == list(range(STEP_OPTIONS_LIMIT))
    assert opts[3] == {"label": "step 3 (0.000 ms)", "value": "h|3"}
    assert step_options(_run(3, hosts=2))[0]["label"] == "step 0 (0.000 ms) on h"


def test_many_steps_a_bounded_spread_in_step_order():
    n = 7353
    d = _run(n)
    got = _steps(step_options(d))
    assert 0 < len(got) <= STEP_OPTIONS_LIMIT
    assert got == sorted(set(got))  # step order, no repeats
    assert {0, n - 1, 5, default_step(d)[1]} <= set(got)  # ends, most exposed, the default
    # the most exposed third of the limit is there (exposure grows with the step number)
    assert set(range(n - STEP_OPTIONS_LIMIT // 3 + 1, n)) <= set(got)
    # and the spread reaches into the middle, not only the ends
    assert any(n // 3 < s < 2 * n // 3 for s in got)


def test_search_finds_any_step_and_keeps_the_selection():
    d = _run(7353)
    got = _steps(step_options(d, search="step 421"))
    assert got == [421] + list(range(4210, 4220))
    assert all("step 42" in o["label"] for o in step_options(d, search="STEP 42 "))
    kept = step_options(d, search="step 421", keep="h|17")
    assert _steps(kept) == [17, 421] + list(range(4210, 4220))
    assert step_options(d, search="no such step") == []


@pytest.fixture
def many_steps(tmp_path, monkeypatch):
    monkeypatch.setenv("OVERLAP_CACHE_DIR", str(tmp_path / "cache"))
    data.clear_cache()
    n = STEP_OPTIONS_LIMIT + 100  # SYNTHETIC: more steps than the dropdown lists
    gpu_offload_scenario(steps=n, layers=1).write_session(tmp_path / "logs" / "long")
    client = create_app([tmp_path / "logs"]).server.test_client()
    assert client.get("/").status_code == 200
    return client, n


def test_run_view_lists_a_spread_and_finds_the_rest(many_steps):
    client, n = many_steps
    r = _post(client, RUN_VIEW, run_picked("long"))
    assert r.status_code == 200
    resp = json.loads(r.get_data(as_text=True))["response"]
    opts, value = resp["step-select"]["options"], resp["step-select"]["value"]
    assert len(opts) <= STEP_OPTIONS_LIMIT < n
    assert value in [o["value"] for o in opts]
    # typing a step the list leaves out finds it on the server
    listed = {int(o["value"].split("|")[1]) for o in opts}
    missing = next(s for s in range(n) if s not in listed)
    r = _search(client, f"step {missing}", value)
    assert r.status_code == 200
    found = json.loads(r.get_data(as_text=True))["response"]["step-select"]["options"]
    labels = [o["label"] for o in found]
    assert any(lab.startswith(f"step {missing} (") for lab in labels)
    assert value in [o["value"] for o in found]  # the selection stays listed
    # a run that lists every step, or a search of the wrong type, changes nothing
    r = _search(client, 7, value)
    assert r.status_code in (200, 204)
    assert not r.get_data() or not json.loads(r.get_data(as_text=True))["response"]


def _search(client, text, value):
    """The request the browser sends when the user types `text` in the step dropdown: Dash
    names `find_steps`' output `step-select.options@<hash>` (a duplicate output)."""
    deps = json.loads(client.get("/_dash-dependencies").get_data(as_text=True))
    key = next(d["output"] for d in deps if d["output"].startswith("step-select.options@"))
    body = {"output": key, "outputs": {"id": "step-select", "property": key.split(".", 1)[1]},
            "inputs": [{"id": "step-select", "property": "search_value", "value": text}],
            "state": [{"id": "run-select", "property": "value", "value": "long"},
                      {"id": "step-select", "property": "value", "value": value}],
            "changedPropIds": ["step-select.search_value"]}
    return client.post("/_dash-update-component", data=json.dumps(body),
                       content_type="application/json")


@pytest.mark.browser
@pytest.mark.skipif(chrome_available() is not None, reason=str(chrome_available()))
def test_browser_types_a_step_the_list_leaves_out(duo, tmp_path, monkeypatch):
    """In headless Chromium: the dropdown of a run with more steps than it lists finds a step
    that was left out once its number is typed, and picking it redraws the timeline on it."""
    from tests.dashboard.test_dashboard_browser import title

    monkeypatch.setenv("OVERLAP_CACHE_DIR", str(tmp_path / "cache"))
    data.clear_cache()
    n = STEP_OPTIONS_LIMIT + 100  # SYNTHETIC
    gpu_offload_scenario(steps=n, layers=1).write_session(tmp_path / "logs" / "long")
    d = data.load_run(data.discover_runs([tmp_path / "logs"])[0])
    listed = set(_steps(step_options(d)))
    missing = next(s for s in range(n - 1, 0, -1) if s not in listed)
    duo.start_server(create_app([tmp_path / "logs"]))
    duo.find_element("#tabs .tab:nth-child(2)").click()
    duo.wait_for_contains_text("#run-status", "SYNTHETIC", timeout=30)
    duo.find_element("#step-select").click()
    duo.find_element("input.dash-dropdown-search").send_keys(f"step {missing}")
    from selenium.common.exceptions import StaleElementReferenceException

    deadline = time.time() + 15
    while time.time() < deadline:
        try:
            opts = [o for o in duo.find_elements(".dash-dropdown-option")
                    if o.text.startswith(f"step {missing} (")]
            if opts:
                opts[0].click()
                break
        except StaleElementReferenceException:
            pass  # (the list redrawn as the typed text was matched: read it again)
        time.sleep(0.2)
    else:
        raise AssertionError(f"step {missing} not offered after typing it")
    deadline = time.time() + 15
    while f"Step {missing}" not in title(duo, "fig-timeline") and time.time() < deadline:
        time.sleep(0.2)
    assert f"Step {missing}" in title(duo, "fig-timeline")
