"""Step rows made as copies of a template (`step_rows._rows_of`, issue 32 round 8) are the dicts
one `_row` per step makes: the same keys in the same order, equal values of the same types,
-0.0 kept apart from 0.0, no dict shared between rows, whichever columns hold one value."""

from __future__ import annotations

import json

import numpy as np
import pytest

from overlap.analysis import step_rows as S


def _reference(n, cols):
    plain = []
    for c in cols:
        if isinstance(c, S._One):
            plain.append([c.v] * n)
        elif isinstance(c, np.ndarray):
            plain.append(c.tolist())
        else:
            plain.append(c)
    return list(map(S._row, *plain))


def _same(a: list[dict], b: list[dict]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert list(x) == list(y)
        assert [type(v) for v in x.values()] == [type(v) for v in y.values()]
        assert json.dumps(x) == json.dumps(y)


def _columns(rng, n, const_share):
    def ints():
        if rng.random() < const_share:
            return np.full(n, int(rng.integers(-5, 10**13)), np.int64)
        return rng.integers(0, 10**12, n).astype(np.int64)

    def floats():
        pick = rng.random()
        if pick < const_share / 2:
            return S._floats([0.25] * n)
        if pick < const_share:
            return S._floats([0.0] * (n - 1) + [-0.0])  # equal, not the same number
        return S._floats([None if rng.random() < 0.2 else float(x) for x in rng.random(n)])

    def names():
        if rng.random() < const_share:
            return S._objects(["train"] * n)
        return S._objects([str(np.str_("s")) if i % 2 else np.str_("s") for i in range(n)])

    causes = [{} if i % 3 == 0 else {"device_waits": i} for i in range(n)]
    return [S._One("host-a"), ints(), names(), ints(), ints(), ints(), ints(), ints(), ints(),
            ints(), ints(), ints(), ints(), ints(), ints(), floats(), ints(), floats(),
            S._objects(["GPU:0"] * n if rng.random() < const_share else
                       [None, "GPU:1"] * (n // 2) + [None] * (n % 2)), causes]


@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("const_share", [0.0, 0.6, 1.0])
def test_template_rows_equal_one_row_per_step(seed, const_share):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40))
    cols = _columns(rng, n, const_share)
    got = S._rows_of(n, *S._split(cols))
    _same(got, _reference(n, cols))
    assert len({id(r) for r in got}) == n
    assert len({id(r["exposure_causes"]) for r in got}) == n  # never one shared dict


def test_minus_zero_and_mixed_types_are_not_one_value():
    assert isinstance(S._floats([0.0, -0.0]), list)
    assert isinstance(S._floats([0.5, 0.5]), S._One)
    assert isinstance(S._floats([None, None]), S._One)
    assert isinstance(S._objects(["a", np.str_("a")]), list)
    assert isinstance(S._objects([None, None]), S._One)
    assert S._rows_of(0, *S._split([])) == []
