"""Read-only commands end their process without the interpreter's teardown
(`overlap.cli.main.run`): what a normal exit does must still happen: every byte of output,
the exit code, atexit hooks (a caller's, coverage's)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from overlap.cli import main as cli_main

REPO = Path(__file__).resolve().parents[2]
TRACE = (REPO / "sample_traces/cpu-transformer-tiny/everything_saveable/plugins/profile/"
         "2026_11_22_05_50_38/vm.xplane.pb")

# `python -m overlap ARGS` under an atexit hook of the caller's, as benchmarks and coverage
# install them
HOOKED = ("import atexit, sys, runpy\n"
          "atexit.register(lambda: sys.stderr.write('HOOK RAN\\n'))\n"
          "sys.argv = ['overlap'] + sys.argv[1:]\n"
          "runpy.run_module('overlap', run_name='__main__')\n")


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", HOOKED, *args], capture_output=True,
                          text=True, cwd=REPO, timeout=300)


@pytest.mark.skipif(not TRACE.exists(), reason="sample trace not present")
def test_report_output_exit_code_and_hooks() -> None:
    p = _run("report", "--json", str(TRACE.relative_to(REPO)))
    assert p.returncode == 0, p.stderr
    assert p.stderr.endswith("HOOK RAN\n")
    buf = io.StringIO()
    with redirect_stdout(buf):  # the same command in this process, ended normally
        assert cli_main.main(["report", "--json", str(TRACE.relative_to(REPO))]) == 0
    assert p.stdout == buf.getvalue()
    assert cli_main._EXIT_KEEP is None  # in-process: nothing kept past the call
    assert json.loads(p.stdout)["status"]


def test_failure_exit_code_and_message_kept(tmp_path: Path) -> None:
    p = _run("report", str(tmp_path / "missing.xplane.pb"))
    assert p.returncode == 3
    assert "no such file" in p.stderr and p.stderr.endswith("HOOK RAN\n")


def test_other_commands_exit_normally() -> None:
    assert "report" in cli_main.QUICK_EXIT_COMMANDS
    for name in cli_main.JAX_COMMANDS + ("dashboard",):
        assert name not in cli_main.QUICK_EXIT_COMMANDS
    p = _run("completion", "bash")
    assert p.returncode in (0, 2)  # 2: shtab not installed (an optional extra)
    assert p.stderr.endswith("HOOK RAN\n")


@pytest.mark.skipif(not TRACE.exists(), reason="sample trace not present")
def test_a_profiler_still_writes_its_results(tmp_path: Path) -> None:
    """`python -m cProfile -o F -m overlap report ...` writes F after `run` returns: under a
    profiler the process ends normally (os._exit would lose the profile)."""
    out = tmp_path / "report.prof"
    p = subprocess.run([sys.executable, "-m", "cProfile", "-o", str(out), "-m", "overlap",
                        "report", "--json", str(TRACE.relative_to(REPO))],
                       capture_output=True, text=True, cwd=REPO, timeout=300)
    assert p.returncode == 0, p.stderr
    assert out.stat().st_size > 0


def test_report_runs_without_the_cyclic_collector() -> None:
    """`report`/`check` (one capture, then the process ends) run with the cyclic collector
    off (`run`); the other commands, and options that load plotly or jax, keep it."""
    assert set(cli_main.NO_COLLECTOR_COMMANDS) <= set(cli_main.QUICK_EXIT_COMMANDS)
    hook = HOOKED.replace("'HOOK RAN\\n'", "'GC %s\\n' % __import__('gc').isenabled()")
    for args, want in ((["completion", "bash"], "GC True"),
                       (["report", str(TRACE.relative_to(REPO))], "GC False"),
                       (["report", "--predict", "--target", "x", "missing.xplane.pb"],
                        "GC True")):
        p = subprocess.run([sys.executable, "-c", hook, *args], capture_output=True,
                           text=True, cwd=REPO, timeout=300)
        assert p.stderr.endswith(want + "\n"), p.stderr[-500:]
