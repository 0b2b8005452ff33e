"""Run directories: labels are names, killed captures are cleaned, one bad run does not sink a
comparison (issue 11)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from overlap.errors import UsageError
from overlap.runs import rundir
from tests.conftest import SAMPLE_TRACES, run_cli


@pytest.mark.parametrize("label", ["../../escape", "a/b", "..", ".hidden", "", "x.partial-1"])
def test_a_label_is_a_name_never_a_path(label):
    with pytest.raises(UsageError):
        rundir.check_label(label)
    assert rundir.check_label("offload_x") == "offload_x"


def test_cli_refuses_an_escaping_label(tmp_path):
    r = run_cli("capture", "--workload", "scan", "--policy", "full", "--label", "../escape",
                "--out", str(tmp_path / "runs"))
    assert r.returncode == 2 and "plain name" in r.stderr
    assert not (tmp_path / "escape").exists()


def test_stale_partials_of_dead_processes_are_cleaned(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    stale = tmp_path / f"run.partial-{dead}-deadbeef"
    live = tmp_path / f"other.partial-{os.getppid()}-cafebabe"
    foreign = tmp_path / "user.partial-notours"
    for d in (stale, live, foreign):
        d.mkdir()
    fresh = rundir.partial_dir_for(tmp_path / "new")
    assert not stale.exists() and live.exists() and foreign.exists()
    assert fresh.name.startswith(f"new.partial-{os.getpid()}-")


def test_output_under_a_file_is_a_usage_error(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(UsageError, match="cannot create a run directory"):
        rundir.partial_dir_for(f / "run")


def test_compare_leaves_out_a_broken_run_with_a_note(tmp_path):
    for name in ("offload_x", "nothing_saveable"):
        shutil.copytree(SAMPLE_TRACES / "cpu-scan" / name, tmp_path / name)
    next((tmp_path / "offload_x").rglob("*.xplane.pb")).write_bytes(b"")
    r = run_cli("compare", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "nothing_saveable" in r.stdout and "note: left out offload_x" in r.stdout
    r = run_cli("compare", str(tmp_path / "offload_x"))  # named explicitly: it must read
    assert r.returncode == 3 and len(r.stderr.strip().splitlines()) == 1


# Second round (issue 25)

@pytest.mark.parametrize("label", ["a\nb", "x\x1b[31mred", "tab\there", "nul\x00", "bell\x07"])
def test_a_label_refuses_control_characters(label):
    with pytest.raises(UsageError, match="control characters"):
        rundir.check_label(label)
    assert rundir.check_label("offload_x-ünï") == "offload_x-ünï"


def test_cli_refuses_a_label_with_a_newline(tmp_path):
    r = run_cli("capture", "--workload", "scan", "--policy", "full", "--label", "a\nb",
                "--out", str(tmp_path / "runs"), timeout=120)
    assert r.returncode == 2 and "control characters" in r.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_a_foreign_label_with_control_characters_is_not_shown(tmp_path):
    import json

    run = tmp_path / "r"
    shutil.copytree(SAMPLE_TRACES / "cpu-scan" / "offload_x", run)
    m = json.loads((run / "run.json").read_text())
    m["label"] = "fake\nPASS: all good"
    (run / "run.json").write_text(json.dumps(m))
    assert rundir.load_manifest(run)["label"] is None


@pytest.mark.parametrize("content", ["{", "[1, 2]", "\xff", "[" * 100000])
def test_a_damaged_run_json_is_named_and_its_run_still_found(tmp_path, content):
    from overlap.errors import InputError

    run = tmp_path / "logs" / "r"
    shutil.copytree(SAMPLE_TRACES / "cpu-scan" / "offload_x", run)
    (run / "run.json").write_bytes(content.encode("latin-1"))
    with pytest.raises(InputError, match="run.json") as e:
        rundir.load_manifest(run)
    assert "\n" not in str(e.value)
    assert not rundir.is_complete(run) and rundir.find_runs(tmp_path / "logs") == [run]
    (run / "run.json").write_text('{"tool": "someone else"}')  # another tool's JSON: not ours
    assert rundir.load_manifest(run) is None


def test_compare_tells_apart_runs_of_one_label(tmp_path):
    from overlap.analysis.compare import compare_dirs

    for sweep in ("x/a", "y/a"):
        shutil.copytree(SAMPLE_TRACES / "cpu-scan" / "offload_x", tmp_path / sweep / "offload_x")
    res = compare_dirs([tmp_path])
    assert sorted(r["label"] for r in res["runs"]) == [
        "offload_x (x/a/offload_x)", "offload_x (y/a/offload_x)"]
