"""`benchmarks/bench.py --quick` runs end to end and prints its table (no timing assertions)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_bench_quick_prints_table(tmp_path):
    r = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench.py"), "--quick",
                        "--cache", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "ratio to bare decode" in r.stdout
    assert "| synthetic gpu 10k |" in r.stdout and "| synthetic tpu 10k |" in r.stdout
