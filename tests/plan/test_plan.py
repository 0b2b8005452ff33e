"""Plan mode against the real compilers, live: XLA:GPU for h100 (CUDA plugin, no GPU) and
XLA:TPU for v5e (libtpu, no TPU). The tutorial scan: x 256x256, w1 10x256x1024, w2 10x1024x256,
f32; offload:x moves one 256x256 f32 residual per layer to pinned host memory and back."""

from __future__ import annotations

import json
import os

import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from overlap.cli.main import main as cli_main  # noqa: E402
from overlap.errors import UsageError  # noqa: E402
from overlap.plan import compile as plan_compile  # noqa: E402
from overlap.plan.compile import plan_step, plan_workload  # noqa: E402
from overlap.runs.rundir import is_complete, load_manifest  # noqa: E402
from tests.conftest import run_cli  # noqa: E402

LAYER_BYTES = 256 * 256 * 4
LAYERS = 10


def _temp(plan) -> int:
    assert plan.status == "ok", plan.error
    return plan.manifest["memory_analysis"]["temp_size_in_bytes"]


def _check_inventory(plan) -> None:
    inv = plan.manifest["offload_inventory"]
    assert inv["trip_counts_known"]
    for d in ("D2H", "H2D"):
        assert inv[d]["executed_bytes"] == LAYERS * LAYER_BYTES, (d, inv)
        assert inv[d]["executed_count"] == LAYERS


@pytest.fixture(scope="module")
def h100_plans(tmp_path_factory):
    out = tmp_path_factory.mktemp("plans")
    return out, plan_workload("scan", ["offload:x", "nothing_saveable"], "h100", out=out)


def test_h100_offload_lowers_device_temp_and_moves_each_layer(h100_plans):
    out, (off, none) = h100_plans
    assert _temp(off) < _temp(none)
    _check_inventory(off)
    assert none.manifest["offload_inventory"]["D2H"]["executed_bytes"] == 0
    assert off.manifest["memory_analysis"]["host_temp_size_in_bytes"] == LAYERS * LAYER_BYTES
    est = off.manifest["estimate"]
    assert est["kind"] == "estimate" and est["model"]["target"] == "h100"
    assert 0.0 <= est["per_step"]["all"]["hidden_fraction"] <= 1.0


def test_plan_runs_are_complete_runs_that_say_not_run(h100_plans):
    out, plans = h100_plans
    for p in plans:
        assert p.path is not None and is_complete(p.path)
        m = load_manifest(p.path)
        assert m["kind"] == "plan" and m["note"] == "compiled for h100, not run"
        assert m["target"]["name"] == "h100" and m["versions"]["jax"] == jax.__version__
        assert "jax-cuda12-plugin" in m["versions"]
        assert list((p.path / "hlo").glob("*.hlo.txt")) and list((p.path / "hlo").glob("*.hlo.pb"))
        live = json.loads((p.path / "program_memory.json").read_text())["live_bytes"]
        assert live and min(live) >= 0 and max(live) == m["heap_simulator"]["peak_bytes"]


def test_tpu_inventory_with_derived_trip_counts():
    (off,) = plan_workload("scan", ["offload:x"], "v5e")
    _check_inventory(off)
    ops = off.manifest["offload_inventory"]["ops"]
    assert {o["opcode"] for o in ops} == {"dynamic-update-slice-start", "dynamic-slice-start"}


def test_tpu_offload_lowers_device_temp():
    # At the tutorial's own shapes XLA:TPU keeps every temporary in scoped memory (temp 0 under
    # both policies); the `small` scan (x 1024x1024, hidden 4096) shows the saving.
    off, none = plan_workload("scan:small", ["offload:x", "nothing_saveable"], "v5e")
    assert _temp(off) < _temp(none)
    assert off.manifest["memory_analysis"]["host_temp_size_in_bytes"] > 0


def _hybrid_step(ws, x):
    ws = jax.device_put(ws, jax.memory.Space.Device)

    def layer(c, w):
        return jnp.sin(c @ w[0]) @ w[1], None

    def loss(ws, x):
        return jax.lax.scan(layer, x, ws)[0].sum()

    return jax.grad(loss)(ws, x)


def _hybrid_args():
    host = jax.sharding.SingleDeviceSharding(jax.devices("cpu")[0], memory_kind="pinned_host")
    ws = (jax.ShapeDtypeStruct((10, 256, 1024), jnp.float32, sharding=host),
          jax.ShapeDtypeStruct((10, 1024, 256), jnp.float32, sharding=host))
    return ws, jax.ShapeDtypeStruct((256, 256), jnp.float32)


def test_tpu_params_in_pinned_host_leave_only_the_input_on_device():
    ws, x = _hybrid_args()
    (p,) = plan_step(_hybrid_step, ws, x, target="v5e")
    mem = p.manifest["memory_analysis"]
    assert mem["argument_size_in_bytes"] == 256 * 256 * 4
    assert mem["host_argument_size_in_bytes"] == 2 * 10 * 256 * 1024 * 4
    assert p.manifest["notes"] == []


def test_gpu_compile_only_device_drops_pinned_host_arguments_and_the_plan_says_so():
    ws, x = _hybrid_args()
    (p,) = plan_step(_hybrid_step, ws, x, target="h100")
    assert p.manifest["pinned_host_arguments_unseen_bytes"] == 2 * 10 * 256 * 1024 * 4
    assert any("exposes no host memory" in n for n in p.manifest["notes"])


def test_a_step_that_does_not_fit_is_a_finding():
    big = jax.ShapeDtypeStruct((1 << 32,), jnp.float32)  # 16 GiB of f32, twice: > v5e's HBM
    (p,) = plan_step(lambda s, b: (s * 2, b), big, jax.ShapeDtypeStruct((8,), jnp.float32),
                     target="v5e")
    assert p.status == "does_not_fit" and "RESOURCE_EXHAUSTED" in p.error


def test_unknown_target_and_missing_extra_are_usage_errors(monkeypatch, capsys):
    with pytest.raises(UsageError, match="targets: h100"):
        plan_workload("scan", ["offload:x"], "a100")
    monkeypatch.setattr(plan_compile, "has_module", lambda name: False)
    assert cli_main(["plan", "--target", "v5e", "--out", "unused"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "overlap-jax[plan]" in err[0]


def test_missing_parent_package_is_missing_not_a_crash():
    """`find_spec("jax_plugins.xla_cuda12")` raises when `jax_plugins` itself is absent."""
    from overlap.errors import has_module

    assert has_module("json") and not has_module("no_such_pkg_overlap.sub")


def test_cli_plan_then_compare_shows_both_plans(tmp_path):
    r = run_cli("plan", "--target", "h100", "--workload", "scan", "--policy", "offload:x",
                "--policy", "nothing_saveable", "--out", str(tmp_path), timeout=300)
    assert r.returncode == 0, r.stderr
    assert "not run" in r.stdout
    assert "Traceback" not in r.stderr and "cuInit" not in r.stderr
    r = run_cli("compare", str(tmp_path))
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "PLAN (compiled for h100, not run" in out
    assert "h100-scan-offload_x" in out and "h100-scan-nothing_saveable" in out
    assert "2.50 MiB" in out  # 10 layers x 256 KiB each way per step, and 2.5 MiB host temp
    assert "device temp" in out and "less than nothing_saveable" in out
    r = run_cli("plan", "--list-targets")
    assert r.returncode == 0 and "v5p" in r.stdout and "h100" in r.stdout
    r = run_cli("plan", "--target", "nope", "--out", str(tmp_path))
    assert r.returncode == 2 and "targets:" in r.stderr


def test_check_gates_on_a_plan(h100_plans, tmp_path):
    _, (off, none) = h100_plans
    # --min-overlap 0: this test is about the plan checks, not the predicted overlap (whose
    # default gate tests/report/test_plan_gate.py covers).
    r = run_cli("check", str(off.path), "--min-offload-bytes", str(LAYERS * LAYER_BYTES),
                "--min-overlap", "0", "--junit", str(tmp_path / "j.xml"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "not run" in r.stdout and "[PASS] fits" in r.stdout
    assert 'name="min_offload_bytes"' in (tmp_path / "j.xml").read_text()
    r = run_cli("check", str(none.path), "--min-offload-bytes", "1")
    assert r.returncode == 1 and "[FAIL] min_offload_bytes" in r.stdout
    r = run_cli("check", str(off.path), "--max-device-gib", "0.001")
    assert r.returncode == 1 and "[FAIL] fits" in r.stdout


def test_plan_gate_on_a_plan_that_does_not_fit():
    from overlap.report.plan_gate import run_plan_checks

    m = {"kind": "plan", "label": "x", "status": "does_not_fit", "target": {"name": "v5e"},
         "error": "RESOURCE_EXHAUSTED: Ran out of memory on HBM"}
    out = run_plan_checks(m, min_offload_bytes=1)
    assert not out["passed"] and set(out["failed"]) == {"fits", "min_offload_bytes"}


def test_report_on_a_plan_text_json_html(h100_plans, tmp_path):
    _, (off, none) = h100_plans
    r = run_cli("report", str(off.path), "--json")
    assert r.returncode == 0, r.stderr
    m = json.loads(r.stdout)
    assert m["kind"] == "plan" and m["offload_inventory"]["D2H"]["executed_bytes"] == 2621440
    page = tmp_path / "plan.html"
    r = run_cli("report", str(off.path), "--html", str(page), "--baseline", str(none.path))
    assert r.returncode == 0, r.stderr
    html = page.read_text()
    assert "compiled for h100, not run" in html and "roofline estimate" in html
    assert "Device memory over program order" in html and "nothing_saveable" in html
    assert "PLAN (compiled for h100, not run" in r.stdout


def test_dashboard_lists_plans_as_plans(h100_plans):
    from overlap.dashboard import data

    out, _ = h100_plans
    runs = data.discover_runs([str(out)])
    assert sorted(r.name for r in runs) == ["h100-scan-nothing_saveable", "h100-scan-offload_x"]
    frame = data.runs_frame(runs)
    assert frame["synthetic"].str.startswith("PLAN (compiled, not run").all()
    # the D2H/H2D columns hold the estimate for plans, and the data column says so
    assert frame["synthetic"].str.contains("predicted").all()
    off = frame.set_index("run").loc["h100-scan-offload_x"]
    assert off["verdict"].startswith("PLAN: compiled for h100, not run")
    assert off["step_ms"] is None or off["step_ms"] != off["step_ms"]  # nothing was timed
    view = data.prepare_run_view(data.find_run(runs, "h100-scan-offload_x"))
    assert view["data"].program_memory is not None
    assert view["data"].program_memory["bytes"].max() > 0
