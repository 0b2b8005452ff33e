"""`statcols.apply_once` (a function of each stat value, called once per distinct str or int value:
per-plane refs give one value per event) equals `[fn(v) for v in values]`: values of other
types, equal but printed apart (1, 1.0, True; -0.0, 0.0), NaN and None are each passed on."""

from __future__ import annotations

import math
import random

from overlap.trace.statcols import apply_once
from overlap.trace.values import as_id, as_text


def test_each_equals_a_call_per_value():
    rng = random.Random(28)
    pool = ["fusion.1", "fusion.2", "a::b::copy.3", "", 1, 2, (1 << 63) - 1, 1.0, True, False,
            -0.0, 0.0, math.nan, None, b"x", "1"]
    for n in (0, 5, 63, 64, 500):
        values = [rng.choice(pool) for _ in range(n)]
        for fn in (as_text, as_id, repr):
            assert [repr(x) for x in apply_once(fn, values)] == [repr(fn(v)) for v in values]


def test_each_distinct_str_or_int_once():
    calls: list = []

    def fn(v):
        calls.append(v)
        return repr(v)
    values = ["a", "b", 1, 1.0, True, -0.0, 0.0] * 20
    assert apply_once(fn, values) == [repr(v) for v in values]
    assert calls.count("a") == 1 and calls.count("b") == 1
    assert len([c for c in calls if type(c) is int]) == 1
    assert len([c for c in calls if type(c) is float]) == 60  # 1.0, -0.0, 0.0: each time
    assert len([c for c in calls if type(c) is bool]) == 20
