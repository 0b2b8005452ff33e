"""The report's shortcuts on the many-distinct-copy-ops shape give the plain rules' answers.

Issue 32, round 9: the top ops' cut found from a sample of the op names
(`group_records._at_most_kth`), a transfer's memory kind compared once per shared object
(`grouping.equal_to`), the (host, device) and (host, direction) groups summed from the (host,
device, direction) groups (`reduce_parts`), the copies' (module, program id) pairs numbered
once per trace (`grouping.copy_pairs`), the `top_exposed` records found in sorted starts by
binary search (`first_use._rows_starting_at`), ratios and bandwidths divided only where
defined (`transfer_columns`). Each is checked against the rule it replaces, on tiny inline
tables and on a SYNTHETIC many-ops trace whose answers are known by construction."""

from __future__ import annotations

import heapq
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from overlap.analysis import group_records
from overlap.analysis import overlap as an
from overlap.analysis.first_use import _rows_starting_at
from overlap.analysis.grouping import copy_pairs, equal_to, group_sums, pair_codes
from overlap.trace import read_trace
from overlap.trace.synthetic import many_ops_scenario


def _objects(values: list) -> np.ndarray:
    a = np.empty(len(values), object)
    a[:] = values
    return a


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet="ab\0é\U0001f600", max_size=4), min_size=1, max_size=300,
                unique=True),
       st.data())
def test_at_most_kth_equals_comparing_with_the_kth_of_a_sort(names, data):
    """Per distinct name: at most the k-th smallest? The same booleans with the sample
    bound (small samples, so that 300 names take that path) as with every name ranked."""
    k = data.draw(st.integers(1, len(names)))
    cut = sorted(names)[k - 1]
    want = [n <= cut for n in names]
    for sample in (2, 8, 32, 2048):
        assert group_records._at_most_kth(_objects(names), k, sample=sample).tolist() == want


def test_at_most_kth_on_many_names_takes_the_sample_and_keeps_exactly_k():
    """36k distinct op names (shuffled, as a capture may order them) and the default top:
    exactly the k smallest are kept, as `heapq.nsmallest` over all of them says."""
    rng = np.random.default_rng(3)
    names = [f"copy-start.{i}" for i in rng.permutation(36_000).tolist()]
    for k in (1, 10, 200):
        got = group_records._at_most_kth(_objects(names), k)
        assert sorted(np.asarray(names, object)[got].tolist()) == heapq.nsmallest(k, names)


@pytest.mark.parametrize("values", [
    ["host", "device"] * 40,                                   # two shared objects
    ["host", None, "pageable", "device"] * 20,                 # a missing kind
    [f"k{i}" for i in range(70)] + ["pageable"] * 10,          # many objects: plain ==
    ["pageable"] + ["".join(["page", "able"]) for _ in range(79)],  # equal, distinct objects
    [1, "pageable", 1.0, None] * 20,                           # not strs
    ["pageable"] * 5,                                          # short
    [*"abcdefg", "pageable"] * 10,                             # 8 objects: the last compared
    [*"abcdefgh", "pageable"] * 10,                            # 9 objects: plain ==
])
def test_equals_is_elementwise_equality(values):
    col = _objects(values)
    assert equal_to(col, "pageable").tolist() == [v == "pageable" for v in values]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 6), min_size=0, max_size=200), st.booleans(),
       st.lists(st.one_of(st.integers(-2, 8), st.sampled_from([True, 2**70, -2**64, 1.0, "3",
                                                               None])), max_size=12))
def test_rows_starting_at_equals_comparing_every_row(starts, in_order, at):
    """The rows whose start equals each record's, in row order: binary search in sorted
    starts (ints in int64's range), a comparison of every row otherwise, as `==` says."""
    start = np.array(sorted(starts) if in_order else starts, np.int64)
    got = _rows_starting_at(start, at)
    assert [g.tolist() for g in got] == [np.flatnonzero(start == v).tolist() for v in at]


_KEYS = [None, "h", 1, 1.0, True, "TPU:0"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_KEYS), st.sampled_from(_KEYS),
                          st.sampled_from(["D2H", "H2D", None]), st.integers(0, 2**40)),
                min_size=1, max_size=40))
def test_device_and_direction_groups_from_the_coarse_groups_equal_the_direct_ones(rows):
    """(host, device) and (host, direction) groups summed from the (host, device, direction)
    groups (in first appearance) equal those summed from the transfer groups themselves:
    the same sums, the same keys in the same order, each group's first row's key objects
    (1, 1.0 and True are one key whose first object is printed: pinned here by type)."""
    n = len(rows)
    g = {"host": _objects([r[0] for r in rows]), "device": _objects([r[1] for r in rows]),
         "direction": _objects([r[2] for r in rows]),
         "hlo_op": _objects([f"op.{i}" for i in range(n)])}
    for c in group_records._SUMS:
        g[c] = np.array([r[3] + i for i, r in enumerate(rows)], np.int64)
    coarse = group_records.regroup(g, ["host", "device", "direction"], sort=False)
    for by in (["host", "device"], ["host", "direction"]):
        want = group_records.regroup(g, by)
        got = group_records.regroup(coarse, by)
        assert list(got) == list(want)
        for c in want:
            w, h = want[c].tolist(), got[c].tolist()
            assert h == w and [type(x) for x in h] == [type(x) for x in w], (by, c)


def _many_ops(tmp_path, **kw):
    path = many_ops_scenario(steps=4, **kw).write(tmp_path / "h.xplane.pb")
    return read_trace(str(path))


def test_copy_pairs_are_pair_codes_kept_until_the_table_changes(tmp_path):
    """The copies' (module, program id) pairs: `pair_codes` of the transfers' columns, the
    same arrays again for the same table, numbered anew for a table set afterwards."""
    trace = _many_ops(tmp_path)
    tr = trace.columns("transfers")
    code, pairs = copy_pairs(trace)
    want_code, want_pairs = pair_codes(np.asarray(tr["hlo_module"], object),
                                       np.asarray(tr["program_id"], object))
    assert code.tolist() == want_code.tolist() and pairs == want_pairs
    again, _ = copy_pairs(trace)
    assert again is code
    frame = trace.transfers.iloc[:5].copy()
    trace.transfers = frame
    code5, pairs5 = copy_pairs(trace)
    assert len(code5) == 5 and pairs5 == pair_codes(
        np.asarray(frame["hlo_module"], object), np.asarray(frame["program_id"], object))[1]


def test_ratio_and_bandwidth_equal_the_plain_division(tmp_path):
    """`overlap_ratio` = hidden / span and `bandwidth_Bps` = bytes * 1e12 / duration, NaN
    where span or duration is 0 or the size unknown: the same floats, bit for bit, as
    dividing every row; on the synthetic many-ops trace every copy hides (ratio 1.0) and
    moves 8 x 128 x 4 bytes in 5 us (its chip clock: 5 us too)."""
    for clocked in (False, True):
        trace = _many_ops(tmp_path / str(clocked), clocked=clocked)
        t, _ = an.transfer_columns(trace)
        assert set(t["overlap_ratio"].tolist()) == {1.0}
        assert set(t["bandwidth_Bps"].tolist()) == {4096 * 1e12 / 5_000_000}
    span = np.array([0, 5, 10, 3, 0], np.int64)
    nbytes = np.array([4, 2**62, 7, 0, 9], np.int64)
    duration = np.array([0, 5, 10, 3, 7], np.int64)
    known = np.array([True, True, False, True, True])
    tr = {"start_ps": np.zeros(5, np.int64), "end_ps": span, "bytes": nbytes,
          "bytes_known": known, "hlo_op": _objects(["a"] * 5), "hlo_module": _objects(["m"] * 5),
          "program_id": _objects([1] * 5), "host": _objects(["h"] * 5),
          "device": _objects(["TPU:0"] * 5), "direction": _objects(["D2H"] * 5),
          "src_kind": _objects(["device"] * 5), "dst_kind": _objects(["host"] * 5),
          "device_span_ps": _objects([None, 5, 10, 3, 7])}

    class _Trace:  # the columns transfer_columns reads; compute [0, 2): 2 ps hide
        def __init__(self):
            self.capture = {}

        def columns(self, name):
            if name == "transfers":
                return tr
            return {"host": _objects(["h"]), "device": _objects(["TPU:0"]),
                    "start_ps": np.zeros(1, np.int64), "end_ps": np.full(1, 2, np.int64),
                    "hlo_module": _objects(["m"])}

    got, _ = an.transfer_columns(_Trace())
    with np.errstate(divide="ignore", invalid="ignore"):
        hidden = np.minimum(span, 2)
        want_ratio = np.where(span > 0, hidden / np.where(span > 0, span, 1), np.nan)
        want_bw = np.where((duration > 0) & known,
                           nbytes * 1e12 / np.where(duration > 0, duration, 1), np.nan)
    assert got["hidden_ps"].tolist() == [0, 2, 2, 2, 0]
    assert got["overlap_ratio"].tobytes() == want_ratio.tobytes()
    assert got["bandwidth_Bps"].tobytes() == want_bw.tobytes()
    assert [math.isnan(x) for x in got["bandwidth_Bps"].tolist()] == [True, False, True,
                                                                      False, False]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["c.1", "c.2", "c.10", None, "b"]),
                          st.sampled_from(["D2H", "H2D", None]), st.integers(0, 9),
                          st.integers(0, 9)), min_size=1, max_size=40),
       st.integers(0, 6))
def test_top_ops_of_one_device_take_the_transfer_groups_as_they_are(rows, top):
    """One (host, device): the transfer groups are the (op, direction) groups, in order of
    first appearance, so `by_hlo_op` from them as they are equals `by_hlo_op` from the
    (op, direction) regrouping, whatever repeats among the transfers."""
    n = len(rows)
    t = {"host": _objects(["h"] * n), "device": _objects(["TPU:0"] * n),
         "direction": _objects([r[1] for r in rows]), "hlo_op": _objects([r[0] for r in rows])}
    sums = {c: np.ones(n, np.int64) for c in group_records._SUMS}
    sums["span_ps"] = np.array([10 + r[2] for r in rows], np.int64)
    sums["hidden_ps"] = np.array([10 - r[3] if r[3] <= 10 else 0 for r in rows], np.int64)
    groups = group_sums(t, list(group_records.GROUP_KEYS), sums, sort=False)
    most = group_records.most_exposed_ops
    assert most(groups, top, one_device=True) == most(groups, top)


def test_two_parts_of_one_host_still_sum_their_ops(tmp_path):
    """Two parts with the same host and device (one file read twice): their op groups repeat
    keys, so `by_hlo_op` sums them (each op's count doubles), as one part of both would."""
    trace = _many_ops(tmp_path)
    part = an.host_part(trace)
    one = an.reduce_parts([part])["by_hlo_op"]
    two = an.reduce_parts([part, part])["by_hlo_op"]
    assert [r["count"] for r in two["records"]] == [2 * r["count"] for r in one["records"]]
    assert two["total_records"] == one["total_records"]


def test_first_use_without_programs_is_unknown_for_every_copy(tmp_path):
    """No program at hand (the synthetic many-ops capture has no HloProto): every copy's
    first-use facts unknown (None, -1) with the one reason its (module, program id) gives,
    as the per-copy rule says; the columns are one value each (read-only)."""
    from overlap.analysis.first_use import NO_HLO, copy_first_use

    trace = _many_ops(tmp_path)
    tr = trace.columns("transfers")
    n = len(tr["start_ps"])
    fu = copy_first_use(trace, None)
    want_why = [f"{NO_HLO}: program {m}({p}) is not at hand" if m is not None else
                f"{NO_HLO}: the copy names no program"
                for m, p in zip(tr["hlo_module"].tolist(), tr["program_id"].tolist())]
    assert fu["why"].tolist() == want_why and len(set(want_why)) == 1
    for c, v in (("instruction", None), ("done", None), ("first_user", None),
                 ("first_use_ps", -1), ("ready_at_ps", -1)):
        assert fu[c].tolist() == [v] * n, c
