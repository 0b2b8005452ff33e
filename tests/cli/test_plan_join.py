"""A plan's prediction beside a measured run of the same program (issue 20): `overlap compare`
(text and JSON) and `overlap report CAPTURE --plan PLAN_RUN`.

Known by construction: a SYNTHETIC TPU capture of `jit_train_step` (one D2H copy in flight for
1 us, compute over its first half: 50% hidden, 0.5 us exposed in its one step) with a run.json
fingerprint, and plan runs written by the test whose estimate says 25% hidden, 0.75 us exposed:
the join must carry exactly those numbers, labelled, and refuse plans of other inputs, policies
or targets with a reason. Real data: the TPU v6e sample capture against a plan run made from
its own scheduled HloProto (the estimate `--predict` runs), for v6e and for v5e.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from overlap.runs import rundir
from tests.conftest import SAMPLE_TRACES, run_cli

V6E = SAMPLE_TRACES / "tpu-v6e-offload"
INPUTS = "0123456789abcdef"


def _capture(root: Path) -> Path:
    from overlap.trace.synthetic import SyntheticTrace

    t = SyntheticTrace()
    dev = t.tpu(0)
    t0 = 10_000_000  # ps, after the planes' start
    dev.module(t0, 1_000_000, name="jit_train_step")
    dev.op(t0, 500_000)
    dev.async_copy("D2H", t0, t0 + 1_000_000)
    t.step(1, t0, t0 + 1_000_000)
    partial = rundir.partial_dir_for(root / "measured")
    t.write_session(partial)
    return rundir.write_run(partial, root / "measured", {
        "label": "measured", "policy": {"name": "offload_x", "offloaded": True},
        "program": {"module": "jit_train_step", "inputs": INPUTS, "program_id": None}})


def _plan(root: Path, label: str, *, target: str = "v6e", inputs: str = INPUTS,
          policy: str = "offload_x", module: str = "jit_train_step",
          estimate: dict | None = None, hlo_text: str | None = None) -> Path:
    est = estimate or {
        "ops": [], "assumptions": ["SYNTHETIC plan estimate written by the test"],
        "model": {"host_link_Bps": 32e9, "h2d_link_Bps": 32e9},
        "per_step": {"all": {"hidden_fraction": 0.25, "exposed_ps": 750_000},
                     "D2H": {"hidden_fraction": 0.25, "exposed_ps": 750_000, "link_Bps": 32e9},
                     "H2D": {"hidden_fraction": None, "exposed_ps": 0, "link_Bps": 32e9}}}
    partial = rundir.partial_dir_for(root / label)
    if hlo_text:
        (partial / "hlo").mkdir()
        (partial / "hlo" / f"{module}.after_optimizations.hlo.txt").write_text(hlo_text)
    return rundir.write_plan_run(partial, root / label, {
        "label": label, "status": "ok", "module": module,
        "program": {"module": module, "inputs": inputs},
        "target": {"name": target, "platform": "tpu"}, "policy": {"name": policy},
        "note": f"compiled for {target}, not run", "estimate": est})


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("join")
    _capture(root)
    _plan(root, "plan_v6e")
    _plan(root, "plan_other_inputs", inputs="ffffffffffffffff")
    _plan(root, "plan_other_policy", policy="full")
    _plan(root, "plan_v5e", target="v5e")
    return root


def test_compare_puts_the_plans_prediction_beside_the_measurement(synthetic):
    p = run_cli("compare", str(synthetic), "--json")
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    (run,) = res["runs"]
    (pair,) = run["predicted"]["pairs"]
    assert pair["plan"] == "plan_v6e" and pair["target"] == "v6e"
    assert pair["label"] == "predicted (plan for v6e)" and "not run" in pair["note"]
    assert pair["predicted_hidden_fraction"] == 0.25
    assert pair["predicted_exposed_ps_per_step"] == 750_000
    assert pair["measured_hidden_fraction"] == pytest.approx(0.5, abs=0.02)
    assert pair["measured_hidden_fraction"] == run["overlap_ratio"]
    assert pair["measured_exposed_ps_per_step"] == run["exposed_ps_per_step"]
    assert "input shapes and dtypes" in pair["matched_by"] and "policy" in pair["matched_by"]
    notes = " | ".join(res["prediction_notes"])
    assert "plan_other_inputs: same module jit_train_step, other input shapes" in notes
    assert "plan plan_other_policy is policy full, the run offload_x" in notes
    assert "plan plan_v5e is for v5e, the run ran on TPU v6 lite" in notes

    text = run_cli("compare", str(synthetic)).stdout
    assert "measured vs predicted (plan for v6e) for measured (plan plan_v6e" in text
    line = next(x for x in text.splitlines() if x.strip().startswith("hidden:"))
    assert "measured 50%" in line and "predicted (plan for v6e) 25%" in line
    assert "note: measured: no prediction joined: plan plan_v5e is for v5e" in text


def test_no_plan_of_the_program_means_no_join(tmp_path):
    _capture(tmp_path)
    _plan(tmp_path, "other", module="jit_eval_step")
    res = json.loads(run_cli("compare", str(tmp_path), "--json").stdout)
    (run,) = res["runs"]
    assert "predicted" not in run and res["prediction_notes"] == []


def test_report_plan_of_another_program_says_why(synthetic):
    p = run_cli("report", str(synthetic / "measured"), "--plan",
                str(synthetic / "plan_other_inputs"))
    assert p.returncode == 0, p.stderr
    assert ("no prediction joined: plan plan_other_inputs (v6e) is not of this capture's "
            "program: plan plan_other_inputs: same module jit_train_step, other input shapes"
            in p.stdout)
    bad = run_cli("report", str(synthetic / "measured"), "--plan", str(synthetic / "measured"))
    assert bad.returncode == 2 and "--plan takes a plan run directory" in bad.stderr
    both = run_cli("report", str(synthetic / "measured"), "--predict", "--plan",
                   str(synthetic / "plan_v6e"))
    assert both.returncode == 2 and "give one" in both.stderr


@pytest.fixture(scope="module")
def v6e_plans(tmp_path_factory) -> Path:
    """Plan runs of the v6e capture's own program: its HloProto printed, estimated for v6e and
    for v5e (what `overlap plan` would write of `jit_f`, less the compile)."""
    from overlap.hlo.program import hlo_text_from_proto
    from overlap.plan.estimate import estimate_for
    from overlap.plan.targets import get_target
    from overlap.trace import read_trace

    root = tmp_path_factory.mktemp("v6e_plans")
    tr = read_trace(V6E)
    (proto,) = [bytes(p) for n, p in zip(tr.modules["name"], tr.modules["hlo_proto"])
                if str(n).startswith("jit_f(") and p]
    text = hlo_text_from_proto(proto)
    for t in ("v6e", "v5e"):
        _plan(root, f"jit_f_{t}", target=t, module="jit_f", inputs="", policy="as given",
              estimate=estimate_for(text, get_target(t)), hlo_text=text)
    return root


def test_report_plan_on_the_real_v6e_capture(v6e_plans):
    p = run_cli("report", str(V6E), "--plan", str(v6e_plans / "jit_f_v6e"), "--json",
                timeout=300)
    assert p.returncode == 0, p.stderr
    sec = json.loads(p.stdout)["prediction"]
    assert sec["joined"] is True and sec["label"] == "predicted (plan for v6e)"
    assert "capture's copies" in sec["matched_by"] and "target v6e" in sec["matched_by"]
    (prog,) = sec["programs"]
    rows = {r["op"]: r for r in prog["ops"]}
    assert len(rows) == 6
    for r in rows.values():
        assert r["measured"]["count"] == 400 and r["predicted"]["duration_ps"] > 0
        assert r["predicted"]["transfer_ps"] == round((5 << 30) / 32e9 * 1e12)
        assert "at_measured_link" in r["predicted"]  # re-estimated from the plan's HLO text
    # The same join as `--predict` on the capture's own proto: the same predicted numbers.
    pred = run_cli("report", str(V6E), "--predict", "--json", timeout=300)
    assert pred.returncode == 0, pred.stderr
    (own,) = json.loads(pred.stdout)["prediction"]["programs"]
    assert [(r["op"], r["predicted"]["duration_ps"], r["measured"]["duration_ps"])
            for r in own["ops"]] == [(r["op"], r["predicted"]["duration_ps"],
                                      r["measured"]["duration_ps"]) for r in prog["ops"]]
    assert prog["measured_link"] == own["measured_link"]
    text = run_cli("report", str(V6E), "--plan", str(v6e_plans / "jit_f_v6e"),
                   timeout=300).stdout
    assert "PREDICTED vs MEASURED (v6e, plan jit_f_v6e, compiled for v6e, not run; " \
           "predicted (plan for v6e) = the plan run's estimate" in text
    other = run_cli("report", str(V6E), "--plan", str(v6e_plans / "jit_f_v5e"), "--json",
                    timeout=300)
    sec = json.loads(other.stdout)["prediction"]
    assert sec["joined"] is False and "is for v5e, the run ran on TPU v6 Lite" in sec["reason"]


def test_compare_real_v6e_capture_beside_its_plans(v6e_plans):
    p = run_cli("compare", str(V6E), str(v6e_plans / "jit_f_v6e"), str(v6e_plans / "jit_f_v5e"),
                "--json", timeout=300)
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    (run,) = res["runs"]
    (pair,) = run["predicted"]["pairs"]
    assert pair["label"] == "predicted (plan for v6e)" and pair["plan"] == "jit_f_v6e"
    assert 0 <= pair["predicted_hidden_fraction"] <= 1
    assert pair["measured_hidden_fraction"] == run["overlap_ratio"]
    # No step annotations in this capture: no measured exposed time per step to set beside.
    assert pair["measured_exposed_ps_per_step"] is None
    assert any("jit_f_v5e is for v5e" in n for n in res["prediction_notes"])


def test_a_real_plan_and_capture_of_one_step_share_the_fingerprint(tmp_path):
    """`overlap capture` (XLA:CPU, run) and `overlap plan --target v5e` (XLA:TPU, compiled) of
    the scan workload under one policy record the same program fingerprint; the join still
    refuses the pair, since the plan predicts a v5e and the run ran on the CPU."""
    cap = run_cli("capture", "--workload", "scan", "--policy", "offload:x", "--steps", "2",
                  "--warmup", "1", "--out", str(tmp_path / "runs"), timeout=300)
    assert cap.returncode == 0, cap.stderr
    plan = run_cli("plan", "--target", "v5e", "--workload", "scan", "--policy", "offload:x",
                   "--out", str(tmp_path / "plans"), timeout=300)
    assert plan.returncode == 0, plan.stderr
    run_m = rundir.load_manifest(tmp_path / "runs" / "offload_x")
    plan_m = rundir.load_manifest(tmp_path / "plans" / "v5e-scan-offload_x")
    assert run_m is not None and plan_m is not None
    assert plan_m["program"] == {"module": run_m["program"]["module"],
                                 "inputs": run_m["program"]["inputs"]}
    assert plan_m["program"]["inputs"]  # a real fingerprint, not an empty one
    res = json.loads(run_cli("compare", str(tmp_path / "runs"), str(tmp_path / "plans"),
                             "--json", timeout=300).stdout)
    (run,) = res["runs"]
    assert run["predicted"]["pairs"] == []
    assert res["prediction_notes"] == [
        "offload_x: no prediction joined: plan v5e-scan-offload_x is for v5e (tpu), the run "
        "ran on cpu"]
