"""Screenshots of every dashboard view and of the HTML report, for the README (docs/img/).

    python scripts/screenshots.py [--out docs/img]

Serves the real dashboard (`overlap.dashboard.app.create_app`) on the shipped captures: the
real TPU v6e host-offload capture (sample_traces/tpu-v6e-offload), the three CPU policy runs
(sample_traces/cpu-transformer-tiny) and two H100 plans of the tutorial scan compiled here
(`overlap plan`, needs the [plan] extra; left out without it). Drives headless Chromium
(selenium + chromedriver, as the browser tests do) through the Runs, Run (real capture), Run
(plan) and Compare views, and opens `overlap report --html` of the TPU capture. Writes one PNG
per view and prints their paths. Exit 2 when Chromium or selenium is missing.
"""

from __future__ import annotations

import argparse
import shutil
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "sample_traces"
CHROME_FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu",
                "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--no-first-run", "--window-size=1400,1500",
                "--hide-scrollbars")
VIEWS = ("dashboard-runs", "dashboard-run-tpu", "dashboard-run-plan", "dashboard-compare",
         "report-html")
TRACES_JS = ("const g = document.getElementById(arguments[0]); const p = g && "
             "g.querySelector('.js-plotly-plot'); return p && p._fullData ? p._fullData.filter("
             "t => t.visible !== false && t._length > 0).length : 0")


def make_plans(out: Path) -> Path | None:
    """Two H100 plans of the tutorial scan (offload:x, nothing_saveable) under `out`, or None
    when the [plan] extra is missing."""
    try:
        from overlap.plan.compile import plan_workload
        from overlap.plan.targets import get_target

        plan_workload("scan", ["offload:x", "nothing_saveable"], get_target("h100"), out=out)
    except Exception as e:  # noqa: BLE001 - no plan extra: the other views still get made
        print(f"screenshots: no plan views ({type(e).__name__}: {e})", file=sys.stderr)
        return None
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(app, port: int):
    import logging

    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request

    server = make_server("127.0.0.1", port, app.server, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _driver():
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options

    opts = Options()
    for flag in CHROME_FLAGS:
        opts.add_argument(flag)
    chromium = shutil.which("chromium") or shutil.which("google-chrome")
    if chromium:
        opts.binary_location = chromium
    from selenium.webdriver.chrome.service import Service

    # The chromedriver on PATH: selenium's own manager would try the network to find one.
    return webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=opts)


def _wait(cond, timeout: float = 60, what: str = "") -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if cond():
                return
        except Exception:  # noqa: BLE001 - page still rendering
            pass
        time.sleep(0.25)
    raise TimeoutError(f"screenshots: timed out waiting for {what}")


def _traces(drv, graph_id: str) -> int:
    return int(drv.execute_script(TRACES_JS, graph_id) or 0)


def _select(drv, dropdown_id: str, text: str) -> None:
    from selenium.webdriver.common.by import By

    drv.find_element(By.CSS_SELECTOR, f"#{dropdown_id}").click()
    time.sleep(0.3)
    for opt in drv.find_elements(By.CSS_SELECTOR, ".dash-dropdown-option"):
        if text in opt.text:
            opt.click()
            return
    raise RuntimeError(f"screenshots: no option {text!r} in #{dropdown_id}")


def _tab(drv, n: int) -> None:
    from selenium.webdriver.common.by import By

    drv.find_element(By.CSS_SELECTOR, f"#tabs .tab:nth-child({n})").click()


def _shot(drv, out: Path, name: str) -> Path:
    time.sleep(0.8)  # plotly transitions
    path = out / f"{name}.png"
    drv.save_screenshot(str(path))
    return path


def take(out: Path) -> list[Path]:
    """Make every screenshot into `out`; returns the files written."""
    from overlap.analysis.overlap import analyze
    from overlap.dashboard import data as rundata
    from overlap.dashboard.app import create_app
    from overlap.report.html import write_html
    from overlap.trace import read_trace

    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    with tempfile.TemporaryDirectory() as tmp:
        tmpdir = Path(tmp)
        import os

        os.environ.setdefault("OVERLAP_CACHE_DIR", str(tmpdir / "cache"))
        plans = make_plans(tmpdir / "plans")
        logdirs = [SAMPLES / "tpu-v6e-offload", SAMPLES / "cpu-transformer-tiny"]
        logdirs += [plans] if plans else []
        rundata.clear_cache_memory()
        app = create_app(logdirs)
        port = _free_port()
        server = _serve(app, port)
        drv = _driver()
        try:
            drv.get(f"http://127.0.0.1:{port}/")
            _wait(lambda: "run(s)" in drv.find_element("id", "runs-count").text, what="runs")
            written.append(_shot(drv, out, "dashboard-runs"))
            _tab(drv, 2)  # Run: opens on the real capture that moved the most bytes
            _wait(lambda: _traces(drv, "fig-timeline") >= 3, what="TPU timeline")
            written.append(_shot(drv, out, "dashboard-run-tpu"))
            if plans:
                _select(drv, "run-select", "offload_x")
                _wait(lambda: "PREDICTED" in drv.find_element("id", "fig-timeline").text
                      and _traces(drv, "fig-timeline") >= 3, what="plan timeline")
                written.append(_shot(drv, out, "dashboard-run-plan"))
            _tab(drv, 3)
            _wait(lambda: "Verdict" in drv.find_element("id", "compare-verdict").text
                  and _traces(drv, "fig-memory") >= 2, what="compare")
            written.append(_shot(drv, out, "dashboard-compare"))
            page = tmpdir / "report.html"
            t = read_trace(SAMPLES / "tpu-v6e-offload")
            write_html(analyze(t), t, page)
            drv.get(page.as_uri())
            _wait(lambda: drv.execute_script(
                "return document.querySelectorAll('.js-plotly-plot').length") >= 3,
                what="HTML report")
            written.append(_shot(drv, out, "report-html"))
        finally:
            drv.quit()
            server.shutdown()
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(REPO / "docs" / "img"), help="directory for the PNGs")
    args = ap.parse_args(argv)
    try:
        import selenium  # noqa: F401
    except ImportError:
        print("screenshots: selenium is not installed (pip install 'dash[testing]')",
              file=sys.stderr)
        return 2
    if not (shutil.which("chromium") or shutil.which("google-chrome")) \
            or not shutil.which("chromedriver"):
        print("screenshots: needs chromium and chromedriver (apt-get install chromium "
              "chromium-driver)", file=sys.stderr)
        return 2
    for p in take(Path(args.out)):
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
