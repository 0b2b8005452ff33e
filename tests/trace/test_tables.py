"""The tables' column helpers equal the pandas calls they replace, on any object column.

`tables.factorize`, `_nullable` and `reader._sort_by_device_start` find runs and distinct
objects by their addresses (`object_addresses`) to avoid hashing a million names per column;
these properties hold them to `pd.factorize`, `pd.array` and a stable `sort_values` on columns
that mix shared objects, equal-but-distinct objects, missing values of every kind and values
pandas refuses, in runs (as the reader writes them) and shuffled.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from overlap.trace.reader import _sort_by_device_start
from overlap.trace.tables import (
    Columns,
    _nullable,
    factorize,
    object_addresses,
    run_starts,
)

BIG = 12190760917235803885  # a real TPU program id: above int64


def _pool() -> list:
    """Objects a column may hold; equal values appear as distinct objects too (`int(str())`,
    joined strings), as they do when a reader converts each op's stat on its own."""
    return [None, None, float("nan"), pd.NA, 0, 5, BIG, int(str(BIG)), 2**64, -1, True, 1.0,
            1.5, "ab", "".join(["a", "b"]), "b", "GPU:0", "GPU:10", "é"]


def _column(picks: list[tuple[int, int]], shuffle: int | None, pool: list | None = None,
            ) -> np.ndarray:
    """Runs of `(pool index, length)`, shuffled with seed `shuffle` unless None."""
    pool = _pool() if pool is None else pool
    vals = [pool[i % len(pool)] for i, k in picks for _ in range(k)]
    if shuffle is not None:
        order = np.random.default_rng(shuffle).permutation(len(vals))
        vals = [vals[i] for i in order]
    out = np.empty(len(vals), object)
    out[:] = vals
    return out


def _same(a, b) -> bool:
    """Element-wise equality where NaN and NA equal themselves."""
    if len(a) != len(b):
        return False
    for x, y in zip(list(a), list(b)):
        nx, ny = x is pd.NA or (isinstance(x, float) and math.isnan(x)), \
            y is pd.NA or (isinstance(y, float) and math.isnan(y))
        if nx or ny:
            if not (nx and ny):
                return False
        elif x != y or type(x) is not type(y):
            return False
    return True


picks = st.lists(st.tuples(st.integers(0, 40), st.integers(1, 30)), max_size=12)
shuffles = st.one_of(st.none(), st.integers(0, 2**32 - 1))


def _int_pool() -> list:
    """Values an id column may hold (and a few pandas refuses)."""
    return [None, None, float("nan"), pd.NA, 0, 5, BIG, int(str(BIG)), 2**64, -1, True, 1.0,
            1.5, None, 7, int(str(BIG)), "a", False, True, np.True_]


def test_object_addresses_are_the_objects():
    a, b = "x" * 3, "y"
    col = np.array([a, a, b, None, a], object)
    addr = object_addresses(col)
    assert addr.tolist() == [id(a), id(a), id(b), id(None), id(a)]
    del col  # the view keeps the column (and its objects) alive
    assert addr.tolist()[2] == id(b)


@settings(max_examples=300, deadline=None)
@given(picks, shuffles, st.booleans(), st.booleans())
def test_factorize_equals_pandas(p, shuffle, sort, sentinel):
    col = _column(p, shuffle)
    try:
        want = pd.factorize(col, sort=sort, use_na_sentinel=sentinel)
    except TypeError:  # values that do not sort together: pandas refuses, so does factorize
        with pytest.raises(TypeError):
            factorize(col, sort=sort, use_na_sentinel=sentinel)
        return
    got = factorize(col, sort=sort, use_na_sentinel=sentinel)
    assert got[0].tolist() == want[0].tolist()
    assert _same(got[1], want[1])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 2), max_size=200), st.booleans())
def test_factorize_of_a_reader_column_equals_pandas(p, runs):
    """Host/device names: one object per chunk, equal names as distinct objects."""
    names = ["GPU:1", "GPU:0", "".join(["GPU:", "1"])]
    col = np.empty(len(p), object)
    col[:] = [names[i] for i in (sorted(p) if runs else p)]
    s = pd.Series(col, dtype=object)
    for sort in (False, True):
        got, want = factorize(s, sort=sort), pd.factorize(s, sort=sort)
        assert got[0].tolist() == want[0].tolist() and list(got[1]) == list(want[1])


@settings(max_examples=300, deadline=None)
@given(picks, shuffles, st.sampled_from(["UInt64", "Int64", "boolean"]))
def test_nullable_equals_pd_array(p, shuffle, dtype):
    col = _column(p, shuffle, _int_pool())
    try:
        want = pd.array(col, dtype=dtype)
    except (TypeError, ValueError, OverflowError) as e:
        with pytest.raises(type(e)):
            _nullable(col, dtype)
        return
    got = _nullable(col, dtype)
    assert got.dtype == want.dtype and got.equals(want)


@pytest.mark.parametrize("n", [9, 1000])
def test_nullable_of_reader_columns(n):
    """The shapes the reader writes: all None (GPU kernels), an int object per op's metadata,
    alternating between ops (TPU), and async flags; each equal to pandas' conversion."""
    none = np.empty(n, object)
    none[:] = None
    ids = np.array([int(str(BIG)) for _ in range(3)] + [5, None], object)
    alternating = ids[np.arange(n) % len(ids)]
    flags = np.array([True, False, None], object)[np.arange(n) % 3]
    for col in (none, alternating, flags):
        for dtype in ("UInt64", "Int64", "boolean"):
            try:
                want = pd.array(col, dtype=dtype)
            except (TypeError, ValueError, OverflowError):
                continue
            assert _nullable(col, dtype).equals(want)


@settings(max_examples=200, deadline=None)
@given(picks)
def test_run_starts_split_exactly_where_neighbours_differ(p):
    col = _column(p, None)
    starts = run_starts(col, by_value=False)
    addr = [id(x) for x in col]
    assert starts.tolist() == [i for i in range(len(col)) if i == 0 or addr[i] != addr[i - 1]]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 3),
                          st.one_of(st.integers(-3, 3), st.integers(-2**62, 2**62))),
                max_size=60), st.booleans())
def test_sort_by_device_start_equals_a_stable_sort(rows, presorted):
    """The reader's sort, sorted or not, equal to pandas' stable sort_values; a table already
    in order comes back with the same rows (and no reordering). Times far apart (up to 2**62)
    take the lexsort path, close ones the (device, time) key path."""
    hosts = ["h1", "h0", "".join(["h", "1"])]
    devs = ["GPU:10", "GPU:2", "TPU:0", "".join(["GPU:", "2"])]
    if presorted:
        rows = sorted(rows, key=lambda r: (hosts[r[0]], devs[r[1]], r[2]))
    host = np.empty(len(rows), object)
    host[:] = [hosts[r[0]] for r in rows]
    dev = np.empty(len(rows), object)
    dev[:] = [devs[r[1]] for r in rows]
    df = pd.DataFrame({"host": pd.Series(host, dtype=object),
                       "device": pd.Series(dev, dtype=object),
                       "start_ps": np.array([r[2] for r in rows], np.int64),
                       "row": np.arange(len(rows))})
    got = _sort_by_device_start(df)
    want = df.sort_values(["host", "device", "start_ps"], kind="stable").reset_index(drop=True)
    pd.testing.assert_frame_equal(got, want)
    # the same order for a table held as Columns (the reader's), which comes back as Columns
    cols = Columns({k: df[k].to_numpy() for k in df.columns})
    got_cols = _sort_by_device_start(cols)
    assert isinstance(got_cols, Columns)
    assert {k: v.tolist() for k, v in got_cols.items()} == want.to_dict("list")
    if (got_cols["row"] == np.arange(len(rows))).all():
        assert got_cols is cols  # in order already: no copy


def test_runs_of_equal_but_distinct_objects_merge_by_value():
    """Neighbouring runs of equal values held by different objects (each chunk's own copy of
    a device name) are one run by value, and factorize as pandas does."""
    a1, a2 = "GPU:0", "".join(["GPU:", "0"])
    b1, b2 = "GPU:1", "".join(["GPU:", "1"])
    assert b1 is not b2 and a1 is not a2
    col = np.empty(62, object)
    col[:] = [a1] * 20 + [b1] + [b2] * 20 + ["GPU:2"] + [a2] * 20
    assert run_starts(col, by_value=False).tolist() == [0, 20, 21, 41, 42]
    assert run_starts(col, by_value=True).tolist() == [0, 20, 41, 42]
    for sort in (False, True):
        got, want = factorize(col, sort=sort), pd.factorize(col, sort=sort)
        assert got[0].tolist() == want[0].tolist() and list(got[1]) == list(want[1])
