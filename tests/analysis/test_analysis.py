"""Golden, cross-check and property tests for `overlap.analysis.overlap`.

Golden traces are tiny SYNTHETIC captures whose answers are known by construction; expected
values are written as the arithmetic that produces them. The TPU traces are also analyzed by
xprof's own `async_overlap.analyze` (fed by a raw plane walker written here, independent of our
reader) and the summaries must agree.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from overlap.analysis import overlap as analysis
from overlap.analysis.overlap import Coverage, analyze, merge_intervals, subtract_intervals
from overlap.trace.protos import XSpace
from overlap.trace.reader import (
    COMPUTE_COLUMNS,
    STEP_COLUMNS,
    TRANSFER_COLUMNS,
    Trace,
    _frame,
    combine_parts,
    load_xspace,
    read_xspace,
)
from overlap.trace.synthetic import SyntheticTrace, gpu_offload_scenario

US = 1_000_000  # picoseconds per microsecond


def read(path: Path) -> Trace:
    """The reader's tables for one file (what `read_trace` returns for it)."""
    return combine_parts([read_xspace(load_xspace(path), host="h", source=path)], [path])


def make_trace(transfers=(), compute=(), steps=(), backend="gpu") -> Trace:
    """A Trace straight from tuples, for property tests that skip protobufs.

    transfers: (device, direction, start_ps, end_ps, bytes, host_kind)
    compute: (device, start_ps, end_ps); steps: (step, start_ps, end_ps)
    """
    tr = {c: [] for c in TRANSFER_COLUMNS}
    for dev, direction, s, e, nbytes, kind in transfers:
        for c, v in (("host", "h"), ("device", dev), ("direction", direction), ("start_ps", s),
                     ("end_ps", e), ("bytes", nbytes),
                     ("src_kind", kind if direction == "H2D" else "device"),
                     ("dst_kind", kind if direction == "D2H" else "device"), ("async", True),
                     ("stream", 20), ("line", "s"), ("hlo_op", f"copy-start.{len(tr['host'])}"),
                     ("hlo_module", "m"), ("program_id", 1)):
            tr[c].append(v)
    co = {c: [] for c in COMPUTE_COLUMNS}
    for dev, s, e in compute:
        for c, v in (("host", "h"), ("device", dev), ("start_ps", s), ("end_ps", e),
                     ("name", "k"), ("hlo_op", "fusion"), ("hlo_module", "m"), ("stream", 7),
                     ("line", "s"), ("program_id", 1)):
            co[c].append(v)
    stp = {"host": ["h"] * len(steps), "step": [s[0] for s in steps],
           "name": ["train"] * len(steps), "start_ps": [s[1] for s in steps],
           "end_ps": [s[2] for s in steps]}
    empty = _frame(None, {"host": "object"})
    return Trace(sources=[], backend=backend, transfers=_frame(tr, TRANSFER_COLUMNS),
                 compute=_frame(co, COMPUTE_COLUMNS), steps=_frame(stp, STEP_COLUMNS),
                 memory=empty, modules=empty, devices=empty, lines=empty, capture={"h": {}})


# ---------------------------------------------------------------------------------------------
# GPU golden trace


@pytest.fixture(scope="module")
def gpu_golden(tmp_path_factory) -> Trace:
    """Two overlapping kernels, four copies, two steps; every answer below follows from this.

    compute: stream 7 [10, 40) us, stream 8 [30, 50) us  -> union [10, 50) us
    D2H a [20, 60) us: 30 us inside the union        -> partial (0.75)
    D2H b [12, 22) us: all inside                      -> hidden
    H2D c [70, 80) us pageable: no compute             -> exposed
    H2D d at 90 us, zero length                        -> counted, no class
    steps: 0 = [5, 65) us, 1 = [65, 100) us
    """
    t = SyntheticTrace("h")
    g = t.gpu(0)
    g.kernel(10 * US, 30 * US, stream=7)
    g.kernel(30 * US, 20 * US, stream=8)
    g.memcpy("D2H", 20 * US, 40 * US, 4_000_000, hlo_op="copy-start.1")
    g.memcpy("D2H", 12 * US, 10 * US, 1_000_000, hlo_op="copy-start.2")
    g.memcpy("H2D", 70 * US, 10 * US, 2_000_000, hlo_op="copy-start.3", host_kind="pageable")
    g.memcpy("H2D", 90 * US, 0, 64, hlo_op="copy-start.4")
    t.step(0, 5 * US, 65 * US)
    t.step(1, 65 * US, 100 * US)
    return read(t.write(tmp_path_factory.mktemp("gpu") / "golden.xplane.pb"))


def test_gpu_golden_summary(gpu_golden):
    r = analyze(gpu_golden, top=1)
    s = r["summary"]
    assert r["status"] == "OK" and r["backend"] == "gpu" and r["synthetic"] is True
    assert s["transfers"] == 4
    assert s["span_ps"] == (40 + 10 + 10 + 0) * US
    assert s["hidden_ps"] == (50 - 20) * US + 10 * US + 0
    assert s["exposed_ps"] == 60 * US - 40 * US
    assert s["overlap_ratio"] == pytest.approx(40 / 60)
    assert (s["hidden"], s["partial"], s["exposed"], s["zero_length"]) == (1, 1, 1, 1)
    assert s["bytes"] == 4_000_000 + 1_000_000 + 2_000_000 + 64
    assert s["pageable_bytes"] == 2_000_000 and s["pageable_transfers"] == 1
    assert s["pageable_share"] == pytest.approx(2_000_000 / 7_000_064)
    assert any("pageable" in n and "cannot overlap" in n for n in r["notes"])


def test_gpu_golden_directions_and_bandwidth(gpu_golden):
    r = analyze(gpu_golden)
    d2h, h2d = r["by_direction"]["D2H"], r["by_direction"]["H2D"]
    assert (d2h["count"], d2h["span_ps"], d2h["hidden_ps"]) == (2, 50 * US, 30 * US + 10 * US)
    assert d2h["overlap_ratio"] == pytest.approx(40 / 50)
    # Mean in-flight bandwidth: bytes / seconds in flight.
    assert d2h["bandwidth_Bps"] == pytest.approx(5_000_000 / (50 * 1e-6))
    assert (h2d["count"], h2d["span_ps"], h2d["hidden_ps"], h2d["exposed"]) == (2, 10 * US, 0, 1)
    assert r["by_device"][0]["device"] == "GPU:0" and r["by_device"][0]["count"] == 4
    ops = {o["hlo_op"]: o for o in r["by_hlo_op"]["records"]}
    assert ops["copy-start.1"]["exposed_ps"] == 40 * US - 30 * US
    assert ops["copy-start.3"]["bandwidth_Bps"] == pytest.approx(2_000_000 / (10 * 1e-6))


def test_gpu_golden_steps(gpu_golden):
    r = analyze(gpu_golden)
    s0, s1 = r["steps"]
    assert (s0["step"], s0["start_ps"], s0["duration_ps"]) == (0, 5 * US, 60 * US)
    assert s0["transfers"] == 2  # a and b start in step 0
    # Transfers in flight [12, 60) us minus compute [10, 50) us leaves [50, 60) us.
    assert s0["exposed_wall_ps"] == (60 - 50) * US
    assert s0["exposed_frac"] == pytest.approx(10 / 60)
    assert s0["overlap_ratio"] == pytest.approx(40 / 50)
    assert (s1["transfers"], s1["exposed_wall_ps"]) == (2, 10 * US)  # c (and zero-length d)
    ss = r["step_summary"]
    assert ss["mean_exposed_wall_ps"] == (10 * US + 10 * US) // 2
    assert ss["max_exposed_frac"] == pytest.approx(10 / 35)
    assert ss["unassigned_transfers"] == 0


def test_top_exposed_truncation_and_order(gpu_golden):
    r = analyze(gpu_golden, top=1)
    top = r["top_exposed"]
    assert (top["truncated"], top["total_records"], top["returned_records"]) == (True, 4, 1)
    # a and c are both 10 us exposed; the earlier one wins the tie.
    assert top["records"][0]["hlo_op"] == "copy-start.1"
    assert top["records"][0]["ratio"] == pytest.approx(0.75)
    full = analyze(gpu_golden, top=10)["top_exposed"]
    assert full["truncated"] is False and full["returned_records"] == 4
    assert analyze(gpu_golden, top=0)["top_exposed"]["records"] == []


def test_result_is_strict_json_with_integer_times(gpu_golden):
    r = analyze(gpu_golden)
    assert set(r) == set(analysis.RESULT_KEYS)
    back = json.loads(json.dumps(r, allow_nan=False))
    assert back == r

    def walk(x, key=""):
        if isinstance(x, dict):
            for k, v in x.items():
                walk(v, k)
        elif isinstance(x, list):
            for v in x:
                walk(v, key)
        elif key.endswith("_ps") and x is not None:
            assert type(x) is int, (key, x)

    walk(r)


def test_verdict_names_directions_steps_and_worst_op(gpu_golden):
    v = analyze(gpu_golden)["verdict"]
    assert v.startswith("D2H 80% hidden, H2D 0% hidden: 10 us exposed per step")
    # Two ops tie at 10 us exposed: neither is "mostly"; the earlier-sorted one is named.
    assert "largest copy-start.1 (50%)" in v and "mostly" not in v
    assert "of bytes via pageable host memory" in v


def test_gpu_scenario_fractions():
    """gpu_offload_scenario hides exactly int(copy_ps * f) of every copy."""
    copy_ps = 200_000_000
    for f in (1.0, 0.5, 0.25):
        t = gpu_offload_scenario(steps=2, layers=2, hidden_fraction=f, copy_ps=copy_ps)
        r = analyze(read_bytes(t))
        n = 2 * 2 * 2  # steps * directions * layers
        assert r["summary"]["hidden_ps"] == n * int(copy_ps * f)
        assert r["summary"]["exposed_ps"] == n * (copy_ps - int(copy_ps * f))
        per_step = 2 * 2 * (copy_ps - int(copy_ps * f))
        assert all(s["exposed_wall_ps"] == per_step for s in r["steps"])


def read_bytes(t: SyntheticTrace) -> Trace:
    xs = XSpace()
    xs.ParseFromString(t.to_bytes())
    return combine_parts([read_xspace(xs, host="h")], [])


# ---------------------------------------------------------------------------------------------
# Status


def test_cpu_backend_is_no_transfers_with_reason():
    r = analyze(make_trace(compute=[("CPU:0", 1 * US, 2 * US)], backend="cpu"))
    assert r["status"] == "NO_TRANSFERS"
    assert "XLA:CPU" in r["reason"] and "overlap plan" in r["reason"]
    assert "sample_traces" not in r["reason"]  # no GPU captures ship there: point to what exists
    assert r["summary"]["transfers"] == 0 and r["summary"]["overlap_ratio"] is None
    assert r["verdict"].startswith("NO_TRANSFERS")


def test_trace_without_capture_metadata_names_hosts_by_its_transfers():
    # Regression: reduce_parts read an undefined `table` (NameError) when no host had capture
    # metadata, e.g. a Trace assembled by hand.
    trace = make_trace(transfers=[("GPU:0", "D2H", 10 * US, 20 * US, 1024, "pinned")],
                       compute=[("GPU:0", 5 * US, 15 * US)])
    trace.capture = {}
    r = analyze(trace)
    assert r["hosts"] == ["h"]
    assert r["summary"]["transfers"] == 1 and r["summary"]["hidden_ps"] == 5 * US
    empty = make_trace(compute=[("GPU:0", US, 2 * US)])
    empty.capture = {}
    assert analyze(empty)["hosts"] == []


def test_statuses_without_transfers():
    assert analyze(make_trace(compute=[("GPU:0", US, 2 * US)]))["status"] == "NO_TRANSFERS"
    r = analyze(make_trace(backend="unknown"))
    assert r["status"] == "NO_DEVICE_EVENTS" and r["reason"]


def test_transfers_without_compute_are_exposed():
    r = analyze(make_trace(transfers=[("GPU:0", "D2H", US, 3 * US, 10, "pinned")]))
    assert r["summary"]["exposed_ps"] == 2 * US and r["summary"]["exposed"] == 1
    assert analysis.NO_COMPUTE_NOTE in r["notes"] and analysis.NO_STEPS_NOTE in r["notes"]


def test_compute_on_other_device_does_not_hide():
    r = analyze(make_trace(transfers=[("GPU:0", "H2D", US, 3 * US, 10, "pinned")],
                           compute=[("GPU:1", 0, 10 * US)]))
    assert r["summary"]["hidden_ps"] == 0


def test_bad_thresholds_raise():
    with pytest.raises(ValueError):
        analyze(make_trace(), hidden_threshold=0.1, exposed_threshold=0.5)


def test_multi_device_step_wall_is_worst_device():
    # Step [0, 100) us: GPU:0 exposed [10, 30) us, GPU:1 exposed [50, 90) us.
    r = analyze(make_trace(
        transfers=[("GPU:0", "D2H", 10 * US, 30 * US, 1, "pinned"),
                   ("GPU:1", "D2H", 50 * US, 90 * US, 1, "pinned")],
        steps=[(0, 1 * US, 100 * US)]))
    assert r["steps"][0]["exposed_wall_ps"] == (90 - 50) * US
    assert r["steps"][0]["worst_device"] == "GPU:1"


def test_exposed_wall_counts_concurrent_copies_once_and_clips_to_step():
    # Two copies in flight together [20, 40) and [30, 60) us; step ends at 50 us.
    r = analyze(make_trace(
        transfers=[("GPU:0", "D2H", 20 * US, 40 * US, 1, "pinned"),
                   ("GPU:0", "H2D", 30 * US, 60 * US, 1, "pinned")],
        steps=[(0, 1 * US, 50 * US), (1, 50 * US, 80 * US)]))
    assert r["summary"]["exposed_ps"] == 20 * US + 30 * US  # summed per transfer
    assert r["steps"][0]["exposed_wall_ps"] == 50 * US - 20 * US  # union, clipped
    assert r["steps"][1]["exposed_wall_ps"] == 60 * US - 50 * US
    assert r["steps"][1]["transfers"] == 0  # both started in step 0


# ---------------------------------------------------------------------------------------------
# Cross-check against xprof's async_overlap on TPU-shaped traces


def xprof_events(path: Path):
    """Our own raw plane walker: XSpace -> xprof TimelineEvents, no overlap.trace.reader
    involved."""
    from xprof.cli.internal.async_overlap import TimelineEvent

    xs = XSpace()
    xs.ParseFromString(path.read_bytes())
    for plane in xs.planes:
        if not plane.name.startswith("/device:"):
            continue
        for line in plane.lines:
            for ev in line.events:
                yield TimelineEvent(plane=plane.name, line=line.name,
                                    name=plane.event_metadata[ev.metadata_id].name,
                                    start_ps=line.timestamp_ns * 1000 + ev.offset_ps,
                                    duration_ps=ev.duration_ps)


def tpu_trace(seed: int, async_line: bool) -> SyntheticTrace:
    """Random but valid TPU step: ops back to back with gaps, copies across them."""
    rng = np.random.default_rng(seed)
    t = SyntheticTrace("h")
    tpu = t.tpu(0, async_line=async_line)
    now = 2 * US
    for _ in range(int(rng.integers(5, 15))):
        dur = int(rng.integers(1, 50)) * US
        tpu.op(now, dur, name=f"fusion.{int(rng.integers(0, 9))}")
        now += dur + int(rng.integers(0, 20)) * US
    end = now
    for _ in range(int(rng.integers(2, 8))):
        s = int(rng.integers(2 * US, end))
        e = s + int(rng.integers(30_000, 80 * US))  # > start+done op durations (2 * 10 ns)
        tpu.async_copy(str(rng.choice(["D2H", "H2D"])), s, e)
    t.step(0, 1 * US, end + 100 * US)
    return t


@pytest.mark.parametrize("async_line", [True, False], ids=["async_line", "start_done"])
@pytest.mark.parametrize("seed", range(6))
def test_summary_agrees_with_xprof(tmp_path, seed, async_line):
    from xprof.cli.internal.async_overlap import analyze as xprof_analyze

    path = tpu_trace(seed, async_line).write(tmp_path / "tpu.xplane.pb")
    ours = analyze(read(path))["summary"]
    theirs = xprof_analyze(list(xprof_events(path)))["summary"]
    assert theirs["count"] > 0
    assert ours["transfers"] == theirs["count"]
    assert ours["span_ps"] == theirs["span_ps"]
    assert ours["exposed_ps"] == theirs["exposed_ps"]
    for label in ("hidden", "partial", "exposed"):
        assert ours[label] == theirs[label], label


def test_tpu_golden(tmp_path):
    """fusion [10, 50) us; D2H copy-start at 30 us, done ends at 70 us: 20 of 40 us hidden."""
    t = SyntheticTrace("h")
    tpu = t.tpu(0)
    tpu.op(10 * US, 40 * US)
    tpu.async_copy("D2H", 30 * US, 70 * US, dims=(256, 1024), dtype="bf16")
    r = analyze(read(t.write(tmp_path / "t.xplane.pb")))
    s = r["summary"]
    assert (s["span_ps"], s["hidden_ps"], s["partial"]) == (40 * US, (50 - 30) * US, 1)
    assert s["bytes"] == 256 * 1024 * 2
    assert r["by_hlo_op"]["records"][0]["hlo_op"] == "copy-start.1"


# ---------------------------------------------------------------------------------------------
# Interval primitives and properties

intervals = st.lists(st.tuples(st.integers(0, 200), st.integers(0, 60)), max_size=25)


def covered_brute(ivs: list[tuple[int, int]], lo: int, hi: int) -> int:
    pts = set()
    for s, e in ivs:
        pts.update(range(max(s, lo), min(e, hi)))
    return len(pts)


@given(intervals, st.integers(0, 260), st.integers(0, 80))
def test_coverage_matches_brute_force(raw, lo, length):
    ivs = [(s, s + d) for s, d in raw]
    ms, me = merge_intervals([s for s, _ in ivs], [e for _, e in ivs])
    assert np.all(ms[1:] > me[:-1]) and np.all(me > ms)  # sorted, disjoint, non-empty
    got = int(Coverage(ms, me).covered(np.array([lo]), np.array([lo + length]))[0])
    assert got == covered_brute(ivs, lo, lo + length)


@given(intervals, intervals, st.integers(0, 260), st.integers(0, 80))
def test_subtract_matches_brute_force(a_raw, b_raw, lo, length):
    a = [(s, s + d) for s, d in a_raw]
    b = [(s, s + d) for s, d in b_raw]
    am = merge_intervals([s for s, _ in a], [e for _, e in a])
    bm = merge_intervals([s for s, _ in b], [e for _, e in b])
    xs, xe = subtract_intervals(*am, *bm)
    pts_a = {p for s, e in a for p in range(max(s, lo), min(e, lo + length))}
    pts_b = {p for s, e in b for p in range(s, e)}
    got = int(Coverage(xs, xe).covered(np.array([lo]), np.array([lo + length]))[0])
    assert got == len(pts_a - pts_b)


transfer_st = st.tuples(st.sampled_from(["GPU:0", "GPU:1"]), st.sampled_from(["D2H", "H2D"]),
                        st.integers(1, 300), st.integers(0, 80), st.integers(0, 1000))
compute_st = st.tuples(st.sampled_from(["GPU:0", "GPU:1"]), st.integers(0, 300),
                       st.integers(1, 80))


def _trace(transfers, compute):
    return make_trace(
        transfers=[(d, k, s * US, (s + n) * US, b, "pinned") for d, k, s, n, b in transfers],
        compute=[(d, s * US, (s + n) * US) for d, s, n in compute],
        steps=[(0, 0, 150 * US), (1, 150 * US, 400 * US)])


@settings(max_examples=60, deadline=None)
@given(st.lists(transfer_st, min_size=1, max_size=12), st.lists(compute_st, max_size=12))
def test_properties_ratios_and_conservation(transfers, compute):
    r = analyze(_trace(transfers, compute))
    groups = ([r["summary"]] + list(r["by_direction"].values()) + r["by_device"]
              + r["by_hlo_op"]["records"] + r["steps"])
    for g in groups:
        assert g["hidden_ps"] + g["exposed_ps"] == g["span_ps"]
        assert g["overlap_ratio"] is None or 0.0 <= g["overlap_ratio"] <= 1.0
    for row in r["top_exposed"]["records"]:
        assert 0 <= row["exposed_ps"] <= row["span_ps"]
    for s in r["steps"]:
        assert 0 <= s["exposed_wall_ps"] <= s["duration_ps"]
    s = r["summary"]
    assert s["hidden"] + s["partial"] + s["exposed"] + s["zero_length"] == s["transfers"]


@settings(max_examples=60, deadline=None)
@given(st.lists(transfer_st, min_size=1, max_size=10), st.lists(compute_st, max_size=10),
       compute_st)
def test_property_adding_compute_never_lowers_hidden(transfers, compute, extra):
    before, _ = analysis.transfer_table(_trace(transfers, compute))
    after, _ = analysis.transfer_table(_trace(transfers, compute + [extra]))
    assert np.all(after["hidden_ps"].to_numpy() >= before["hidden_ps"].to_numpy())
    r0, r1 = analyze(_trace(transfers, compute)), analyze(_trace(transfers, compute + [extra]))
    for a, b in zip(r0["steps"], r1["steps"]):
        assert b["exposed_wall_ps"] <= a["exposed_wall_ps"]


@settings(max_examples=60, deadline=None)
@given(st.lists(transfer_st, min_size=1, max_size=10), st.lists(compute_st, min_size=1,
       max_size=10), st.data())
def test_property_splitting_compute_changes_nothing(transfers, compute, data):
    i = data.draw(st.integers(0, len(compute) - 1))
    dev, s, n = compute[i]
    cut = data.draw(st.integers(1, n)) if n > 1 else n
    split = compute[:i] + [(dev, s, cut), (dev, s + cut, n - cut)] + compute[i + 1:]
    split = [c for c in split if c[2] > 0]
    r0, r1 = analyze(_trace(transfers, compute)), analyze(_trace(transfers, split))
    assert r0 == r1


# ---------------------------------------------------------------------------------------------
# Scale


def test_million_compute_events_aggregates_stay_consistent():
    """At scale the grouped sums must still add up (speed itself is measured in benchmarks/)."""
    rng = np.random.default_rng(0)
    nc, nt = 1_000_000, 100_000
    devs = np.array(["GPU:0", "GPU:1", "GPU:2", "GPU:3"], dtype=object)
    cs = rng.integers(US, 10**13, nc)
    ts = rng.integers(US, 10**13, nt)
    co = pd.DataFrame({"host": np.full(nc, "h", object), "device": devs[rng.integers(0, 4, nc)],
                       "start_ps": cs, "end_ps": cs + rng.integers(1_000, 20 * US, nc)})
    tr = pd.DataFrame({
        "host": np.full(nt, "h", object), "device": devs[rng.integers(0, 4, nt)],
        "direction": np.where(rng.random(nt) < 0.5, "D2H", "H2D").astype(object),
        "start_ps": ts, "end_ps": ts + rng.integers(0, 50 * US, nt),
        "bytes": rng.integers(0, 1 << 26, nt), "src_kind": np.full(nt, "device", object),
        "dst_kind": np.full(nt, "pinned", object),
        "hlo_op": np.array([f"copy-start.{i}" for i in rng.integers(0, 300, nt)], object)})
    bounds = np.linspace(US, 10**13, 101).astype(np.int64)
    stp = pd.DataFrame({"host": np.full(100, "h", object), "step": np.arange(100),
                        "name": np.full(100, "train", object), "start_ps": bounds[:-1],
                        "end_ps": bounds[1:]})
    empty = pd.DataFrame()
    trace = Trace(sources=[], backend="gpu", transfers=tr, compute=co, steps=stp, memory=empty,
                  modules=empty, devices=empty, lines=empty, capture={"h": {}})
    r = analyze(trace)
    summ = r["summary"]
    assert summ["transfers"] == nt and len(r["steps"]) == 100
    assert summ["hidden_ps"] + summ["exposed_ps"] == summ["span_ps"] == int(
        (tr["end_ps"] - tr["start_ps"]).sum())
    dirs = r["by_direction"]
    assert dirs["D2H"]["hidden_ps"] + dirs["H2D"]["hidden_ps"] == summ["hidden_ps"]
    assert sum(d["span_ps"] for d in r["by_device"]) == summ["span_ps"]


def test_step_sums_stay_exact_past_float_precision():
    # 2**53 + 1 ps is not a float64; a float accumulator would round the step total.
    big = 2**53 + 1
    r = analyze(make_trace(transfers=[("GPU:0", "D2H", US, US + big, 1, "pinned"),
                                      ("GPU:0", "D2H", US, US + 2, 1, "pinned")],
                           steps=[(0, 1, 2**60)]))
    assert r["steps"][0]["span_ps"] == big + 2
    assert r["summary"]["span_ps"] == big + 2


def test_grouped_interval_primitives_equal_the_per_group_ones():
    """`transfer_table` works on every device at once (issue 11: 10,000 devices); the grouped
    primitives must give, group by group, exactly what the per-device primitives give, on
    random intervals with empty, negative, touching and tied ones."""
    from overlap.analysis.overlap import (
        Coverage,
        covered_grouped,
        merge_grouped,
        merge_intervals,
        subtract_grouped,
        subtract_intervals,
    )

    rng = np.random.default_rng(7)
    for _ in range(300):
        G = int(rng.integers(1, 6))
        n, m = int(rng.integers(0, 30)), int(rng.integers(0, 30))
        cg, cs = rng.integers(0, G, n), rng.integers(0, 100, n)
        ce = cs + rng.integers(-5, 30, n)
        tg, ts = rng.integers(0, G, m), rng.integers(0, 100, m)
        te = np.maximum(ts + rng.integers(-5, 30, m), ts)
        mg, ms, me = merge_grouped(cg, cs, ce)
        hidden = covered_grouped(mg, ms, me, tg, ts, te)
        xg, xs, xe = subtract_grouped(*merge_grouped(tg, ts, te), mg, ms, me)
        for g in range(G):
            cov = Coverage(*merge_intervals(cs[cg == g], ce[cg == g]))
            assert np.array_equal(cov.starts, ms[mg == g])
            assert np.array_equal(cov.ends, me[mg == g])
            ti = np.flatnonzero(tg == g)
            assert np.array_equal(hidden[ti], cov.covered(ts[ti], te[ti]))
            ex = subtract_intervals(*merge_intervals(ts[ti], te[ti]), cov.starts, cov.ends)
            assert np.array_equal(ex[0], xs[xg == g]) and np.array_equal(ex[1], xe[xg == g])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.none(), st.text(st.sampled_from(["a", "b", "\0", "é", "Z", "1"]),
                                             max_size=4)), max_size=30))
def test_sorted_codes_equal_pandas_sorted_factorize(values):
    """Issue 15: op names are ranked with numpy strings where that is exact; the ranks must
    be pandas' (the tie-break order of `by_hlo_op`), NULs and missing values included."""
    import pandas as pd

    from overlap.analysis.grouping import sorted_codes

    col = np.empty(len(values), object)
    col[:] = values
    want = pd.factorize(pd.Series(values, dtype=object), sort=True)[0].tolist()
    assert sorted_codes(col).tolist() == want


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), st.sampled_from(["a", "b", "c", "aa", "é"])),
                          st.sampled_from(["D2H", "H2D"]), st.sampled_from([0, 0, 0, 5, 9])),
                max_size=40, unique_by=lambda r: (r[0], r[1])),
       st.integers(0, 6))
def test_top_ops_with_many_ties_equal_a_full_sort(rows, top):
    """`by_hlo_op` keeps the `top` rows by exposed time, ties by op name (missing first) then
    direction; with many ties it sorts only the rows that can make the cut (`_fewest_tied`),
    and must give what sorting every row gives."""
    import pandas as pd

    from overlap.analysis.group_records import most_exposed_ops

    g = _op_groups(rows)
    got = [(None if pd.isna(r["hlo_op"]) else r["hlo_op"], r["direction"])
           for r in most_exposed_ops(g, top)["records"]]
    key = [(-(r[2]), r[0] is not None, r[0] or "", r[1]) for r in rows]
    want = [(rows[i][0], rows[i][1]) for i in sorted(range(len(rows)), key=key.__getitem__)]
    assert got == want[:top]


def _op_groups(rows) -> dict:
    """(host, device, direction, hlo_op) groups of one host: `rows` of (op, direction, extra
    exposed ps), each span 10 + extra ps with 10 ps hidden."""
    from overlap.analysis.group_records import _SUMS

    n = len(rows)
    g = {"host": np.array(["h"] * n, object), "device": np.array(["TPU:0"] * n, object),
         "direction": np.array([r[1] for r in rows], object),
         "hlo_op": np.array([r[0] for r in rows], object)}
    for c in _SUMS:
        g[c] = np.ones(n, np.int64)
    g["span_ps"] = np.array([10 + r[2] for r in rows], np.int64)
    g["hidden_ps"] = np.full(n, 10, np.int64)
    return g


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "B", "aa", "é", "z", "\U0001f600", "a\0"]),
                          st.sampled_from(["D2H", "H2D"]), st.sampled_from([0, 0, 0, 5, 9])),
                max_size=40, unique_by=lambda r: (r[0], r[1])),
       st.integers(1, 6))
def test_top_ops_named_by_strs_equal_a_full_sort(rows, top):
    """Every op named by a str: the tied rows that can make the cut are found by the names'
    ranks (`strcodes.str_codes`, Python's order), and the top is what sorting every row
    gives (a name and its two directions, non-ASCII and NUL in names)."""
    from overlap.analysis.group_records import most_exposed_ops

    g = _op_groups(rows)
    got = [(r["hlo_op"], r["direction"]) for r in most_exposed_ops(g, top)["records"]]
    want = sorted(rows, key=lambda r: (-r[2], r[0], r[1]))
    assert got == [(r[0], r[1]) for r in want[:top]]


@pytest.mark.parametrize("scale", [1, 10**6, 2**59, 2**61])
def test_grouped_primitives_keys_equal_ranks_and_the_per_group_ones(scale, monkeypatch):
    """The grouped primitives search per-group int64 keys where those are exact and rank the
    times (np.unique) or sweep every edge where not (times near the int64 limits): both ways
    give, group by group, what the per-device primitives give, on sorted input (as the reader
    hands it over) and shuffled, with groups absent from either side."""
    from overlap.analysis import intervals as iv

    rng = np.random.default_rng(scale % 1000 + 11)

    def run():
        return (iv.merge_grouped(cg, cs, ce), iv.covered_grouped(*m, tg, ts, te),
                iv.subtract_grouped(*iv.merge_grouped(tg, ts, te), *m))

    for it in range(150):
        G = int(rng.integers(1, 5))
        n, k = int(rng.integers(0, 40)), int(rng.integers(0, 40))
        base = int(rng.integers(-scale, scale)) if it % 2 else 0
        step = max(scale // 100, 1)
        cg = rng.integers(0, G, n)
        cs = base + rng.integers(0, 100, n) * step
        ce = cs + rng.integers(-5, 30, n) * step
        tg = rng.integers(0, G + 1, k)  # group G has no compute
        ts = base + rng.integers(0, 100, k) * step
        te = np.maximum(ts + rng.integers(-5, 30, k) * step, ts)
        if it % 3 == 0:
            o = np.lexsort((cs, cg))
            cg, cs, ce = cg[o], cs[o], ce[o]
        m = iv.merge_grouped(cg, cs, ce)
        fast = run()
        with monkeypatch.context() as mp:
            mp.setattr(iv, "_KEY_LIMIT", 0.0)
            slow = run()
        for a, b in zip((*fast[0], fast[1], *fast[2]), (*slow[0], slow[1], *slow[2])):
            assert np.array_equal(a, b)
        (mg, ms, me), hidden, (xg, xs, xe) = fast
        for g in range(G + 1):
            cov = iv.Coverage(*iv.merge_intervals(cs[cg == g], ce[cg == g]))
            assert np.array_equal(cov.starts, ms[mg == g]) and np.array_equal(cov.ends,
                                                                               me[mg == g])
            ti = np.flatnonzero(tg == g)
            assert np.array_equal(hidden[ti], cov.covered(ts[ti], te[ti]))
            ex = iv.subtract_intervals(*iv.merge_intervals(ts[ti], te[ti]), cov.starts, cov.ends)
            assert np.array_equal(ex[0], xs[xg == g]) and np.array_equal(ex[1], xe[xg == g])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["h0", "h1"]),
                          st.sampled_from(["GPU:0", "GPU:1", "GPU:10"]),
                          st.one_of(st.none(), st.sampled_from(["D2H", "H2D"])),
                          st.one_of(st.none(), st.sampled_from(["a", "b", "c.1", "é"])),
                          st.integers(0, 2**62)),
                max_size=60),
       st.booleans(), st.booleans())
def test_group_sums_equal_pandas_groupby(rows, sort, runs):
    """`grouping.group_sums` (every aggregate of the result) equals `groupby(by, sort, dropna=False)
    .sum()`: the same groups, in the same order (missing keys a group of their own, last
    when sorted), with exact int64 sums; on rows in runs (as the analysis' tables come) and
    mixed."""
    import pandas as pd

    from overlap.analysis.grouping import group_sums

    if runs:
        rows = sorted(rows, key=lambda r: (r[0], r[1]))
    cols = ["host", "device", "direction", "hlo_op"]
    t = pd.DataFrame({c: pd.Series([r[i] for r in rows], dtype=object)
                      for i, c in enumerate(cols)})
    t["v"] = np.array([r[4] for r in rows], np.int64)
    # the analysis' tables are dicts of numpy arrays (object columns: None where missing)
    tc = {c: t[c].to_numpy(dtype=object) for c in cols}
    for by in (cols, ["hlo_op", "direction"], ["host", "device"]):
        got = group_sums(tc, by, {"v": t["v"].to_numpy()}, sort=sort)
        want = t.groupby(by, sort=sort, dropna=False)["v"].sum().reset_index()
        assert all(isinstance(v, np.ndarray) and len(v) == len(want) for v in got.values())
        for c in (*by, "v"):
            g, w = got[c].tolist(), want[c].tolist()
            assert [None if pd.isna(x) else x for x in g] == \
                [None if pd.isna(x) else x for x in w], c


@pytest.mark.parametrize("groups", [1, 3])
def test_merge_grouped_of_disjoint_input_is_the_input(groups):
    """One line per device (the reader's usual table): every interval ends before the next
    starts; merge_grouped hands the input back unchanged, equal to the per-group merge, and a
    single touching pair is merged as before."""
    from overlap.analysis.intervals import merge_grouped, merge_intervals

    rng = np.random.default_rng(groups)
    g = np.repeat(np.arange(groups), 50)
    gaps = rng.integers(1, 5, len(g))
    s = np.cumsum(gaps + 10) - 10
    e = s + 10 - rng.integers(0, 3, len(g))  # ends before the next start (gaps >= 1)
    mg, ms, me = merge_grouped(g, s, e)
    assert np.array_equal(mg, g) and np.array_equal(ms, s) and np.array_equal(me, e)
    e2 = e.copy()
    e2[10] = s[11]  # touching: merged
    mg, ms, me = merge_grouped(g, s, e2)
    for k in range(groups):
        want = merge_intervals(s[g == k], e2[g == k])
        assert np.array_equal(ms[mg == k], want[0]) and np.array_equal(me[mg == k], want[1])
    assert len(ms) == len(s) - 1
