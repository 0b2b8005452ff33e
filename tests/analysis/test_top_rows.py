"""Round 23 of issue 32: the most exposed rows chosen without sorting every row
(`overlap.top_rows`), and one (module, program) pair numbered without a code per row
(`grouping.pair_codes` of two `repeated` columns): the same answers as the full sort and the
row-by-row numbering, on inputs whose answers are known by construction."""

from __future__ import annotations

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from overlap.analysis.causes import _max_at, _sums_at
from overlap.analysis.grouping import pair_codes
from overlap.analysis.overlap import top_rows
from overlap.arrays import is_repeated, repeated


@settings(max_examples=300, deadline=None)
@given(st.integers(4097, 6000), st.integers(0, 30), st.integers(1, 6),
       st.sampled_from([1, 3, 6, 50, 3000, 10**9]), st.booleans(), st.integers(0, 2**32 - 1))
def test_top_rows_are_the_full_sorts_first(n, k, spread_e, spread_s, ordered, seed):
    """Many ties (a few distinct exposed times, or one; starts from all one to all
    distinct, in time order or not) and none: the first k of the full sort, in its order
    (ties by start, then by row)."""
    rng = np.random.default_rng(seed)
    exposed = rng.integers(0, spread_e, n).astype(np.int64) * 1000
    start = rng.integers(0, spread_s, n).astype(np.int64)
    if ordered:  # (in time order, as a reader writes copies)
        start.sort()
    want = np.lexsort((start, -exposed))[:k]
    got = top_rows(exposed, start, k)
    assert got.tolist() == want.tolist()
    distinct = rng.permutation(n).astype(np.int64)
    assert top_rows(distinct, start, k).tolist() == np.lexsort((start, -distinct))[:k].tolist()


def test_top_rows_small_and_degenerate():
    e = np.array([5, 9, 9, 1], np.int64)
    s = np.array([0, 3, 2, 1], np.int64)
    assert top_rows(e, s, 2).tolist() == [2, 1]
    assert top_rows(e, s, 0).tolist() == [] and top_rows(e, s, -1).tolist() == []
    assert top_rows(e, s, 10).tolist() == [2, 1, 0, 3]
    n = 10_000  # one exposed time and one start for every row: the first rows written
    assert top_rows(repeated(n, 7, np.int64), repeated(n, 3, np.int64), 5).tolist() == \
        [0, 1, 2, 3, 4]


def test_one_pair_of_repeated_columns_is_numbered_as_row_by_row():
    for mod, pid in (("jit_step", 5), (None, None), ("m", None), (None, 7)):
        n = 1000
        code, pairs = pair_codes(repeated(n, mod), repeated(n, pid))
        want_code, want_pairs = pair_codes(np.full(n, mod, object), np.full(n, pid, object))
        assert is_repeated(code) and code.tolist() == want_code.tolist()
        assert pairs == want_pairs


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 3 * (1 << 16) + 5), st.integers(0, 2**32 - 1), st.booleans())
@example(3 * (1 << 16) + 5, 7, True)  # (blocks whose int64 sums pass int64 together)
def test_block_sums_and_maxima_are_the_whole_masks(n, seed, huge):
    """`causes._sums_at` (a block of rows at a time) gives one int64 dot product of the
    whole 0/1 mask, wrapping alike where the sum passes int64; `_max_at` the rows' largest."""
    rng = np.random.default_rng(seed)
    m = rng.random(n) < 0.7
    m[rng.integers(0, n)] = True
    hi = 2**62 if huge else 10**6
    cols = [rng.integers(-hi, hi, n, dtype=np.int64), repeated(n, 5, np.int64)]
    want = [int(np.dot(m.astype(np.int64), c)) for c in cols]
    assert _sums_at(m, cols) == want
    assert _max_at(cols[0], m) == int(cols[0][m].max())
