"""`overlap check` on plan runs: the measured gate's defaults on the plan's predicted numbers.

Manifests are built by hand here, so every answer is known by construction: a plan of an
offloading policy with N planned copies whose estimate predicts a hidden fraction f.
"""

from __future__ import annotations

from pathlib import Path

from overlap.report.plan_gate import DEFAULT_MIN_OVERLAP, markdown, run_plan_checks
from overlap.runs import rundir
from tests.conftest import run_cli

GiB = 1 << 30


def plan_manifest(*, hidden: float | None, copies: int = 10, category: str = "offload",
                  policy: str = "offload:x", d2h_hidden: float | None = None) -> dict:
    """A plan run's manifest: `copies` D2H and `copies` H2D of 1 MiB each, predicted `hidden`."""
    moved = {"count": 1 if copies else 0, "bytes": (1 << 20) if copies else 0,
             "executed_count": copies, "executed_bytes": copies << 20}
    per_dir = {"hidden_fraction": hidden if copies else None}
    return {
        "kind": "plan", "label": f"t-{policy}", "status": "ok",
        "target": {"name": "h100", "device_memory_bytes": 80 * GiB},
        "policy": {"name": policy, "category": category},
        "memory_analysis": {"temp_size_in_bytes": GiB, "argument_size_in_bytes": GiB,
                            "output_size_in_bytes": 0, "alias_size_in_bytes": 0},
        "offload_inventory": {"D2H": moved, "H2D": dict(moved), "trip_counts_known": True},
        "estimate": {"per_step": {
            "all": per_dir,
            "D2H": {"hidden_fraction": d2h_hidden if d2h_hidden is not None else hidden},
            "H2D": per_dir}},
    }


def statuses(out: dict) -> dict[str, str]:
    return {c["name"]: c["status"] for c in out["checks"]}


def test_a_zero_percent_hidden_plan_fails_by_default():
    out = run_plan_checks(plan_manifest(hidden=0.0))
    assert not out["passed"] and out["failed"] == ["min_overlap"]
    msg = next(c["message"] for c in out["checks"] if c["name"] == "min_overlap")
    assert "PREDICTED" in msg and "not measured" in msg and "0%" in msg


def test_a_plan_above_the_minimum_passes_and_the_minimum_is_the_measured_default():
    from overlap.report.gate import DEFAULT_MIN_OVERLAP as MEASURED

    assert DEFAULT_MIN_OVERLAP == MEASURED
    assert run_plan_checks(plan_manifest(hidden=0.95))["passed"]
    assert not run_plan_checks(plan_manifest(hidden=0.85))["passed"]
    assert run_plan_checks(plan_manifest(hidden=0.85), min_overlap=0.8)["passed"]
    assert run_plan_checks(plan_manifest(hidden=0.0), min_overlap=None)["passed"]


def test_per_direction_minimums():
    m = plan_manifest(hidden=0.95, d2h_hidden=0.5)
    out = run_plan_checks(m, min_overlap_d2h=0.9)
    assert out["failed"] == ["min_overlap_d2h"]


def test_an_offloading_policy_without_planned_copies_fails():
    out = run_plan_checks(plan_manifest(hidden=None, copies=0))
    assert out["failed"] == ["planned_transfers"]
    assert statuses(out)["min_overlap"] == "skip"
    msg = next(c["message"] for c in out["checks"] if c["name"] == "planned_transfers")
    assert "compiled away" in msg and "offload:x" in msg
    assert run_plan_checks(plan_manifest(hidden=None, copies=0),
                           allow_no_transfers=True)["passed"]


def test_a_step_as_given_without_copies_fails_like_a_capture_without_transfers():
    m = plan_manifest(hidden=None, copies=0)
    m["policy"] = {"name": "as given"}
    assert run_plan_checks(m)["failed"] == ["planned_transfers"]


def test_a_remat_policy_without_copies_passes():
    out = run_plan_checks(plan_manifest(hidden=None, copies=0, category="remat",
                                        policy="full"))
    assert out["passed"] and statuses(out)["planned_transfers"] == "pass"


def test_a_plan_that_did_not_compile_skips_the_transfer_checks():
    m = {"kind": "plan", "label": "x", "status": "compile_error", "error": "boom",
         "target": {"name": "v5e"}, "policy": {"name": "offload:x", "category": "offload"}}
    out = run_plan_checks(m)
    assert out["failed"] == ["compiles"]
    assert statuses(out)["planned_transfers"] == statuses(out)["min_overlap"] == "skip"


def test_markdown_names_the_plan_and_escapes_cells():
    out = run_plan_checks(plan_manifest(hidden=0.0))
    md = markdown(out)
    assert md.startswith("### overlap: plan check (compiled, not run)")
    assert ":x:" in md and "| `min_overlap` | FAIL |" in md and "estimate" in md


def _write_plan(tmp_path: Path, manifest: dict) -> Path:
    final = tmp_path / manifest["label"]
    partial = rundir.partial_dir_for(final)
    return rundir.write_plan_run(partial, final, manifest)


def test_cli_plan_check_fails_by_default_and_writes_the_step_summary(tmp_path):
    run = _write_plan(tmp_path, plan_manifest(hidden=0.0))
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    r = run_cli("check", str(run), env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert r.returncode == 1, r.stdout + r.stderr
    assert "[FAIL] min_overlap" in r.stdout and "not run" in r.stdout
    text = summary.read_text()
    assert text.startswith("earlier step\n") and "plan check (compiled, not run)" in text
    r = run_cli("check", str(run), "--min-overlap", "0")
    assert r.returncode == 0, r.stdout + r.stderr
