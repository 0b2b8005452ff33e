"""overlap.arrays: the helpers equal the numpy functions they stand in for."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from overlap.arrays import filled, sorted_unique


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
