"""`Cols.rows` of columns given one scalar per chunk (a plane's host, device, line, stream,
a flag: 4,000 TPU chips' chunks) is what joining each chunk's `repeated` view gives
(`_chunk_part`, `_joined`): the same dtype, values, and a `repeated` view exactly where that
gives one."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from overlap.arrays import is_repeated
from overlap.trace.values import Cols, _chunk_part, _joined

SHARED = "GPU:0"  # one object given to several chunks, as a reader's device name is
NUMBERS = [None, True, False, np.True_, 0, 1, 7, np.int64(7), 2**62]
scalar = st.sampled_from(NUMBERS + [SHARED, "GPU:1", ("a", 1)])
number = st.sampled_from(NUMBERS)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(["object", "int64", "bool", "boolean"]), st.data())
def test_scalar_chunks_join_as_their_views_do(dtype, data):
    # (texts are object columns' only: a number column of text raises either way)
    chunks = data.draw(st.lists(st.tuples(st.integers(1, 5),
                                          scalar if dtype == "object" else number),
                                min_size=2, max_size=8))
    c = Cols()
    for n, v in chunks:
        c.add(n, col=v)
    got = c.rows({"col": dtype})["col"]
    want = _joined([(n, _chunk_part(v, n, dtype)) for n, v in chunks])
    assert got.dtype == want.dtype
    assert is_repeated(got) == is_repeated(want)
    assert [(type(x), x) for x in got.tolist()] == [(type(x), x) for x in want.tolist()]


def test_one_object_over_chunks_is_a_view_and_different_ones_are_repeated():
    c = Cols()
    for n in (3, 2, 4):
        c.add(n, host=SHARED, device=f"TPU:{n}", stream=n)
    rows = c.rows({"host": "object", "device": "object", "stream": "int64"})
    assert is_repeated(rows["host"]) and rows["host"].tolist() == [SHARED] * 9
    assert rows["device"].tolist() == ["TPU:3"] * 3 + ["TPU:2"] * 2 + ["TPU:4"] * 4
    assert rows["stream"].dtype == np.int64
    assert rows["stream"].tolist() == [3] * 3 + [2] * 2 + [4] * 4
