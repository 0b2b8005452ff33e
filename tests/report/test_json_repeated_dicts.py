"""Dict columns with few distinct rows (a step's `exposure_causes`: a handful of value rows in
thousands of steps) are encoded once per distinct row (`text._layout_text`, issue 32 round 8),
and a column's types are counted by identity (`text._kinds`): the fast paths checked against
the encoder writing every row itself, on columns built to catch equal values whose text
differs (1, True and 1.0; 0.0 and -0.0; a str subclass)."""

from __future__ import annotations

import random

import numpy as np

from overlap.analysis import causes
from overlap.report.text import _ENCODE, _dicts_text, _kinds, _layout_text, _rows_text


class _Name(str):
    pass


def _each(col):
    return [_ENCODE(d) for d in col]


def test_repeated_dicts_written_as_the_encoder_writes_each():
    base = [{"device_waits": 96, "unknown": 19}, {"device_waits": 0, "unknown": 5},
            {"device_waits": 7, "unknown": None}, {"device_waits": 3, "unknown": "x"}]
    col = [dict(base[i % len(base)]) for i in range(400)]
    assert _layout_text(col, ("device_waits", "unknown")) == _each(col)
    assert _dicts_text(col) == _each(col)


def test_equal_values_of_another_type_keep_their_own_text():
    # each trap equals a value that repeats (so the rows would share a text by equality)
    for trap in (True, 1.0, _Name("x")):
        col = [{"a": 1 if i % 2 else "x"} for i in range(200)]
        col[37] = {"a": trap}
        got = _dicts_text(col)
        assert got == _each(col)
        assert got[37] == _ENCODE({"a": trap})
    col = [{"a": 0.0} for _ in range(100)]
    col[5] = {"a": -0.0}
    assert _dicts_text(col) == _each(col) and _dicts_text(col)[5] == '{"a": -0.0}'
    col = [{"a": 2} for _ in range(100)]
    col[9] = {1: 2}  # another layout whose key is no str: refused, as the rows path refuses
    assert _dicts_text(col) in (None, _each(col))


def test_random_repeated_columns_and_layouts():
    rng = random.Random(5)
    pool = [0, 1, 2, 10**15, -3, True, False, 1.0, 0.0, -0.0, 2.5, None, "u", "é", _Name("u"),
            [1], {"k": 1}]
    for _ in range(300):
        keys = rng.sample(["device_waits", "unknown", "queued", "%s"], rng.randrange(0, 4))
        rows = [{k: rng.choice(pool[:rng.randrange(1, len(pool))]) for k in keys}
                for _ in range(rng.randrange(1, 5))]
        col = [dict(rng.choice(rows)) for _ in range(rng.randrange(1, 120))]
        if rng.random() < 0.3 and len(col) > 2:  # a few dicts of another layout
            col[1] = {"unknown": 1}
        got = _dicts_text(col)
        assert got in (None, _each(col))
        if keys and all(list(d) == keys for d in col):
            assert _layout_text(col, tuple(keys)) in (None, _each(col))
        steps = [{"step": i, "exposure_causes": d} for i, d in enumerate(col)]
        assert _rows_text(steps) in (None, _each(steps))


def test_kinds_is_the_set_of_types():
    for col in ([1, 2, 3], [1, True], [True, 1], [1.0, 1], ["a", _Name("a")], [None],
                [{}, {}, []], list(range(600)) + [2.0]):
        assert _kinds(col) == set(map(type, col))


def test_cause_dicts_are_each_their_own_dict():
    one = [np.full(5, 7), *[np.zeros(5, np.int64)] * (len(causes.CAUSES) - 1)]
    got = causes.cause_dicts(one)
    assert len({id(d) for d in got}) == 5
    got[0][causes.CAUSES[0]] = 1  # changing one row's dict leaves the others
    assert [d[causes.CAUSES[0]] for d in got] == [1, 7, 7, 7, 7]
    empty = causes.cause_dicts([np.zeros(3, np.int64)] * len(causes.CAUSES))
    assert empty == [{}, {}, {}] and len({id(d) for d in empty}) == 3
    two = [np.array([5, 0, 5, 0]), np.array([0, 4, 4, 0]),
           *[np.zeros(4, np.int64)] * (len(causes.CAUSES) - 2)]
    got = causes.cause_dicts(two)
    assert got == [{causes.CAUSES[0]: 5}, {causes.CAUSES[1]: 4},
                   {causes.CAUSES[0]: 5, causes.CAUSES[1]: 4}, {}]
    assert all(type(v) is int for d in got for v in d.values())
