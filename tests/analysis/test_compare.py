"""overlap compare / capture / demo: pure comparison arithmetic, and the commands end to end."""

from __future__ import annotations

import json
import shutil

import pytest

from overlap.analysis.compare import compare, offload_check
from tests.conftest import SAMPLE_TRACES, run_cli

MS = 1_000_000  # ns


def _row(label, policy, category, step_ms, peak, *, offloads=False, transfers=0,
         overlap=None, exposed_ps=None, in_flight_ps=0, source="heap simulator (program order)"):
    return {"run": f"/runs/{label}", "label": label, "policy": policy, "category": category,
            "offloads": offloads, "backend": "gpu", "synthetic": False, "device": "H100",
            "workload": "t", "step_ns_median": step_ms * MS, "step_ns_min": step_ms * MS,
            "step_ns_max": step_ms * MS, "steps": 8, "step_source": "unprofiled",
            # 8 steps with 1 us of jitter: differences of whole percents are outside the noise
            "step_ns_samples": [step_ms * MS + k * 1000 for k in range(8)],
            "peak_bytes": peak, "peak_source": source, "memory_analysis": None,
            "d2h_bytes_per_step": 0, "h2d_bytes_per_step": 0, "d2h_overlap": overlap,
            "h2d_overlap": overlap, "overlap_ratio": overlap, "exposed_ps_per_step": exposed_ps,
            "in_flight_ps_per_step": in_flight_ps, "transfers": transfers, "status": "OK",
            "verdict_overlap": None, "planned": {}, "executed": {},
            "offload_happened": {"status": "ok", "lines": []}}


def test_compare_deltas_verdict_and_breakeven():
    rows = [
        _row("qkv_proj_offloaded", "qkv_proj_offloaded", "offload", 96, 62 << 30, offloads=True,
             transfers=48, overlap=0.96, exposed_ps=1 * MS * 1000, in_flight_ps=20 * MS * 1000),
        _row("full", "full", "remat", 100, 40 << 30),
        _row("everything_saveable", "everything_saveable", "no-remat", 80, 100 << 30),
    ]
    res = compare(rows)
    assert res["baseline"] == "full" and res["no_remat"] == "everything_saveable"
    off = res["runs"][0]
    assert off["step_delta"] == pytest.approx((96 - 100) / 100, abs=1e-4) and off["step_called"]
    assert off["peak_delta_vs_no_remat"] == pytest.approx((62 - 100) / 100)
    assert off["verdict"] == ("qkv_proj_offloaded: 4.0% faster than full, 38.0% less peak memory "
                              "than everything_saveable, 96% of transfer time hidden")
    assert res["runs"][1]["verdict"] is None  # the baseline has nothing to say about itself
    be = res["breakeven"]
    assert be["recompute_ns_per_step"] == (100 - 80) * MS
    assert be["offload"][0]["exposed_ns_per_step"] == 1 * MS and be["offload"][0]["pays"] is True


def test_compare_explicit_baseline_and_unknown_baseline():
    rows = [_row("a", "minimal", "remat", 10, 1), _row("b", "full", "remat", 20, 1)]
    assert compare(rows, baseline="a")["baseline"] == "a"
    from overlap.errors import UsageError

    with pytest.raises(UsageError):
        compare(rows, baseline="nope")


def test_peak_memory_only_compared_like_for_like():
    rows = [_row("full", "full", "remat", 10, 100),
            _row("x", "minimal", "remat", 10, 50, source="allocator peak_bytes_in_use (trace)")]
    assert compare(rows)["runs"][1]["peak_delta"] is None


def test_offload_check_states():
    planned = {"D2H": {"executed_count": 4, "executed_bytes": 400},
               "H2D": {"executed_count": 4, "executed_bytes": 400}}
    same = {d: {"count_per_step": 4, "bytes_per_step": 400} for d in ("D2H", "H2D")}
    assert offload_check(planned, same, True)["status"] == "yes"
    fewer = {"D2H": {"count_per_step": 4, "bytes_per_step": 400},
             "H2D": {"count_per_step": 2, "bytes_per_step": 200}}
    out = offload_check(planned, fewer, True)
    assert out["status"] == "partly" and "<- differ" in out["lines"][1]
    none = {d: {"count_per_step": 0, "bytes_per_step": 0} for d in ("D2H", "H2D")}
    assert offload_check({"D2H": {"count": 0}, "H2D": {"count": 0}}, none, True)["status"] \
        == "no"
    # Planned, never executed: no. No inventory at all (capture(), attach()): unknown, never yes.
    assert offload_check(planned, none, True)["status"] == "no"
    for pol in (True, False):
        out = offload_check({}, none, pol)
        assert out["status"] == "unknown" and out["answer"].startswith("unknown")


def test_compare_cli_on_sample_traces():
    r = run_cli("compare", str(SAMPLE_TRACES / "cpu-transformer-tiny"), "--json")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["baseline"] == "full" and res["no_remat"] == "everything_saveable"
    labels = [x["label"] for x in res["runs"]]
    assert sorted(labels) == ["everything_saveable", "full", "qkv_proj_offloaded"]
    off = next(x for x in res["runs"] if x["label"] == "qkv_proj_offloaded")
    # XLA:CPU compiles offload away: the tool must say so rather than claim success
    assert off["offload_happened"]["status"] == "no"
    assert off["peak_bytes"] > 0 and off["step_ns_median"] > 0
    r = run_cli("compare", str(SAMPLE_TRACES / "cpu-transformer-tiny"))
    assert "did offload happen in qkv_proj_offloaded? no" in r.stdout


def test_report_on_run_dir_answers_did_offload_happen():
    r = run_cli("report", str(SAMPLE_TRACES / "cpu-transformer-tiny" / "qkv_proj_offloaded"))
    assert r.returncode == 0 and "did offload happen? no" in r.stdout
    r = run_cli("report", str(SAMPLE_TRACES / "cpu-transformer-tiny" / "full"), "--json")
    # full remat: nothing planned, nothing moved
    assert json.loads(r.stdout)["offload"]["status"] == "no"


@pytest.mark.slow
def test_capture_cli_sweep_and_never_overwrite(tmp_path):
    out = tmp_path / "runs"
    r = run_cli("capture", "--workload", "scan", "--policy", "offload:x", "--policy",
                "nothing_saveable", "--steps", "2", "--warmup", "1", "--out", str(out),
                timeout=300)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in out.iterdir()) == ["nothing_saveable", "offload_x"]
    manifest = json.loads((out / "offload_x" / "run.json").read_text())
    assert manifest["policy"]["name"] == "offload:x" and len(manifest["step_ns"]) == 2
    before = sorted(p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file())
    r = run_cli("capture", "--workload", "scan", "--policy", "nothing_saveable", "--out",
                str(out), timeout=300)
    assert r.returncode == 2 and "already exists" in r.stderr and "Traceback" not in r.stderr
    assert sorted(p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()) == before
    r = run_cli("capture", "--workload", "scan", "--policy", "bogus", "--out", str(out))
    assert r.returncode == 2 and "bogus" in r.stderr


@pytest.mark.slow
def test_demo_no_serve_on_cpu(tmp_path):
    r = run_cli("demo", "--no-serve", "--out", str(tmp_path), "--steps", "2", "--warmup", "1",
                timeout=400)
    assert r.returncode == 0, r.stderr
    assert "XLA:CPU compiles host offload away" in r.stdout
    assert "baseline: full" in r.stdout and "qkv_proj_offloaded:" in r.stdout
    demo_dirs = list(tmp_path.iterdir())
    assert len(demo_dirs) == 1
    assert sorted(p.name for p in demo_dirs[0].iterdir()) == [
        "everything_saveable", "full", "plans", "qkv_proj_offloaded"]
    # A newcomer with no accelerator still sees real planned copies, labelled as compiled.
    assert "MEASURED here on cpu" in r.stdout and "COMPILED, NOT RUN" in r.stdout
    plans = sorted(p.name for p in (demo_dirs[0] / "plans").iterdir())
    assert plans == sorted(f"{t}-{w}-{p}" for t in ("h100", "v5e")
                           for w, ps in (("scan", ("offload_x", "nothing_saveable")),
                                         ("transformer", ("qkv_proj_offloaded", "full")))
                           for p in ps)
    assert "h100 offload:x: device temp" in r.stdout and "D2H" in r.stdout
    shutil.rmtree(tmp_path)
