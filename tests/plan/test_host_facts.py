"""Host compute and the pinned host peak in `plan --json`, `report --json` and `check` (issue 33
items 3, 4), against the real XLA:GPU compiler (deviceless H100 compile) and real captures."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")

from tests.conftest import REPO, run_cli  # noqa: E402

# The tutorial scan under offload:x keeps one 256x256 f32 residual per layer, 10 layers, in
# pinned host memory at once (the backward pass reads them in reverse): 2,621,440 B.
SCAN_PINNED = 10 * 256 * 256 * 4


def _plan(tmp_path: Path, workload: str, policy: str, env: dict | None = None) -> dict:
    r = run_cli("plan", "--target", "h100", "--workload", workload, "--policy", policy,
                "--out", str(tmp_path), "--json", env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    (plan,) = json.loads(r.stdout)
    return plan


@pytest.fixture(scope="module")
def plans(tmp_path_factory):
    out = tmp_path_factory.mktemp("hostplans")
    return out, {"scan": _plan(out / "a", "scan", "offload:x"),
                 "host": _plan(out / "b", "tests.plan.host_compute_workload:make", "full"),
                 "capped": _plan(out / "c", "scan", "offload:x",
                                 env={"XLA_PJRT_GPU_HOST_MEMORY_LIMIT_GB": "0.001"})}


def test_plan_json_lists_host_compute_and_the_pinned_peak(plans):
    _, p = plans
    scan = p["scan"]["host"]
    assert scan["host_compute"]["count"] == 0
    ph = scan["pinned_host"]
    assert ph["peak_bytes"] == SCAN_PINNED and ph["cap_bytes"] == 64 << 30
    assert "unset in the planning process's environment" in ph["cap_source"]
    assert ph["fraction_of_cap"] == pytest.approx(SCAN_PINNED / (64 << 30))
    host = p["host"]["host"]["host_compute"]
    assert host["count"] == 1
    (op,) = host["ops"]
    assert op["opcode"] == "custom-call-start" and "runs called_computation on the host" in \
        op["why"]
    capped = p["capped"]["host"]["pinned_host"]
    assert capped["cap_bytes"] == int(0.001 * (1 << 30)) and capped["over_cap"] is True


def test_check_fails_a_plan_on_host_compute_and_over_the_cap(plans):
    out, _ = plans
    (scan,) = (out / "a").iterdir()
    (host,) = (out / "b").iterdir()
    (capped,) = (out / "c").iterdir()
    r = run_cli("check", str(scan), "--min-overlap", "0")
    assert r.returncode == 0, r.stdout
    assert "[PASS] host_compute" in r.stdout and "[PASS] pinned_host_cap" in r.stdout
    r = run_cli("check", str(host), "--min-overlap", "0")
    assert r.returncode == 1 and "[FAIL] host_compute: 1 op(s)" in r.stdout
    r = run_cli("check", str(host), "--min-overlap", "0", "--allow-host-compute")
    assert r.returncode == 0 and "allowed with --allow-host-compute" in r.stdout
    r = run_cli("check", str(capped), "--min-overlap", "0")
    assert r.returncode == 1 and "[FAIL] pinned_host_cap" in r.stdout


def test_report_json_host_section_on_real_captures(tmp_path):
    """CPU: not applicable. The real H100 capture carries no HloProto of the program that ran:
    "not available" with the reason, the cap said all the same (run.json predates `env`)."""
    cpu = json.loads(run_cli("report", str(REPO / "sample_traces/cpu-scan/offload_x"),
                             "--json").stdout)["host"]
    assert cpu["available"] is False and "not applicable on XLA:CPU" in \
        cpu["host_compute"]["source"]
    gpu_run = REPO / "sample_traces/gpu-h100/scan-h100/offload_x"
    r = run_cli("report", str(gpu_run), "--json")
    assert r.returncode == 0, r.stderr
    gpu = json.loads(r.stdout)["host"]
    assert gpu["available"] is False and gpu["host_compute"]["count"] is None
    assert gpu["host_compute"]["source"].startswith("not available: ")
    assert gpu["pinned_host"]["cap_bytes"] == 64 << 30
    assert "not recorded: assumed unset" in gpu["pinned_host"]["cap_source"]
    assert gpu["trace_host_ops"]["count"] is None
    # --no-host-compute on it: asked for and cannot be checked, so it fails; CPU skips.
    r = run_cli("check", str(gpu_run), "--min-overlap", "0", "--no-host-compute")
    assert r.returncode == 1 and "FAIL  host_compute: cannot be checked" in r.stdout
    r = run_cli("check", str(REPO / "sample_traces/cpu-scan/offload_x"),
                "--allow-no-transfers", "--no-host-compute")
    assert r.returncode == 0 and "SKIP  host_compute" in r.stdout
