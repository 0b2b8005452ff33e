"""The Run tab's figures are laid out once, at the width they keep (round 36). The page keeps its
scroll bar's room from the start (`app.PAGE_STYLE`): before, the figures were laid out while the
page still fit the window, the scroll bar that came with them narrowed each by its width, and
Dash's graphs laid every one out again (the public v6e capture's 5,920-bar timeline: ~0.3 s
more of the browser's main thread after it first showed). And the timeline's left margin
holds its lane names from the start (`figures.timeline_figure`): plotly.js' automargin grew a
60 px margin to ~150 px after the first layout, and drew the figure a second time. Headless
Chromium on the real app, each plotly.js layout of a graph recorded with its width."""

from __future__ import annotations

import time

import pytest

from overlap.dashboard import data
from overlap.dashboard.app import create_app
from overlap.trace.synthetic import gpu_offload_scenario
from tests.dashboard.dashboard_support import chrome_available, duo  # noqa: F401
from tests.dashboard.test_dashboard_browser import wait_traces

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(chrome_available() is not None,
                                 reason=str(chrome_available()))]

# Before any page script: every `Plotly.react` and `Plotly.Plots.resize` of a graph, once it
# is done, records (graph id, what was called, the width plotly.js laid the graph out at).
RECORD = """
window.__layouts = [];
let __plotly;
function __id(gd) {
  const g = gd && gd.closest && gd.closest('[id^="fig-"]');
  return g ? g.id : '';
}
Object.defineProperty(window, 'Plotly', {configurable: true, get: () => __plotly, set: v => {
  if (v && v.react && v.Plots && !v.__recorded) {
    const react = v.react, resize = v.Plots.resize;
    v.react = function (gd) {
      return Promise.resolve(react.apply(this, arguments)).then(r => {
        window.__layouts.push([__id(gd), 'react', gd._fullLayout && gd._fullLayout.width]);
        return r; });
    };
    v.Plots.resize = function (gd) {
      return Promise.resolve(resize.apply(this, arguments)).then(r => {
        window.__layouts.push([__id(gd), 'resize', gd._fullLayout && gd._fullLayout.width]);
        return r; });
    };
    v.__recorded = true;
  }
  __plotly = v; }});
"""


def test_run_figures_are_laid_out_at_the_width_they_keep(duo, tmp_path, monkeypatch):
    monkeypatch.setenv("OVERLAP_CACHE_DIR", str(tmp_path / "cache"))
    data.clear_cache()
    gpu_offload_scenario(steps=3, layers=4).write_session(tmp_path / "logs" / "run")  # SYNTHETIC
    duo.driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": RECORD})
    duo.start_server(create_app([tmp_path / "logs"]))
    duo.wait_for_text_to_equal("#runs-count", "1 run(s)", timeout=30)
    next(r for r in duo.find_elements("#runs-table td[data-dash-column='run']")
         if r.text == "run").click()
    assert wait_traces(duo, "fig-timeline", 3) >= 3
    # Dash's graphs ask plotly.js to fit them once they are in the page (a 100 ms timer each)
    deadline = time.time() + 20
    while time.time() < deadline and not any(
            g == "fig-timeline" and how == "resize"
            for g, how, _ in duo.driver.execute_script("return window.__layouts")):
        time.sleep(0.1)
    time.sleep(0.5)
    got = duo.driver.execute_script("return window.__layouts")
    # the page is taller than the window: it has a scroll bar, which came with the figures
    assert duo.driver.execute_script(
        "return document.documentElement.scrollHeight > document.documentElement.clientHeight")
    for graph in ("fig-timeline", "fig-histogram", "fig-bandwidth", "fig-hosts"):
        widths = [w for g, _, w in got if g == graph]
        assert widths and ("fig-timeline" != graph or len(widths) >= 2), (graph, got)
        # laid out first at the width it keeps: fitting it again changed nothing
        assert len(set(widths)) == 1, (graph, got)
        assert widths[0] == duo.driver.execute_script(
            "return document.querySelector('#' + arguments[0] + ' .js-plotly-plot')"
            "._fullLayout.width", graph)
    # the lane names fit the timeline's own margin: automargin had nothing to grow
    used, asked = duo.driver.execute_script(
        "const f = document.querySelector('#fig-timeline .js-plotly-plot')._fullLayout;"
        "return [f._size.l, f.margin.l]")
    assert used == asked > 60
