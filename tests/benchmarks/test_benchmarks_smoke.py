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
    # (a real capture repeated: twice; each repetition is its size)
    specs = [f"{k}:{2 if k.endswith('repeat') else 1000 + i}"
             for i, k in enumerate(sorted(SHAPES))]
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



def test_bench_process_expands_a_folder_into_runs_and_files():
    """`bench_process.py --files FOLDER`: a row per run directory (its capture file not listed
    again) and per capture file outside one; a file or run directory given is itself."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import bench_process

    runs = REPO / "sample_traces" / "gpu-h100" / "scan-h100"  # (run directories alone)
    want = sorted(r.parent for r in runs.rglob("run.json"))
    files = sorted((REPO / "sample_traces" / "rocm").rglob("*.xplane.pb"))
    assert len(want) >= 2 and len(files) == 2
    assert bench_process.inputs([str(runs), str(REPO / "sample_traces" / "rocm")]) == \
        want + files
    mixed = REPO / "sample_traces" / "gpu-h100"  # (run directories and loose captures)
    got = bench_process.inputs([str(mixed)])
    dirs = sorted(r.parent for r in mixed.rglob("run.json"))
    loose = got[len(dirs):]
    assert got[:len(dirs)] == dirs and loose and all(q.is_file() for q in loose)
    assert not any(d in q.parents for q in loose for d in dirs)
    assert bench_process.inputs([str(files[0]), str(want[0])]) == [files[0], want[0]]


def test_bench_process_times_another_command(capsys):
    """`bench_process.py --command 'inspect --json'`: that command, not `report --json`, is
    what the report columns time (one round on the smallest real capture)."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import bench_process

    f = sorted((REPO / "sample_traces" / "rocm").rglob("*.xplane.pb"))[-1]
    cmd = bench_process.commands(str(f), False, None, ("inspect", "--json"))["report"][0]
    assert "['overlap', *['inspect', '--json'], " in cmd[-1]
    assert bench_process.main(["--files", str(f), "--rounds", "1", "--no-upb",
                               "--command", "inspect --json"]) == 0
    out = capsys.readouterr().out
    assert "`report` = `overlap inspect --json INPUT`" in out
    row = [line for line in out.splitlines() if line.startswith(f"| {bench_process.label(f)} |")]
    assert row and "MiB" in row[0]
