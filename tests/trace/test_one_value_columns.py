"""Columns of one value per op or kernel, handed on as that one value (a `repeated` view):
the same objects at every row as the per-event column they replace.

`tpu._per_event` (the compute ops' module and program per event) and `gpu._one_or_coded`
(a kernel line's `hlo_module`, read from each kernel's metadata where the events name none):
where every value is None, or one str, the column is that value repeated; anything else
(values of two types that compare equal, two strs, a str and None) stays per event.
"""

from __future__ import annotations

import numpy as np
import pytest

from overlap.arrays import is_repeated
from overlap.trace.gpu import _one_or_coded
from overlap.trace.tpu import _per_event
from overlap.trace.values import Coded, Cols

A_STR = "jit_step"
CASES = [
    [None, None, None],
    [A_STR, A_STR, "jit_" + "step"],  # equal strs, distinct objects
    [A_STR, None, A_STR],
    [A_STR, "other", A_STR],
    [A_STR, b"jit_step", A_STR],  # a str and bytes of the same bytes
    [1, 1.0, True],  # equal under ==, not one value
    [None],
]


def _same(a: np.ndarray, b: np.ndarray) -> None:
    assert len(a) == len(b)
    for x, y in zip(a.tolist(), b.tolist()):
        assert type(x) is type(y) and x == y


def _id_column(values) -> bool:
    """Whether `values` could be an `ids` column: `as_id`'s ints or None only."""
    return all(type(v) in (int, type(None)) for v in values) or \
        not any(type(v) is int for v in values)


# (values, ids): every case as names; as ids, the cases an `ids` column can hold
PER_EVENT = [(v, False) for v in CASES] + [(v, True) for v in CASES if _id_column(v)]


@pytest.mark.parametrize(("values", "ids"), PER_EVENT)
def test_per_event_is_the_per_op_column(values, ids):
    per_op = np.array([*values, "a boundary op"] + [None], object)[:-1]
    nb = np.arange(len(values))  # the compute ops (not the last)
    iu = np.random.default_rng(len(values)).integers(0, len(values), 1000)
    got = _per_event(per_op, nb, iu, ids)
    _same(got, per_op[iu])
    one = all(v is None for v in values) or (
        type(values[0]) is str and all(type(v) is str and v == values[0] for v in values))
    assert is_repeated(got) == one
    # ids: one int for every op is one value too
    if ids:
        _same(_per_event(np.array([5, 5, None], object), np.arange(2), iu % 2, True),
              np.full(len(iu), 5, object))


@pytest.mark.parametrize("values", CASES)
def test_one_or_coded_gives_the_coded_column(values):
    vals = np.array([*values] + [None], object)[:-1]
    codes = np.random.default_rng(7).integers(0, len(values), 500)
    expect = Coded(codes, vals).column()
    got = _one_or_coded(Coded(codes, vals))
    cols = Cols()
    cols.add(len(codes), hlo_module=got)
    column = cols.rows({"hlo_module": "object"})["hlo_module"]
    _same(column, expect)
    one = all(v is None for v in values) or (
        type(values[0]) is str and all(type(v) is str and v == values[0] for v in values))
    assert isinstance(got, Coded) != one
    if one:
        assert is_repeated(column)


@pytest.mark.parametrize("seed", range(6))
def test_own_rows_is_the_selection(seed, monkeypatch):
    """`tpu._own_rows`: the selected rows, in order, moved to the front of the caller's
    array (the scanner's `compact`) or taken (no scanner, another dtype, a read-only
    array): the same values either way."""
    from overlap.trace import tpu

    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 3000))
    a = rng.integers(-(1 << 62), 1 << 62, n)
    sel = rng.random(n) < [0.0, 0.03, 0.5, 0.97, 1.0, 0.5][seed]
    expect = a[sel].tolist()
    assert tpu._own_rows(a.copy(), sel).tolist() == expect
    ro = a.copy()
    ro.flags.writeable = False
    assert tpu._own_rows(ro, sel).tolist() == expect and ro.tolist() == a.tolist()
    assert tpu._own_rows(a.astype(np.int32), sel).tolist() == a.astype(np.int32)[sel].tolist()
    monkeypatch.setattr(tpu, "_scan", None)
    assert tpu._own_rows(a.copy(), sel).tolist() == expect
