"""The real H200 captures of many steps (tests/data/gpu-large, SOURCES.md there): the shapes the
38-capture corpus lacks (300 steps with command buffers on, 305,700 device events on one
stream and the executed program carried; a user's loop with the Python tracer on). One answer
whichever decoder reads them, and the answers SOURCES.md records."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from overlap.trace import wire

RUNS = {
    # run: (transfers, bytes, span_ps, hidden_ps)
    "transformer_control_qkv_cb_300": (14_400, 483_183_820_800, 8_796_460_023_000, 0),
    "user_pytracer_700": (11_900, 757_491_302_400, 13_728_610_441_000, 0),
}


def _report(path, scanner: bool) -> tuple[int, str]:
    env = {**os.environ, "OVERLAP_SCANNER": "1" if scanner else "0"}
    p = subprocess.run([sys.executable, "-m", "overlap", "report", "--json", str(path)],
                       capture_output=True, text=True, env=env, timeout=300)
    return p.returncode, p.stdout


@pytest.mark.skipif(wire._scan is None, reason="the compiled scanner is not built")
@pytest.mark.parametrize("run", sorted(RUNS))
def test_both_decoders_give_one_report_and_the_recorded_answers(gpu_large, run):
    (xplane,) = (gpu_large / run).glob("plugins/profile/*/*.xplane.pb")
    rc, fast = _report(xplane, True)
    assert rc == 0
    assert _report(xplane, False) == (0, fast)
    r = json.loads(fast)
    assert r["status"] == "OK" and r["transfer_status"]["status"] == "complete"
    s = r["summary"]
    assert (s["transfers"], s["bytes"], s["span_ps"], s["hidden_ps"]) == RUNS[run]
    assert s["hidden_ps"] <= s["span_ps"] and 0.0 <= s["overlap_ratio"] <= 1.0
    # command buffers: every copy shares the one stream with the graph's kernels
    causes = {c["cause"] for d in r["by_direction"].values()
              for c in d.get("exposure_causes", [])}
    assert "shares_stream_with_compute" in causes
