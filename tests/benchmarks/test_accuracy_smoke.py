"""`benchmarks/accuracy.py` runs end to end on the in-repo H100 scan pair and prints both tables
(its numbers are the report's: checked against the measured ones by the report's own tests)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_accuracy_on_the_scan_pair(tmp_path):
    out = tmp_path / "acc.md"
    r = subprocess.run([sys.executable, str(REPO / "benchmarks" / "accuracy.py"), "--corpus",
                        str(REPO / "sample_traces"), "--only", "gpu-h100/scan-h100", "--no-tpu",
                        "--markdown", str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    assert text.strip() == r.stdout.strip()
    rows = [ln for ln in text.splitlines() if ln.startswith("| gpu-h100/scan-h100/offload_x |")]
    assert [ln.split(" | ")[1] for ln in rows] == ["D2H", "H2D"]
    assert all(ln.rstrip(" |").endswith("100/100") for ln in rows)  # every copy joined
    # the H2D copies hide behind nothing (measured 0%): exposed = their whole span, ~25 ms/step
    h2d = rows[1].split(" | ")
    assert 20 < float(h2d[2]) < 30 and h2d[6] == "0%"
    assert "| gpu-h100/scan-h100 | offload_x | nothing_saveable | +3.1% |" in text
    assert "target met on" in text
