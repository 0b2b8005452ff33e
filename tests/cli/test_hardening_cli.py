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


# ---------------------------------------------------------------------------------------------
# Second round (issue 25): every repro is one line and its documented exit code, never 4 and
# never a hang (each command runs under a timeout).

def _one_line(r, code: int) -> str:
    err = r.stderr.strip().splitlines()
    assert r.returncode == code, (r.returncode, r.stderr)
    assert len(err) == 1 and "Traceback" not in r.stderr and "internal error" not in r.stderr, \
        r.stderr
    return err[0]


def test_bytes_stats_in_every_renderer(tmp_path):
    from overlap.trace.protos import XSpace
    from tests.trace.test_hardening import TEXT_STATS, _gpu, set_stat_type

    def edit(xs):
        set_stat_type(xs, TEXT_STATS, "bytes")
    cap = str(_gpu(tmp_path, edit))
    assert any(st.WhichOneof("value") == "bytes_value" for pl in XSpace.FromString(
        open(cap, "rb").read()).planes for st in pl.stats)
    r = run_cli("inspect", "--json", cap, timeout=60)
    info = json.loads(r.stdout)
    assert r.returncode == 0 and info["hosts"][0]["jax_version"].endswith("\\xff")
    assert run_cli("inspect", cap, timeout=60).returncode == 0
    r = run_cli("report", "--json", cap, "--html", str(tmp_path / "r.html"), timeout=60)
    assert r.returncode == 0 and json.loads(r.stdout)["summary"]["transfers"] == 1, r.stderr
    assert (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")
    r = run_cli("check", cap, "--junit", str(tmp_path / "j.xml"), "--json-out",
                str(tmp_path / "c.json"), timeout=60)
    assert r.returncode in (0, 1) and "Traceback" not in r.stderr, r.stderr
    json.loads((tmp_path / "c.json").read_text())
    import xml.etree.ElementTree as ET

    ET.parse(tmp_path / "j.xml")


@pytest.mark.parametrize("cmd,jobs", [("report", []), ("check", []), ("inspect", []),
                                      ("report", ["--jobs", "2"]), ("check", ["--jobs", "2"])])
def test_pod_with_a_damaged_host_reports_the_others_and_exits_3(tmp_path, cmd, jobs):
    from tests.trace.test_hardening import pod

    root = pod(tmp_path / "pod")
    # default --jobs: read here (small host files); --jobs 2: in worker processes
    r = run_cli(cmd, str(root), *jobs, timeout=120)
    line = _one_line(r, 3)
    assert "host-1.xplane.pb" in line and "corrupt" in line and "2 readable host file" in line
    assert "BrokenProcessPool" not in r.stderr
    if cmd == "inspect":
        assert "host host-0" in r.stdout and "host host-2" in r.stdout
    else:  # the readable hosts' results, with the damaged file named beside the verdict
        assert "2 transfers" in r.stdout or "2 transfer(s)" in r.stdout, r.stdout
        assert "1 of 3 host file(s) unreadable" in r.stdout
    r = run_cli(cmd, str(root), "--json", *jobs, timeout=120)
    assert r.returncode == 3
    doc = json.loads(r.stdout)
    doc = doc.get("analysis", doc)
    assert [u["path"].rsplit("/", 1)[-1] for u in doc["unreadable_hosts"]] == ["host-1.xplane.pb"]


def test_compare_of_a_named_pod_with_a_damaged_host_exits_3_after_its_table(tmp_path):
    """As report/check/inspect: the comparison of the readable hosts, then one line naming the
    damaged file, exit 3 (it exited 0 with a note; fuzz round 3, minor)."""
    from tests.trace.test_hardening import pod

    root = pod(tmp_path / "pod")
    r = run_cli("compare", str(root), timeout=120)
    line = _one_line(r, 3)
    assert "host-1.xplane.pb" in line and "covers the readable host files" in line
    assert "host file(s) unreadable" in r.stdout  # the table and its note came first
    r = run_cli("compare", "--json", str(root), timeout=120)
    assert r.returncode == 3
    doc = json.loads(r.stdout)
    assert [u["path"].rsplit("/", 1)[-1] for u in doc["named_unreadable"]] == ["host-1.xplane.pb"]


def _fifo_run(tmp_path):
    import os

    run = tmp_path / "runs" / "r"
    shutil.copytree(RUN, run)
    (run / "run.json").unlink()
    os.mkfifo(run / "run.json")
    shutil.copytree(BASE, tmp_path / "runs" / "base")
    return run


def test_side_files_that_are_not_regular_files_never_hang(tmp_path):
    import os

    run = _fifo_run(tmp_path)
    for cmd in (("report", str(run)), ("check", str(run)), ("compare", str(run))):
        line = _one_line(run_cli(*cmd, timeout=60), 3)
        assert "run.json" in line and "not a regular file" in line
    r = run_cli("compare", str(tmp_path / "runs"), timeout=60)  # found, not named: a note
    assert r.returncode == 0 and "left out r:" in r.stdout and "run.json" in r.stdout
    fifo = tmp_path / "baseline.json"
    os.mkfifo(fifo)
    for b in (str(fifo), "/dev/zero", str(tmp_path)):
        line = _one_line(run_cli("check", str(BASE), "--baseline", b, "--allow-no-transfers",
                                 timeout=60), 3)
        assert b in line
    line = _one_line(run_cli("report", str(BASE), "--html", str(tmp_path / "x.html"),
                             "--baseline", str(fifo), timeout=60), 3)
    assert "not a regular file" in line


def test_a_damaged_run_json_is_named_in_every_view(tmp_path):
    run = tmp_path / "runs" / "r"
    shutil.copytree(RUN, run)
    (run / "run.json").write_text("{")
    for cmd in (("report", str(run)), ("check", str(run)), ("compare", str(run))):
        line = _one_line(run_cli(*cmd, timeout=60), 3)
        assert str(run / "run.json") in line and "not JSON" in line
    shutil.copytree(BASE, tmp_path / "runs" / "base")
    r = run_cli("compare", str(tmp_path / "runs"), timeout=60)
    assert r.returncode == 0 and "left out r:" in r.stdout and "run.json" in r.stdout


def test_runs_with_the_same_label_are_told_apart_in_compare(tmp_path):
    for sweep in ("a", "b"):
        shutil.copytree(RUN, tmp_path / sweep / "offload_x")
    r = run_cli("compare", "--json", str(tmp_path / "a" / "offload_x"),
                str(tmp_path / "b" / "offload_x"), timeout=60)
    labels = [row["label"] for row in json.loads(r.stdout)["runs"]]
    assert r.returncode == 0 and len(set(labels)) == 2, labels
    assert labels == ["offload_x (a/offload_x)", "offload_x (b/offload_x)"]


def test_dropped_events_are_in_every_output(tmp_path):
    from tests.trace.test_hardening import _drop

    cap = str(_drop(tmp_path, "kernels"))
    r = run_cli("report", cap, timeout=60)
    assert r.returncode == 0 and "1 invalid event(s) dropped" in r.stdout
    assert "note: 1 event(s) dropped as invalid (negative offset or duration: 1)" in r.stdout
    r = run_cli("report", "--json", cap, timeout=60)
    assert json.loads(r.stdout)["dropped_events"]["count"] == 1
    r = run_cli("check", cap, "--json", timeout=60)
    assert json.loads(r.stdout)["analysis"]["dropped_events"]["count"] == 1
    r = run_cli("inspect", cap, timeout=60)
    assert "1 event(s) dropped as invalid" in r.stdout


@pytest.mark.parametrize("address", ["garbage", "http://127.0.0.1:8786", "tcp://[::1", ""])
def test_bad_scheduler_is_a_usage_error(address):
    line = _one_line(run_cli("report", str(RUN), "--scheduler", address, timeout=60), 2)
    assert "--scheduler" in line


def test_a_scheduler_address_that_never_answers_is_bounded(tmp_path):
    import http.server
    import threading
    import time

    pytest.importorskip("dask.distributed")
    srv = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        t0 = time.monotonic()
        line = _one_line(run_cli("report", str(RUN), "--scheduler",
                                 f"tcp://127.0.0.1:{srv.server_address[1]}", timeout=90), 2)
        assert time.monotonic() - t0 < 60 and "Dask scheduler" in line
    finally:
        srv.shutdown()


@pytest.mark.parametrize("args,needle", [
    (("--host-bandwidth", "1e-300"), "--host-bandwidth"),
    (("--host-bandwidth", "nan"), "--host-bandwidth"),
    (("--workload", "../x:f"), "not a path"),
    (("--workload", "/tmp/x:f"), "not a path")])
def test_plan_inputs_are_usage_errors(tmp_path, args, needle):
    line = _one_line(run_cli("plan", "--target", "h100", "--out", str(tmp_path), *args,
                             timeout=120), 2)
    assert needle in line or "pip install" in line  # without the [plan] extra: exit 2 as well


@pytest.mark.parametrize("value", ["1e-300", "nan", "-1", "1e9"])
def test_host_bandwidth_means_the_same_in_every_command(tmp_path, capsys, value):
    """plan, advise and report --predict share one rule (overlap/cli/options.py), checked
    before any compile or read."""
    from overlap.cli.main import main as cli_main

    capture = str(SAMPLE_TRACES / "tpu-v6e-offload")
    for argv in (["plan", "--target", "h100", "--out", str(tmp_path)],
                 ["advise", "--target", "h100", "--workload", "scan", "--out", str(tmp_path)],
                 ["report", capture, "--predict"]):
        assert cli_main([*argv, "--host-bandwidth", value]) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and ("--host-bandwidth must be a number of GB/s between 0.01 "
                                  "and 100000" in err[0] or "pip install" in err[0]), (argv, err)


def test_plan_into_an_existing_run_refuses_before_compiling(tmp_path):
    import time

    pytest.importorskip("jax")
    (tmp_path / "h100-scan-nothing_saveable").mkdir()
    t0 = time.monotonic()
    line = _one_line(run_cli("plan", "--target", "h100", "--out", str(tmp_path), timeout=120), 2)
    if "pip install" in line:
        pytest.skip("the [plan] extra is not installed")
    assert "exists already" in line and "--label" not in line and "--out" in line
    assert time.monotonic() - t0 < 30  # no compile ran (one takes ~10 s)
    assert not list(tmp_path.glob("h100-scan-offload*"))


def test_compare_refuses_an_empty_path():
    line = _one_line(run_cli("compare", "", timeout=60), 3)
    assert "empty path" in line


@pytest.mark.parametrize("args", [("--junit", "missing-dir/j.xml"), ("--json-out", "/dev/full"),
                                  ("--junit", ".")])
def test_unwritable_check_outputs_exit_2_like_report_html(tmp_path, args):
    flag, target = args
    t = target if target.startswith("/") else str(tmp_path / target)
    line = _one_line(run_cli("check", str(RUN), "--allow-no-transfers", flag, t, timeout=60), 2)
    assert "cannot write" in line


@pytest.mark.parametrize("value", ["-5", "0", "abc"])
def test_capture_duration_must_be_positive(value):
    r = run_cli("capture", "--attach", "localhost:1", "--duration-ms", value, "--out", "x",
                timeout=60)
    assert r.returncode == 2 and "--duration-ms" in r.stderr


def test_a_pod_baseline_or_compared_run_read_in_part_is_named(tmp_path):
    from tests.trace.test_hardening import pod

    root = pod(tmp_path / "runs" / "pod")
    line = _one_line(run_cli("check", str(RUN), "--allow-no-transfers", "--baseline", str(root),
                             timeout=120), 3)
    assert "host-1.xplane.pb" in line and "baseline must be read whole" in line
    shutil.copytree(BASE, tmp_path / "runs" / "base")
    r = run_cli("compare", str(tmp_path / "runs"), timeout=120)
    assert r.returncode == 0, r.stderr
    assert "note: pod: 1 host file(s) unreadable" in r.stdout and "host-1.xplane.pb" in r.stdout
