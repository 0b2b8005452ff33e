"""Sample run directories and a headless-Chromium `dash.testing` fixture for dashboard tests.

`make_logdir(root)` writes SYNTHETIC GPU runs the way `overlap capture` lays them out
(`<run>/plugins/profile/<ts>/<host>.xplane.pb` + `<run>/run.json`), plus the things discovery
must not list or must survive: a half-written run (no run.json), a `*.partial-*` run, a run
with a corrupt capture (listed; shows an error card), and a symlink to a run outside the
logdir.

`duo` is `dash_duo` with our Chromium flags (no network on test machines: no background
networking, component updates or sync), built here rather than through the
`pytest_setup_options` hook so that tests/conftest.py needs nothing from us.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from overlap.trace.synthetic import gpu_offload_scenario

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"
CHROME_FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu",
                "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--no-first-run", "--window-size=1400,1800")

# The offload run's numbers, for tests: 4 layers, each copy 200 us of which half hides.
OFFLOAD_HIDDEN_FRACTION = 0.5
KERNEL_PS = 400_000_000
COPY_PS = 200_000_000
GIB = 1 << 30


def _with_memory(t, peak_gib: int):
    """Allocator events: rise to `peak_gib` in the first step, fall back after it."""
    t.allocation(3_000_000, bytes_allocated=1 * GIB)
    t.allocation(1_000_000_000, bytes_allocated=peak_gib * GIB)
    t.allocation(2_500_000_000, kind="free", bytes_allocated=2 * GIB)
    return t


def write_run(logdir: Path, name: str, manifest: dict | None, *, hidden_fraction: float = 1.0,
              peak_gib: int = 3, steps: int = 3) -> Path:
    run = logdir / name
    t = _with_memory(gpu_offload_scenario(steps=steps, layers=4, hidden_fraction=hidden_fraction,
                                          kernel_ps=KERNEL_PS, copy_ps=COPY_PS), peak_gib)
    t.write_session(run)
    if manifest is not None:
        (run / "run.json").write_text(json.dumps(manifest))
    return run


def make_logdir(root: Path) -> Path:
    """A logdir with two good runs, a corrupt one, and three that must not be listed."""
    logdir = root / "runs"
    logdir.mkdir(parents=True)
    write_run(logdir, "remat_full", {"label": "remat", "workload": "synthetic-mlp",
                                     "policy": "full"}, hidden_fraction=1.0, peak_gib=6)
    write_run(logdir, "qkv_offloaded", {"label": "offload", "workload": "synthetic-mlp",
                                        "policy": "qkv_proj_offloaded"},
              hidden_fraction=OFFLOAD_HIDDEN_FRACTION, peak_gib=4)
    broken = logdir / "broken_capture"
    f = broken / "plugins" / "profile" / "2026_11_22_00_00_00" / "h.xplane.pb"
    f.parent.mkdir(parents=True)
    f.write_bytes(b"\x0a\xff\xff\xff\xff garbage, not an XSpace")
    (broken / "run.json").write_text(json.dumps({"policy": "minimal_offloaded"}))
    write_run(logdir, "half_written", None)  # a capture without run.json: a plain logdir
    write_run(logdir, "late.partial-1234", {"policy": "full"})
    outside = write_run(root / "elsewhere", "secret_run", {"policy": "full"})
    (logdir / "link_out").symlink_to(outside, target_is_directory=True)
    return logdir


# The Run view's callback (`show_run`): a run picked gives its steps, status cards and figures
RUN_VIEW = ("..step-select.options...step-select.value...run-status.children...fig-timeline.figure"
            "...fig-histogram.figure...fig-bandwidth.figure...top-exposed.data...fig-hosts.figure"
            "...top-exposed.columns...run-table-title.children..")


def run_picked(name, step=None) -> list[dict]:
    """`RUN_VIEW`'s inputs, the run-select first (the input that changed)."""
    return [{"id": "run-select", "property": "value", "value": name},
            {"id": "step-select", "property": "value", "value": step}]


def chrome_available() -> str | None:
    """None when headless Chromium can be driven here, else the reason to skip."""
    try:
        import selenium  # noqa: F401
        from dash.testing.composite import DashComposite  # noqa: F401
    except ImportError as e:
        return f"dash[testing]/selenium not installed ({e})"
    if not (shutil.which("chromium") or shutil.which("google-chrome")):
        return "no chromium binary (apt-get install chromium chromium-driver)"
    if not shutil.which("chromedriver"):
        return "no chromedriver (apt-get install chromium-driver)"
    return None


@pytest.fixture
def duo(tmp_path):
    """`dash_duo` in headless Chromium with CHROME_FLAGS."""
    from dash.testing.application_runners import ThreadedRunner
    from dash.testing.composite import DashComposite
    from selenium.webdriver.chrome.options import Options

    opts = Options()
    for flag in CHROME_FLAGS:
        opts.add_argument(flag)
    chromium = shutil.which("chromium")
    if chromium:
        opts.binary_location = chromium
    downloads = tmp_path / "download"
    downloads.mkdir()
    with ThreadedRunner() as server, DashComposite(
            server=server, browser="Chrome", headless=False,  # --headless=new is in opts
            options=[opts], download_path=str(downloads), percy_run=False,
            percy_finalize=False) as dc:
        yield dc


def select(duo, dropdown_id: str, text: str) -> None:
    """Pick the option of a dcc.Dropdown whose label contains `text`."""
    duo.find_element(f"#{dropdown_id}").click()
    for opt in duo.find_elements(".dash-dropdown-option"):
        if text in opt.text:
            opt.click()
            return
    raise AssertionError(f"no option {text!r} in #{dropdown_id}")
