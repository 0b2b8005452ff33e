"""Compare on the real H100 sweeps (issue 33, item 7), in the real dashboard in headless
Chromium: runs made with command buffers on and off are two groups, each with its own
baseline; the verdict opens with whether offload pays here and why not; the bar axes show
short, wrapped run names; a run of the other experiment added by hand is flagged."""

from __future__ import annotations

import pytest

from tests.dashboard.dashboard_support import chrome_available, duo, select  # noqa: F401
from tests.dashboard.test_dashboard_views import _wait
from tests.report.test_like_with_like import sweeps  # noqa: F401 (a fixture)

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(chrome_available() is not None,
                                 reason=str(chrome_available()))]

TICKS_JS = ("const g = document.getElementById(arguments[0]); const p = g && "
            "g.querySelector('.js-plotly-plot'); return p && p._fullData && p._fullData[0] ? "
            "Array.from(p._fullData[0].x) : []")


def test_compare_groups_command_buffer_runs_apart_with_their_own_baselines(duo, sweeps):
    from overlap.dashboard.app import create_app

    duo.start_server(create_app(list(sweeps)))
    duo.wait_for_element("#tabs", timeout=60)
    duo.find_element("#tabs .tab:nth-child(3)").click()
    duo.wait_for_contains_text("#compare-verdict", "offload does not pay here", timeout=60)
    first = duo.find_element("#baseline").text.strip()
    cb_first = first.endswith("full_cb")
    assert first.endswith("full_cb" if cb_first else "transformer-h100/full"), first
    chosen = duo.find_element("#compare-select").text
    # the whole group, and nothing made the other way
    assert ("command-buffers" in chosen) == cb_first
    assert ("transformer-h100/" in chosen) != cb_first
    verdict = duo.find_element("#compare-verdict").text
    assert "why: its copies are " + ("0%" if cb_first else "24%") + " hidden" in verdict
    # bar axes: the distinct tails of the names, wrapped, never the long directory prefix
    _wait(lambda: len(duo.driver.execute_script(TICKS_JS, "fig-step-time")) >= 2,
          what="step-time bars")
    ticks = duo.driver.execute_script(TICKS_JS, "fig-step-time")
    assert all("transformer-h100" not in t for t in ticks), ticks
    assert all(len(line) <= 16 for t in ticks for line in t.split("<br>")), ticks

    # The other experiment: its runs and its own baseline.
    select(duo, "compare-group", "command buffers off" if cb_first else "default XLA flags")
    _wait(lambda: duo.find_element("#baseline").text.strip() not in (first, ""),
          what="baseline of the other group")
    second = duo.find_element("#baseline").text.strip()
    assert second.endswith("transformer-h100/full" if cb_first else "full_cb"), second
    duo.wait_for_contains_text("#compare-verdict", "offload does not pay here", timeout=60)

    # A run made the other way, added by hand: flagged as another experiment, not judged.
    select(duo, "compare-select", first)
    duo.wait_for_contains_text("#compare-status", "Not compared", timeout=60)
    status = duo.find_element("#compare-status").text
    assert "made another way" in status and "command buffers off" in status
    assert duo.get_logs() in ([], None)
