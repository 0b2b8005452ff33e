"""`GroupStatNames.names_of` (a group of planes' stat names looked up a column at a time, the
refs of many small GPU planes) equals `get(key, "")` key by key: keys of every plane, ids no
map has, negative keys, keys past the last plane, and keys too large for int64."""

from __future__ import annotations

import random

import numpy as np
import pytest

from overlap.trace import wire
from overlap.trace.statids import GroupStatNames
from overlap.trace.values import GROUP_STRIDE
from tests.trace.test_stat_names_memo import _file

pytestmark = pytest.mark.skipif(wire._scan is None, reason="scanner not built")


def _planes(seed: int, n: int) -> list:
    raw = _file(random.Random(seed), n)
    _, views, _ = wire.parse_space(wire.padded(raw), len(raw))
    return [wire.Plane(pv) for pv in views]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_names_of_is_get_of_each_key(seed):
    planes = _planes(seed, 12)
    names = GroupStatNames(planes)
    rng = random.Random(seed)
    keys = [i * GROUP_STRIDE + k for i in range(len(planes) + 2) for k in range(0, 24)]
    keys += [-1, -GROUP_STRIDE - 3, rng.randrange(1 << 40)]
    rng.shuffle(keys)
    got = names.names_of(np.unique(np.array(keys, np.int64)))
    want = [names.get(k, "") for k in np.unique(np.array(keys, np.int64)).tolist()]
    assert got.dtype == object and got.tolist() == want
    assert any(w for w in want) and "" in want  # names found, and keys with none
    big = np.array([3, (1 << 64) - 1], np.uint64)
    assert names.names_of(big).tolist() == [names.get(3, ""), ""]
    assert names.names_of(np.zeros(0, np.int64)).tolist() == []
