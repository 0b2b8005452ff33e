"""The analysis' shortcuts of issue 32, round 10, give the plain rules' answers.

Pinned here, each against a rule written out copy by copy or row by row: the copy queues
(`causes._queues`: rows by (device, direction, start) with the groups' places from their
sizes, a running maximum of the ends per group in place, the queue heads by a running
maximum), the one-group search of `MergedGroups.around` (times unclipped, absent groups),
`covered` computed in place, the causes' columns assembled with one-value columns as
read-only views (`causes.transfer_causes`, on SYNTHETIC traces whose copies hide, or not),
and one rule for "equals a value" (`grouping.equal_to`, a missing value equals nothing),
whose few-objects path serves the memory kinds (`overlap._host_kind_pageable`)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from overlap.analysis import causes as C
from overlap.analysis.grouping import equal_to
from overlap.analysis.intervals import merged_groups
from overlap.analysis.overlap import transfer_columns
from overlap.arrays import is_repeated
from overlap.trace import read_trace
from overlap.trace.synthetic import SyntheticTrace, gpu_offload_scenario, many_ops_scenario
from tests.analysis.test_causes import _queues_by_rows
from tests.analysis.test_waits_reference import _waits_by_pieces

US = C.US


@pytest.mark.parametrize("seed", range(24))
@pytest.mark.parametrize("few", [C._FEW_GROUPS, 0])
def test_queues_equal_the_copy_by_copy_rule(seed, few, monkeypatch):
    """In the reader's order (by device, then start; directions in turn), in no order, with
    negative group codes, one group by one or by the lifted running maximum (`few` 0), and
    by ranks where lifted times would not fit (`_LIFT_LIMIT` 0)."""
    monkeypatch.setattr(C, "_FEW_GROUPS", few)
    if seed % 5 == 4:
        monkeypatch.setattr(C, "_LIFT_LIMIT", 0)
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 60))
    ng = int(rng.integers(1, 4))
    tg = rng.integers(0, ng, n).astype(np.int64)
    start = rng.integers(0, 80, n).astype(np.int64) * US
    if seed % 3 == 0:  # the reader's order: by device, then start
        order = np.lexsort((start, tg))
        tg, start = tg[order], start[order]
    if seed % 4 == 1:  # codes that cannot be counted by `np.bincount`
        tg = tg - 2
    if seed % 6 == 2:  # one device, as the reader hands it: a broadcast code
        tg = np.broadcast_to(np.asarray(tg[:1]), (n,))
        start = np.sort(start)
    end = start + rng.integers(0, 20, n).astype(np.int64) * US
    kinds = ["D2H", "H2D"] if seed % 2 else ["D2H", "H2D", "D2D"]
    direction = np.empty(n, object)
    direction[:] = [kinds[k] for k in rng.integers(0, len(kinds), n)] if seed % 7 else \
        [kinds[i % 2] for i in range(n)]
    nbytes = rng.integers(0, 1000, n).astype(np.int64)
    got = C._queues(tg, direction, start, end, nbytes)
    assert [v.tolist() for v in got] == list(_queues_by_rows(tg, direction, start, end, nbytes))


def _cover(ivs, lo, hi) -> int:
    return sum(max(0, min(hi, b) - max(lo, a)) for a, b in ivs)


@pytest.mark.parametrize("seed", range(30))
def test_one_group_covered_equals_the_sum_per_window(seed):
    """One group's intervals, searched by their times unclipped: windows before, across and
    after them, empty and reversed ones, queries of groups below and above it (no interval:
    nothing covered), one query group as a broadcast; asked twice and after a change."""
    rng = np.random.default_rng(seed)
    g0 = int(rng.integers(0, 4))
    k = int(rng.integers(1, 40))
    cs = np.sort(rng.integers(0, 1000, k))
    ce = cs + rng.integers(0, 60, k)
    comp = merged_groups(np.full(k, g0, np.int64), cs, ce)
    ivs: list[tuple[int, int]] = []
    for a, b in zip(cs.tolist(), ce.tolist()):
        if b <= a:
            continue
        if ivs and a <= ivs[-1][1]:
            ivs[-1] = (ivs[-1][0], max(ivs[-1][1], b))
        else:
            ivs.append((a, b))
    m = int(rng.integers(1, 3 * k + 2))  # fewer queries than intervals, or more
    qg = rng.integers(0, 5, m) if seed % 3 else np.broadcast_to(np.int64(g0), (m,))
    lo = rng.integers(-200, 1300, m)
    hi = lo + rng.integers(-5, 400, m)
    want = [_cover(ivs if g == g0 else [], a, max(a, b))
            for g, a, b in zip(qg.tolist(), lo.tolist(), hi.tolist())]
    assert comp.covered(qg, lo, hi).tolist() == want
    assert comp.covered(qg, lo, hi).tolist() == want
    lo2 = lo - 3
    want2 = [_cover(ivs if g == g0 else [], a, max(a, b))
             for g, a, b in zip(qg.tolist(), lo2.tolist(), hi.tolist())]
    assert comp.covered(qg, lo2, hi).tolist() == want2
    # the intervals around each window: those ending after lo, before those starting at hi
    i0, i1 = comp.around(qg, lo, np.maximum(hi, lo))
    for j, (g, a, b) in enumerate(zip(qg.tolist(), lo.tolist(), np.maximum(hi, lo).tolist())):
        if g == g0:
            want_i = (sum(e <= a for _, e in ivs), sum(s < b for s, _ in ivs))
        else:
            want_i = (0, 0) if g < g0 else (len(ivs), len(ivs))
        assert (int(i0[j]), int(i1[j])) == want_i


def _mixed() -> SyntheticTrace:
    """SYNTHETIC: one GPU, kernels with gaps, copies inside a kernel (hidden), across a gap
    (partly exposed), back to back in a gap (queued), and after the last kernel."""
    t = SyntheticTrace()
    gpu = t.gpu(0)
    for k in range(4):
        gpu.kernel((10 + 100 * k) * US, 60 * US, hlo_op=f"fusion.{k}", name=f"k{k}")
    copies = [("D2H", 20, 10), ("H2D", 65, 30), ("D2H", 75, 20), ("D2H", 97, 5),
              ("H2D", 120, 20), ("D2H", 170, 50), ("H2D", 420, 30)]
    for i, (d, a, dur) in enumerate(copies):
        gpu.memcpy(d, a * US, dur * US, 1 << 20, hlo_op=f"copy-start.{i}")
    return t


def _causes_plain(trace, table):
    """`transfer_causes`' columns by the module docstring's precedence, copy by copy, the
    device-waits split by pieces (`_waits_by_pieces`)."""
    tr = trace.columns("transfers")
    co = trace.columns("compute")
    (tg, cg), keys_hd, _ = C.compute_groups(trace)
    tg, cg = np.asarray(tg, np.int64), np.asarray(cg, np.int64)
    start, end = table["start_ps"], table["end_ps"]
    exposed = table["exposed_ps"].tolist()
    pg = table["pageable"].tolist()
    ss = C._on_compute_stream(tr, co, tg, cg, keys_hd)[0].tolist()
    qu = _queues_by_rows(tg, table["direction"], start, end, table["bytes"])[0]
    n = len(exposed)
    rest = [not (pg[i] or ss[i] or qu[i]) and exposed[i] > 0 for i in range(n)]
    cs = np.asarray(co["start_ps"], np.int64)
    ce = np.maximum(np.asarray(co["end_ps"], np.int64), cs)
    w = _waits_by_pieces(tg, start, end, cg, cs, ce, rest)
    out = {"cause_pageable_memory_ps": [x if p else 0 for x, p in zip(exposed, pg)],
           "cause_shares_stream_with_compute_ps": [
               x if s and not p else 0 for x, s, p in zip(exposed, ss, pg)],
           "cause_queued_behind_same_direction_ps": [
               x if q and not s and not p else 0 for x, q, s, p in zip(exposed, qu, ss, pg)],
           **w}
    cols = [out[c] for c in C.CAUSE_COLUMNS]
    out["cause"] = []
    for i in range(n):
        split = [c[i] for c in cols]
        out["cause_unknown_ps"][i] += exposed[i] - sum(split)
        split = [c[i] for c in cols]
        out["cause"].append(C.CAUSES[split.index(max(split))] if exposed[i] > 0 else "")
    return out


@pytest.mark.parametrize("make", [
    lambda: many_ops_scenario(steps=3),                          # every copy hidden
    lambda: gpu_offload_scenario(steps=2, hidden_fraction=0.5),  # half of each exposed
    lambda: gpu_offload_scenario(steps=2, hidden_fraction=0.0),  # wholly exposed
    lambda: gpu_offload_scenario(steps=2, hidden_fraction=1.0),
    lambda: _mixed(),  # some hidden, some not: every cause but pageable and the stream
])
def test_transfer_causes_equal_the_rule_copy_by_copy(make, tmp_path):
    trace = read_trace(str(make().write(tmp_path / "h.xplane.pb")))  # SYNTHETIC
    table, _ = transfer_columns(trace)
    got = C.transfer_causes(trace, table)
    want = _causes_plain(trace, table)
    for c in (*C.CAUSE_COLUMNS, "cause", "stall_ps", "ready_ps", "unknown_no_resume_ps",
              "unknown_late_resume_ps", "unknown_not_copy_bound_ps"):
        assert got[c].tolist() == want[c], c
        # a one-value column is a read-only view; any other the causes' own array
        assert not got[c].flags.writeable or not is_repeated(got[c])
    q, ahead, bahead = _queues_by_rows(C.compute_groups(trace)[0][0], table["direction"],
                                     table["start_ps"], table["end_ps"], table["bytes"])
    assert got["queue_ahead"].tolist() == ahead and got["bytes_ahead"].tolist() == bahead
    if not table["exposed_ps"].any():  # nothing exposed: no column of its own
        assert all(is_repeated(got[c]) for c in (*C.CAUSE_COLUMNS, "cause", "stall_ps",
                                                   "ready_ps"))


def _missing(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _objects(values: list) -> np.ndarray:
    a = np.empty(len(values), object)
    a[:] = values
    return a


NAN = float("nan")


@pytest.mark.parametrize("values", [
    ["host", "device"] * 40,                                       # two shared objects
    ["host", None, "pageable", "device"] * 20,                     # a missing kind
    ["pageable", NAN, None] * 30,                                  # NaN and None
    [NAN] * 70,                                                    # one NaN object
    [float("nan") for _ in range(70)],                             # many NaN objects
    [f"k{i}" for i in range(70)] + ["pageable"] * 10,              # many objects
    ["pageable"] + ["".join(["page", "able"]) for _ in range(79)],  # equal, distinct objects
    [1, "pageable", 1.0, None, True] * 20,                         # not strs
    ["pageable", None] * 5,                                        # short
    [*"abcdefg", "pageable"] * 10,                                 # 8 objects: the last
    [*"abcdefgh", "pageable"] * 10,                                # 9 objects
])
@pytest.mark.parametrize("value", ["pageable", None, NAN, 1, "a"])
def test_equal_to_is_equality_where_missing_equals_nothing(values, value):
    """Both paths (each of a few objects compared once, or the column's codes) against the
    plain rule; `most` 0 forces the codes."""
    col = _objects(values)
    want = [not _missing(v) and not _missing(value) and bool(v == value) for v in values]
    assert equal_to(col, value).tolist() == want
    assert equal_to(col, value, most=0).tolist() == want
