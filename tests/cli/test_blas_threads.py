"""The reading commands load numpy's OpenBLAS with one thread unless the user chose a thread
count (issue 32: its thread pool's start was a quarter of a small report's CPU time); the
commands that run user code (capture, plan, ...) are left alone."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import SAMPLE_TRACES

_RUN = """
import atexit, os, runpy, sys
atexit.register(lambda: sys.stderr.write(
    '\\nBLAS ' + repr([os.environ.get(k) for k in
                      ('OPENBLAS_NUM_THREADS', 'GOTO_NUM_THREADS', 'OMP_NUM_THREADS')]) + '\\n'))
sys.argv = ['overlap'] + {args!r}
runpy.run_module('overlap', run_name='__main__')
"""


def _blas(args: list[str], env: dict[str, str]) -> tuple[int, list]:
    base = {k: v for k, v in os.environ.items()
            if k not in ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")}
    p = subprocess.run([sys.executable, "-c", _RUN.format(args=args)], capture_output=True,
                       text=True, env={**base, **env})
    line = [x for x in p.stderr.splitlines() if x.startswith("BLAS ")]
    assert line, p.stderr[-2000:]
    return p.returncode, eval(line[-1][5:])  # noqa: S307 - our own repr of a list


def _capture() -> str:
    return str(next((SAMPLE_TRACES / "cpu-scan" / "offload_x").rglob("*.xplane.pb")))


def test_report_loads_one_blas_thread():
    code, got = _blas(["report", "--json", _capture()], {})
    assert code == 0 and got == ["1", None, None]


@pytest.mark.parametrize("var", ["OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS"])
def test_a_users_choice_stands(var):
    code, got = _blas(["report", "--json", _capture()], {var: "3"})
    want = {"OPENBLAS_NUM_THREADS": ["3", None, None], "GOTO_NUM_THREADS": [None, "3", None],
            "OMP_NUM_THREADS": [None, None, "3"]}[var]
    assert code == 0 and got == want


def test_other_commands_are_left_alone():
    code, got = _blas(["completion", "bash"], {})
    assert got == [None, None, None]
