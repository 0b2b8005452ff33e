"""What a page is built from that depends only on the installed plotly is made once per
machine and kept in overlap's cache (`overlap.cache.derived`, issue 32): the compressed
plotly.js of `report --html` and plotly's validated figure template. Read back from the
cache, each is what plotly gives when made afresh, byte for byte; an entry that does not
verify is never used; and a page written with the cache, without it and from it is the
same page."""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path

import plotly.graph_objects as go
import pytest
from plotly.offline import get_plotlyjs

from overlap.report import figures, html
from tests.conftest import SAMPLE_TRACES, run_cli


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    """An empty cache directory of the test's own, and no value kept in this process."""
    d = tmp_path / "cache"
    monkeypatch.setenv("OVERLAP_CACHE_DIR", str(d))
    html._plotly_gz_b64.cache_clear()
    figures._template_json.cache_clear()
    html._AHEAD.clear()
    yield d
    html._plotly_gz_b64.cache_clear()
    figures._template_json.cache_clear()
    html._AHEAD.clear()


def _plotly_js_as_made() -> str:
    raw = get_plotlyjs().encode("utf-8")
    return base64.b64encode(gzip.compress(raw, compresslevel=9, mtime=0)).decode("ascii")


def _template_as_made() -> str:
    return json.dumps(go.Figure().update_layout(template=figures.TEMPLATE).layout.template
                      .to_plotly_json())


def test_plotly_js_made_then_read_back_is_plotlys(fresh):
    want = _plotly_js_as_made()
    assert html._plotly_gz_b64() == want  # made
    assert list(fresh.glob("plotly-js-*.bin"))
    html._plotly_gz_b64.cache_clear()
    assert html._plotly_gz_b64() == want  # read back
    assert gzip.decompress(base64.b64decode(want)) == get_plotlyjs().encode("utf-8")


def test_template_made_then_read_back_is_plotlys(fresh):
    want = _template_as_made()
    assert figures._template_json() == want
    assert list(fresh.glob("plotly-template-*.bin"))
    figures._template_json.cache_clear()
    assert figures._template_json() == want


@pytest.mark.parametrize("kind", ["plotly-js", "plotly-template"])
def test_an_entry_written_by_anyone_else_is_not_used(fresh, kind):
    """A cache entry replaced by other content (script injected into the page's plotly.js, a
    changed template) does not verify under this cache's secret: the value is made again."""
    html._plotly_gz_b64()
    figures._template_json()
    (entry,) = fresh.glob(f"{kind}-*.bin")
    forged = base64.b64encode(gzip.compress(b"alert('forged')", mtime=0)) \
        if kind == "plotly-js" else b'{"layout": {}}'
    entry.write_bytes(forged)
    html._plotly_gz_b64.cache_clear()
    figures._template_json.cache_clear()
    assert html._plotly_gz_b64() == _plotly_js_as_made()
    assert figures._template_json() == _template_as_made()
    assert entry.read_bytes() != forged


def test_pages_with_the_cache_without_it_and_from_it_are_one_page(tmp_path, monkeypatch):
    """`report --html` in fresh processes: the cache turned off, then filled, then read."""
    cap = SAMPLE_TRACES / "tpu-v6e-offload"
    pages = []
    for i, where in enumerate(["", str(tmp_path / "c"), str(tmp_path / "c")]):
        monkeypatch.setenv("OVERLAP_CACHE_DIR", where)
        out = tmp_path / f"page{i}.html"
        r = run_cli("report", str(cap), "--html", str(out))
        assert r.returncode == 0, r.stderr
        pages.append(out.read_bytes())
    assert list((tmp_path / "c").glob("plotly-js-*.bin"))
    assert pages[0] == pages[1] == pages[2]


def test_plotly_js_read_as_bytes_is_get_plotlyjs(monkeypatch):
    """The page's plotly.js is read from the package's file as bytes: the same bytes as
    plotly's own `get_plotlyjs()`, encoded; where the file is not at that place, that."""
    want = get_plotlyjs().encode("utf-8")
    assert html._plotly_js_bytes() == want
    # the package's file not where it is looked for (another layout of the package)
    monkeypatch.setattr(html, "Path", lambda *_: Path("/nonexistent/plotly"))
    assert html._plotly_js_bytes() == want


def test_plotly_js_made_ahead_in_a_thread_is_the_same(fresh):
    """`prefetch_plotly_js` makes the page's plotly.js in a thread: the page gets the same
    text; the entry is written when the page takes it (a process that ends first writes
    nothing), then read back by the next thread."""
    want = _plotly_js_as_made()
    html.prefetch_plotly_js()
    (ahead,) = html._AHEAD
    ahead.join()
    assert not list(fresh.glob("plotly-js-*"))  # made, not yet kept
    assert html._plotly_gz_b64() == want
    assert list(fresh.glob("plotly-js-*.bin")) and not html._AHEAD
    html.prefetch_plotly_js()  # (made in this process: no second thread)
    assert not html._AHEAD
    html._plotly_gz_b64.cache_clear()
    html.prefetch_plotly_js()
    assert html._AHEAD[0].join() is None and html._AHEAD[0].made[0] is None  # read back
    assert html._plotly_gz_b64() == want


def test_an_error_made_ahead_is_raised_where_the_page_asks(fresh, monkeypatch):
    def broken() -> bytes:
        raise OSError("plotly.min.js unreadable")

    monkeypatch.setattr(html, "_plotly_js_bytes", broken)
    html.prefetch_plotly_js()
    with pytest.raises(OSError, match="unreadable"):
        html._plotly_gz_b64()
    assert not list(fresh.glob("plotly-js-*"))
