"""The host-plane rules (`overlap.trace.host`) against a per-event reference.

The reader decides which host events give rows with whole-line array work (events that can
never give a row are set aside before any stat is read). The reference here applies the
rules of `overlap.trace.host` to one event at a time through protobuf's messages, so any
shortcut that changes a row, drops one or invents one shows up, whatever the stat types.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from overlap.trace import host, wire
from overlap.trace.names import MEMORY_EVENT_KINDS
from overlap.trace.protos import XSpace
from overlap.trace.reader import read_xspace
from overlap.trace.synthetic import LINE_TIMESTAMP_NS, U64, Ref, _PlaneWriter
from overlap.trace.wire import Plane, as_id, as_int
from tests.conftest import SAMPLE_TRACES

BASE_PS = LINE_TIMESTAMP_NS * 1000
# The stats the rules read: an event carrying one (or whose metadata carries any stat) counts.
RULE_STATS = ("_r", "step_num", "hlo_op", "hlo_module", "device_ordinal", "allocator_name",
              "bytes_allocated", "bytes_reserved", "peak_bytes_in_use", "requested_bytes",
              "allocation_bytes", "index_on_host")
INTS = ("bytes_allocated", "bytes_reserved", "peak_bytes_in_use", "requested_bytes",
        "allocation_bytes")

NAMES = ["MemoryAllocation", "MemoryDeallocation", "train", "ThunkExecutor::Execute",
         "fusion.1", "$model.py:42 layer", "end: x", "ThreadpoolListener::Run",
         "cuLaunchKernel"]
# Values of every type a stat can hold, including ones no profiler writes for that stat.
value = st.one_of(
    st.integers(min_value=-3, max_value=5), st.integers(min_value=1 << 40, max_value=1 << 45),
    st.just(U64((1 << 64) - 1)), st.just(U64(7)), st.sampled_from([0.0, 2.5, float("nan")]),
    st.sampled_from(["", "3", "GPU_0_bfc", "GPU_1_bfc", "xla_gpu_host_bfc", "a::b::dot.3"]),
    st.sampled_from([Ref("GPU_0_bfc"), Ref("x::fusion.2")]), st.just(True), st.just(b"12"))
stats = st.dictionaries(
    st.sampled_from([*RULE_STATS, "program_id", "correlation_id", "fragmentation"]), value,
    max_size=4)
# metadata (len(NAMES): an id no metadata of the plane has, so no name), line
event = st.tuples(st.integers(0, len(NAMES)), st.integers(0, 2),
                  st.integers(0, 10**6), st.integers(0, 10**5), stats)


def _build(meta_stats: list[dict], events: list[tuple]) -> XSpace:
    xs = XSpace()
    w = _PlaneWriter(xs.planes.add(name="/host:CPU"))
    mids = [w.event_id(n, stats=s) for n, s in zip(NAMES, meta_stats)]
    mids.append(max(mids) + 100)  # (no metadata)
    for m, line, start, dur, s in events:
        w.event(w.line(line + 1, f"line{line}"), mids[m], BASE_PS + start, dur, s)
    return xs


def _reference(xs: XSpace) -> tuple[list, list, list]:
    """(steps, memory rows, compute rows): each event on its own, through upb."""
    P = Plane(xs.planes[0])
    plane_can_row = bool(P.stat_ids.get("_r") or P.stat_ids.get("hlo_op"))
    wanted = P.ids(*RULE_STATS)
    steps, mem, comp = [], [], []
    for line in xs.planes[0].lines:
        for e in line.events:
            md = P.meta.get(e.metadata_id)
            name = md.name if md is not None else ""
            if name.startswith(("$", "end: ", "ThreadpoolListener::")):
                continue
            if not plane_can_row and name not in MEMORY_EVENT_KINDS:
                continue
            s: dict[str, Any] = dict(P.meta_stats(e.metadata_id))
            s.update(P.stats(e.stats, wanted))  # the event's own first stat wins
            if not s:
                continue
            start = line.timestamp_ns * 1000 + e.offset_ps
            if name in MEMORY_EVENT_KINDS:
                alloc = s.get("allocator_name")
                if alloc is None and s.get("index_on_host") is not None:
                    alloc = f"index_on_host:{s['index_on_host']}"
                if isinstance(alloc, float) and alloc != alloc:
                    # a NaN double as the name reads as missing: the tables' documented blind
                    # spot (overlap.trace.tables), after the index_on_host rule saw a name
                    alloc = None
                dev = (f"GPU:{alloc[4:-4]}" if isinstance(alloc, str) and alloc.startswith("GPU_")
                       and alloc.endswith("_bfc") and alloc[4:-4].isdigit() else None)
                mem.append((start, alloc, dev, MEMORY_EVENT_KINDS[name],
                            *(as_int(s.get(c)) or 0 for c in INTS)))
            elif s.get("_r"):
                steps.append((start, start + e.duration_ps, as_int(s.get("step_num")), name))
            elif "hlo_op" in s:
                pid = P.stats(e.stats).get("program_id",
                                           P.meta_stats(e.metadata_id).get("program_id"))
                comp.append((start, start + e.duration_ps, name,
                             f"CPU:{as_int(s.get('device_ordinal')) or 0}", as_id(pid)))
    steps.sort(key=lambda r: (r[0], r[1], r[2] if r[2] is not None else -1, r[3]))
    steps = [(num if num is not None else k, name, a, b)
             for k, (a, b, num, name) in enumerate(steps)]
    return steps, mem, comp


def _nan_free(rows: list[tuple]) -> list[tuple]:
    return [tuple("nan" if isinstance(v, float) and v != v else v for v in r) for r in rows]


@contextlib.contextmanager
def _decoding(scanner: bool, grouped: bool):
    """The scanner or upb; the rules' stats as interned groups or as records."""
    saved = wire.SCANNER, host._GROUP_MAX_EVENTS
    wire.SCANNER = wire.SCANNER if scanner else None
    host._GROUP_MAX_EVENTS = host._GROUP_MAX_EVENTS if grouped else -1
    try:
        yield
    finally:
        wire.SCANNER, host._GROUP_MAX_EVENTS = saved


@settings(max_examples=60, deadline=None)
@given(st.lists(stats, min_size=len(NAMES), max_size=len(NAMES)),
       st.lists(event, max_size=40))
@example(meta_stats=[{}] * len(NAMES),  # an allocation whose allocator_name is a NaN double
         events=[(0, 0, 0, 0, {"allocator_name": float("nan")})])
@example(meta_stats=[{}] * len(NAMES),  # a step and a CPU op of no metadata: named ""
         events=[(len(NAMES), 0, 0, 5, {"_r": 1, "step_num": 3}),
                 (len(NAMES), 1, 10, 5, {"hlo_op": "fusion.1", "device_ordinal": 2})])
def test_host_rows_match_per_event_reference(meta_stats, events):
    xs = _build(meta_stats, events)
    want = _reference(xs)
    for scanner in (True, False):
        for grouped in (True, False):
            with _decoding(scanner, grouped):
                _check(read_xspace(xs, host="h"), *want)


def _check(r: dict, want_steps: list, want_mem: list, want_comp: list) -> None:
    s = r["steps"]
    assert list(zip(s["step"], s["name"], s["start_ps"], s["end_ps"])) == want_steps
    m = r["memory"]
    got_mem = list(zip(m["time_ps"], m["allocator"], m["device"], m["kind"],
                       *(m[c] for c in INTS)))
    assert _nan_free(sorted(got_mem, key=repr)) == _nan_free(sorted(want_mem, key=repr))
    c = r["compute"]
    pids = [None if pd.isna(v) else int(v) for v in c["program_id"]]
    got_comp = list(zip(c["start_ps"], c["end_ps"], c["name"], c["device"], pids))
    assert sorted(got_comp, key=repr) == sorted(want_comp, key=repr)


def test_host_plane_rows_by_construction():
    """A step, an allocator event named by index, a CPU thunk, and events that never give a
    row (a Python frame carrying `_r`, a CUDA API call, a falsy `_r`)."""
    meta = [{} for _ in NAMES]
    meta[4] = {"hlo_op": "fusion.1"}  # fusion.1: compute by its metadata
    events = [
        (2, 0, 100, 50, {"_r": 1, "step_num": 4}),
        (0, 1, 120, 0, {"index_on_host": 2, "bytes_allocated": 64}),
        (4, 2, 130, 5, {"device_ordinal": 1}),
        (5, 0, 140, 5, {"_r": 1}),
        (8, 0, 150, 5, {"correlation_id": 9}),
        (3, 0, 160, 5, {"_r": 0}),
    ]
    r = read_xspace(_build(meta, events), host="h")
    assert list(zip(r["steps"]["step"], r["steps"]["start_ps"])) == [(4, BASE_PS + 100)]
    assert r["memory"]["allocator"].tolist() == ["index_on_host:2"]
    assert r["memory"]["bytes_allocated"].tolist() == [64]
    assert list(zip(r["compute"]["name"], r["compute"]["device"])) == [("fusion.1", "CPU:1")]


def test_meta_stat_without_value_makes_an_allocation_count():
    """A metadata stat of a known name with no value set (an unset oneof) still makes the
    metadata's stats dict non-empty: its allocator events count (`_meta_sets`, whether read
    through the plane's `MetaTable` or through upb)."""
    xs = _build([{}] * len(NAMES), [(0, 0, 10, 0, {}), (1, 1, 20, 0, {})])
    pl = xs.planes[0]
    sid = max(pl.stat_metadata, default=0) + 1
    pl.stat_metadata[sid].id = sid
    pl.stat_metadata[sid].name = "fragmentation"  # a stat no rule reads
    md = next(m for m in pl.event_metadata.values() if m.name == "MemoryAllocation")
    md.stats.add(metadata_id=sid)  # no value
    want = _reference(xs)
    assert len(want[1]) == 1
    for scanner in (True, False):
        with _decoding(scanner, True):
            _check(read_xspace(xs, host="h"), *want)


_HOST_CAPTURES = ("tpu-v6e-offload", "gpu-v100-tf-multiworker", "rocm/mi300x-jax08-attention",
                  "cpu-transformer-tiny/everything_saveable",
                  "gpu-h100/scan-h100/offload_x")


@pytest.mark.parametrize("rel", _HOST_CAPTURES)
def test_lines_read_together_give_the_rows_of_lines_read_alone(rel):
    """Short host lines are decoded as one segment (`host._read_segment`): on real captures
    (a TPU host's ~120 thread lines, ROCm HIP calls, CUDA, XLA:CPU compute) every table is
    the one reading each line on its own gives, rows in the same order, each compute row
    with its own line's id and name."""
    import numpy as np

    from overlap.trace.reader import read_host_file

    (path,) = sorted((SAMPLE_TRACES / rel).rglob("*.xplane.pb"))[:1]
    together = read_host_file(path)
    saved = host._SEGMENT_LINE_MAX
    host._SEGMENT_LINE_MAX = 0
    try:
        alone = read_host_file(path)
    finally:
        host._SEGMENT_LINE_MAX = saved
    for table in ("steps", "memory", "compute", "transfers"):
        a, b = together[table], alone[table]
        assert list(a) == list(b), table
        for col in a:
            x, y = np.asarray(a[col]), np.asarray(b[col])
            assert x.dtype == y.dtype and len(x) == len(y), (table, col)
            assert [repr(v) for v in x.tolist()] == [repr(v) for v in y.tolist()], (table, col)
    assert len(together["compute"]["line"]) or rel != "cpu-transformer-tiny/everything_saveable"


_VALUES = [-3, 0, 1, 5, 1 << 44, U64((1 << 64) - 1), U64(7), 0.0, 2.5, float("nan"), "", "3",
           "GPU_0_bfc", "GPU_1_bfc", "xla_gpu_host_bfc", Ref("GPU_0_bfc"), True, b"12"]


@pytest.mark.parametrize("seed", [0, 1])
def test_long_lines_match_per_event_reference(seed):
    """Lines of thousands of events (the per-distinct-value paths: `unique_inverse_at`'s and
    `isin_ids`'s tables start at 1,024 rows), every value type in the rules' stats, against
    the reference read event by event."""
    import random

    rng = random.Random(seed)

    def stats() -> dict:
        return {rng.choice(RULE_STATS): rng.choice(_VALUES) for _ in range(rng.randint(0, 3))}

    meta = [stats() if rng.random() < 0.3 else {} for _ in NAMES]
    # allocator events, steps (distinct and repeated step numbers) and compute dominate
    events = [(rng.choice([0, 0, 1, 2, 4, 3, 8]), rng.randint(0, 1),
               rng.randint(0, 10**6), rng.randint(0, 10**4),
               {**stats(), **({"_r": 1, "step_num": rng.choice([k, k % 7, "x", 2.0])}
                              if rng.random() < 0.2 else {})})
              for k in range(3000)]
    want = _reference(_build(meta, events))
    assert len(want[0]) > 100 and len(want[1]) > 1024
    for scanner in (True, False):
        with _decoding(scanner, True):
            _check(read_xspace(_build(meta, events), host="h"), *want)


@pytest.mark.parametrize("seed", range(6))
def test_isin_ids_is_np_isin(seed):
    """`values.isin_ids` (a bool table over the ids' range) against `np.isin`: ids of every
    integer dtype, negative and offset ranges, keys outside the range, a uint64 key beyond
    int64, a dict's keys, few and many rows, none."""
    import numpy as np

    from overlap.trace.values import isin_ids

    rng = np.random.default_rng(seed)
    for dt in (np.int64, np.uint64, np.int32, np.intp):
        for k in range(40):
            lo, span = int(rng.integers(0, 5000)), int(rng.integers(1, 300_000))
            shift = -1000 if k % 3 == 0 and dt != np.uint64 else 0
            vals = (rng.integers(lo, lo + span, int(rng.integers(0, 5000))) + shift).astype(dt)
            keys: Any = rng.integers(-2000, lo + span + 2000, int(rng.integers(0, 60))).tolist()
            if k % 7 == 0:
                keys.append((1 << 63) + 5)
            if k % 11 == 0:
                keys = dict.fromkeys(keys, "x")
            got = isin_ids(vals, keys)
            assert got.dtype == bool and got.tolist() == np.isin(vals, list(keys)).tolist()


def test_one_allocator_columns_are_repeated(tmp_path):
    """A line of one allocator's events: its name and device columns are `repeated` views
    (`Coded` in `_memory_rows`: no object per event), the kinds per event; with staging
    events named by their index among them, every row still gets its own name."""
    import numpy as np

    from overlap.arrays import is_repeated
    from overlap.trace.reader import read_host_file

    meta = [{} for _ in NAMES]
    events = [(k % 2, 0, 10 * k, 0, {"allocator_name": "GPU_0_bfc", "bytes_allocated": k})
              for k in range(2000)]
    p = tmp_path / "h.xplane.pb"
    p.write_bytes(_build(meta, events).SerializeToString())
    m = read_host_file(p)["memory"]
    assert is_repeated(m["allocator"]) and is_repeated(m["device"])
    assert set(np.asarray(m["allocator"]).tolist()) == {"GPU_0_bfc"}
    assert set(np.asarray(m["device"]).tolist()) == {"GPU:0"}
    assert np.asarray(m["kind"]).tolist()[:2] == [MEMORY_EVENT_KINDS[NAMES[0]],
                                                  MEMORY_EVENT_KINDS[NAMES[1]]]
    events[7] = (0, 0, 70, 0, {"index_on_host": 3})
    want = _reference(_build(meta, events))
    got = read_xspace(_build(meta, events), host="h")
    _check(got, *want)
    assert np.asarray(got["memory"]["allocator"]).tolist()[7] == "index_on_host:3"


def test_api_calls_without_a_rule_stat_keep_no_row(monkeypatch):
    """A GPU host line is mostly CUDA API calls (a real 4000-step H200 capture: 3.1M on one
    line): events whose metadata gives no row keep one only where they carry `_r` or
    `hlo_op` themselves (`LineEvents(keep_if=)`), on both decoders; the tables are the
    per-event reference's."""
    meta = [{} for _ in NAMES]
    events = [(8, 0, 10 * i, 5, {"correlation_id": U64(i)}) for i in range(50)]
    events += [(2, 0, 1000 + 100 * k, 50, {"_r": 1, "step_num": k}) for k in range(3)]
    events += [(8, 0, 2000, 5, {"_r": 1, "step_num": 9}),  # a call that marks a step itself
               (0, 1, 120, 0, {"bytes_allocated": 64, "allocator_name": "GPU_0_bfc"})]
    xs = _build(meta, events)
    want = _reference(xs)
    assert len(want[0]) == 4 and len(want[1]) == 1
    rows: list[int] = []
    orig = wire.LineEvents.__init__

    def counted(self, *a, **k):
        orig(self, *a, **k)
        rows.append(self.n)

    monkeypatch.setattr(wire.LineEvents, "__init__", counted)
    for scanner in (True, False):
        for grouped in (True, False):
            rows.clear()
            with _decoding(scanner, grouped):
                _check(read_xspace(xs, host="h"), *want)
            assert sum(rows) == 5  # 3 steps, the call marking one, the allocation
