"""Bad input: one line on stderr naming the file and the problem, exit 3, never a traceback."""

from __future__ import annotations

import pytest

from overlap.trace.synthetic import SyntheticTrace, gpu_offload_scenario
from tests.conftest import run_cli


def _assert_one_line_error(r, path_fragment: str, problem: str, code: int = 3):
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    err = r.stderr.strip()
    assert "Traceback" not in r.stderr
    assert len(err.splitlines()) == 1, err
    assert path_fragment in err and problem in err, err


def test_missing_path(tmp_path):
    r = run_cli("inspect", str(tmp_path / "nope.xplane.pb"))
    _assert_one_line_error(r, "nope.xplane.pb", "no such")


def test_empty_file(tmp_path):
    f = tmp_path / "empty.xplane.pb"
    f.write_bytes(b"")
    _assert_one_line_error(run_cli("inspect", str(f)), "empty.xplane.pb", "empty")


def test_truncated_file(tmp_path):
    data = gpu_offload_scenario(steps=1, layers=2).to_bytes()
    f = tmp_path / "cut.xplane.pb"
    f.write_bytes(data[: len(data) // 2])
    _assert_one_line_error(run_cli("inspect", str(f)), "cut.xplane.pb", "truncated or corrupt")


@pytest.mark.parametrize("payload", [b"\xff" * 64, b"hello, this is not a protobuf\n",
                                     b"\x0a\x02\x10\x01"])
def test_corrupt_or_foreign_file(tmp_path, payload):
    f = tmp_path / "junk.xplane.pb"
    f.write_bytes(payload)
    r = run_cli("inspect", str(f))
    assert r.returncode == 3 and "junk.xplane.pb" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_directory_without_captures(tmp_path):
    r = run_cli("inspect", str(tmp_path))
    assert r.returncode == 3 and str(tmp_path) in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_usage_error_exits_2():
    r = run_cli("inspect")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    r = run_cli("no-such-command")
    assert r.returncode == 2


def test_inspect_text_and_json(tmp_path):
    import json

    f = gpu_offload_scenario(steps=2, layers=3).write(tmp_path / "gpu.xplane.pb")
    r = run_cli("inspect", str(f))
    assert r.returncode == 0, r.stderr
    assert "SYNTHETIC" in r.stdout and "backend: gpu" in r.stdout
    r = run_cli("inspect", str(f), "--json")
    info = json.loads(r.stdout)
    assert info["synthetic"] is True and info["backend"] == "gpu"
    dev = info["devices"][0]
    # 2 steps x 3 layers, one D2H and one H2D per layer, 8 MiB each (the scenario's default)
    assert dev["D2H"] == {"count": 2 * 3, "bytes": 2 * 3 * (8 << 20), "unknown_bytes": 0}
    assert dev["H2D"] == {"count": 2 * 3, "bytes": 2 * 3 * (8 << 20), "unknown_bytes": 0}
    assert dev["compute_ops"] == 2 * 3 * 2
    assert info["steps"] == 2
    assert info["vendors"] == ["NVIDIA"] and dev["vendor"] == "NVIDIA"
    assert info["transfer_status"] == {"status": "complete", "unknown": []}


def test_inspect_cpu_capture_reports_no_transfers_plainly(cpu_capture):
    r = run_cli("inspect", str(cpu_capture))
    assert r.returncode == 0, r.stderr
    assert "backend: cpu" in r.stdout and "XLA:CPU compiles host offload away" in r.stdout


def test_python_m_and_console_script_agree(tmp_path):
    import shutil
    import subprocess

    f = SyntheticTrace().write(tmp_path / "t.xplane.pb")
    exe = shutil.which("overlap")
    if exe is None:
        pytest.skip("console script not installed in this environment")
    a = subprocess.run([exe, "inspect", str(f), "--json"], capture_output=True, text=True)
    b = run_cli("inspect", str(f), "--json")
    assert a.returncode == b.returncode == 0 and a.stdout == b.stdout


def test_installed_package_imports_outside_the_checkout(tmp_path):
    """`overlap dashboard` imports the top-level `dashboard` package: it must be installed too."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run([sys.executable, "-c",
                        "import overlap, overlap.dashboard.app, overlap.cli.main"],
                       cwd=tmp_path, env=env, capture_output=True, text=True)
    if r.returncode and "No module named 'overlap'" in r.stderr:
        pytest.skip("overlap is not installed in this interpreter (running from a checkout)")
    assert r.returncode == 0, r.stderr
