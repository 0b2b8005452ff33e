"""FLOPs of HLO `convolution`s as XLA:TPU writes matrix products: plain matmuls, the batched
matmuls of attention (batch/head dimensions as spatial dimensions with `lhs_dilate`), projections
(a dimension of 1 padded out) and weight gradients (the batch contracted through a window).

Every line below is real XLA:TPU output (libtpu, v5p, `transformer:tiny`/`transformer:small`,
`overlap plan ... --policy full`), set in a module whose parameters carry the operands' shapes;
the expected counts are worked out by hand from the model's sizes. The last tests compile
`transformer:small` for v5p and hold the roofline against XLA's own `estimated_cycles`."""

from __future__ import annotations

import random
import re

import pytest

from overlap.hlo.program import _COMMENT_RE, _parse_module
from overlap.hlo.schedule import (
    _CALLS_ONE_RE,
    Roofline,
    _conv_fmas,
    _fusion_flops,
    _matmul_flops,
    _Module,
    _valid_positions,
    estimate_overlap,
)

# FLOPs in ps at 1e12 FLOP/s: 1 FLOP = 1 ps, and memory free (so compute_ps == FLOPs).
FLOP_PS = Roofline(hbm_Bps=1e30, peak_flops_bf16=1e12, peak_flops_f32=1e12, host_link_Bps=1e9)


def _module(lhs: str, rhs: str, line: str) -> str:
    """`line` (a real convolution of %a and %b) between a copy's start and done."""
    return f"""HloModule m, is_scheduled=true

ENTRY %main (a: {lhs}, b: {rhs}) -> f32[8] {{
  %a = {lhs} parameter(0)
  %b = {rhs} parameter(1)
  %x = f32[8]{{0}} constant({{0,0,0,0,0,0,0,0}})
  %copy-start = (f32[8]{{0:S(5)}}, f32[8]{{0}}, u32[]) copy-start(%x)
  {line}
  %copy-done = f32[8]{{0:S(5)}} copy-done(%copy-start)
  ROOT %out = f32[8]{{0}} negate(%x)
}}
"""


def _flops(lhs: str, rhs: str, line: str) -> int:
    (row,) = estimate_overlap(_module(lhs, rhs, line), FLOP_PS)["ops"]
    return row["compute_ps"]


def test_a_plain_matmul_written_as_convolution_counts_like_the_dot():
    # v5e scan fixture: x[256,256] @ w[256,1024], no window at all.
    conv = ("%c = f32[256,1024]{1,0:T(8,128)} convolution(%a, %b), dim_labels=bf_io->bf")
    dot = ("%c = f32[256,1024]{1,0} dot(%a, %b), lhs_contracting_dims={1}, "
           "rhs_contracting_dims={0}")
    want = 2 * 256 * 1024 * 256
    assert _flops("f32[256,256]{1,0}", "f32[256,1024]{1,0}", conv) == want
    assert _flops("f32[256,256]{1,0}", "f32[256,1024]{1,0}", dot) == want


def test_attention_batched_matmul_counts_batch_and_heads_once():
    # transformer:small, bhqk,bkhd->bqhd: b=4, h=4, q=k=256, d=64. Batch and heads are the
    # spatial dimensions 0 and 1 with lhs_dilate=4, size=4, stride=3: each output meets one
    # kernel position, so they contribute 4 each, not 4 x 4 (the window is not contracted).
    line = ("%c = bf16[4,4,64,256]{3,2,1,0:T(8,128)(2,1)} convolution(%a, %b), "
            "window={size=4x4 stride=3x3 lhs_dilate=4x4}, dim_labels=0f1b_01oi->01bf")
    assert _flops("bf16[4,256,4,64]{1,3,2,0}", "f32[4,4,256,256]{2,3,1,0}", line) == \
        2 * 4 * 4 * 256 * 256 * 64


def test_tiny_attention_with_unequal_batch_and_heads():
    # transformer:tiny: b=2, h=4, q=k=32, d=16 (size=2x4 stride=1x3 lhs_dilate=2x4).
    line = ("%c = bf16[2,4,16,32]{3,2,1,0:T(8,128)(2,1)} convolution(%a, %b), "
            "window={size=2x4 stride=1x3 lhs_dilate=2x4}, dim_labels=0f1b_01oi->01bf")
    assert _flops("bf16[2,32,4,16]{1,3,2,0}", "f32[2,4,32,32]{2,3,1,0}", line) == \
        2 * 2 * 4 * 32 * 32 * 16


def test_projection_with_a_padded_unit_dimension_is_the_dot():
    # transformer:tiny q projection: x[2,32,64] @ W[64,4x16] = 2 * (2*32) * 64 * 64. The heads
    # (4) are spatial dimension 1: an input of 1 padded 3_3 against a kernel of 4.
    line = ("%c = bf16[2,32,4,16]{1,3,2,0:T(8,128)(2,1)} convolution(%a, %b), "
            "window={size=1x4 pad=0_0x3_3 rhs_reversal=0x1}, dim_labels=0bf1_1oi0->0b1f")
    assert _flops("f32[2,32,64,1]{2,1,3,0}", "bf16[4,16,64,1]{2,1,0,3}", line) == \
        2 * (2 * 32) * 64 * 64


def test_weight_gradient_contracts_the_batch_through_the_window():
    # transformer:small MLP weight gradient: dW[256,2048] = x^T g over 4 x 256 tokens; the
    # batch (4) is a spatial dimension the window (size 4, output 1) really contracts.
    line = ("%c = f32[256,2048,1]{1,0,2:T(8,128)} convolution(%a, %b), window={size=4}, "
            "dim_labels=0fb_0io->bf0")
    assert _flops("f32[4,256,256]{2,1,0}", "bf16[4,256,2048]{2,1,0}", line) == \
        2 * (4 * 256) * 256 * 2048


def test_group_counts_divide_the_contraction():
    # Depthwise 3x3 convolution: 32 channels in 32 groups, so each output reads 1 channel.
    depthwise = ("%c = f32[8,30,30,32]{3,2,1,0} convolution(%a, %b), window={size=3x3}, "
                 "dim_labels=b01f_01io->b01f, feature_group_count=32")
    assert _flops("f32[8,32,32,32]{3,2,1,0}", "f32[3,3,1,32]{3,2,1,0}", depthwise) == \
        2 * (8 * 30 * 30 * 32) * 9
    # Its filter gradient: the 32 images (batch) split into 32 groups, one per output feature.
    grouped = ("%c = f32[1,3,3,32]{3,2,1,0} convolution(%a, %b), window={size=30x30}, "
               "dim_labels=f01b_i01o->b01f, batch_group_count=32")
    fmas = _conv_fmas(grouped.split("),", 1)[1], (8, 32, 32, 32), (8, 30, 30, 32),
                      (1, 3, 3, 32))
    assert fmas == (8 // 1) * 32 * (32 // 32) * (3 * 30) * (3 * 30)


def test_valid_positions_is_the_literal_count():
    """The closed form equals counting every (kernel, output) pair that reads a real input."""
    def literal(n_in, n_k, n_out, stride, pad_lo, lhs_d, rhs_d):
        n = 0
        for k in range(n_k):
            for o in range(n_out):
                u = o * stride - pad_lo + k * rhs_d
                if u % lhs_d == 0 and 0 <= u // lhs_d < n_in:
                    n += 1
        return n

    rng = random.Random(7)
    for _ in range(3000):
        args = (rng.randint(1, 9), rng.randint(1, 9), rng.randint(1, 12), rng.randint(1, 5),
                rng.randint(-3, 6), rng.randint(1, 5), rng.randint(1, 4))
        assert _valid_positions(*args) == literal(*args), args


def test_labels_that_do_not_fit_the_shapes_count_nothing():
    assert _conv_fmas("dim_labels=bf_io->bf", (4, 4, 4), (4, 4), (4, 4)) == 0
    assert _conv_fmas("window={size=3}", (4, 4, 4), (3, 4, 4), (4, 2, 4)) == 0


# -- the real compiler: transformer:small on v5p ---------------------------------------------

V5P_CLOCK_HZ = 1.75e9  # 459 TFLOP/s bf16 = 2 cores x 4 MXUs x 128 x 128 MACs x 2 x 1.75 GHz
V5P_BF16 = 459e12


@pytest.fixture(scope="module")
def small_v5p() -> _Module:
    from overlap.plan.compile import plan_workload

    (plan,) = plan_workload("transformer:small", ["full"], "v5p")
    comps, _ = _parse_module(_COMMENT_RE.sub("", plan.hlo_text))
    return _Module(comps, {i.name: i for c in comps.values() for i in c})


def test_compiled_attention_convolutions_are_2bhqkd(small_v5p):
    from overlap.capture.workloads import TRANSFORMER_SIZES

    cfg = TRANSFORMER_SIZES["small"]
    want = 2 * cfg.batch * cfg.heads * cfg.seq * cfg.seq * cfg.head_dim
    attn = [i for i in small_v5p.by_name.values()
            if i.opcode == "convolution" and "lhs_dilate" in i.attrs]
    assert attn  # XLA:TPU still writes attention this way
    for ins in attn:
        assert _matmul_flops(ins, small_v5p)[0] == want, ins.name


def test_roofline_never_exceeds_xlas_own_estimate(small_v5p):
    """At the bf16 peak a fusion's matrix products cannot take longer than XLA:TPU's own cost
    model says the whole fusion takes (`estimated_cycles` at the v5p clock): the peak is a
    lower bound. Counting attention's batch x head window as contracted broke this ~2x."""
    checked = 0
    for ins in small_v5p.by_name.values():
        mm = re.search(r'"estimated_cycles":"(\d+)"', ins.attrs)
        if ins.opcode != "fusion" or not mm:
            continue
        flops = sum(sum(_fusion_flops(c, small_v5p)) for c in _CALLS_ONE_RE.findall(ins.attrs))
        if not flops:
            continue
        checked += 1
        assert flops / V5P_BF16 <= int(mm.group(1)) / V5P_CLOCK_HZ, ins.name
    assert checked >= 10
