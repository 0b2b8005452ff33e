"""What a user sees (issue 21), in the real dashboard in headless Chromium, on real data: the
shipped TPU v6e offload capture and CPU policy runs, and two H100 plans compiled here.

* a plan's Run view shows its planned copies and its predicted timeline;
* Compare opens on one program group, the baseline from that group, one verdict sentence;
* no figure title is covered by the modebar or cut at the figure's edge (bounding boxes);
* the HTML report (plotly.js packed once) draws its figures;
* scripts/screenshots.py makes a screenshot of every view.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import SAMPLE_TRACES
from tests.dashboard.dashboard_support import chrome_available, duo, select  # noqa: F401

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(chrome_available() is not None,
                                 reason=str(chrome_available()))]

TRACES_JS = ("const g = document.getElementById(arguments[0]); const p = g && "
             "g.querySelector('.js-plotly-plot'); return p && p._fullData ? p._fullData.filter("
             "t => t.visible !== false && t._length > 0).length : 0")
# Per rendered graph: its id, the title's box, the modebar's box and the figure's box.
BOXES_JS = """
const out = [];
for (const g of document.querySelectorAll('.js-plotly-plot')) {
  const box = e => { if (!e) return null; const b = e.getBoundingClientRect();
                     return [b.left, b.top, b.right, b.bottom]; };
  const t = g.querySelector('.gtitle');
  out.push({id: g.closest('[id]').id, title: t && t.textContent ? box(t) : null,
            modebar: box(g.querySelector('.modebar')), fig: box(g.querySelector('.main-svg'))});
}
return out;"""


@pytest.fixture(scope="module")
def plans_dir(tmp_path_factory) -> Path:
    """Two real H100 plans of the tutorial scan (the [plan] extra's compilers)."""
    try:
        from overlap.plan.compile import plan_workload
        from overlap.plan.targets import get_target

        out = tmp_path_factory.mktemp("plans")
        plan_workload("scan", ["offload:x", "nothing_saveable"], get_target("h100"), out=out)
    except Exception as e:  # noqa: BLE001 - no [plan] extra here
        pytest.skip(f"cannot compile plans here: {e}")
    return out


def _traces(duo, graph_id: str) -> int:
    return int(duo.driver.execute_script(TRACES_JS, graph_id) or 0)


def _wait(cond, timeout: float = 30, what: str = "") -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if cond():
                return
        except Exception:  # noqa: BLE001 - still rendering
            pass
        time.sleep(0.2)
    raise AssertionError(f"timed out: {what}")


def _check_titles(duo) -> int:
    """No title overlaps its modebar or leaves its figure; returns how many were checked."""
    n = 0
    for g in duo.driver.execute_script(BOXES_JS):
        t, m, f = g["title"], g["modebar"], g["fig"]
        if t is None:
            continue
        n += 1
        assert t[0] >= f[0] - 1 and t[2] <= f[2] + 1, f"{g['id']}: title cut at the edge {g}"
        if m is not None and m[2] > m[0]:
            apart = t[1] >= m[3] or t[3] <= m[1] or t[0] >= m[2] or t[2] <= m[0]
            assert apart, f"{g['id']}: modebar over the title {g}"
    return n


def test_plan_run_view_shows_planned_copies_and_predicted_timeline(duo, plans_dir):
    from overlap.dashboard.app import create_app

    duo.start_server(create_app([plans_dir]))
    duo.find_element("#tabs .tab:nth-child(2)").click()
    select(duo, "run-select", "offload_x")
    duo.wait_for_contains_text("#run-status", "PLAN", timeout=30)
    # compute, D2H, H2D and exposed bars: one loop body per direction in the scan
    _wait(lambda: _traces(duo, "fig-timeline") >= 4, what="predicted timeline")
    assert "PREDICTED" in duo.find_element("#fig-timeline").text
    duo.wait_for_contains_text("#run-table-title", "Planned copies")
    table = duo.find_element("#top-exposed").text
    assert "dynamic-update-slice-start" in table and "dynamic-slice-start" in table
    assert "D2H" in table and "H2D" in table and "10" in table  # 10 executions per step
    _wait(lambda: _traces(duo, "fig-histogram") >= 1, what="memory over program order")
    assert "memory budget" in duo.find_element("#fig-histogram").text
    _wait(lambda: _traces(duo, "fig-bandwidth") == 2, what="hidden/exposed per copy")
    assert _check_titles(duo) >= 3
    assert duo.get_logs() in ([], None)


def test_compare_defaults_to_one_group_with_its_baseline_and_a_verdict(duo, plans_dir):
    from overlap.dashboard import data as rundata
    from overlap.dashboard.app import create_app
    from overlap.report import groups

    logdirs = [SAMPLE_TRACES / "cpu-transformer-tiny", SAMPLE_TRACES / "tpu-v6e-offload",
               plans_dir]
    duo.start_server(create_app(logdirs))
    # The first screen: the real TPU capture's transfers as the headline.
    duo.wait_for_contains_text("#headline", "tpu-v6e-offload", timeout=30)
    assert "hidden" in duo.find_element("#headline").text
    duo.find_element("#tabs .tab:nth-child(3)").click()
    duo.wait_for_contains_text("#compare-verdict", "Verdict", timeout=30)
    chosen = duo.driver.execute_script(
        "return Array.from(document.querySelectorAll('#compare-select .dash-dropdown-value-item,"
        " #compare-select .Select-value-label')).map(e => e.textContent.trim())")
    runs = rundata.discover_runs(logdirs)
    keys = {r.name: groups.group_key(rundata.load_run(r)) for r in runs}
    baseline = duo.find_element("#baseline").text.strip()
    assert baseline in keys, baseline
    group = [n for n in keys if keys[n] == keys[baseline]]
    assert len(group) >= 2
    # every chosen run is of the baseline's group, and the whole group is chosen
    text = duo.find_element("#compare-select").text
    for name in keys:
        assert (name in text) == (name in group), (name, text, chosen)
    # the baseline is the group's remat run
    assert baseline.endswith(("full", "nothing_saveable"))
    verdict = duo.find_element("#compare-verdict").text
    assert "least memory" in verdict and ("measured" in verdict or "PREDICTED" in verdict)
    _wait(lambda: _traces(duo, "fig-memory") == len(group), what="one curve per group run")
    _wait(lambda: _traces(duo, "fig-peak-memory") >= 1, what="peak bars")
    assert _check_titles(duo) >= 4

    # Another group: the runs and the baseline follow, the verdict too.
    other = "transformer" if "scan" in baseline or "h100" in baseline else "scan"
    select(duo, "compare-group", other)
    _wait(lambda: duo.find_element("#baseline").text.strip() not in (baseline, ""),
          what="baseline of the other group")
    new_base = duo.find_element("#baseline").text.strip()
    assert keys[new_base] != keys[baseline]
    duo.wait_for_contains_text("#compare-verdict", "least memory", timeout=30)
    assert _check_titles(duo) >= 4

    # A run of another program added by hand is flagged, not judged.
    tpu = next(n for n in keys if "tpu-v6e-offload" in n)
    select(duo, "compare-select", tpu)
    duo.wait_for_contains_text("#compare-status", "Not compared", timeout=30)
    assert "another" in duo.find_element("#compare-status").text
    assert duo.get_logs() in ([], None)


def test_run_view_titles_clear_and_html_report_draws(duo, tmp_path):
    from overlap.analysis.overlap import analyze
    from overlap.dashboard.app import create_app
    from overlap.report.html import write_html
    from overlap.trace import read_trace

    duo.start_server(create_app([SAMPLE_TRACES / "tpu-v6e-offload"]))
    duo.find_element("#tabs .tab:nth-child(2)").click()
    _wait(lambda: _traces(duo, "fig-timeline") >= 3, what="whole-capture timeline")
    _wait(lambda: _traces(duo, "fig-histogram") >= 2, what="histogram")
    assert _check_titles(duo) >= 3

    t = read_trace(SAMPLE_TRACES / "tpu-v6e-offload")
    page = tmp_path / "report.html"
    write_html(analyze(t), t, page)
    text = page.read_text()
    assert text.count("id='plotly-js-gz'") == 1 and "cdn." not in text  # one, inlined
    duo.driver.get(page.as_uri())
    _wait(lambda: duo.driver.execute_script(
        "return document.querySelectorAll('.js-plotly-plot').length") == text.count(
        'class="plotly-graph-div"'), what="report figures drawn")
    assert _check_titles(duo) >= 3


def test_screenshot_script_makes_every_view(tmp_path):
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "screenshots.py"), "--out",
                        str(tmp_path)], capture_output=True, text=True, timeout=600,
                       env={**__import__("os").environ, "JAX_PLATFORMS": "cpu"})
    assert r.returncode == 0, r.stderr[-2000:]
    made = sorted(p.name for p in tmp_path.glob("*.png"))
    want = {"dashboard-runs.png", "dashboard-run-tpu.png", "dashboard-compare.png",
            "report-html.png"}
    assert want <= set(made), made
    for p in tmp_path.glob("*.png"):
        assert p.stat().st_size > 20_000  # a drawn page, not a blank one
