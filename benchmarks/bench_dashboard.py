"""The dashboard as a user opens it: `overlap dashboard FILE` started as its own process, the page
loaded in headless Chromium, the run picked, and the time until its step timeline is drawn
(issue 32: "the dashboard opens a 1M-event capture within 2 s").

    python benchmarks/bench_dashboard.py                      # the synthetic 1M files
    python benchmarks/bench_dashboard.py --rounds 5 --files a.xplane.pb b.xplane.pb
    python benchmarks/bench_dashboard.py --before /tmp/older_checkout --files a.xplane.pb

Each round starts a fresh server (nothing in its memory) with the on-disk cache disabled
(`OVERLAP_CACHE_DIR=`: a run never seen before) or, with `--cached`, pointed at a folder the
warm-up round filled (a run opened before). Times, wall seconds, median over rounds:

* `runs table`: from asking the browser for the page until the runs table lists the run (the
  listing reads and analyzes every run it shows);
* `run drawn`: from the click on the run's row until the Run tab's step timeline has its
  traces laid out by plotly.js (`_fullData`), i.e. what the user waits for after picking it
  (or, for a run with nothing to draw, the timeline's message laid out in their place);
* `open`: the two together, the page asked for until the timeline is drawn;
* `open, figures done`: the page asked for until plotly.js last finished laying out a graph
  (`FIGURES_INIT`: each `Plotly.react`, and each `Plots.resize` Dash's graphs ask for): the
  timeline shows once its data is laid out, while the other figures may still be drawn;
* `open settled`: `open` until the page's main thread is quiet after the timeline shows
  (`SETTLED_JS`: the other figures drawn, and any figure laid out again, are the user's wait
  too; round 36: each figure was laid out a second time once the page's scroll bar came);
* `server start`: process start until the server answers HTTP (interpreter, dash, plotly);
* `server MiB`: the server's peak RSS (VmHWM) at the end of the round.

The server is ready when it answers `GET /`. Dash's first request builds the layout, which
reads and analyzes every run: that probe, not the page, pays the read. `--cold` waits for the
port to accept a connection instead, so the page's own first request pays it (a user who
opens the printed URL at once).

`--timeline` prints, for each round, where the open went in the browser: its long tasks (the
main thread busy > 50 ms, PerformanceObserver 'longtask'), each callback request (which outputs,
sent -> answered, from a wrapped `fetch`), the scripts over 1 MB and when plotly.js has run (its
bundle setting `window.Plotly`), in ms from the page asked.

Needs chromium, chromedriver and selenium (the project's [test] extra); nothing here is a
test, and no test asserts any of these times.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CACHE = HERE / ".cache"
DEFAULT_FILES = ["gpu_1M.upb.xplane.pb", "gpu_compact_1M.upb.xplane.pb", "tpu_1M.upb.xplane.pb",
                 "many_ops_tpu.xplane.pb"]
FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run",
         "--window-size=1400,1800")
# plotly.js's own count of laid-out traces with points (see tests/dashboard)
TRACES_JS = ("const g = document.getElementById(arguments[0]);"
             "const p = g && g.querySelector('.js-plotly-plot');"
             "return p && p._fullData ? p._fullData.filter("
             "t => t.visible !== false && t._length > 0).length : 0")
# A figure with nothing to draw (`figures.empty_figure`: a run the rules cannot read, no steps):
# laid out with its message as its annotation and no trace; drawn all the same, the user's
# answer is on the screen. Not the "Loading..." figure every graph holds until its callback
# answers (`dashboard.app._placeholder_json`), which is one too.
MESSAGE_JS = ("const g = document.getElementById(arguments[0]);"
              "const p = g && g.querySelector('.js-plotly-plot');"
              "const a = (p && p._fullLayout && p._fullLayout.annotations) || [];"
              "return p && p._fullData && p._fullData.length === 0 ? a.filter("
              "x => x.text && x.text !== 'Loading...').length : 0")

TITLE_JS = ("const p = document.querySelector('#' + arguments[0] + ' .js-plotly-plot');"
            "return (p && p.layout && p.layout.title && p.layout.title.text) || ''")


# Installed before any page script (CDP): the browser's long tasks, and each Dash callback
# request with the outputs it asks for, in the page's own clock (performance.now()).
TIMELINE_INIT = """
window.__bench = {lt: [], cb: []};
try {
  new PerformanceObserver(l => { for (const e of l.getEntries())
    window.__bench.lt.push([e.startTime, e.duration]); })
    .observe({type: 'longtask', buffered: true});
} catch (e) {}
// (when plotly.js has run: `FIGURES_INIT`'s `window.__plotlyRan`, one trap on window.Plotly)
const __fetch = window.fetch;
window.fetch = function (url, opts) {
  const t0 = performance.now();
  let out = '';
  try { out = JSON.parse(opts.body).output; } catch (e) {}
  const p = __fetch.apply(this, arguments);
  if (out) { p.then(() => window.__bench.cb.push([t0, performance.now(), out]), () => {}); }
  return p;
};
"""
TIMELINE_JS = ("return [performance.timeOrigin, window.__bench || {lt: [], cb: []}, "
               "performance.getEntriesByType('resource').filter(e => e.encodedBodySize > 1e6)"
               ".map(e => [e.startTime, e.responseEnd, e.name]), window.__plotlyRan || 0]")


# Installed before any page script, the one trap on window.Plotly (`TIMELINE_INIT` reads it
# too): when plotly.js has run (`window.__plotlyRan`: its bundle sets Plotly, after the page's
# loader set a thenable without newPlot), and when the last layout of a graph by plotly.js
# finished (`Plotly.react`, and `Plots.resize`, which lays a graph out again where its size
# changed): `window.__figuresDone`. Both in the page's clock.
FIGURES_INIT = """
window.__figuresDone = 0;
let __benchPlotly;
Object.defineProperty(window, 'Plotly', {configurable: true, get: () => __benchPlotly, set: v => {
  if (v && v.newPlot && !window.__plotlyRan) { window.__plotlyRan = performance.now(); }
  if (v && v.react && v.Plots && !v.__benchWrapped) {
    const react = v.react, resize = v.Plots.resize;
    const mark = r => { window.__figuresDone = performance.now(); return r; };
    v.react = function () { return Promise.resolve(react.apply(this, arguments)).then(mark); };
    v.Plots.resize = function () {
      return Promise.resolve(resize.apply(this, arguments)).then(mark); };
    v.__benchWrapped = true;
  }
  __benchPlotly = v; }});
"""

# How long after it is called the page's main thread goes quiet (ms, as performance.now()
# counts; 0 where it is quiet at once): a 25 ms timer a tick, a tick later than 15 ms is the
# thread busy, and `arguments[0]` ms of ticks on time is quiet, dated from the first of them.
# Dash's graphs ask plotly.js to fit them 100 ms after they are in the page: a quiet spell
# longer than that sees any drawing that comes of it.
SETTLED_JS = """
const quietMs = arguments[0], done = arguments[arguments.length - 1];
const t0 = performance.now();
let since = t0, last = t0;
function tick() {
  const now = performance.now();
  if (now - last > 40) { since = now; }
  last = now;
  if (now - since >= quietMs) { done(Math.max(0, since - t0)); return; }
  setTimeout(tick, 25);
}
setTimeout(tick, 25);
"""
QUIET_MS = 300


def print_timeline(driver, marks: dict[str, float]) -> None:
    """The browser's side of one round (see the module docstring), in ms from the page asked
    (`marks`: python time.time() of each step the bench took)."""
    origin, got, big, plotly_ran = driver.execute_script(TIMELINE_JS)
    t0 = marks["page asked"] * 1000
    rows = [(v * 1000 - t0, f"-- {k}") for k, v in marks.items()]
    rows += [(origin + s - t0, f"long task {d:.0f} ms") for s, d in got["lt"]]
    rows += [(origin + s - t0, f"callback {e - s:.0f} ms {out[:70]}") for s, e, out in got["cb"]]
    rows += [(origin + s - t0, f"script {e - s:.0f} ms {url.rsplit('/', 1)[-1]}")
             for s, e, url in big]
    if plotly_ran:
        rows.append((origin + plotly_ran - t0, "plotly.js has run"))
    for t, what in sorted(rows):
        print(f"    {t:7.0f}  {what}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(pred, timeout: float, what: str, poll: float = 0.02):
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        try:
            v = pred()
        except Exception:  # noqa: BLE001 - not there yet (element missing, server starting)
            v = None
        if v:
            return v
        time.sleep(poll)
    raise TimeoutError(f"{what} not seen within {timeout} s")


def _browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    opts = Options()
    for f in FLAGS:
        opts.add_argument(f)
    if shutil.which("chromium"):
        opts.binary_location = shutil.which("chromium") or ""
    # the chromedriver on PATH (selenium's manager would try the network first)
    driver = shutil.which("chromedriver")
    return webdriver.Chrome(options=opts, service=Service(driver) if driver else None)


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _peak_rss_mib(pid: int) -> float:
    """A live process's peak resident set (VmHWM), MiB; nan where /proc cannot tell."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def one_round(driver, path: Path, cache_dir: str, think: float = 0.0,
              timeline: bool = False, tree: Path = REPO,
              also: tuple[Path, ...] = (), cold: bool = False) -> dict[str, float]:
    from selenium.webdriver.common.by import By

    port = _free_port()
    env = {**os.environ, "OVERLAP_CACHE_DIR": cache_dir, "PYTHONPATH": str(tree)}
    t0 = time.perf_counter()
    # OVERLAP_BENCH_SERVER: another script taking the same arguments (e.g. one that logs
    # each request's time), for finding where a slow open goes
    server = os.environ.get("OVERLAP_BENCH_SERVER")
    cmd = [sys.executable, server] if server else [sys.executable, "-m", "overlap", "dashboard"]
    # (in the tree: `python -m` puts the working directory first on the path, before
    # PYTHONPATH, so a run from another checkout served that checkout's code)
    proc = subprocess.Popen(cmd + [str(p) for p in (*also, path)] + ["--port", str(port)],
                            env=env, cwd=str(tree),
                            stdout=subprocess.DEVNULL, stderr=None if server else
                            subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/"
    try:
        if cold:  # listening; the page's first request builds the layout (reads the runs)
            _wait(lambda: _port_open(port), 60, "server")
        else:
            _wait(lambda: urllib.request.urlopen(url, timeout=1).status == 200, 60, "server")
        started = time.perf_counter() - t0
        marks = {"page asked": time.time()}
        t1 = time.perf_counter()
        driver.get(url)
        name = path.name

        def row():
            for r in driver.find_elements(By.CSS_SELECTOR,
                                          "#runs-table td[data-dash-column='run']"):
                if r.text == name:
                    return r
            return None

        cell = _wait(row, 120, "the run in the runs table")
        listed = time.perf_counter() - t1
        marks["runs table seen"] = time.time()
        time.sleep(think)  # the user reading the runs table before picking the run
        t2 = time.perf_counter()
        marks["click"] = time.time()
        clicked_at = driver.execute_script("return performance.now()")
        cell.click()
        # with `also`, the Run tab first shows the page's run (a real one): the picked run's
        # timeline is the one whose title says SYNTHETIC
        _wait(lambda: (driver.execute_script(TRACES_JS, "fig-timeline") >= 1
                       or driver.execute_script(MESSAGE_JS, "fig-timeline") >= 1) and (
            not also or "SYNTHETIC" in driver.execute_script(TITLE_JS, "fig-timeline")), 120,
              "the step timeline (or its message, where the run has nothing to draw)")
        drawn = time.perf_counter() - t2
        opened = time.perf_counter() - t1 - think
        marks["timeline seen"] = time.time()
        # then until the page is quiet: what it does after the timeline first shows (the other
        # figures, a figure laid out again) is the user's wait too
        quiet = driver.execute_async_script(SETTLED_JS, QUIET_MS)
        settled = drawn + max(0.0, quiet / 1000)
        marks["settled"] = marks["timeline seen"] + max(0.0, quiet / 1000)
        # (a resize answers 100 ms after it is asked, and lays the graph out only where its
        # size changed: what the quiet spell has seen is all there is)
        done = (driver.execute_script("return window.__figuresDone") - clicked_at) / 1000
        if timeline:
            print_timeline(driver, marks)
        return {"server start": started, "runs table": listed, "run drawn": drawn,
                "open": opened, "run settled": settled, "open settled": opened + settled - drawn,
                "open, figures done": listed + done,
                "server MiB": _peak_rss_mib(proc.pid)}
    finally:
        proc.terminate()
        proc.wait(10)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", nargs="*", help="captures (default: benchmarks/.cache's 1M files)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--think", type=float, default=0.0, metavar="S",
                    help="seconds between the runs table showing the run and the click (a "
                         "user reading it; `open` leaves them out)")
    ap.add_argument("--cached", action="store_true",
                    help="a run opened before: the on-disk cache filled by the warm-up round")
    ap.add_argument("--cold", action="store_true",
                    help="the server is ready when its port accepts a connection, not when it "
                         "answers GET /: the page's first request pays reading the runs")
    ap.add_argument("--timeline", action="store_true",
                    help="print each round's browser timeline: long tasks, callbacks, scripts")
    ap.add_argument("--also", nargs="*", default=[], metavar="PATH",
                    help="real captures or logdirs the dashboard gets before the file (a "
                         "SYNTHETIC one): the page opens on a real run, so the click picks a run "
                         "not shown yet; its timeline is seen when its title says SYNTHETIC")
    ap.add_argument("--before", metavar="DIR",
                    help="another checkout (bytecode compiled) timed in the same rounds: each "
                         "round opens the file with it, then with this one")
    a = ap.parse_args(argv)
    trees = [("before", Path(a.before).resolve()), ("after", REPO)] if a.before else [("", REPO)]
    also = tuple(Path(p).resolve() for p in a.also)
    files = [Path(f).resolve() for f in a.files] if a.files else [CACHE / f for f in DEFAULT_FILES]
    files = [f for f in files if f.exists()]
    if not files:
        print("no inputs: run benchmarks/bench_process.py once to make the synthetic files")
        return 2
    driver = _browser()
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": FIGURES_INIT})
    if a.timeline:
        driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": TIMELINE_INIT})
    cols = ["server start", "runs table", "run drawn", "open", "open settled",
            "open, figures done", "server MiB"]
    print("| input | MB | " + " | ".join(cols) + " | open, each round |")
    print("|---|---|" + "---|" * (len(cols) + 1))
    try:
        for f in files:
            rows: dict[str, list[dict[str, float]]] = {k: [] for k, _ in trees}
            with tempfile.TemporaryDirectory() as tmp:
                caches = {k: (str(Path(tmp) / (k or "cache")) if a.cached else "")
                          for k, _ in trees}
                for k, tree in trees:  # warm-up: page cache, browser, disk cache
                    one_round(driver, f, caches[k], a.think, tree=tree, also=also, cold=a.cold)
                for _ in range(a.rounds):  # interleaved: before, after, before, ...
                    for k, tree in trees:
                        if a.timeline and k:
                            print(f"  {k}:")
                        rows[k].append(one_round(driver, f, caches[k], a.think, a.timeline,
                                                 tree, also, a.cold))
            for k, _ in trees:
                med = {c: statistics.median(r[c] for r in rows[k]) for c in cols}
                each = ", ".join(f"{r['open']:.2f}" for r in rows[k])
                print(f"| {f.name}{' ' + k if k else ''} | {f.stat().st_size / 1e6:.1f} | "
                      + " | ".join(f"{med[c]:.0f}" if c == "server MiB" else f"{med[c]:.2f} s"
                                   for c in cols) + f" | {each} |",
                      flush=True)
    finally:
        driver.quit()
    return 0


if __name__ == "__main__":
    sys.exit(main())
