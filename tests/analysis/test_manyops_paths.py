"""The many-distinct-ops shortcuts of the analysis give the answers of the general paths.

Issue 32: on a capture where every copy is its own op (36k ops, no program at hand) the
analysis skips work whose answer it knows: `group_sums` stops numbering keys once one key
tells every row apart, `grouping.pair_codes` numbers (module, program id) pairs without a step
per copy, and `equal_to` compares a key column once per distinct value. Each is checked here
against the general path on SYNTHETIC tables built to hit both. (`first_use` making the
per-copy numbers of the few `top_exposed` records only: tests/analysis/test_first_use.py.)"""

from __future__ import annotations

from unittest import mock

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from overlap.analysis.grouping import codes_equal, equal_to, group_sums, key_codes, pair_codes


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 60), st.booleans(), st.booleans(), st.randoms(use_true_random=False))
def test_group_sums_where_one_key_tells_rows_apart_equal_pandas(n, with_none, sort, rnd):
    """Op names all distinct (one of them missing, or not), hosts, devices and directions
    few: `group_sums` (which stops at the distinct key when unsorted) equals pandas'
    `groupby(by, sort, dropna=False).sum()`, in either key order."""
    import pandas as pd

    ops: list[object] = [f"copy-start.{i}" for i in rnd.sample(range(10 * n), n)]
    if with_none:
        ops[rnd.randrange(n)] = None
    t = {"host": np.array([rnd.choice(["h0", "h1"]) for _ in range(n)], object),
         "device": np.array([rnd.choice(["TPU:0", "TPU:1"]) for _ in range(n)], object),
         "direction": np.array([rnd.choice(["D2H", "H2D", None]) for _ in range(n)], object),
         "hlo_op": np.array(ops, object)}
    v = np.array([rnd.randrange(2**40) for _ in range(n)], np.int64)
    df = pd.DataFrame({k: pd.Series(c, dtype=object) for k, c in t.items()})
    df["v"] = v
    for by in (["host", "device", "direction", "hlo_op"], ["hlo_op", "direction"],
               ["direction", "host"]):
        got = group_sums(t, by, {"v": v}, sort=sort)
        want = df.groupby(by, sort=sort, dropna=False)["v"].sum().reset_index()
        for c in (*by, "v"):
            assert [None if pd.isna(x) else x for x in got[c].tolist()] == \
                [None if pd.isna(x) else x for x in want[c].tolist()], (by, c)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["D2H", "H2D", None]), st.sampled_from(["h0", "h1"])),
                min_size=1, max_size=60),
       st.integers(-2**62, 2**62), st.booleans())
def test_group_sums_of_one_value_and_zero_columns_equal_row_sums(rows, value, sort):
    """A column of one value (`arrays.repeated`) sums to each group's size times it and a
    column of zeros to zeros, without adding its rows: the same int64 sums (wrapping alike)
    as adding every row, per group of few keys."""
    from overlap.arrays import repeated

    n = len(rows)
    t = {"direction": np.array([r[0] for r in rows], object),
         "host": np.array([r[1] for r in rows], object)}
    cols = {"one": repeated(n, value, np.int64), "zero": np.zeros(n, np.int64),
            "rows": np.arange(n, dtype=np.int64) * 7}
    got = group_sums(t, ["host", "direction"], cols, sort=sort)
    keys = list(zip(got["host"].tolist(), got["direction"].tolist()))
    assert sorted(keys, key=str) == sorted(set((r[1], r[0]) for r in rows), key=str)
    for i, (h, d) in enumerate(keys):
        members = [j for j, r in enumerate(rows) if (r[1], r[0]) == (h, d)]
        wrapped = np.array([len(members) * value % 2**64], np.uint64).view(np.int64)[0]
        assert got["one"][i] == wrapped and got["zero"][i] == 0
        assert got["rows"][i] == 7 * sum(members)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), st.sampled_from(["jit_a", "jit_b"])),
                          st.one_of(st.none(), st.sampled_from([5, 7, 2**64 - 1]))),
                min_size=0, max_size=40))
def test_pair_codes_number_each_distinct_pair(rows):
    """Each row's number names its own (module, program id); the pairs are distinct, one per
    distinct pair of the rows."""
    mods = np.array([r[0] for r in rows], object)
    pids = np.array([r[1] for r in rows], object)
    code, pairs = pair_codes(mods, pids)
    assert len(code) == len(rows)
    assert [pairs[c] for c in code.tolist()] == rows
    assert sorted(pairs, key=str) == sorted(set(rows), key=str)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.none(), st.just(float("nan")), st.sampled_from(["D2H", "H2D", "x"]),
                          st.sampled_from([1, 1.0, True, 2]), st.text(max_size=3)),
                max_size=80),
       st.sampled_from(["D2H", "H2D", "", "zz", 1, 2.0, None, float("nan"), mock.ANY]))
def test_equal_to_is_elementwise_equality(values, value):
    """`equal_to` (compared once per distinct value), and `codes_equal` (the same of a column
    numbered once, as step rows and the causes' evidence number theirs), is `values == value`
    per row, a missing value (None, NaN) equal to nothing; on few shared objects and on many
    distinct ones; equal objects of other types (1, 1.0, True) match, and a value equal to
    several distinct keys (`mock.ANY`) matches each of them."""
    col = np.empty(len(values), object)
    col[:] = values
    want = [v is not None and v == v and bool(v == value) for v in values]
    got = equal_to(col, value)
    assert got.dtype == bool and got.tolist() == want
    assert codes_equal(*key_codes(col, sort=False), value).tolist() == want
