"""`overlap report --html` pages as a user opens them: each page loaded in headless Chromium, timed
from the navigation's start until every figure is laid out by plotly.js and the page's main
thread has been quiet for `bench_dashboard.QUIET_MS` (its `SETTLED_JS`: a figure laid out a
second time is the user's wait too).

    python benchmarks/bench_html_open.py --rounds 5 PAGE.html ...   # pages made by each tree

Rounds are interleaved over the pages (a warm-up round first, not counted); each cell is the
median, ms. Make the pages to compare with each tree's `python -m overlap report --html`, run
from inside that tree (`python -m` puts the working directory first on the path). Needs
chromium, chromedriver and selenium (the project's [test] extra); nothing here is a test.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import bench_dashboard as bd  # noqa: E402  (the browser, the waits and the quiet check)

FIGURES_LAID_OUT = ("const g = document.querySelectorAll('.js-plotly-plot');"
                    "return g.length > 0 && [...g].every(x => x._fullLayout)")


def settled_ms(driver, page: Path) -> float:
    """One load of `page`: ms from the navigation's start until the page is quiet."""
    driver.get(page.resolve().as_uri())
    bd._wait(lambda: driver.execute_script(FIGURES_LAID_OUT), 60, "the page's figures")
    # (the page's clock starts at the navigation; `SETTLED_JS` dates the quiet spell from when
    # it is called)
    called = driver.execute_script("return performance.now()")
    return called + driver.execute_async_script(bd.SETTLED_JS, bd.QUIET_MS)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pages", nargs="+", type=Path)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args(argv)
    driver = bd._browser()
    got: dict[Path, list[float]] = {p: [] for p in a.pages}
    try:
        for r in range(a.rounds + 1):
            for p in a.pages:
                t = settled_ms(driver, p)
                if r:  # (round 0 warms the browser's caches)
                    got[p].append(t)
    finally:
        driver.quit()
    print("| page | settled, ms (median) | each round |\n|---|---|---|")
    for p, v in got.items():
        print(f"| {p.name} | {statistics.median(v):.0f} | "
              + ", ".join(f"{x:.0f}" for x in v) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
