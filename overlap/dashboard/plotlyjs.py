"""plotly.js for the dashboard's page: started before the click, compiled off the main thread.

Why (issue 32, "the dashboard opens a 1M-event capture within 2 s"): Dash's Graph loads
plotly.js (4.8 MB) only when a graph first mounts, and starting it was ~1.0-1.4 s of script on
the browser's one main thread in this VM's Chromium (the long-task timeline: one task, the
`EvaluateScript` of plotly.min.js, most of it V8 compiling plotly's functions one at a time as
its start-up first calls them). A user who clicked a run the moment the runs table showed
waited for all of it after the click (page asked -> figures drawn 2.2-2.5 s).

* `install(app)` serves the installed plotly.min.js, byte for byte, behind one comment line,
  `//# allFunctionsCalledOnLoad`: V8's explicit compile hint (Chromium 136+; other browsers
  see a comment), which compiles every function while the script streams in, on a background
  thread, instead of on the main thread when each is first called. Measured here (headless
  Chromium 156, the bare file in an empty page, medians of 5, loaded machine): the
  main-thread task 1.42 -> 0.68 s and the first plot 108 -> 82 ms; the script tag to plotly
  ready about the same (~1.3 s, the rest off the main thread, so the page stays responsive).
  Not a `<link rel=preload>` (Chromium then compiles the preloaded bytes on the main thread
  when the script runs: 1.3-1.6 s) nor a module preload (compiled on the main thread at once).
* `LOADER` (in the page's <head>) starts that script once an element of the app's layout is
  in the page (`after`: the server has read the runs, the runs table is next), not when a
  graph first mounts. Started with the page instead, its run landed before the runs table on
  a busy 2-core machine and delayed it 0.9 -> 2.2 s. Until plotly.js has run, `window.Plotly`
  is a thenable: Dash's Graph (dash 4 `dcc`) uses `window.Plotly` when it is set instead of
  adding its own script tag and waits on it (`Promise.resolve` of a thenable), so plotly.js
  runs once; a graph that mounts first starts the load itself. Should the file fail to load,
  the loader falls back to Dash's own URL for it.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

#: V8's explicit compile hint: eager compilation of the whole file, off the main thread
HINT = b"//# allFunctionsCalledOnLoad\n"

# The loader, before Dash's own scripts; %(url)s, %(fallback)s and %(after)s are filled by
# `loader_html`. `window.Plotly` is a thenable until plotly.js has run: a Graph that mounts
# first (`Promise.resolve(window.Plotly)`) starts the load if it has not started and waits for it.
LOADER = """<script>
(function () {
  if (window.Plotly) { return; }
  var started = null;
  function load(src, done, failed) {
    var s = document.createElement("script");
    s.src = src; s.async = true; s.onload = done; s.onerror = failed;
    document.head.appendChild(s);
  }
  function start() {
    if (!started) {
      started = new Promise(function (resolve, reject) {
        function ready() { resolve(window.Plotly); }
        load(%(url)s, ready, function () {
          window.Plotly = undefined;  // Dash's own copy, unhinted
          load(%(fallback)s, ready, reject);
        });
      });
    }
    return started;
  }
  window.Plotly = {then: function (ok, bad) { return start().then(ok, bad); }};
  var after = %(after)s;
  if (!after) { start(); return; }
  var seen = new MutationObserver(function () {
    if (document.querySelector(after)) { seen.disconnect(); start(); }
  });
  seen.observe(document.documentElement, {childList: true, subtree: true});
})();
</script>"""


def plotly_path() -> Path:
    """The plotly.min.js that Dash itself serves (the plotly package's own copy)."""
    import plotly

    return Path(plotly.__file__).resolve().parent / "package_data" / "plotly.min.js"


@functools.cache
def _hinted(path: Path, mtime_ns: int, size: int) -> bytes:
    # keyed by the file's stat: an upgraded plotly is served as the new file
    return HINT + path.read_bytes()


def hinted_js() -> bytes:
    """The installed plotly.min.js behind the compile-hint line."""
    p = plotly_path()
    st = p.stat()
    return _hinted(p, st.st_mtime_ns, st.st_size)


def _version() -> str:
    from plotly.offline import get_plotlyjs_version

    return str(get_plotlyjs_version())


def loader_html(url: str, fallback: str, after: str | None = None) -> str:
    """The page's loader: start at once, or once an element matching the CSS selector `after`
    is in the page."""
    return LOADER % {"url": json.dumps(url), "fallback": json.dumps(fallback),
                     "after": json.dumps(after)}


def install(app: Any, after: str | None = None) -> str:
    """Serve the hinted plotly.js under the app's prefix and start it from the page's <head>.
    Returns the URL the page loads it from."""
    from flask import Response

    name = f"_overlap/plotly-{_version()}.min.js"  # a new plotly.js is a new URL: cache forever
    routes, requests = app.config.routes_pathname_prefix, app.config.requests_pathname_prefix

    def serve() -> Response:
        return Response(hinted_js(), mimetype="application/javascript",
                        headers={"Cache-Control": "public, max-age=31536000, immutable"})

    app.server.add_url_rule(routes + name, "overlap_plotly_js", serve)
    url = requests + name
    fallback = requests + "_dash-component-suites/plotly/package_data/plotly.min.js"
    app.index_string = app.index_string.replace(
        "</head>", loader_html(url, fallback, after) + "\n    </head>", 1)
    return url
