"""plotly.js as the dashboard's page gets it (`overlap.dashboard.plotlyjs`, issue 32): the
installed file byte for byte behind V8's compile-hint line, started from the page's <head>, run
once (Dash's Graph waits on the page's load instead of adding its own), and Dash's own copy
when that file cannot be had. The real app: Flask's test client, then headless Chromium."""

from __future__ import annotations

import re
import time

import pytest

from overlap.dashboard import data, plotlyjs
from overlap.dashboard.app import create_app
from overlap.trace.synthetic import gpu_offload_scenario
from tests.dashboard.dashboard_support import chrome_available, duo  # noqa: F401

DASH_COPY = "/_dash-component-suites/plotly/package_data/plotly.min.js"
# every plotly.js the page fetched, in order (the resource timeline of the page)
FETCHED_JS = ("return performance.getEntriesByType('resource').map(e => new URL(e.name).pathname)"
              ".filter(p => /plotly[^/]*\\.js$/.test(p))")
TIMELINE_JS = ("const p = document.querySelector('#fig-timeline .js-plotly-plot');"
               "return p && p._fullData ? p._fullData.filter(t => t._length > 0).length : 0")

needs_chrome = pytest.mark.skipif(chrome_available() is not None, reason=str(chrome_available()))


@pytest.fixture
def one_run(tmp_path, monkeypatch):
    monkeypatch.setenv("OVERLAP_CACHE_DIR", str(tmp_path / "cache"))
    data.clear_cache()
    gpu_offload_scenario(steps=3, layers=1).write_session(tmp_path / "logs" / "run")  # SYNTHETIC
    return tmp_path / "logs"


def test_served_file_is_the_installed_one_behind_the_hint(one_run):
    client = create_app([one_run]).server.test_client()
    page = client.get("/").get_data(as_text=True)
    head = page[:page.index("</head>")]
    url = re.search(r'load\("([^"]+)"', head).group(1)
    assert url.startswith("/_overlap/plotly-") and url.endswith(".min.js")
    # in <head>: it starts before Dash's own scripts, which sit at the end of <body>
    assert "<script src=" not in head and "<script src=" in page[page.index("</head>"):]
    r = client.get(url)
    assert r.status_code == 200 and r.mimetype == "application/javascript"
    assert "immutable" in r.headers["Cache-Control"]
    body = r.get_data()
    assert body.startswith(plotlyjs.HINT)
    assert body[len(plotlyjs.HINT):] == plotlyjs.plotly_path().read_bytes()
    from plotly.offline import get_plotlyjs_version

    assert get_plotlyjs_version() in url  # a new plotly.js, a new URL (cached forever)


def test_loader_waits_for_its_trigger_when_given_one():
    html = plotlyjs.loader_html("/a.js", "/b.js", after="#runs-count")
    assert '"#runs-count"' in html and '"/a.js"' in html and '"/b.js"' in html
    assert "var after = null;" in plotlyjs.loader_html("/a.js", "/b.js")


def _open_the_run(duo) -> None:
    duo.wait_for_text_to_equal("#runs-count", "1 run(s)", timeout=30)
    duo.find_element("#runs-table td[data-dash-column='run']").click()
    deadline = time.time() + 30
    while time.time() < deadline and not duo.driver.execute_script(TIMELINE_JS):
        time.sleep(0.1)
    assert duo.driver.execute_script(TIMELINE_JS) >= 1, "the run's timeline was not drawn"
    assert duo.driver.execute_script("return typeof window.Plotly.newPlot") == "function"


@pytest.mark.browser
@needs_chrome
def test_plotly_runs_once_from_the_hinted_file(duo, one_run):
    duo.start_server(create_app([one_run]))
    _open_the_run(duo)
    fetched = duo.driver.execute_script(FETCHED_JS)
    assert len(fetched) == 1 and fetched[0].startswith("/_overlap/plotly-"), fetched
    assert duo.driver.execute_script(  # the file that ran is the hinted one
        "return [...document.scripts].filter(s => /plotly[^/]*\\.js/.test(s.src)).length") == 1


@pytest.mark.browser
@needs_chrome
def test_dash_own_copy_when_the_hinted_file_fails(duo, one_run, monkeypatch):
    def broken() -> bytes:
        raise OSError("plotly.min.js unreadable")

    monkeypatch.setattr(plotlyjs, "hinted_js", broken)  # the route answers 500
    duo.start_server(create_app([one_run]))
    _open_the_run(duo)
    fetched = duo.driver.execute_script(FETCHED_JS)
    assert fetched[0].startswith("/_overlap/plotly-") and fetched[1:] == [DASH_COPY], fetched
