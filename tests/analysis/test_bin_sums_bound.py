"""`arrays.bin_sums` takes bincount's float64 sums only where no partial sum can reach 2**53;
its bound is the largest |value| times the count. int64's least value has no int64 absolute
value (`np.abs` gives it back, negative), so the bound is taken from the extremes as Python
ints (issue 32 round 11): such a column is summed exactly, as `np.add.at` sums it."""

from __future__ import annotations

import numpy as np
import pytest

from overlap.arrays import EXACT_FLOAT, bin_sums


def _plain(idx: np.ndarray, v: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros(n, np.int64)
    np.add.at(out, idx, v)
    return out


@pytest.mark.parametrize("values", [
    [-(1 << 63), 5, 7], [5, -(1 << 63)], [(1 << 63) - 1, -3], [-(1 << 52), 1 << 52, 3],
    [EXACT_FLOAT - 1, 1], [0, 0, 0], [1, 2, 3],
])
def test_sums_are_exact(values):
    v = np.array(values, np.int64)
    idx = np.zeros(len(v), np.intp)
    idx[-1] = 1
    assert np.array_equal(bin_sums(idx, v, 2), _plain(idx, v, 2))


def test_random_columns_equal_add_at():
    rng = np.random.default_rng(3)
    for hi in (10, 1 << 40, 1 << 62):
        v = rng.integers(-hi, hi, 5000)
        idx = rng.integers(0, 50, 5000)
        assert np.array_equal(bin_sums(idx, v, 50), _plain(idx, v, 50))
