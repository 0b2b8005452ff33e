"""`overlap check`'s opt-in gates (`cli.check._run_gates`): with none asked for (no
`--no-host-compute`, no `--same-answer-as`) the outcome is what `run_gates.add_checks` of no
check gives (the same object), and `overlap.report.run_gates` is never imported; with one
asked for, its check is added as before."""

from __future__ import annotations

import subprocess
import sys
from argparse import Namespace

from overlap.cli import check
from overlap.report import run_gates


def _outcome() -> dict:
    return {"checks": [{"name": "min_overlap", "status": "pass", "passed": True}],
            "failed": [], "passed": True, "verdict": "PASS: 1 transfer"}


def test_no_gate_is_add_checks_of_nothing():
    o = _outcome()
    args = Namespace(no_host_compute=False, path="x.xplane.pb", same_answer_as=None,
                     max_grad_diff=None)
    got = check._run_gates(args, None, {}, o, None)
    assert got is o and got == run_gates.add_checks(_outcome(), [])


def test_a_gate_asked_for_still_runs():
    args = Namespace(no_host_compute=False, path="/nonexistent/x.xplane.pb",
                     same_answer_as="/nonexistent/run", max_grad_diff=None)
    got = check._run_gates(args, None, {}, _outcome(), {})
    assert got["failed"] == ["same_answer"] and got["passed"] is False
    assert got["verdict"].startswith("FAIL (same_answer): ")
    args = Namespace(no_host_compute=True, path="x.xplane.pb", same_answer_as=None,
                     max_grad_diff=None)
    result = {"backend": "gpu", "host": {"host_compute": {"count": None, "source": None}}}
    got = check._run_gates(args, None, result, _outcome(), None)
    assert got["failed"] == ["host_compute"] and got["passed"] is False


def test_check_without_gates_never_imports_run_gates(tmp_path):
    from overlap.trace.synthetic import gpu_offload_scenario

    # synthetic: copies known by construction, all hidden (the default gates pass)
    cap = gpu_offload_scenario(steps=2, layers=2).write(tmp_path / "synthetic.xplane.pb")
    code = ("import sys; from overlap.cli.main import main; rc = main(['check', %r]); "
            "print(rc, 'overlap.report.run_gates' in sys.modules)" % str(cap))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.stdout.strip().splitlines()[-1].split() == ["0", "False"], r.stdout + r.stderr
