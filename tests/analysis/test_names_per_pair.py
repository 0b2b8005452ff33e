"""`names.per_pair` (issue 32 round 12): a copy's "program at hand" flag is its pair's,
`have[pair]`, also where every pair's flag is the same (the answer then made without a
gather per copy). Drawn flags and codes, every pair used or not."""

from __future__ import annotations

import numpy as np
import pytest

from overlap.analysis.names import per_pair


@pytest.mark.parametrize("seed", range(30))
def test_per_pair_is_the_gather(seed):
    rng = np.random.default_rng(seed)
    k = int(rng.integers(1, 5))
    mode = seed % 3
    have = (np.zeros(k, bool) if mode == 0 else np.ones(k, bool) if mode == 1
            else rng.random(k) < 0.5)
    pair = rng.integers(0, k, int(rng.integers(0, 50)))
    got = per_pair(have, pair)
    assert got.dtype == bool and got.tolist() == have[pair].tolist()


def test_mixed_flags_are_gathered():
    have = np.array([False, True])
    assert per_pair(have, np.array([1, 0, 1, 1])).tolist() == [True, False, True, True]
    assert per_pair(np.array([True]), np.array([0, 0])).tolist() == [True, True]
    assert per_pair(np.array([False, False]), np.array([], np.intp)).tolist() == []
