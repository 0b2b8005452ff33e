"""CLI inputs from the fuzz campaign (issue 11) and baselines (issue 12): one line, right code."""

from __future__ import annotations

import json
import shutil

import pytest

from overlap.runs.rundir import load_manifest
from tests.conftest import SAMPLE_TRACES, run_cli

RUN = SAMPLE_TRACES / "cpu-scan" / "offload_x"
BASE = SAMPLE_TRACES / "cpu-scan" / "nothing_saveable"


@pytest.mark.parametrize("target", ["missing-dir/x.html", ".", "/dev/full"])
def test_html_to_an_unwritable_place_is_a_usage_error(tmp_path, target):
    t = target if target.startswith("/") else str(tmp_path / target)
    r = run_cli("report", str(RUN), "--html", t)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_nested_json_baseline_is_bad_input(tmp_path):
    p = tmp_path / "deep.json"
    p.write_text("[" * 100000)
    r = run_cli("check", str(RUN), "--baseline", str(p), "--allow-no-transfers")
    assert r.returncode == 3 and "nested too deeply" in r.stderr


def test_check_accepts_a_run_or_capture_as_baseline():
    for b in (BASE, next(BASE.rglob("*.xplane.pb"))):
        r = run_cli("check", str(RUN), "--baseline", str(b), "--allow-no-transfers")
        assert r.returncode == 0, r.stderr
        assert "Traceback" not in r.stderr and "codec" not in r.stderr


@pytest.mark.parametrize("edit", [
    {"policy": "offload:x"}, {"offload_inventory": [1, 2]}, {"step_ns": ["a", 10**30]},
    {"label": [1]}, {"memory_analysis": {"temp_size_in_bytes": "big"}},
    {"heap_simulator": [3]}, {"backend": 5}])
def test_run_json_of_wrong_types_is_read_defensively(tmp_path, edit):
    run = tmp_path / "r"
    shutil.copytree(RUN, run)
    m = json.loads((run / "run.json").read_text())
    m.update(edit)
    (run / "run.json").write_text(json.dumps(m))
    n = load_manifest(run)
    assert isinstance(n["policy"], (dict, type(None)))
    assert isinstance(n["step_ns"], (list, type(None)))
    for cmd in (("report", str(run)), ("compare", str(run), str(BASE))):
        r = run_cli(*cmd)
        assert r.returncode == 0, (cmd, r.stderr)
        assert "Traceback" not in r.stderr
