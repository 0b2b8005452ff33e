"""`grouping.key_codes` keeps what it made (issue 32): per column of a few shared objects its
objects' numbers and its codes for each `sort`, found again by the column's objects at its
rows (`grouping._FEW`), and hands out the kept codes read-only; a column of one run gets a
read-only broadcast of one code. Pinned here against the plain rule (`pd.factorize` of the
column at that moment): another column of the same table, holding the same objects at other
rows, never gets the kept column's codes, nor does a column changed in place, and a caller
cannot write to codes a later call would get."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from overlap.analysis import grouping
from overlap.arrays import repeated
from overlap.trace.reader import read_host_file
from overlap.trace.synthetic import many_ops_scenario


def _plain(col: np.ndarray, sort: bool) -> tuple[list, list]:
    c, u = pd.factorize(pd.Series(col, dtype=object), sort=sort)
    return c.tolist(), list(u)


def _check(col: np.ndarray, sort: bool) -> np.ndarray:
    codes, uniq = grouping.key_codes(col, sort)
    assert (codes.tolist(), uniq.tolist()) == _plain(col, sort)
    return codes


def test_columns_of_the_same_objects_at_other_rows_in_turn():
    """Two and three columns of the same few objects (a direction and the memory kinds of a
    copy's ends: one column's rows are another's swapped), numbered in turn sorted and not:
    each answer is its own column's, also after another evicted it from the two kept."""
    d2h, h2d = "D2H", "".join(["H2", "D"])
    a = np.array([h2d, d2h] * 30, object)
    b = a[::-1].copy()  # the same two objects, each at the other's rows
    c = np.array([d2h, d2h, h2d] * 20, object)
    for order in itertools.permutations([a, b, c]):
        for sort in (True, False, True):
            for col in order:
                _check(col, sort)
    assert grouping.key_codes(a, False)[0][:2].tolist() == [0, 1]
    assert grouping.key_codes(b, False)[0][:2].tolist() == [0, 1]
    assert grouping.key_codes(a, True)[0][:2].tolist() == [1, 0]
    assert grouping.key_codes(b, True)[0][:2].tolist() == [0, 1]


def test_a_column_changed_in_place_after_both_numberings():
    """A column numbered sorted and not, then changed in place (a third object, a missing
    value): numbered afresh both ways, not from the objects kept for it."""
    col = np.array(["D2H", "H2D"] * 20, object)
    _check(col, True)
    _check(col, False)
    col[3] = "H2H"
    col[5] = None
    _check(col, False)
    _check(col, True)


def test_kept_codes_are_read_only_and_shared():
    """A few objects' codes: one read-only array per (column, sort), the same array to every
    caller (no copy per call); a write raises instead of changing a later answer. The
    uniques are each caller's own."""
    col = np.array(["D2H", "H2D", "H2D"] * 20, object)
    first, u1 = grouping.key_codes(col, False)
    again, u2 = grouping.key_codes(col.copy(), False)
    assert again is first and not first.flags.writeable
    with pytest.raises(ValueError):
        first[0] = 5
    u1[0] = "changed"
    assert grouping.key_codes(col, False)[1].tolist() == ["D2H", "H2D"] != u1.tolist()
    assert not grouping.key_codes(col, True)[0].flags.writeable


@pytest.mark.parametrize(("make", "value"), [
    *((m, v) for m in ("repeated", "filled") for v in ("host-a", None, float("nan"), 3)),
    ("equal objects", "host-a")])
def test_one_run_is_one_read_only_code(make, value):
    """A column of one value (a host file's host: `arrays.repeated`, a filled array, equal
    strs held by a few distinct objects in runs) gets its one code for every row, read-only;
    a missing value -1 and no unique, as `pd.factorize` numbers it."""
    n = 40
    if make == "repeated":
        col = repeated(n, value)
    elif make == "filled":
        col = np.empty(n, object)
        col[:] = [value] * n
    else:
        col = np.empty(n, object)  # four equal strs, each in a block of ten rows
        col[:] = [s for s in ("".join(list(value)) for _ in range(4)) for _ in range(10)]
        assert len({id(x) for x in col}) == 4
    for sort in (False, True):
        codes = _check(col, sort)
        assert not codes.flags.writeable


def test_every_column_of_a_real_trace_in_any_order(tmp_path):
    """The transfer table of a capture written by the synthetic many-ops builder (read by the
    reader): its object columns numbered in several orders, both ways, each time the plain
    rule's answer for that column."""
    path = many_ops_scenario(steps=4).write(tmp_path / "many_ops.xplane.pb")
    t = read_host_file(path)["transfers"]
    names = [k for k in ("direction", "src_kind", "dst_kind", "host", "device", "hlo_op",
                         "hlo_module") if k in t]
    cols = {k: np.asarray(t[k], dtype=object) for k in names}
    assert len(cols["direction"]) == 48
    rng = np.random.default_rng(0)
    for _ in range(6):
        for k in rng.permutation(names).tolist():
            for sort in (bool(rng.integers(2)), True, False):
                _check(cols[k], sort)


@pytest.mark.parametrize("sort", [False, True])
@pytest.mark.parametrize("distinct", [True, False])
def test_str_columns_uniques_are_first_objects(sort, distinct):
    """A str column (op names) numbered by the scanner: codes and uniques the plain rule's,
    and each unique the object of its value's first row (as `arrays.factorize` keeps it),
    also where every row is its own value (uniques taken from the rows, sorted or not)."""
    names = [f"copy-start.{(i * 7919) % 50}" for i in range(50)]
    if not distinct:
        names = names + ["".join(list(x)) for x in names[:20]]  # equal, other objects
    col = np.empty(len(names), object)
    col[:] = names
    for _ in range(2):  # (the second: the kept answer)
        codes, uniq = grouping.key_codes(col, sort)
        assert (codes.tolist(), uniq.tolist()) == _plain(col, sort)
        first = {}
        for x in col.tolist():
            first.setdefault(x, x)
        assert all(u is first[u] for u in uniq.tolist())
