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

pytestmark = pytest.mark.skipif(getattr(wire._scan, "async_pairs_at", None) is None,
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
