"""`causes._first_max` is `np.argmax` over the stacked columns (ties: the first), the cause
each copy is labelled with (issue 32 round 22: the stack was 38 MB of a million copies)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from overlap.analysis.causes import _first_max


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 6), st.integers(0, 20), st.data())
def test_first_max_is_argmax_of_the_stack(k, n, data):
    cols = [np.array(data.draw(st.lists(st.integers(-3, 3), min_size=n, max_size=n)), np.int64)
            for _ in range(k)]
    assert _first_max(cols).tolist() == np.argmax(np.stack(cols), axis=0).tolist()
