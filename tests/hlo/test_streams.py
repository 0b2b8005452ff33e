"""Async ops on XLA:GPU's execution streams (overlap.hlo.streams) and the FIFO queueing the
estimate walks with them: hand-written programs whose answers are known by construction, and
the real H100/H200 captures (the rule against the streams the copies ran on)."""

from __future__ import annotations

import numpy as np
import pytest

from overlap.analysis.copy_join import stream_check
from overlap.hlo.program import _COMMENT_RE, _parse_module
from overlap.hlo.schedule import Roofline, estimate_overlap, predicted_timeline
from overlap.hlo.streams import Streams, execution_streams, is_async_start

HBM = 1e12          # 1 TB/s: 1 byte = 1 ps
LINK = 1e10         # 10 GB/s: 1 byte = 100 ps
MODEL = Roofline(hbm_Bps=HBM, peak_flops_bf16=1e18, peak_flops_f32=1e18, host_link_Bps=LINK)
ACT = "f32[256,256]{1,0}"
ACT_BYTES = 256 * 256 * 4                       # the D2H copy: 26,214,400 ps on the link
COPY_PS = ACT_BYTES * 100
SLICE = "f32[1,256,1024]{2,1,0}"
SLICE_BYTES = 256 * 1024 * 4
# The device-side slice: reads the 1 MiB slice of the stack and writes it, plus its three s32
# indices: 2 MiB + 12 bytes at 1 TB/s.
SLICE_PS = 2 * SLICE_BYTES + 12
NEG_PS = 2 * ACT_BYTES                          # negate(x): reads and writes 256 KiB
FS = f"((f32[10,256,1024]{{2,1,0}}, s32[], s32[], s32[]), {SLICE}, u32[])"


def _program() -> str:
    """A D2H host copy issued first, then a device-side async dynamic slice whose done comes
    right after it, then one kernel, then the copy's done."""
    return f"""HloModule m, is_scheduled=true

%fused_ds (p0: f32[10,256,1024], p1: s32[], p2: s32[], p3: s32[]) -> f32[1,256,1024] {{
  %p0 = f32[10,256,1024]{{2,1,0}} parameter(0)
  %p1 = s32[] parameter(1)
  %p2 = s32[] parameter(2)
  %p3 = s32[] parameter(3)
  ROOT %ds = {SLICE} dynamic-slice(%p0, %p1, %p2, %p3), dynamic_slice_sizes={{1,256,1024}}
}}

ENTRY %main (x: f32[256,256], w: f32[10,256,1024]) -> f32[256,256] {{
  %x = {ACT} parameter(0)
  %w = f32[10,256,1024]{{2,1,0}} parameter(1)
  %i = s32[] constant(3)
  %z = s32[] constant(0)
  %copy-start = (f32[256,256]{{1,0:S(5)}}, {ACT}, u32[]) copy-start(%x)
  %fusion-start = {FS} fusion-start(%w, %i, %z, %z), kind=kLoop, calls=%fused_ds
  %fusion-done = {SLICE} fusion-done(%fusion-start)
  %neg = {ACT} negate(%x)
  %copy-done = f32[256,256]{{1,0:S(5)}} copy-done(%copy-start)
  ROOT %out = {ACT} negate(%neg)
}}
"""


def test_a_device_slice_on_the_host_copys_stream_waits_for_the_copy():
    est = estimate_overlap(_program(), MODEL, streams={"copy-start": 1, "fusion-start": 1},
                           streams_source="given")
    (row,) = est["ops"]
    # the slice starts when the copy is complete; the compute stream waits for the slice at
    # its done, then runs both negates: the copy is never hidden
    assert est["step_ps"] == COPY_PS + SLICE_PS + 2 * NEG_PS
    assert row["duration_ps"] == COPY_PS and row["hidden_ps"] == 0
    assert est["per_step"]["D2H"]["exposed_wall_ps"] == COPY_PS
    assert est["streams"]["modelled"] and est["streams"]["count"] == 1
    assert any("waits for a host copy issued before it" in a for a in est["assumptions"])


def test_on_streams_of_their_own_the_copy_hides_behind_the_slice_wait_and_the_kernel():
    est = estimate_overlap(_program(), MODEL, streams={"copy-start": 1, "fusion-start": 2})
    (row,) = est["ops"]
    # the slice runs at once; the compute stream waits SLICE_PS for it, then one negate, then
    # waits at copy-done for the rest of the copy
    assert est["step_ps"] == COPY_PS + NEG_PS
    assert row["hidden_ps"] == NEG_PS
    # without streams: the slice is free (the model before streams were known)
    old = estimate_overlap(_program(), MODEL)
    assert old["step_ps"] == COPY_PS + NEG_PS and old["ops"][0]["hidden_ps"] == NEG_PS
    assert not old["streams"]["modelled"]


def test_the_timeline_leaves_the_wait_at_a_slice_out_of_compute():
    (comp,) = predicted_timeline(_program(), MODEL, {"copy-start": 1, "fusion-start": 1})
    assert comp["compute"] == [(COPY_PS + SLICE_PS, COPY_PS + SLICE_PS + 2 * NEG_PS)]
    (c,) = comp["copies"]
    assert (c["begin_ps"], c["end_ps"], c["hidden_ps"]) == (0, COPY_PS, 0)


def test_streams_queue_fifo_across_directions_and_device_ops():
    s = Streams({"D2H": 1e12, "H2D": 1e12}, 1.0, True)  # 1 byte = 1 ps
    s.add("d2h", 0, stream="a", direction="D2H", nbytes=1000)
    s.add("h2d", 10, stream="a", direction="H2D", nbytes=500)   # behind d2h on its stream
    s.add("dev", 20, stream="b", device_ps=300)                 # a stream of its own
    s.add("dev2", 30, stream="a", device_ps=50)                 # behind both copies
    assert s.finish("dev") == (20, 320)
    assert s.finish("d2h") == (0, 1000)
    assert s.finish("h2d") == (1000, 1500)
    assert s.finish("dev2") == (1500, 1550)
    # no stream given: each op on its own, the old per-direction link FIFO
    t = Streams({"D2H": 1e12, "H2D": 1e12}, 1.0, True)
    t.add("a", 0, direction="D2H", nbytes=100)
    t.add("b", 0, direction="D2H", nbytes=100)
    t.add("c", 0, direction="H2D", nbytes=100)
    assert (t.finish("a"), t.finish("b"), t.finish("c")) == ((0, 100), (100, 200), (0, 100))


def test_xla_round_robin_follows_the_order_it_is_given():
    text = """HloModule m, is_scheduled=true

%body (p: (s32[])) -> (s32[]) {
  %p = (s32[]) parameter(0)
  %c = (f32[4]{0}, f32[4]{0}, u32[]) copy-start(%k)
  %d = ((f32[4]{0}), f32[4]{0}, u32[]) fusion-start(%k), kind=kLoop, calls=%f
  %e = ((f32[4]{0}), f32[4]{0}, u32[]) async-start(%k), calls=%g
  ROOT %r = (s32[]) tuple(%i)
}

%cond (p: (s32[])) -> pred[] {
  %p = (s32[]) parameter(0)
  ROOT %t = pred[] constant(true)
}

ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  %a = (f32[4]{0}, f32[4]{0}, u32[]) copy-start(%x)
  %b = ((f32[4]{0}), f32[4]{0}, u32[]) fusion-start(%x), kind=kLoop, calls=%f
  %ar = f32[4]{0} all-reduce-start(%x), to_apply=%add
  %w = (s32[]) while(%t0), condition=%cond, body=%body
  ROOT %o = f32[4]{0} negate(%x)
}
"""
    comps, entry = _parse_module(_COMMENT_RE.sub("", text))
    order = {c: [i.name for i in instrs] for c, instrs in comps.items()}
    order["main"] = ["x", "b", "a", "ar", "w", "o"]  # XLA's list order, not the printed one
    got = execution_streams(comps, entry, order, n=4)
    # entry first (b, a), then the while body; the all-reduce-start is not an async-start
    assert got == {"b": 1, "a": 2, "c": 3, "d": 4, "e": 1}
    assert not is_async_start("all-reduce-start") and is_async_start("copy-start")
    # an order that misses an instruction is not XLA's: no streams rather than wrong ones
    order["body"] = order["body"][:-1]
    assert execution_streams(comps, entry, order, n=4) == {}
    assert execution_streams(comps, entry, None) == {}


def test_stream_check_sees_runs_that_break_the_rule():
    # two ops of one rule id, two runs of one execution each; run 1 puts them on two streams
    tr = {"device": np.array(["GPU:0"] * 4, object),
          "start_ps": np.array([0, 10, 100, 110], np.int64),
          "stream": np.array([67, 67, 68, 69], object)}
    op = np.array(["a", "b", "a", "b"], object)
    pid = np.array([7, 7, 7, 7], object)
    ok = stream_check(tr, op, pid, 7, {"a": 1, "b": 1}, {"a": 1, "b": 1})
    assert ok["runs"] == 2 and not ok["agree"] and "ops of id 1 ran on streams" in \
        ok["mismatch"][0]
    # the pool hands other CUDA streams to another run: still the rule
    tr["stream"] = np.array([67, 67, 68, 68], object)
    assert stream_check(tr, op, pid, 7, {"a": 1, "b": 1}, {"a": 1, "b": 1})["agree"]
    # two ids sharing one CUDA stream in one run is not the rule either
    assert not stream_check(tr, op, pid, 7, {"a": 1, "b": 1}, {"a": 1, "b": 2})["agree"]


@pytest.mark.parametrize("gpu", ["gpu-h100/transformer-h100", "gpu-h100/transformer-control",
                                 "gpu-h200/transformer-h100"])
def test_qkv_proj_offloaded_d2h_exposure_on_the_real_captures(gpu_corpus, gpu):
    """The three misses of the accuracy table before streams (predicted 100% hidden, measured
    39-67%): the weight slices that queue behind host copies on their stream."""
    pytest.importorskip("jaxlib")
    import json

    from overlap.analysis.overlap import analyze
    from overlap.plan.predict import predict_capture
    from overlap.trace import read_trace

    run = gpu_corpus / gpu / "qkv_proj_offloaded"
    bw = json.loads((gpu_corpus / gpu.split("/")[0] / "bw.json").read_text())["torch"]["1024"]
    trace = read_trace(str(run))
    result = analyze(trace)
    pred = predict_capture(trace, result, host_link_Bps=bw["d2h_GBps"] * 1e9,
                           h2d_link_Bps=bw["h2d_GBps"] * 1e9)
    (prog,) = pred["programs"]
    st = prog["streams"]
    assert st["modelled"] and st["count"] == 4
    assert "checked on the capture: its host copies ran on those streams in all" in st["source"]
    m = prog["measured_per_step_as_captured"]["D2H"]
    p = prog["predicted_per_step_as_captured"]["D2H"]
    step_ps = json.loads((run / "run.json").read_text())["step_ns"]
    step_ps = sorted(step_ps)[len(step_ps) // 2] * 1000
    # the target: within 25% of measured + 2% of the step
    assert abs(p["exposed_ps"] - m["exposed_ps"]) <= 0.25 * m["exposed_ps"] + 0.02 * step_ps
    assert 0.0 < p["hidden_fraction"] < 0.8
