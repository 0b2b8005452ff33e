"""The estimate's cost model on programs whose answers are known by construction (hand-written
scheduled HLO), and on the real XLA:GPU module of the tutorial scan (fixtures/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from overlap.errors import UsageError
from overlap.hlo.program import offload_inventory, parse_shape
from overlap.hlo.schedule import PS_PER_S, Roofline, estimate_overlap
from overlap.plan.estimate import roofline_for
from overlap.plan.targets import (
    JAX_GPU_MEM_FRACTION,
    get_target,
    memory_budget,
    target_for_device_kind,
)

FIX = Path(__file__).resolve().parent / "fixtures"
HBM = 1e12          # 1 TB/s: 1 byte = 1 ps
LINK = 1e10         # 10 GB/s: 1 byte = 100 ps
MODEL = Roofline(hbm_Bps=HBM, peak_flops_bf16=1e18, peak_flops_f32=1e18, host_link_Bps=LINK)
STACK = "f32[10,256,1024]{2,1,0}"
SLICE_BYTES = 256 * 1024 * 4
ACT = "f32[256,256]{1,0}"
ACT_BYTES = 256 * 256 * 4
COPY = f"(f32[256,256]{{1,0:S(5)}}, {ACT}, u32[])"


def _module(between: str, extra_comps: str = "", params: str = "") -> str:
    """One D2H copy of a 256x256 f32 activation with `between` scheduled before its done."""
    return f"""HloModule m, is_scheduled=true

{extra_comps}
ENTRY %main (x: f32[256,256], w: f32[10,256,1024]{params}) -> f32[256,256] {{
  %x = {ACT} parameter(0)
  %w = {STACK} parameter(1)
  %i = s32[] constant(3)
  %z = s32[] constant(0)
  %copy-start = {COPY} copy-start(%x)
{between}
  %copy-done = f32[256,256]{{1,0:S(5)}} copy-done(%copy-start)
  ROOT %out = {ACT} negate(%x)
}}
"""


def _compute(text: str, model: Roofline = MODEL) -> int:
    (row,) = estimate_overlap(text, model)["ops"]
    return row["compute_ps"]


def test_a_dynamic_slice_reads_the_slice_not_the_stacked_array():
    between = "  %ds = f32[1,256,1024]{2,1,0} dynamic-slice(%w, %i, %z, %z), " \
              "dynamic_slice_sizes={1,256,1024}"
    # Reads the 1 MiB slice and writes it: 2 MiB at 1 TB/s. The stack is 10 MiB.
    assert _compute(_module(between)) == 2 * SLICE_BYTES


def test_a_fusion_counts_the_slices_its_parameters_feed():
    comps = f"""%fused_slice (p0: f32[10,256,1024], p1: s32[]) -> f32[1,256,1024] {{
  %p0 = {STACK} parameter(0)
  %p1 = s32[] parameter(1)
  %c0 = s32[] constant(0)
  %ds = f32[1,256,1024]{{2,1,0}} dynamic-slice(%p0, %p1, %c0, %c0), \
dynamic_slice_sizes={{1,256,1024}}
  ROOT %cp = f32[1,256,1024]{{2,1,0}} copy(%ds)
}}
"""
    between = ("  %f = f32[1,256,1024]{2,1,0} fusion(%w, %i), kind=kLoop, calls=%fused_slice")
    # The slice in and out, and the 4-byte index.
    assert _compute(_module(between, comps)) == 2 * SLICE_BYTES + 4


def test_an_in_place_update_writes_the_update_not_its_buffer():
    comps = f"""%fused_dus (p0: f32[10,256,1024], p1: s32[], p2: f32[1,256,1024]) \
-> f32[10,256,1024] {{
  %p0 = {STACK} parameter(0)
  %p1 = s32[] parameter(1)
  %p2 = f32[1,256,1024]{{2,1,0}} parameter(2)
  %c0 = s32[] constant(0)
  ROOT %dus = {STACK} dynamic-update-slice(%p0, %p2, %p1, %c0, %c0)
}}
"""
    between = ("  %u = f32[1,256,1024]{2,1,0} broadcast(%i), dimensions={}\n"
               f"  %f = {STACK} fusion(%w, %i, %u), kind=kLoop, calls=%fused_dus")
    # broadcast: writes 1 MiB (+ reads 4 B); the fusion reads and writes the 1 MiB update
    # (+ its 4-byte index), not the 10 MiB buffer.
    assert _compute(_module(between, comps)) == (SLICE_BYTES + 4) + 2 * SLICE_BYTES + 4
    # A bare in-place dynamic-update-slice likewise.
    bare = ("  %u = f32[1,256,1024]{2,1,0} broadcast(%i), dimensions={}\n"
            f"  %d = {STACK} dynamic-update-slice(%w, %u, %i, %z, %z)")
    assert _compute(_module(bare)) == (SLICE_BYTES + 4) + 2 * SLICE_BYTES


def test_tpu_tiles_pad_the_minor_dimension_of_copies_and_compute():
    a = parse_shape("f32[256,64]{1,0:T(8,128)}")
    assert a.nbytes == 256 * 64 * 4 and a.layout_nbytes == 256 * 128 * 4
    assert parse_shape("f32[]{:T(128)}").layout_nbytes == 512
    assert parse_shape("bf16[8,256]{1,0:T(8,128)(2,1)}").layout_nbytes == 8 * 256 * 2
    # Column-major: dim 0 (6) is the minor one and pads to 128; dim 1 (128) is a multiple of 8.
    assert parse_shape("f32[6,128]{0,1:T(8,128)}").layout_nbytes == 128 * 128 * 4
    text = """HloModule m, is_scheduled=true

ENTRY %main (x: f32[256,64]) -> f32[256,64] {
  %x = f32[256,64]{1,0:T(8,128)} parameter(0)
  %copy-start = (f32[256,64]{1,0:T(8,128)S(5)}, f32[256,64]{1,0:T(8,128)}, u32[]) copy-start(%x)
  %copy-done = f32[256,64]{1,0:T(8,128)S(5)} copy-done(%copy-start)
  ROOT %n = f32[256,64]{1,0:T(8,128)} negate(%x)
}
"""
    (o,) = offload_inventory(text).ops
    assert o.bytes == 256 * 64 * 4 and o.layout_bytes == 2 * o.bytes
    (row,) = estimate_overlap(text, MODEL)["ops"]
    assert row["transfer_ps"] == round(2 * o.bytes / LINK * PS_PER_S)


def test_each_kernel_takes_at_least_the_floor():
    between = "\n".join(f"  %s{k} = s32[] add(%i, %z)" for k in range(5))
    assert _compute(_module(between)) == 5 * 12  # three 4-byte arrays each, 1 ps a byte
    floored = Roofline(HBM, 1e18, 1e18, LINK, kernel_floor_ps=1_000_000)
    assert _compute(_module(between), floored) == 5 * 1_000_000
    # A copy is a stream operation too: it starts one floor after it is issued.
    (row,) = estimate_overlap(_module(""), floored)["ops"]
    assert row["transfer_ps"] == 1_000_000 + round(ACT_BYTES / LINK * PS_PER_S)


def _three_h2d_then_d2h() -> str:
    host = "f32[256,256]{1,0:S(5)}"
    h2d = f"({ACT}, {host}, u32[])"
    return f"""HloModule m, is_scheduled=true

ENTRY %main (a: f32[256,256], b: f32[256,256], c: f32[256,256], x: f32[256,256]) -> f32[256,256] {{
  %a = {host} parameter(0)
  %b = {host} parameter(1)
  %c = {host} parameter(2)
  %x = {ACT} parameter(3)
  %cs0 = {h2d} copy-start(%a)
  %cs1 = {h2d} copy-start(%b)
  %cs2 = {h2d} copy-start(%c)
  %d2h = {COPY} copy-start(%x)
  %cd0 = {ACT} copy-done(%cs0)
  %cd1 = {ACT} copy-done(%cs1)
  %cd2 = {ACT} copy-done(%cs2)
  %dd = {host} copy-done(%d2h)
  ROOT %n = {ACT} negate(%cd2)
}}
"""


def test_copies_in_flight_together_share_the_link_in_issue_order():
    t = round(ACT_BYTES / LINK * PS_PER_S)
    est = estimate_overlap(_three_h2d_then_d2h(), MODEL)
    rows = {r["op"]: r for r in est["ops"]}
    assert [rows[n]["duration_ps"] for n in ("cs0", "cs1", "cs2")] == [t, 2 * t, 3 * t]
    assert [rows[n]["queued_ps"] for n in ("cs0", "cs1", "cs2")] == [0, t, 2 * t]
    assert rows["d2h"]["duration_ps"] == t  # full duplex: the other direction's queue
    assert est["step_ps"] == 3 * t + est["busy_ps"]
    half = Roofline(HBM, 1e18, 1e18, LINK, full_duplex=False)
    rows = {r["op"]: r for r in estimate_overlap(_three_h2d_then_d2h(), half)["ops"]}
    assert rows["d2h"]["duration_ps"] == 4 * t  # half duplex: behind the three H2D copies


def test_break_even_and_the_hidden_fraction_are_the_same_numbers():
    between = "\n".join(f"  %s{k} = {ACT} negate(%x)" for k in range(4))  # 4 x 512 KiB
    text = _module(between)
    est = estimate_overlap(text, MODEL)
    d = est["per_step"]["D2H"]
    be = d["break_even_Bps"]
    assert d["hidden_fraction"] < 1.0 and be > LINK and not d["never_hides"]
    # The copy (256 KiB) hides exactly when the link moves it within the 4 x 512 KiB of work.
    assert be == pytest.approx(ACT_BYTES / (4 * 2 * ACT_BYTES / HBM), rel=1e-6)
    faster = Roofline(HBM, 1e18, 1e18, be * 1.001)
    assert estimate_overlap(text, faster)["per_step"]["D2H"]["hidden_fraction"] == 1.0
    slower = Roofline(HBM, 1e18, 1e18, be * 0.999)
    assert estimate_overlap(text, slower)["per_step"]["D2H"]["hidden_fraction"] < 1.0
    for r in est["ops"]:  # invariants
        assert 0 <= r["hidden_ps"] <= r["duration_ps"]
        assert r["exposed_ps"] == r["duration_ps"] - r["hidden_ps"]


def test_a_copy_with_nothing_beside_it_hides_at_no_bandwidth():
    est = estimate_overlap(_module(""), MODEL)
    (row,) = est["ops"]
    assert row["never_hides"] and row["break_even_Bps"] is None
    assert row["why_not"] == "nothing scheduled beside it"
    assert est["per_step"]["D2H"]["never_hides"] == ["copy-start"]
    assert est["per_step"]["D2H"]["break_even_Bps"] is None and est["break_even_Bps"] is None
    assert row["hidden_fraction"] == 0.0


def test_h100_scan_cannot_hide_at_pcie_gen5():
    """The physics check of issue 20 on the real XLA:GPU module: each layer's work beside a
    256 KiB copy is a few microseconds on an H100 (two 1 MiB slice copies, two small GEMMs,
    1 us floor each), while the copy takes ~5 us at the measured 54.7 GB/s plus its setup
    (command buffers off, as `overlap capture` runs: with them on nothing hides at all)."""
    model, _ = roofline_for(get_target("h100"), command_buffers=False)
    assert model.host_link_Bps == 54.7e9 and model.kernel_floor_ps == 1_000_000
    assert get_target("h100").nominal_link_Bps == 64e9
    est = estimate_overlap((FIX / "h100_scan_offload_x.hlo.txt").read_text(), model)
    assert est["per_step"]["all"]["hidden_fraction"] < 1.0
    assert est["break_even_Bps"] > 64e9
    for r in est["ops"]:  # no whole stacked array (10 MiB) is charged: < 3 MiB a kernel
        assert r["compute_ps"] < len(r["scheduled_beside"]) * max(
            1_000_000, 2 * 3 * (1 << 20) / 3.35e12 * PS_PER_S)


def test_gpu_budget_is_jax_share_of_what_the_device_reports():
    h100 = get_target("h100")
    assert h100.device_memory_bytes == 81559 << 20  # 79.6 GiB, not 80e9 B = 74.5 GiB
    b = memory_budget(h100, env={})
    assert b.fraction == JAX_GPU_MEM_FRACTION == 0.75
    assert b.bytes == int(0.75 * (81559 << 20)) and "0.75" in b.source
    assert memory_budget(h100, env={"XLA_PYTHON_CLIENT_MEM_FRACTION": ".9"}).fraction == 0.9
    assert memory_budget(h100, env={"XLA_PYTHON_CLIENT_ALLOCATOR": "platform"}).bytes == (
        81559 << 20)
    assert memory_budget(h100, budget_gib=40).bytes == 40 << 30
    assert memory_budget(h100, fraction=0.5).bytes == (81559 << 20) // 2
    assert memory_budget(get_target("v5e"), env={}).bytes == 16 << 30  # no fraction on TPU
    with pytest.raises(UsageError):
        memory_budget(h100, fraction=1.5)
    with pytest.raises(UsageError):
        memory_budget(h100, env={"XLA_PYTHON_CLIENT_MEM_FRACTION": "lots"})


def test_device_kinds_name_targets():
    assert target_for_device_kind("TPU v6 Lite") == "v6e"
    assert target_for_device_kind("TPU v5 lite") == "v5e"
    assert target_for_device_kind("TPU v5") == "v5p"
    assert target_for_device_kind("NVIDIA H100 80GB HBM3") == "h100"
    assert target_for_device_kind("Tesla V100-SXM2-16GB") is None
