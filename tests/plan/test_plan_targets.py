"""Plan mode where it used to break: the `params` workload on h100 and v5e, two TPU plans at
once (libtpu's lockfile), the demo keeping finished plans when a later one fails, and the
newer targets (tpu7x, b300) against the real compilers."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")

from overlap.plan.compile import Plan, plan_workload, target_devices  # noqa: E402
from overlap.plan.targets import get_target  # noqa: E402
from tests.conftest import REPO  # noqa: E402

LAYER_BYTES = 256 * 256 * 4


@pytest.mark.parametrize("target", ["h100", "v5e"])
def test_params_workload_compiles_without_cpu_notes(target):
    (p,) = plan_workload("params", ["full"], target)
    assert p.status == "ok", p.error
    m = p.manifest
    notes = " ".join(m["notes"] + m["workload"]["notes"])
    assert "XLA:CPU" not in notes
    # The state lives in host memory: the compiler sees host arguments and copies it back.
    assert m["memory_analysis"]["host_argument_size_in_bytes"] > 0
    assert m["offload_inventory"]["D2H"]["executed_bytes"] > 0
    if target == "v5e":  # XLA:TPU also plans the copy in (XLA:GPU reads host args in place)
        assert m["offload_inventory"]["H2D"]["executed_bytes"] > 0


def test_two_tpu_plans_at_once(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "ALLOW_MULTIPLE_LIBTPU_LOAD"}
    env.setdefault("PYTHONPATH", str(REPO))
    procs = [subprocess.Popen(
        [sys.executable, "-m", "overlap", "plan", "--target", "v5e", "--workload", "scan",
         "--policy", "offload:x", "--out", str(tmp_path / f"out{i}")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
        for i in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (_out, err) in zip(procs, outs):
        assert p.returncode == 0, err
        assert "lockfile" not in err
    for i in range(2):
        assert (tmp_path / f"out{i}" / "v5e-scan-offload_x" / "run.json").is_file()


def test_demo_keeps_the_plans_compiled_before_a_failure(monkeypatch, capsys, tmp_path):
    from overlap.cli import demo
    from overlap.errors import UsageError
    from overlap.plan import compile as plan_compile

    def fake(workload, policies, target, out=None):
        if target.name == "v5e":
            raise UsageError("v5e: no compile-only device (simulated)")
        (pol,) = policies
        m = {"kind": "plan", "status": "compile_error", "error": "simulated",
             "target": {"name": target.name}, "policy": {"name": pol}}
        return [Plan(pol, target.name, "compile_error", m, error="simulated")]

    monkeypatch.setattr(plan_compile, "plan_workload", fake)
    demo._plans(tmp_path)
    out = capsys.readouterr().out
    assert "h100 scan: compiled 2 of 2 policies" in out
    assert "v5e scan offload:x: skipped (v5e: no compile-only device (simulated))" in out
    assert "v5e scan: compiled 0 of 2 policies" in out
    assert out.count("COMPILE ERROR") == 4  # the four h100 plans are still shown


def test_tpu7x_compiles_deviceless_with_its_device_kind():
    tgt = get_target("tpu7x")
    assert target_devices(tgt)[0].device_kind == "TPU7x"
    (p,) = plan_workload("scan", ["offload:x"], tgt)
    assert p.status == "ok", p.error
    assert p.manifest["offload_inventory"]["D2H"]["executed_bytes"] == 10 * LAYER_BYTES


def test_b300_compiles_with_xla_gpu():
    (p,) = plan_workload("scan", ["offload:x"], "b300")
    assert p.status == "ok", p.error
    assert p.manifest["offload_inventory"]["D2H"]["executed_bytes"] == 10 * LAYER_BYTES
    assert "B300" in p.manifest["target"]["device"]
