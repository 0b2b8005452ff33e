"""`intervals.search_ascending`: `np.searchsorted` of an ascending table by one stable sort
of table and queries where the queries ascend too (issue 32 round 11: the one-device
coverage search of many-ops' 36k copies in 36k compute intervals). Pinned against
`np.searchsorted` on both sides with many equal values (table and queries, each other's),
queries before, between and after the table, not ascending, fewer than 64, a table more than
twice as long (the binary search itself); and the coverage answers of a one-device
`MergedGroups` against `Coverage`, whose searches are the plain ones."""

from __future__ import annotations

import numpy as np
import pytest

from overlap.analysis import intervals as I


def _case(rng: np.random.Generator, n: int, m: int, spread: int):
    table = np.sort(rng.integers(0, spread, n)).astype(np.int64)
    q = np.sort(rng.integers(-5, spread + 5, m)).astype(np.int64)
    return table, q


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("side", ["left", "right"])
def test_equal_to_searchsorted(seed, side):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(64, 3000))
    m = int(rng.integers(max(64, n // 2), 3 * n))
    for spread in (3, 50, 10**6, 2**62):  # from nearly all equal to all distinct
        table, q = _case(rng, n, m, spread)
        got = I.search_ascending(table, q, side)
        assert got.dtype == np.intp
        assert np.array_equal(got, np.searchsorted(table, q, side=side))


@pytest.mark.parametrize("side", ["left", "right"])
def test_shared_values_count_as_their_side_says(side):
    """Every query equal to table values: "right" counts them, "left" does not (a rule with
    the concatenation the wrong way round fails here)."""
    table = np.array([1, 2, 2, 2, 5] * 30, np.int64)
    table.sort()
    q = np.repeat(np.array([2, 2, 5], np.int64), 40)
    q.sort()
    assert np.array_equal(I.search_ascending(table, q, side),
                          np.searchsorted(table, q, side=side))
    assert I.search_ascending(table, q, "right")[0] == int((table <= 2).sum())
    assert I.search_ascending(table, q, "left")[0] == int((table < 2).sum())


@pytest.mark.parametrize("n, m, ascending", [(100, 80, False), (100, 10, True), (1000, 100, True),
                                             (0, 100, True), (100, 0, True)])
def test_other_inputs_take_the_binary_search(n, m, ascending):
    rng = np.random.default_rng(n + m)
    table, q = _case(rng, n, m, 1000)
    if not ascending:
        q = q[::-1].copy()
    for side in ("left", "right"):
        assert np.array_equal(I.search_ascending(table, q, side),
                              np.searchsorted(table, q, side=side))


def test_one_device_coverage_equals_coverage():
    rng = np.random.default_rng(7)
    s = np.sort(rng.integers(0, 10**7, 5000)).astype(np.int64)
    e = s + rng.integers(0, 3000, 5000)
    mg = I.merged_groups(np.zeros(5000, np.int64), s, e)
    ms, me = I.merge_intervals(s, e)
    lo = np.sort(rng.integers(-100, 10**7 + 100, 4000)).astype(np.int64)
    hi = lo + rng.integers(0, 5000, 4000)
    hi.sort()  # (ends ascending too: the merge path for both searches)
    got = mg.covered(np.zeros(4000, np.int64), lo, hi)
    assert np.array_equal(got, I.Coverage(ms, me).covered(lo, hi))
