"""The run view's "Did each name offload?" card (`overlap.dashboard.names_view`) in headless
Chromium, on a REAL H100 capture (the scan workload's offload_x run from the gpu_corpus
archive): the name the run asked for, its copies each way and how much of them hid."""

from __future__ import annotations

import shutil

import pytest

from tests.dashboard.dashboard_support import chrome_available, duo  # noqa: F401
from tests.dashboard.test_dashboard_browser import shot

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(chrome_available() is not None,
                                 reason=str(chrome_available()))]


def test_names_card_on_a_real_capture(duo, tmp_path, gpu_corpus, monkeypatch):  # noqa: F811
    from overlap.dashboard.app import create_app

    monkeypatch.setenv("OVERLAP_CACHE_DIR", "")  # computed here, not read from a cache
    logdir = tmp_path / "runs"
    shutil.copytree(gpu_corpus / "gpu-h100" / "scan-h100" / "offload_x", logdir / "offload_x")
    duo.start_server(create_app([logdir]))
    duo.wait_for_text_to_equal("#runs-count", "1 run(s)", timeout=30)
    rows = duo.find_elements("#runs-table td[data-dash-column='run']")
    next(r for r in rows if r.text == "offload_x").click()  # opens the Run tab on it
    duo.wait_for_contains_text("#run-names", "Did each name offload?", timeout=60)
    rows = [r.text for r in duo.find_elements("#run-names tr.name-row")]
    # x: asked by the run's policy, named by elimination (a loop carry), 50 copies each way;
    # D2H 87.3% hidden, H2D 0.0% (overlap report's numbers on the same capture)
    assert len(rows) == 2
    assert rows[0].startswith("x yes D2H 1 ") and rows[0].endswith(" 87.3%")
    assert " 50 " in rows[0] and rows[1].startswith("x yes H2D 1 ")
    assert rows[1].endswith(" 0.0%")
    assert not duo.find_elements("#run-names li.name-flag")  # nothing to flag
    shot(duo, "dashboard-run-names")
    # the causes card carries what the program says about the reloads' first use
    causes = duo.find_element("#run-causes").text
    assert "HLO: 50 of 50 copies' first users found" in causes
    assert "only an earlier issue hides it" in causes
