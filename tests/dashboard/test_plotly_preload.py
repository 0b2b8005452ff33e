"""The dashboard starts plotly.js while the user reads the runs table (issue 32: on a small
machine its ~1 s of script came after the click on a run, and a 1M-event run's figures took
1.7 s to appear; with it loaded before, 0.45 s). plotly.js is started from the page's <head>
(`overlap.dashboard.plotlyjs`) and loaded once; an empty hidden graph in the layout (no
callback) has Dash's graph code and plotly.js's first plot run before the click. Headless
Chromium on the real app."""

from __future__ import annotations

import time

import pytest

from overlap.dashboard import data
from overlap.dashboard.app import create_app
from overlap.trace.synthetic import gpu_offload_scenario
from tests.dashboard.dashboard_support import chrome_available, duo  # noqa: F401

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(chrome_available() is not None,
                                 reason=str(chrome_available()))]


def test_plotly_is_started_on_the_runs_tab(duo, tmp_path, monkeypatch):
    monkeypatch.setenv("OVERLAP_CACHE_DIR", str(tmp_path / "cache"))
    data.clear_cache()
    gpu_offload_scenario(steps=3, layers=1).write_session(tmp_path / "logs" / "run")  # SYNTHETIC
    duo.start_server(create_app([tmp_path / "logs"]))
    duo.wait_for_text_to_equal("#runs-count", "1 run(s)", timeout=30)
    # still on the Runs tab: no figure of the Run tab exists, yet plotly.js is there
    assert not duo.find_elements("#fig-timeline")
    deadline = time.time() + 20
    while time.time() < deadline and not duo.driver.execute_script(
            "return typeof window.Plotly === 'object' && !!window.Plotly.newPlot"):
        time.sleep(0.1)
    assert duo.driver.execute_script("return typeof window.Plotly") == "object"
    # the hidden graph was drawn by plotly.js, on the Runs tab still
    while time.time() < deadline and not duo.driver.execute_script(
            "return !!document.querySelector('#plotly-preload .main-svg')"):
        time.sleep(0.1)
    assert duo.driver.execute_script("return !!document.querySelector('#plotly-preload .main-svg')")
    assert duo.find_element("#plotly-preload").is_displayed() is False
    assert not duo.find_elements("#fig-timeline")
    # plotly.js fetched and run once: the page's own load, never Dash's copy beside it
    fetched = duo.driver.execute_script(
        "return performance.getEntriesByType('resource').map(e => new URL(e.name).pathname)"
        ".filter(p => /plotly[^/]*\\.js$/.test(p))")
    assert len(fetched) == 1 and fetched[0].startswith("/_overlap/plotly-"), fetched
    assert duo.driver.execute_script(
        "return [...document.scripts].filter(s => /plotly[^/]*\\.js/.test(s.src)).length") == 1
