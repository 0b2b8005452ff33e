"""`tpu._join` where the entries' times rise strictly (`tpu._join_rising`: the one entry at
the query's time, its code compared) against the plain rule (`tpu._join_numpy`: the first
entry of that code and time) and the scanner's hash join (`join_first`): the same index per
query, code -1 never matching; and the clocked Async spans (`tpu._async_device_spans`) the
plain rule's (every name coded by `tpu._async_codes_py`, then `_join_numpy`) for names that
are None, empty, without `-start`, non-ASCII, with `-start` twice, ops of equal names, with
boundary times that rise strictly and ones that do not (a time twice: the hash join)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from overlap.trace import tpu, wire
from tests.trace.async_cases import _case, _plain, _spans

_needs_scanner = pytest.mark.skipif(getattr(wire._scan, "join_first", None) is None,
                                    reason="the scanner was not built")



_entries = st.lists(st.tuples(st.integers(-1, 3), st.integers(1, 3)), min_size=1, max_size=30)
_queries = st.lists(st.tuples(st.integers(-1, 3), st.integers(-2, 70)), max_size=30)


@settings(max_examples=500, deadline=None)
@given(_entries, _queries)
def test_join_rising_equals_plain_rule(entries, queries):
    codes = np.array([c for c, _ in entries], np.int64)
    times = np.cumsum(np.array([g for _, g in entries], np.int64))  # strictly rising
    qc = np.array([c for c, _ in queries], np.int64)
    qt = np.array([t for _, t in queries], np.int64)
    want = tpu._join_numpy(codes, times, qc, qt).tolist()
    if len(times):
        assert tpu._join_rising(codes, times, qc, qt).tolist() == want
    assert tpu._join(codes, times, qc, qt).tolist() == want
    if getattr(wire._scan, "join_first", None) is not None:
        assert wire._scan.join_first(codes, times, qc, qt).tolist() == want


@settings(max_examples=300, deadline=None)
@given(_entries, _queries)
def test_join_with_a_time_twice_equals_plain_rule(entries, queries):
    # gaps of 0: a time twice, the first entry of the code at that time (not the rising path)
    codes = np.array([c for c, _ in entries], np.int64)
    times = np.cumsum(np.array([g - 1 for _, g in entries], np.int64))
    qc = np.array([c for c, _ in queries], np.int64)
    qt = np.array([t for _, t in queries], np.int64)
    assert tpu._join(codes, times, qc, qt).tolist() == \
        tpu._join_numpy(codes, times, qc, qt).tolist()


def test_join_rising_one_case():
    codes = np.array([5, -1, 7, 5], np.int64)
    times = np.array([10, 20, 30, 40], np.int64)
    # at 10 code 5; at 20 code -1 never matches; at 30 code 5 is not 7; 35 is no time; 40
    got = tpu._join(codes, times, np.array([5, -1, 5, 5, 5]), np.array([10, 20, 30, 35, 40]))
    assert got.tolist() == [0, -1, -1, -1, 3]


def _spans_by_plain_rule(starts, ends, inv, names, boundaries, clock, at, op_names):
    si, di = _plain(starts, ends, inv, names, boundaries, at, op_names)
    want = np.full(len(starts), -1, np.int64)
    hit = np.flatnonzero((si >= 0) & (di >= 0))
    want[hit] = tpu._pair_spans(clock, si[hit], di[hit])
    return want.tolist()


@_needs_scanner
@settings(max_examples=300, deadline=None)
@given(st.booleans().flatmap(_case), st.booleans())
def test_device_spans_equal_plain_rule(case, all_clocked):
    starts, ends, inv, names, boundaries, at = case
    b0, b1 = boundaries[:2]
    ok = np.ones(len(b0), bool) if all_clocked else (np.arange(len(b0)) % 3 != 1)
    clock = (np.where(ok, b0 * 10, 0), np.where(ok, b1 * 10 + 3, 0), ok)
    op_names = boundaries[4][at].tolist()
    want = _spans_by_plain_rule(starts, ends, inv, names, boundaries, clock, at, op_names)
    # the ops' names as UTF-8 bytes (the scanner's codes) and as strs
    assert tpu._async_device_spans(starts, ends, inv, names, boundaries, clock,
                                   (at, _spans(op_names))).tolist() == want
    assert tpu._async_device_spans(starts, ends, inv, names, boundaries, clock,
                                   (at, op_names)).tolist() == want


@pytest.mark.parametrize("n_queries", [0, 1, 5])
def test_no_entries_find_nothing(n_queries):
    """No boundary entries (a line with Async events but none to join them to): every query
    is -1 on each path, the numpy fallback included (it raised IndexError before)."""
    e = np.zeros(0, np.int64)
    q_codes = np.arange(n_queries, dtype=np.int64) - 1  # a -1 among them
    q_times = np.arange(n_queries, dtype=np.int64) * 7
    want = np.full(n_queries, -1, np.int64)
    assert np.array_equal(tpu._join_numpy(e, e, q_codes, q_times), want)
    assert np.array_equal(tpu._join(e, e, q_codes, q_times), want)
