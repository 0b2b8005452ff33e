"""Fast paths of the TPU plane read (issue 32, round 11) against their plain rules: the Async
line's distinct ops where the ids rise (`tpu._distinct_ops`: `np.unique` with its inverse),
the device clock of boundary events where every one has it in range (`_boundary_clock`: the
masks), an op line's codes table made once (`_OpIndex.codes`: each id's index in the
sorted distinct ids), and `copy_durations` where no copy or every copy has the chip's clock."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from overlap.trace import tpu
from overlap.trace.wire import TIME_LIMIT_PS

L = TIME_LIMIT_PS


@pytest.mark.parametrize("mids", [[], [4], [1, 2, 3], [3, 9, 40, 41], [1, 1, 2], [2, 1],
                                  [5, 7, 7, 9], [0, 3, 2, 8], list(range(0, 5000, 3)),
                                  list(range(5000, 0, -2))])
def test_distinct_ops_is_unique_with_inverse(mids):
    a = np.array(mids, np.intp)
    u, inv = tpu._distinct_ops(a)
    wu, winv = np.unique(a, return_inverse=True)
    assert u.tolist() == wu.tolist() and inv.tolist() == winv.reshape(-1).tolist()
    assert u.dtype == a.dtype
    if len(a):
        assert not np.shares_memory(u, a)  # (the caller may keep it)


def _plain_clock(off, has_off, dur, has_dur):
    ok = has_off & has_dur & (off >= 0) & (off < L) & (dur >= 0) & (dur < L)
    return np.where(ok, off, 0), np.where(ok, off + dur, 0), ok


CASES = [
    ([5, 0, 7], [1, 2, 3]),  # all in range: the fast path
    ([0, L - 1], [L - 1, 0]),  # the edges, in range
    ([5, L], [1, 1]),  # an offset at the limit
    ([5, 6], [1, L]),  # a duration at the limit
    ([-1, 6], [1, 1]),  # a negative offset
    ([5, 6], [-3, 1]),  # a negative duration
    ([1 << 62, 2], [1, 1]),
]


@pytest.mark.parametrize("off,dur", CASES)
@pytest.mark.parametrize("missing", [None, 0, 1])
def test_boundary_clock_is_the_masks(off, dur, missing):
    off, dur = np.array(off, np.int64), np.array(dur, np.int64)
    has_off, has_dur = np.ones(len(off), bool), np.ones(len(off), bool)
    if missing is not None:  # one event lacks a stat
        (has_off if missing == 0 else has_dur)[-1] = False
    ev = SimpleNamespace(ints_of=lambda *a, **k: [(off.copy(), has_off.copy()),
                                                  (dur.copy(), has_dur.copy())])
    b = np.arange(len(off))
    got = tpu._boundary_clock(ev, b, np.arange(len(off)), np.ones(len(off), bool), [1, 2])
    want = _plain_clock(off, has_off, dur, has_dur)
    for g, w in zip(got, want):
        assert g.tolist() == w.tolist()
    assert got[2].dtype == bool


@pytest.mark.parametrize("n", [10, 3000])
def test_op_index_codes_are_the_sorted_positions(n):
    rng = np.random.default_rng(n)
    mids = rng.choice(np.arange(5, 5 + 4 * n, 2), n).astype(np.intp)
    ops = tpu._OpIndex(mids)
    assert bool(ops._size) == (n >= 1024)  # the table, and the search without it
    for ids in (mids, mids[::-1], mids[: n // 3]):
        for _ in range(2):  # (the table made on the first call, read on the second)
            got = ops.codes(ids)
            assert got.tolist() == np.searchsorted(ops.uniq, ids).tolist()
            assert got.dtype == (np.int8 if len(ops.uniq) <= 127 else np.int16)
    per_op = np.arange(len(ops.uniq)) * 3
    assert ops.take(per_op, mids).tolist() == per_op[np.searchsorted(ops.uniq, mids)].tolist()


@pytest.mark.parametrize("dev", [
    [None, None, None], [5, 6, 7], [5, None, 7], [None, 0, None], [0, 0, 0],
    np.array([3, -1, 4], np.int64), np.array([-1, -1, -1], np.int64),
    np.array([2, 3, 9], np.int64)])
def test_copy_durations_are_the_device_span_else_the_span(dev):
    """`copy_durations` (every bandwidth's denominator): per transfer its device span where
    the capture gave one (an object column: not None; an int column: >= 0), else `span`."""
    dev = np.array(dev, object) if isinstance(dev, list) else dev
    span = np.array([10, 20, 30], np.int64)
    got, has = tpu.copy_durations({"device_span_ps": dev}, span)
    vals = dev.tolist()
    want_has = [v is not None and (dev.dtype == object or v >= 0) for v in vals]
    want = [v if h else s for v, h, s in zip(vals, want_has, span.tolist())]
    assert has.tolist() == want_has and got.tolist() == want and got.dtype == np.int64
    # no copy clocked: the spans themselves, as without the column (round 23: a copy was 8 MB
    # a million copies; no caller changes either in place, `analysis.memo`); else a new array
    assert (got is span) == (not any(want_has))
    no, flags = tpu.copy_durations({}, span)
    assert no is span and not flags.any()


@pytest.mark.parametrize("vals", [
    [], ["H2D"], ["D2H", "H2D", None], ["H2D", "".join(["H", "2D"]), "D2H", "x", None],
    ["".join(["D", "2H"]), 5, "H2D "]])
def test_is_h2d_is_the_comparison(vals):
    """Directions as the byte rules write them (the shared objects) and as any other
    object (an equal str made apart, another value): `== "H2D"` per op."""
    d = np.empty(len(vals), object)
    d[:] = [tpu._DIRECTIONS[2] if v == "H2D" and i % 2 == 0 else v
            for i, v in enumerate(vals)]
    got = tpu._is_h2d(d)
    assert got.dtype == bool and got.tolist() == [v == "H2D" for v in vals]


@pytest.mark.parametrize("values", [[], ["a"], ["x", None, "y"], [(1, 2), (3, 4)],
                                    [[1, 2], [3, 4], "s"], [("a",), None, (1, 2, 3)]])
def test_fill_puts_each_value_as_it_is(values):
    """`_fill(out, at, values)` is `out[at[i]] = values[i]` one by one: tuples and lists of
    equal length stay elements (no second axis)."""
    out = np.empty(len(values) + 3, object)
    at = np.arange(len(values)) * 1 + 2
    tpu._fill(out, at, values)
    want = [None] * len(out)
    for i, v in zip(at.tolist(), values):
        want[i] = v
    assert out.tolist() == want and all(a is b for a, b in zip(out.tolist(), want))
