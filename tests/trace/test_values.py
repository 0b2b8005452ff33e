"""`values.ids_of`: `as_id` of each value of an object column, a column at a time."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from overlap.trace.values import as_id, ids_of, object_array

ints = st.one_of(st.integers(0, 2**64 + 5), st.integers(-(2**70), -1),
                 st.sampled_from([0, 2**63 - 1, 2**63, 2**64 - 1, 2**64]))
others = st.sampled_from([None, None, True, False, 1.0, float("nan"), "12", "x", b"7",
                          np.uint64(2**64 - 1), np.int64(-3)])


@settings(max_examples=300, deadline=None)
@given(st.lists(ints, max_size=150), st.lists(others, max_size=3), st.booleans())
def test_ids_of_is_as_id_of_each(xs, more, mixed):
    vals = xs + (more if mixed else [])
    got = ids_of(object_array(vals)).tolist()
    want = [as_id(v) for v in vals]
    assert got == want and [type(x) for x in got] == [type(x) for x in want]


def test_plain_ints_keep_their_values_and_lose_those_out_of_range():
    vals = list(range(62)) + [2**64 - 1, 2**64, -1]
    assert ids_of(object_array(vals)).tolist() == list(range(62)) + [2**64 - 1, None, None]


def test_ints_beside_none():
    vals = [None] + list(range(70)) + [None, 2**64, -5]
    assert ids_of(object_array(vals)).tolist() == [as_id(v) for v in vals]
    assert ids_of(object_array(vals)).tolist()[-3:] == [None, None, None]
