"""The clocked TPU Async join by time first (`tpu._pairs_by_time`, `_scan.async_pairs_at`)
against the plain rule it stands for: every name coded (`tpu._async_codes_py`), then the
first boundary event of that code and time (`tpu._join_numpy`). Where the boundary events'
begin and end times each rise strictly (one event per time), the two give the same start and
done events and the same device spans, for names that are None, empty, without `-start`,
non-ASCII, with `-start` twice, and ops of equal names; elsewhere (a time twice, a name the
bytes cannot take) the join by time steps aside and the hash join answers, as before."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from overlap.trace import tpu, wire
from tests.trace.async_cases import _case, _plain, _spans

pytestmark = pytest.mark.skipif(getattr(wire._scan, "async_pairs_at", None) is None,
                                reason="the scanner was not built")



@settings(max_examples=500, deadline=None)
@given(_case())
def test_pairs_by_time_equal_the_hash_join(case):
    starts, ends, inv, names, boundaries, at = case
    op_names = boundaries[4][at].tolist()
    got = tpu._pairs_by_time(names.tolist(), inv, at, _spans(op_names), boundaries, starts,
                             ends)
    assert got is not None  # (times rise: the join by time answers)
    want = _plain(starts, ends, inv, names, boundaries, at, op_names)
    assert [g.tolist() for g in got] == [w.tolist() for w in want]


@settings(max_examples=300, deadline=None)
@given(_case(), st.booleans())
def test_device_spans_the_same_by_either_join(case, all_clocked):
    starts, ends, inv, names, boundaries, at = case
    b0, b1 = boundaries[:2]
    ok = np.ones(len(b0), bool) if all_clocked else (np.arange(len(b0)) % 3 != 1)
    clock = (np.where(ok, b0 * 10, 0), np.where(ok, b1 * 10 + 3, 0), ok)
    op_names = boundaries[4][at].tolist()
    got = tpu._async_device_spans(starts, ends, inv, names, boundaries, clock,
                                  (at, _spans(op_names)))
    si, di = _plain(starts, ends, inv, names, boundaries, at, op_names)
    want = np.full(len(starts), -1, np.int64)
    hit = np.flatnonzero((si >= 0) & (di >= 0))
    want[hit] = tpu._pair_spans(clock, si[hit], di[hit])
    assert got.tolist() == want.tolist()


@settings(max_examples=200, deadline=None)
@given(_case(rising=False))
def test_times_not_rising_take_the_hash_join(case):
    starts, ends, inv, names, boundaries, at = case
    b0, b1 = boundaries[:2]
    op_names = boundaries[4][at].tolist()
    got = tpu._pairs_by_time(names.tolist(), inv, at, _spans(op_names), boundaries, starts,
                             ends)
    rising = bool(np.all(np.diff(b0) > 0) and np.all(np.diff(b1) > 0))
    assert (got is not None) == rising
    ok = np.ones(len(b0), bool)
    clock = (b0 * 10, b1 * 10 + 3, ok)
    si, di = _plain(starts, ends, inv, names, boundaries, at, op_names)
    want = np.full(len(starts), -1, np.int64)
    hit = np.flatnonzero((si >= 0) & (di >= 0))
    want[hit] = tpu._pair_spans(clock, si[hit], di[hit])
    assert tpu._async_device_spans(starts, ends, inv, names, boundaries, clock,
                                   (at, _spans(op_names))).tolist() == want.tolist()


def test_one_pair_found_and_others_not():
    # ops: a-start.1, a-done.1, b-start; boundary events in time order
    u_names = np.array(["a-start.1", "a-done.1", "b-start", "a-start.1"], object)
    bop = np.array([0, 1, 2, 3], np.int64)
    b0 = np.array([10, 20, 30, 40], np.int64)
    b1 = np.array([15, 25, 35, 45], np.int64)
    at = np.array([0, 1, 2, 3], np.int64)
    boundaries = (b0, b1, bop, bop, u_names)
    names = np.array(["a-start.1", "b-start", None, "a-start.1"], object)
    inv = np.array([0, 1, 2, 3], np.int64)
    starts = np.array([10, 30, 10, 40], np.int64)
    ends = np.array([25, 25, 25, 26], np.int64)
    si, di = tpu._pairs_by_time(names.tolist(), inv, at, _spans(u_names.tolist()), boundaries,
                                starts, ends)
    # a-start.1 at 10 .. a-done.1 ending 25; b-start's done (b-done) is no op; None asks
    # nothing; the second a-start.1 (op 3, its own event) has no done ending at 26
    assert si.tolist() == [0, 2, -1, 3]
    assert di.tolist() == [1, -1, -1, -1]


def test_values_the_bytes_cannot_take():
    buf, fs, fe = _spans(["a-start", "a-done"])
    one = np.zeros(1, np.int64)
    fn = wire._scan.async_pairs_at
    assert fn(["a-start", 3], one, buf, fs, fe, one, one) is None
    assert fn(["\ud800-start"], one, buf, fs, fe, one, one) is None
    assert [a.tolist() for a in fn(["a-start"], one, buf, fs, fe, one, one + 1)] == [[1], [1]]
    with pytest.raises(ValueError):
        fn(["a-start"], one, buf, fs, fe, one + 2, one)
    with pytest.raises(ValueError):
        fn(["a-start"], one + 1, buf, fs, fe, one, one)
    # the hash join answers where the bytes cannot: the lone surrogate matches nothing
    b = (np.array([1], np.int64), np.array([2], np.int64), np.zeros(1, np.int64),
         np.zeros(1, np.int64), np.array(["a-start"], object))
    assert tpu._pairs_by_time(["\ud800-start"], one, one, (buf, fs[:1], fe[:1]), b,
                              np.array([1]), np.array([2])) is None
