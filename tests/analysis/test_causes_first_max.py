"""`causes._first_max` is `np.argmax` over the stacked columns (ties: the first), the cause
each copy is labelled with (issue 32 round 22: the stack was 38 MB of a million copies), of
every row or of the rows asked for, however the rows fall across its blocks (round 24)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from overlap.analysis import causes
from overlap.analysis.causes import _first_max


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 6), st.integers(0, 20), st.data())
def test_first_max_is_argmax_of_the_stack(k, n, data):
    cols = [np.array(data.draw(st.lists(st.integers(-3, 3), min_size=n, max_size=n)), np.int64)
            for _ in range(k)]
    assert _first_max(cols).tolist() == np.argmax(np.stack(cols), axis=0).tolist()


@pytest.mark.parametrize("block", [1, 3, 7, 1 << 16])
@settings(max_examples=100, deadline=None)
@given(st.integers(1, 6), st.integers(0, 30), st.data())
def test_first_max_of_some_rows_in_blocks(block, k, n, data):
    cols = [np.array(data.draw(st.lists(st.integers(-3, 3), min_size=n, max_size=n)), np.int64)
            for _ in range(k)]
    rows = np.array(sorted(data.draw(st.sets(st.integers(0, max(n - 1, 0)), max_size=n))),
                    np.intp) if n else np.zeros(0, np.intp)
    old = causes._SUM_BLOCK
    causes._SUM_BLOCK = block
    try:
        every = _first_max(cols)
        some = _first_max(cols, rows)
    finally:
        causes._SUM_BLOCK = old
    want = np.argmax(np.stack(cols), axis=0) if n else np.zeros(0, np.intp)
    assert every.tolist() == want.tolist()
    assert some.tolist() == want[rows].tolist()
