"""The offload inventory and the overlap estimate on optimized modules from the real XLA:GPU
(h100) and XLA:TPU (v5e) compilers (fixtures made by fixtures/make_fixtures.py; the tutorial
scan under offload:x: one 256x256 f32 residual per layer, 10 layers)."""

from __future__ import annotations

from pathlib import Path

import pytest

from overlap.hlo.program import offload_inventory
from overlap.hlo.schedule import Roofline, estimate_overlap

FIX = Path(__file__).resolve().parent / "fixtures"
LAYER_BYTES = 256 * 256 * 4
LAYERS = 10
MODEL = Roofline(hbm_Bps=3.35e12, peak_flops_bf16=989e12, peak_flops_f32=494e12,
                 host_link_Bps=64e9)


@pytest.mark.parametrize("target", ["h100", "v5e"])
def test_inventory_counts_each_layer_once_per_direction(target):
    inv = offload_inventory((FIX / f"{target}_scan_offload_x.hlo.txt").read_text())
    for d in ("D2H", "H2D"):
        s = inv.summary(d)
        assert s["count"] == 1, (d, inv.ops)
        assert s["executed_count"] == LAYERS
        assert s["executed_bytes"] == LAYERS * LAYER_BYTES
    assert inv.trip_counts_known  # TPU: derived from the loop's induction variable
    assert all(o.is_async for o in inv.ops)  # GPU: fusion-start wrappers; TPU: *-start ops


def test_gpu_copies_are_named_as_the_runtime_names_them():
    inv = offload_inventory((FIX / "h100_scan_offload_x.hlo.txt").read_text())
    names = sorted(o.name for o in inv.ops)
    assert names[0].startswith("dynamic-slice-start") and names[1].startswith(
        "dynamic-update-slice-start")


@pytest.mark.parametrize("target", ["h100", "v5e"])
def test_estimate_invariants(target):
    est = estimate_overlap((FIX / f"{target}_scan_offload_x.hlo.txt").read_text(), MODEL)
    assert est["kind"] == "estimate" and "not a measurement" in est["note"]
    assert len(est["ops"]) == 2
    for r in est["ops"]:
        assert r["transfer_ps"] == round(LAYER_BYTES / MODEL.host_link_Bps * 1e12)
        assert 0 <= r["hidden_ps"] <= r["transfer_ps"]
        assert r["exposed_ps"] == r["transfer_ps"] - r["hidden_ps"]
        assert 0.0 <= r["hidden_fraction"] <= 1.0
        assert r["compute_ps"] >= 0
    tot = est["per_step"]["all"]
    assert tot["bytes"] == 2 * LAYERS * LAYER_BYTES
    assert tot["transfers"] == 2 * LAYERS
    assert tot["hidden_ps"] + tot["exposed_ps"] == tot["transfer_ps"]


def test_gpu_schedule_puts_matmuls_beside_the_copies():
    """XLA:GPU schedules the layer's GEMMs between each copy's start and done: a little above
    the break-even bandwidth every copy hides; at a hundredth of it, they stop hiding."""
    text = (FIX / "h100_scan_offload_x.hlo.txt").read_text()
    est = estimate_overlap(text, MODEL)
    assert all(r["scheduled_beside_count"] > 0 for r in est["ops"])
    assert any("gemm" in n or "dot" in n for r in est["ops"] for n in r["scheduled_beside"])
    be = est["break_even_Bps"]
    assert be is not None and be > 0
    slow = Roofline(MODEL.hbm_Bps, MODEL.peak_flops_bf16, MODEL.peak_flops_f32, be / 100)
    est_slow = estimate_overlap(text, slow)
    assert est_slow["per_step"]["all"]["hidden_fraction"] < 0.05
    fast = Roofline(MODEL.hbm_Bps, MODEL.peak_flops_bf16, MODEL.peak_flops_f32, be * 1.01)
    assert estimate_overlap(text, fast)["per_step"]["all"]["hidden_fraction"] == pytest.approx(
        1.0)


def test_derived_trip_count_needs_a_counted_loop():
    """A while whose bound is not a constant stays unknown (executed figures are lower bounds)."""
    text = """HloModule m, is_scheduled=true

%cond (p: (s32[], s32[])) -> pred[] {
  %p = (s32[], s32[]) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %n = s32[] get-tuple-element(%p), index=1
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}

%body (q: (s32[], s32[])) -> (s32[], s32[]) {
  %q = (s32[], s32[]) parameter(0)
  %j = s32[] get-tuple-element(%q), index=0
  %one = s32[] constant(1)
  %k = s32[] add(%j, %one)
  %m = s32[] get-tuple-element(%q), index=1
  %buf = f32[4]{0:S(5)} constant({1,2,3,4})
  %c = f32[4]{0} copy(%buf)
  ROOT %t = (s32[], s32[]) tuple(%k, %m)
}

ENTRY %main (a: s32[]) -> (s32[], s32[]) {
  %a = s32[] parameter(0)
  %zero = s32[] constant(0)
  %init = (s32[], s32[]) tuple(%zero, %a)
  ROOT %w = (s32[], s32[]) while(%init), condition=%cond, body=%body
}
"""
    inv = offload_inventory(text)
    assert len(inv.ops) == 1 and not inv.trip_counts_known and inv.ops[0].executions == 1
    known = text.replace("%n = s32[] get-tuple-element(%p), index=1", "%n = s32[] constant(7)")
    inv = offload_inventory(known)
    assert inv.trip_counts_known and inv.ops[0].executions == 7
