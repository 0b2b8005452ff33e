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

_needs_scanner = pytest.mark.skipif(getattr(wire._scan, "join_first", None) is None,
                                    reason="the scanner was not built")

_op_name = st.sampled_from(["copy-start", "copy-start.1", "copy-done.1", "copy-done",
                            "x-start-start.2", "x-start-done.2", "x-done-start.2",
                            "é-start", "é-done", "-start", "-done", "fusion.3", "a-startb",
                            "a-doneb", "é-start-é", "é-done-é"]) | \
    st.text(alphabet="-adeorstn.é1", min_size=1, max_size=9)


def _spans(op_names: list[str]) -> tuple[np.ndarray, ...]:
    """The names' UTF-8 bytes side by side in one buffer: (buffer, starts, ends)."""
    enc = [n.encode() for n in op_names]
    buf = np.frombuffer(b"".join(enc) + b"\0", np.uint8)
    ln = np.array([len(e) for e in enc], np.int64)
    hi = np.cumsum(ln)
    return buf, hi - ln, hi


def _plain(starts, ends, inv, names, boundaries, at, op_names):
    """(start event, done event) per Async event by the plain rule: -1 where none."""
    b0, b1, _, bop, u_names = boundaries
    s, d, at_code = tpu._async_codes_py(names.tolist(), op_names)
    op_code = np.full(len(u_names), -1, np.int64)
    op_code[at] = at_code
    bcode = op_code[bop]
    return (tpu._join_numpy(bcode, b0, s[inv], starts),
            tpu._join_numpy(bcode, b1, d[inv], ends))


@st.composite
def _case(draw, rising: bool = True):
    u = draw(st.lists(_op_name, min_size=1, max_size=10))
    nb = draw(st.integers(1, 24))
    bop = np.array(draw(st.lists(st.integers(0, len(u) - 1), min_size=nb, max_size=nb)),
                   np.int64)
    lo = 0 if rising else -1  # (a gap of 0 gives a time twice)
    b0 = np.cumsum(draw(st.lists(st.integers(lo + 1, 3), min_size=nb, max_size=nb)))
    b1 = b0 + 2 + np.cumsum(draw(st.lists(st.integers(lo, 2), min_size=nb, max_size=nb)))
    if not rising:
        b0 = np.sort(np.abs(b0))
    extra = draw(st.lists(st.integers(0, len(u) - 1), max_size=3))
    at = np.unique(np.concatenate([bop, np.array(extra, np.int64)]))
    u_names = np.array(u + [None], object)[:-1]
    asked = draw(st.lists(st.none() | st.just("") | _op_name | st.sampled_from(u),
                          min_size=1, max_size=12))
    names = np.array(asked + [None], object)[:-1]
    nq = draw(st.integers(0, 20))
    inv = np.array(draw(st.lists(st.integers(0, len(asked) - 1), min_size=nq, max_size=nq)),
                   np.int64)
    # each Async event begins at a start event's begin or between two, ends likewise
    pick = st.lists(st.integers(-1, nb - 1), min_size=nq, max_size=nq)
    j0, j1 = (np.array(draw(pick), np.int64) for _ in range(2))
    starts = np.where(j0 >= 0, b0[j0], b0[0] + 1 + 7 * nb)
    ends = np.where(j1 >= 0, b1[j1], -1)
    boundaries = (b0.astype(np.int64), b1.astype(np.int64), bop, bop, u_names)
    return starts, ends, inv, names, boundaries, at


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
