"""Property tests: whatever the SYNTHETIC builder writes, the reader reads back exactly."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from overlap.trace.protos import XSpace
from overlap.trace.reader import read_xspace
from overlap.trace.synthetic import SyntheticTrace

US = 1_000_000

gpu_event = st.tuples(
    st.sampled_from(["kernel", "D2H", "H2D", "D2D"]),
    st.integers(min_value=1 * US, max_value=10_000 * US),  # start
    st.integers(min_value=0, max_value=500 * US),  # duration (zero-length allowed)
    st.integers(min_value=0, max_value=1 << 34),  # bytes
    st.sampled_from([7, 13, 20, 21]),  # stream
    st.integers(min_value=0, max_value=2),  # device
    st.sampled_from(["pinned", "pageable"]),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(gpu_event, max_size=40))
def test_gpu_tables_match_builder_truth(events):
    t = SyntheticTrace()
    gpus = {}
    for kind, start, dur, nbytes, stream, dev, host_kind in events:
        gpu = gpus.get(dev) or gpus.setdefault(dev, t.gpu(dev))
        if kind == "kernel":
            gpu.kernel(start, dur, stream=stream, name=f"k{stream}")
        else:
            gpu.memcpy(kind, start, dur, nbytes, stream=stream, host_kind=host_kind,
                       hlo_op=f"copy-start.{start % 7}")
    r = read_xspace(XSpace.FromString(t.to_bytes()), host="h")
    want = sorted((x.device, x.direction, x.start_ps, x.end_ps, x.bytes, x.src_kind, x.dst_kind,
                   x.hlo_op) for x in t.truth.transfers)
    tr = r["transfers"]
    got = sorted(zip(tr["device"], tr["direction"], tr["start_ps"], tr["end_ps"], tr["bytes"],
                     tr["src_kind"], tr["dst_kind"], tr["hlo_op"]))
    assert got == want
    co = r["compute"]
    assert sorted(zip(co["device"], co["start_ps"], co["end_ps"], co["name"])) == sorted(
        (c.device, c.start_ps, c.end_ps, c.name) for c in t.truth.compute)


tpu_copy = st.tuples(
    st.sampled_from(["D2H", "H2D"]),
    st.integers(min_value=1 * US, max_value=5_000 * US),
    st.integers(min_value=20_000, max_value=300 * US),
    st.lists(st.integers(min_value=1, max_value=64), min_size=1, max_size=3),
    st.sampled_from(["f32", "bf16"]),
)


@settings(max_examples=40, deadline=None)
@given(st.lists(tpu_copy, max_size=12), st.booleans())
def test_tpu_tables_match_builder_truth(copies, async_line):
    t = SyntheticTrace()
    tpu = t.tpu(0, async_line=async_line)
    for direction, start, span, dims, dtype in copies:
        tpu.async_copy(direction, start, start + span, dims=tuple(dims), dtype=dtype)
        tpu.op(start, span // 2, name=f"fusion.{start % 5}")
    r = read_xspace(XSpace.FromString(t.to_bytes()), host="h")
    tr = r["transfers"]
    got = sorted(zip(tr["direction"], tr["start_ps"], tr["end_ps"], tr["bytes"], tr["hlo_op"]))
    want = sorted((x.direction, x.start_ps, x.end_ps, x.bytes, x.hlo_op)
                  for x in t.truth.transfers)
    # Without the async line a copy-start pairs with the next copy-done of the same name;
    # names are unique per copy here, so that pairing is exact too.
    assert got == want
    assert len(r["compute"]) == len(copies)
