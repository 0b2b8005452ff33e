"""The real dashboard in headless Chromium, on SYNTHETIC GPU runs written into a tmp logdir.

Screenshots of every view land in test-artifacts/ for a human to look at.
"""

from __future__ import annotations

import time

import pytest

from tests.dashboard.dashboard_support import (  # noqa: F401
    ARTIFACTS,
    chrome_available,
    duo,
    make_logdir,
    select,
    write_run,
)

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(chrome_available() is not None,
                                 reason=str(chrome_available()))]

# Plotly draws into .js-plotly-plot; `_fullData[i]._length` is the number of points plotly.js
# really laid out for trace i (`data[i].x` may be a base64 typed-array spec, with no length).
TRACES_JS = "return document.getElementById(arguments[0]).querySelector('.js-plotly-plot')" \
            "._fullData.filter(t => t.visible !== false && t._length > 0).length"
TITLE_JS = "const g = document.getElementById(arguments[0]).querySelector('.js-plotly-plot');" \
           "return g.layout.title && (g.layout.title.text || g.layout.title)"


def wait_traces(duo, graph_id: str, minimum: int = 1, timeout: float = 20) -> int:
    """Wait until graph `graph_id` shows at least `minimum` traces with data; return the count."""
    deadline = time.time() + timeout
    n = 0
    while time.time() < deadline:
        try:
            n = duo.driver.execute_script(TRACES_JS, graph_id) or 0
        except Exception:  # noqa: BLE001 - graph not rendered yet
            n = 0
        if n >= minimum:
            return n
        time.sleep(0.2)
    raise AssertionError(f"{graph_id}: {n} traces with data after {timeout}s")


def title(duo, graph_id: str) -> str:
    return str(duo.driver.execute_script(TITLE_JS, graph_id))


def shot(duo, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    time.sleep(0.5)  # let plotly finish its transitions
    duo.driver.save_screenshot(str(ARTIFACTS / f"{name}.png"))


def test_dash001_views_render_with_data(duo, tmp_path):
    from overlap.dashboard.app import create_app

    logdir = make_logdir(tmp_path)
    duo.start_server(create_app([logdir]))

    # Runs: the complete runs and the plain logdir (half_written: a capture, no run.json),
    # never the partial or outside ones.
    duo.wait_for_text_to_equal("#runs-count", "4 run(s)", timeout=30)
    table = duo.find_element("#runs-table").text
    for name in ("remat_full", "qkv_offloaded", "broken_capture", "half_written"):
        assert name in table
    for name in ("partial", "secret_run", "link_out"):
        assert name not in table
    assert "ERROR" in table and "SYNTHETIC" in table
    assert " 50 50 D2H 50% hidden" in table  # qkv_offloaded: D2H and H2D each 50% hidden
    shot(duo, "dashboard-runs")

    # Clicking the offload run's row opens the Run tab on it.
    rows = duo.find_elements("#runs-table td[data-dash-column='run']")
    next(r for r in rows if r.text == "qkv_offloaded").click()
    duo.wait_for_contains_text("#run-select", "qkv_offloaded")
    duo.wait_for_contains_text("#run-status", "SYNTHETIC")
    assert wait_traces(duo, "fig-timeline", 4) == 4  # compute, D2H, H2D, exposed
    assert "SYNTHETIC" in title(duo, "fig-timeline")
    assert wait_traces(duo, "fig-histogram", 2) == 2  # D2H and H2D
    assert wait_traces(duo, "fig-bandwidth", 2) == 2
    duo.wait_for_contains_text("#top-exposed", "copy-start")
    shot(duo, "dashboard-run")

    # Switch step: the timeline title follows.
    select(duo, "step-select", "step 2")
    deadline = time.time() + 15
    while "Step 2" not in title(duo, "fig-timeline") and time.time() < deadline:
        time.sleep(0.2)
    assert "Step 2" in title(duo, "fig-timeline")
    shot(duo, "dashboard-run-step2")

    # Switch run to the broken one: an error card, and the app keeps working.
    select(duo, "run-select", "broken_capture")
    duo.wait_for_contains_text("#run-status", "could not be read")
    shot(duo, "dashboard-run-broken")
    select(duo, "run-select", "remat_full")
    duo.wait_for_contains_text("#run-status", "Verdict")
    assert wait_traces(duo, "fig-timeline", 3) >= 3

    # Compare: memory curves of all runs over the baseline, and the bars.
    duo.find_element("#tabs .tab:nth-child(3)").click()
    # Default baseline: the remat run of the group.
    duo.wait_for_contains_text("#baseline", "remat_full")
    assert wait_traces(duo, "fig-memory", 3) == 3  # one GPU:0 curve per readable run
    assert wait_traces(duo, "fig-step-time") == 1
    assert wait_traces(duo, "fig-peak-memory") == 1
    assert wait_traces(duo, "fig-overlap", 2) == 2
    # One group (the broken run is in none), judged in one sentence.
    duo.wait_for_contains_text("#compare-verdict", "Verdict")
    duo.wait_for_contains_text("#compare-table", "yes")  # the baseline row is marked
    shot(duo, "dashboard-compare")

    # Switch baseline: the memory figure's baseline (dashed) curve follows.
    select(duo, "baseline", "qkv_offloaded")
    deadline = time.time() + 15
    names = []
    while time.time() < deadline:
        names = duo.driver.execute_script(
            "return document.getElementById('fig-memory').querySelector('.js-plotly-plot')"
            ".data.map(t => t.name)")
        if any("qkv_offloaded" in n and "baseline" in n for n in names):
            break
        time.sleep(0.2)
    assert any("qkv_offloaded" in n and "(baseline)" in n for n in names), names
    shot(duo, "dashboard-compare-baseline")

    # A run that appears while the app runs shows up on Refresh.
    write_run(logdir, "new_run", {"policy": "minimal_offloaded"}, hidden_fraction=0.25)
    duo.find_element("#tabs .tab:nth-child(1)").click()
    duo.find_element("#refresh").click()
    duo.wait_for_text_to_equal("#runs-count", "5 run(s)", timeout=30)
    assert "new_run" in duo.find_element("#runs-table").text
    assert duo.get_logs() in ([], None)  # no JS errors in the browser console


def test_dash002_html_download(duo, tmp_path):
    from overlap.dashboard.app import create_app

    logdir = tmp_path / "runs"
    write_run(logdir, "only", {"policy": "qkv_proj_offloaded"}, hidden_fraction=0.5)
    duo.start_server(create_app([logdir]))
    duo.find_element("#tabs .tab:nth-child(2)").click()
    wait_traces(duo, "fig-timeline", 4)
    duo.find_element("#run-html-button").click()
    target = tmp_path / "download" / "overlap-only.html"
    deadline = time.time() + 20
    while not target.exists() and time.time() < deadline:
        time.sleep(0.2)
    page = target.read_text()
    assert "SYNTHETIC" in page and "plotly" in page and page.count("js-plotly-plot") >= 0
    assert page.count('class="plotly-graph-div"') == 3
