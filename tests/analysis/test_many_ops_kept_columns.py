"""Issue 32 round 11, second wave (many-ops analysis): the fast paths pinned to the plain rules.

* `arrays.SeenColumns.put(..., hold=)`: the caller's array stands for the column where it holds
  the same objects at the same rows (the unsorted uniques of a column where every row is its
  own value, `strcodes.str_codes`), else a copy is kept as before; a column changed in place
  is coded afresh either way.
* `grouping.key_codes` of many distinct strs hands out `str_codes`' kept answer (read-only),
  equal to `arrays.factorize`'s.
* `group_records._fewest_tied` where every row is a candidate (no gathers) and where every
  op name is its own value (no gather of the codes): `by_hlo_op` is the plain sort's top.
"""

from __future__ import annotations

import numpy as np
import pytest

from overlap import arrays
from overlap.analysis import causes, grouping
from overlap.analysis.group_records import _SUMS, most_exposed_ops
from overlap.trace import strcodes, wire

scanner = pytest.mark.skipif(getattr(wire.SCANNER, "str_codes", None) is None,
                             reason="the scanner is not used")


def _col(names: list) -> np.ndarray:
    col = np.empty(len(names), object)
    col[:] = names
    return col


def test_hold_stands_for_the_column_and_a_wrong_one_is_not_kept():
    seen = arrays.SeenColumns(2)
    col = _col([f"op.{i}" for i in range(50)])
    held = col.copy()
    seen.put(col, "k", 1, hold=held)
    assert seen._kept[0][0] is held
    assert seen.get(col.copy(), "k") == 1  # the same objects in another array
    other = _col(["".join(["op.", str(i)]) for i in range(50)])  # equal values, new objects
    seen2 = arrays.SeenColumns(2)
    seen2.put(col, "k", 1, hold=other)  # not the column's objects: a copy is kept instead
    assert seen2._kept[0][0] is not other
    assert seen2.get(col, "k") == 1 and seen2.get(other, "k") is None
    seen3 = arrays.SeenColumns(2)
    seen3.put(col, "k", 1, hold=held[:10])  # another length: a copy
    assert seen3._kept[0][0] is not held and seen3.get(col, "k") == 1


@scanner
@pytest.mark.parametrize("sort", [False, True])
def test_str_codes_of_distinct_names_right_after_the_column_changes(sort):
    """The kept column is a copy the caller never sees (the unsorted uniques): a column
    changed in place after it was coded is coded afresh, right (were the caller's own array
    kept, the change would find the old answer)."""
    col = _col([f"copy-start.{(i * 7919) % 300}" for i in range(300)])
    for _ in range(2):
        codes, uniq = strcodes.str_codes(col, sort, copy=False)
        want = arrays._factorize_objects(col, sort)
        assert codes.tolist() == want[0].tolist() and uniq.tolist() == want[1].tolist()
        col[:5] = ["a", "b", "a", "c", "b"]  # in place: repeats now


@scanner
@pytest.mark.parametrize("sort", [False, True])
@pytest.mark.parametrize("distinct", [False, True])
def test_key_codes_of_many_strs_is_factorize(sort, distinct):
    names = [f"copy-start.{(i * 7919) % 97 if not distinct else i}" for i in range(400)]
    col = _col(names)
    for _ in range(2):
        codes, uniq = grouping.key_codes(col, sort)
        want = arrays._factorize_objects(col, sort)
        assert codes.tolist() == want[0].tolist() and uniq.tolist() == want[1].tolist()
        assert not codes.flags.writeable and not uniq.flags.writeable


def _groups(ops: list, dirs: list, exposed: list) -> dict:
    n = len(ops)
    g = {"hlo_op": _col(ops), "direction": _col(dirs)}
    for c in _SUMS:
        g[c] = np.zeros(n, np.int64)
    g["count"] = np.ones(n, np.int64)
    g["span_ps"] = np.full(n, 100, np.int64)
    g["hidden_ps"] = 100 - np.asarray(exposed, np.int64)
    return g


def _plain(ops, dirs, exposed, k):
    rows = sorted(zip(ops, dirs, exposed), key=lambda r: (-r[2], r[0], r[1]))
    return [(o, d) for o, d, _ in rows[:k]]


@pytest.mark.parametrize("shape", ["all_tied", "some_above", "repeated_names",
                                   "repeated_some_above"])
@pytest.mark.parametrize("n", [300, 5000])
def test_by_hlo_op_top_is_the_plain_sort(shape, n):
    rng = np.random.default_rng(n + len(shape))
    k = 20
    if shape.startswith("repeated"):
        ops = [f"copy-start.{i // 2}" for i in range(n)]  # each name twice (both directions)
        dirs = ["D2H", "H2D"] * (n // 2)
    else:
        ops = [f"copy-start.{i}" for i in range(n)]
        dirs = ["D2H" if i % 3 else "H2D" for i in range(n)]
    order = rng.permutation(n)
    ops = [ops[i] for i in order]
    dirs = [dirs[i] for i in order]
    exposed = [0] * n
    if shape.endswith("some_above"):
        for i in rng.choice(n, 7, replace=False).tolist():
            exposed[i] = int(rng.integers(1, 50))
    g = _groups(ops, dirs, exposed)
    strcodes.str_codes(g["hlo_op"], False)  # (kept, as group_transfers leaves it)
    got = most_exposed_ops(g, k, one_device=True)
    assert [(r["hlo_op"], r["direction"]) for r in got["records"]] == \
        _plain(ops, dirs, exposed, k)
    assert got["total_records"] == n
    assert all(r["exposure_causes"] == causes.cause_dict({c: 0 for c in causes.CAUSE_COLUMNS})
               for r in got["records"])


@pytest.mark.parametrize("shape", ["ascending", "ascending_ties", "unsorted", "one_group",
                                   "two_groups", "two_groups_ties", "wide_groups",
                                   "negative"])
def test_group_order_is_the_lexsort(shape):
    """`causes._group_order`: where starts ascend in table order, a stable sort of the groups
    alone (each group's rows in turn where they are a few, else int16 keys); elsewhere the
    lexsort. Each gives `np.lexsort((start, grp))`."""
    rng = np.random.default_rng(len(shape))
    n = 3000
    start = np.sort(rng.integers(0, 10**9, n))
    if shape.endswith("ties"):
        start = np.sort(rng.integers(0, 50, n))
    elif shape == "unsorted":
        start = rng.integers(0, 50, n)
    grp = rng.integers(0, 8, n).astype(np.int64)
    if shape == "one_group":
        grp[:] = 3
    elif shape.startswith("two_groups"):
        grp = np.where(grp < 3, 1, 6)  # (groups without rows between them)
    elif shape == "wide_groups":
        grp = rng.integers(0, 1 << 20, n).astype(np.int64)
    elif shape == "negative":
        grp -= 2
    order, s, begin = causes._group_order(grp, start)
    want = np.lexsort((start, grp))
    assert order.tolist() == want.tolist()
    assert s.tolist() == start[want].tolist()
    g = grp[want]
    assert begin.tolist() == (np.flatnonzero(g[1:] != g[:-1]) + 1).tolist()


@pytest.mark.parametrize("value", [0, 5, -3])
def test_bin_sums_of_a_repeated_column(value):
    """`arrays.bin_sums` of a read-only one-value column (`arrays.repeated`: a cause no copy
    has): told by its element, the plain per-bin sums; a column whose first row alone is 0
    is summed."""
    rng = np.random.default_rng(value + 10)
    n, bins = 5000, 37
    idx = rng.integers(0, bins, n)
    col = arrays.repeated(n, value, np.int64)
    want = np.zeros(bins, np.int64)
    np.add.at(want, idx, np.full(n, value, np.int64))
    assert arrays.bin_sums(idx, col, bins).tolist() == want.tolist()
    first_zero = rng.integers(-9, 9, n)
    first_zero[0] = 0
    want = np.zeros(bins, np.int64)
    np.add.at(want, idx, first_zero)
    assert arrays.bin_sums(idx, first_zero, bins).tolist() == want.tolist()
