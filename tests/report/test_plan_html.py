"""The HTML page of a plan: the model and its assumptions stated, human headers and units, and
no horizontal scroll (checked in headless Chromium when it is installed). The plan manifest is
built by hand, so every number on the page is known."""

from __future__ import annotations

import html
import re

import pytest

from overlap.report.html import write_plan_html
from tests.dashboard.dashboard_support import CHROME_FLAGS, chrome_available

KiB = 1 << 10


def _plan(label: str = "h100-scan-offload_x-with-a-rather-long-label-that-must-wrap") -> dict:
    op = {"op": "copy-start.1", "direction": "D2H", "bytes": 256 * KiB,
          "layout_bytes": 256 * KiB, "executions": 10, "transfer_ps": 4_096_000,
          "duration_ps": 5_096_000, "compute_ps": 800_000, "hidden_ps": 800_000,
          "hidden_fraction": 800_000 / 5_096_000, "break_even_Bps": 34536060675.24649}
    return {
        "kind": "plan", "label": label, "status": "ok", "fits": True,
        "target": {"name": "h100", "device_memory_bytes": 81559 << 20},
        "policy": {"name": "offload:x", "category": "offload"},
        "memory_budget": {"bytes": 60 << 30, "source": "JAX's default GPU preallocation"},
        "memory_analysis": {"temp_size_in_bytes": 3 << 20, "argument_size_in_bytes": 1 << 20,
                            "output_size_in_bytes": 0, "alias_size_in_bytes": 0,
                            "host_temp_size_in_bytes": 2560 * KiB},
        "offload_inventory": {"D2H": {"executed_bytes": 2560 * KiB, "executed_count": 10},
                              "H2D": {"executed_bytes": 2560 * KiB, "executed_count": 10},
                              "trip_counts_known": True},
        "estimate": {
            "model": {"target": "h100", "hbm_Bps": 3.35e12, "peak_flops_bf16": 989e12,
                      "peak_flops_f32": 494e12, "host_link_Bps": 64e9,
                      "host_link": "PCIe Gen5 x16", "kernel_floor_ps": 1_000_000,
                      "source": "NVIDIA H100 data sheet"},
            "assumptions": ["copies of one direction are served one at a time"],
            "ops": [op], "step_ps": 123_456_789, "break_even_Bps": 34536060675.24649,
            "per_step": {"all": {"hidden_fraction": 0.157, "exposed_ps": 42_960_000}}},
        "notes": [],
    }


def _text(page: str) -> str:
    page = re.sub(r"<(script|style).*?</\1>", "", page, flags=re.S)
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page)))


def test_plan_page_states_the_model_in_human_units(tmp_path):
    path = write_plan_html([_plan()], tmp_path / "p.html")
    text = _text(path.read_text())
    assert "compiled for h100, not run" in text
    # The model and what it assumes, with units.
    assert "Machine model (h100): device memory 3350 GB/s, bf16 989 TFLOP/s" in text
    assert "host link 64 GB/s (PCIe Gen5 x16)" in text and "each kernel at least 1 us" in text
    assert "Assumes: copies of one direction are served one at a time." in text
    assert "Memory budget 60.0 GiB: JAX's default GPU preallocation" in text
    assert "PREDICTED" in text and "never measured" in text
    # Human headers and units, not field names and raw floats.
    for header in ("Device peak", "Fits budget", "Every copy hides at host link of at least",
                   "Transfer time (pred.)", "Hidden (pred.)", "Times per step"):
        assert header in text
    assert "break_even_Bps" not in text and "34536060675" not in text
    assert "34.5 GB/s" in text and "256.0 KiB" in text and "16%" in text
    assert "123 us" in text  # the predicted step
    assert not re.search(r"\d\.\d{5,}", text)


def test_a_plan_that_moves_nothing_says_so(tmp_path):
    m = _plan("h100-scan-full")
    m["offload_inventory"] = {"D2H": {"executed_bytes": 0}, "H2D": {"executed_bytes": 0}}
    m["estimate"]["ops"] = []
    m["estimate"]["break_even_Bps"] = None
    text = _text(write_plan_html([m], tmp_path / "p.html").read_text())
    assert "no planned host transfers" in text and "never (nothing beside" not in text


@pytest.mark.skipif(chrome_available() is not None, reason=str(chrome_available()))
def test_plan_page_has_no_horizontal_scroll(tmp_path):
    import shutil

    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options

    path = write_plan_html([_plan()], tmp_path / "p.html",
                           baseline=_plan("h100-scan-nothing_saveable-baseline-label"))
    opts = Options()
    for flag in CHROME_FLAGS:
        opts.add_argument(flag)
    # A laptop half-screen: the old page (no wrapping) scrolled sideways at this width.
    opts.add_argument("--window-size=760,800")
    if shutil.which("chromium"):
        opts.binary_location = shutil.which("chromium")
    driver = webdriver.Chrome(options=opts)
    try:
        driver.get(path.resolve().as_uri())
        wide, view = driver.execute_script(
            "return [document.documentElement.scrollWidth, "
            "document.documentElement.clientWidth]")
    finally:
        driver.quit()
    assert wide <= view, (wide, view)
