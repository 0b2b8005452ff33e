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


def test_bench_other_encodings_and_captures(tmp_path):
    """--encodings re-serialises each synthetic file with upb; --capture adds a real capture."""
    cap = next((REPO / "sample_traces").rglob("*.xplane.pb"))
    r = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench.py"), "--quick",
                        "--cache", str(tmp_path), "--encodings", "--capture", str(cap),
                        "--readers", "overlap_report"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert "| synthetic gpu 10k (upb" in r.stdout and f"/{cap.name} |" in r.stdout
    assert "overlap_report x" in r.stdout and "jaxlib" not in r.stdout


def test_bench_shapes_quick_prints_every_shape():
    r = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_shapes.py"), "--quick"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    for shape in ("many-ops tpu", "id-0 events", "many planes", "pod 2 hosts"):
        assert f"| {shape}" in r.stdout


def test_bench_pod_quick_measures_every_reader():
    r = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_pod.py"), "--quick"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "| gpu 3 hosts x 2,000 device events |" in r.stdout
    row = next(line for line in r.stdout.splitlines() if line.startswith("| tpu 3 hosts"))
    # Two spawned workers were seen by the sampler; the single process had none.
    assert "worker 0 /" not in row.split("|")[5] and "worker 0 /" in row.split("|")[4]


def test_degenerate_shapes_write_and_report(tmp_path):
    """`benchmarks/degenerate.py` writes every shape it names (small sizes here), and each
    reads to a report marked SYNTHETIC."""
    import json

    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        from degenerate import SHAPES
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    specs = [f"{k}:{1000 + i}" for i, k in enumerate(sorted(SHAPES))]
    r = subprocess.run([sys.executable, str(REPO / "benchmarks" / "degenerate.py"),
                        str(tmp_path), *specs], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    files = [line.split()[0] for line in r.stdout.splitlines()]
    assert len(files) == len(SHAPES)
    for f in files:
        rep = subprocess.run([sys.executable, "-m", "overlap", "report", "--json", f],
                             capture_output=True, text=True, timeout=120)
        assert rep.returncode == 0, (f, rep.stderr)
        assert json.loads(rep.stdout)["synthetic"] is True, f


def test_real_captures_lists_each_run_and_file_once():
    """`real_captures.py` of a folder: a row per run directory (its capture file not listed
    again) and per capture file outside one, each with its decode ratio and memory goal."""
    runs = REPO / "sample_traces" / "gpu-h100" / "scan-h100"  # (run directories alone)
    want = sorted(str(r.parent) for r in runs.rglob("run.json"))
    files = sorted(str(f) for f in (REPO / "sample_traces" / "rocm").rglob("*.xplane.pb"))
    assert len(want) >= 2 and len(files) == 2
    r = subprocess.run([sys.executable, str(REPO / "benchmarks" / "real_captures.py"),
                        "--rounds", "1", str(runs), str(REPO / "sample_traces" / "rocm")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    rows = [line.split(" | ") for line in r.stdout.splitlines()[2:]]
    assert [row[0].lstrip("| ") for row in rows] == want + files
    for row in rows:
        assert row[4].endswith("x") and float(row[6]) >= 40 and row[7] in ("yes |", "no |")
