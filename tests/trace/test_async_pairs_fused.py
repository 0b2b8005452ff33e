"""The clocked TPU Async join by time in one scanner call (`_scan.async_pairs_by_time`, what
`tpu._pairs_by_time` calls where it is built) against the plain rule (every name coded,
then the first boundary event of that code and time: `tpu._async_codes_py`,
`tpu._join_numpy`) and against the numpy glue around `async_pairs_at` it replaces (a build
without it): the same start and done events where both boundary times rise strictly, None
(the hash join) where they do not; Async events in any order (the search from the last
answer, `_seek`, forward and back), ops not among `at`, names the bytes cannot take."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from overlap.trace import tpu, tpu_async, wire
from tests.trace.async_cases import _case, _plain, _spans

_scan = wire._scan
pytestmark = pytest.mark.skipif(getattr(_scan, "async_pairs_by_time", None) is None,
                                reason="the scanner was not built")


def _glue(*args):
    """`tpu._pairs_by_time` as a build without `async_pairs_by_time` answers."""
    real = tpu_async._scan
    tpu_async._scan = SimpleNamespace(async_pairs_at=real.async_pairs_at)
    try:
        return tpu._pairs_by_time(*args)
    finally:
        tpu_async._scan = real


def _lists(got):
    return None if got is None else [g.tolist() for g in got]


@settings(max_examples=500, deadline=None)
@given(_case(), st.randoms(use_true_random=False))
def test_fused_equals_the_plain_rule(case, rnd):
    starts, ends, inv, names, boundaries, at = case
    # the Async events in any order (not only ascending): `_seek` from the last answer
    order = list(range(len(starts)))
    rnd.shuffle(order)
    o = np.array(order, np.int64)
    starts, ends, inv = starts[o], ends[o], inv[o]
    op_names = boundaries[4][at].tolist()
    args = (names.tolist(), inv, at, _spans(op_names), boundaries, starts, ends)
    got = tpu._pairs_by_time(*args)
    assert got is not None
    want = _plain(starts, ends, inv, names, boundaries, at, op_names)
    assert _lists(got) == [w.tolist() for w in want]
    assert _lists(_glue(*args)) == _lists(got)


@settings(max_examples=200, deadline=None)
@given(_case(rising=False))
def test_fused_steps_aside_where_times_do_not_rise(case):
    starts, ends, inv, names, boundaries, at = case
    b0, b1 = boundaries[:2]
    op_names = boundaries[4][at].tolist()
    args = (names.tolist(), inv, at, _spans(op_names), boundaries, starts, ends)
    rising = bool(np.all(np.diff(b0) > 0) and np.all(np.diff(b1) > 0))
    got = tpu._pairs_by_time(*args)
    assert (got is not None) == rising
    assert _lists(_glue(*args)) == _lists(got)


def test_ops_outside_at_and_times_between():
    # ops: 0 a-start.1, 1 fusion (no place in `at`), 2 a-done.1; times met exactly, between
    # two events, before the first and after the last
    b0 = np.array([10, 20, 30, 40], np.int64)
    b1 = np.array([15, 25, 35, 45], np.int64)
    bop = np.array([0, 1, 2, 0], np.int64)
    u_names = np.array(["a-start.1", "a-start.1", "a-done.1"], object)
    at = np.array([0, 2], np.int64)
    boundaries = (b0, b1, bop, bop, u_names)
    names = ["a-start.1"]
    starts = np.array([40, 20, 10, 9, 50, 10], np.int64)
    ends = np.array([35, 35, 36, 35, 35, 46], np.int64)
    inv = np.zeros(len(starts), np.int64)
    si, di = tpu._pairs_by_time(names, inv, at, _spans(["a-start.1", "a-done.1"]),
                                boundaries, starts, ends)
    # op 1 is named a-start.1 too but has no place in `at`: its event (20) matches nothing
    assert si.tolist() == [3, -1, 0, -1, -1, 0]
    assert di.tolist() == [2, 2, -1, 2, 2, -1]
    assert _lists(_glue(names, inv, at, _spans(["a-start.1", "a-done.1"]), boundaries,
                        starts, ends)) == [si.tolist(), di.tolist()]


def test_refusals():
    buf, fs, fe = _spans(["a-start", "a-done"])
    one = np.zeros(1, np.int64)
    at = np.array([0, 1], np.int64)
    t = np.array([5], np.int64)
    fn = _scan.async_pairs_by_time
    # no boundary events, a name not a str, a lone surrogate: None (the hash join answers)
    assert fn(["a-start"], one, buf, fs, fe, at, one[:0], one[:0], one[:0], t, t) is None
    assert fn(["a-start", 3], one, buf, fs, fe, at, t, t, one, t, t) is None
    assert fn(["\ud800-start"], one, buf, fs, fe, at, t, t, one, t, t) is None
    assert _lists(fn(["a-start"], one, buf, fs, fe, at, t, t, one, t, t)) == [[0], [-1]]
    with pytest.raises(ValueError):  # `at` not ascending
        fn(["a-start"], one, buf, fs, fe, at[::-1].copy(), t, t, one, t, t)
    with pytest.raises(ValueError):  # spans and `at` differ
        fn(["a-start"], one, buf, fs[:1], fe[:1], at, t, t, one, t, t)
    with pytest.raises(ValueError):  # an op place beyond the spans (async_pairs_at)
        fn(["a-start"], one, buf, fs, fe, np.array([0, 1, 2], np.int64), t, t, one + 2, t, t)
