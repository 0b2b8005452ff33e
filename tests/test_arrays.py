"""overlap.arrays: the helpers equal the numpy functions they stand in for."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from overlap.arrays import bin_sums, dict_rows, factorize, filled, sorted_unique


@given(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=200))
def test_sorted_unique_equals_np_unique_ints(xs):
    a = np.array(xs, np.int64)
    got = sorted_unique(a)
    assert got.dtype == a.dtype
    np.testing.assert_array_equal(got, np.unique(a))


@given(st.lists(st.floats(allow_nan=False), max_size=100))
def test_sorted_unique_equals_np_unique_floats(xs):
    a = np.array(xs, np.float64)
    np.testing.assert_array_equal(sorted_unique(a), np.unique(a))


def test_sorted_unique_many_distinct():
    a = np.random.default_rng(0).integers(0, 1 << 40, 200_000)
    np.testing.assert_array_equal(sorted_unique(a), np.unique(a))


def test_filled_equals_np_full():
    for v, dtype in (("GPU:0", object), (None, object), (7, np.int64), ("x", object)):
        got, want = filled(5, v, dtype), np.full(5, v, dtype=dtype)
        assert got.dtype == want.dtype and got.tolist() == want.tolist()
    assert filled(0, "a").shape == (0,)


# factorize: pandas' answer, with no pandas on the way (the reference imports it here).
_VALUES = st.one_of(st.none(), st.just(float("nan")), st.sampled_from(["a", "b", "GPU:0", ""]),
                    st.text(max_size=3), st.integers(-3, 3))


def _same_as_pandas(a, sort):
    import pandas as pd

    codes, uniq = factorize(a, sort=sort)
    want_codes, want_uniq = pd.factorize(a, sort=sort)
    assert codes.dtype == np.int64
    assert codes.tolist() == want_codes.tolist()
    assert uniq.dtype == want_uniq.dtype
    assert [type(x) for x in uniq.tolist()] == [type(x) for x in want_uniq.tolist()]
    assert uniq.tolist() == want_uniq.tolist()


@given(st.lists(_VALUES, max_size=60), st.booleans())
def test_factorize_objects_equals_pandas(xs, sort):
    a = np.empty(len(xs), object)
    a[:] = xs
    if sort and len({type(x) for x in xs if x is not None and x == x}) > 1:
        sort = False  # str and int do not order (pandas' mixed sort is its own rule)
    _same_as_pandas(a, sort)


@given(st.lists(st.sampled_from(["h0", "h1", None, "dev"]), max_size=12),
       st.lists(st.integers(1, 40), max_size=12), st.booleans())
def test_factorize_runs_equals_pandas(heads, lengths, sort):
    # long runs of one object, and of equal but distinct objects: the run-compressed path
    xs = [("".join(h) if h is not None and k % 2 else h)
          for k, (h, n) in enumerate(zip(heads, lengths)) for _ in range(n)]
    a = np.empty(len(xs), object)
    a[:] = xs
    _same_as_pandas(a, sort)


@given(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=80), st.booleans())
def test_factorize_ints_equals_pandas(xs, sort):
    _same_as_pandas(np.array(xs, np.int64), sort)


def test_factorize_hands_pd_na_and_mixed_sort_to_pandas():
    import pandas as pd

    a = np.array(["b", pd.NA, "a", "b"], object)
    assert factorize(a)[0].tolist() == pd.factorize(a)[0].tolist() == [0, -1, 1, 0]
    m = np.array([2, "x", 1], object)
    assert factorize(m, sort=True)[0].tolist() == pd.factorize(m, sort=True)[0].tolist()


def test_factorize_does_not_import_pandas():
    import subprocess
    import sys

    code = ("import sys, numpy as np\nfrom overlap.arrays import factorize\n"
            "a = np.array(['b', None, 'a', float('nan')] * 9, object)\n"
            "assert factorize(a, sort=True)[0].tolist()[:4] == [1, -1, 0, -1]\n"
            "assert 'pandas' not in sys.modules, 'pandas imported'\n")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("seed", range(20))
def test_bin_sums_equal_integer_sums(seed):
    """`bin_sums` equals `np.add.at`'s int64 sums per bin whichever way it sums: bincount's
    float64 sums below 2**53 (small values, or a caller's bound), integer sums above (values
    whose sums pass 2**53, where float64 would round), zeros, negative values, empty bins."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 30))
    m = int(rng.integers(0, 200))
    idx = rng.integers(0, n, m)
    for hi in (10, 10**12, 2**60 // max(m, 1)):
        for values in (rng.integers(-hi, hi, m), rng.integers(0, hi, m), np.zeros(m, np.int64)):
            want = np.zeros(n, np.int64)
            np.add.at(want, idx, values)
            got = bin_sums(idx, values, n)
            assert got.dtype == np.int64 and got.tolist() == want.tolist()
            # a bound the caller knows (every bin's partial sums within it) gives the same
            bound = int(np.abs(values).max(initial=0)) * m
            assert bin_sums(idx, values, n, bound).tolist() == want.tolist()


def test_bin_sums_are_exact_past_2_53():
    """Sums float64 would lose a 1 of (2**53 + 1) come out exact: the bound is looked at."""
    big = 1 << 53
    idx = np.array([0, 0, 1, 2, 2, 2])
    small = np.array([1, 2, 3, 4, 5, 6], np.int64)
    assert bin_sums(idx, small, 4).tolist() == [3, 3, 15, 0]
    values = np.array([big, 1, 5, big + 1, big - 1, 1], np.int64)
    assert bin_sums(idx, values, 3).tolist() == [big + 1, 5, 2 * big + 1]
    assert np.bincount(idx, weights=values).astype(np.int64).tolist() != [big + 1, 5,
                                                                           2 * big + 1]
    assert bin_sums(idx[:0], small[:0], 2).tolist() == [0, 0]


def test_dict_rows_are_template_copies_with_the_columns_set():
    """`dict_rows`: each row its own dict, the template's keys in its order (a column's key
    new to the template last), values per row, the template itself untouched."""
    template = {"a": 1, "b": None, "c": "x"}
    rows = dict_rows(template, 3, [("b", [4, 5, 6]), ("d", ["p", "q", "r"])])
    assert rows == [{"a": 1, "b": 4, "c": "x", "d": "p"}, {"a": 1, "b": 5, "c": "x", "d": "q"},
                    {"a": 1, "b": 6, "c": "x", "d": "r"}]
    assert [list(r) for r in rows] == [["a", "b", "c", "d"]] * 3
    assert template == {"a": 1, "b": None, "c": "x"}
    rows[0]["a"] = 9
    assert rows[1]["a"] == 1 and len({id(r) for r in rows}) == 3
    assert dict_rows({}, 2, []) == [{}, {}] and dict_rows(template, 0, [("b", [])]) == []
