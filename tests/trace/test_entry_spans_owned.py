"""`_scan.split_space` hands the entry spans of all planes over as the arrays it filled (no
copy; each plane's a slice of them): numpy's own int32 where the buffer is under 2 GiB (round
22: a million entries' spans were 16 MB of int64 on the read's peak), writable and contiguous,
each entry's [start, end) where it lies in the buffer, living on after the buffer and the rest
of the split are gone."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from overlap.trace import wire
from tests.trace.wire_bytes import field, split_planes

pytestmark = pytest.mark.skipif(wire._scan is None, reason="the scanner was not built")


def _payload(key: int, name: bytes) -> bytes:
    """An event_metadata map entry's bytes: its key and its XEventMetadata value."""
    return field(1, 0, key) + field(2, 2, field(1, 0, key) + field(2, 2, name))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2**40), st.binary(max_size=300)), max_size=200),
       st.booleans())
def test_entry_spans_are_numpy_int32_where_the_entries_lie(entries, stripped):
    payloads = [_payload(k, n) for k, n in entries]
    plane = field(2, 2, b"/device:TPU:0") + b"".join(field(4, 2, p) for p in payloads)
    raw = field(1, 2, plane)
    buf = wire.padded(raw)
    _, planes, _ = split_planes(buf, len(raw), lambda name: stripped)
    ms, me = planes[0][1], planes[0][2]
    del planes
    for a in (ms, me):
        assert a.dtype == np.int32 and a.dtype.type is np.int32 and a.dtype.char == \
            np.dtype(np.int32).char
        assert a.flags.c_contiguous and a.flags.writeable and a.ndim == 1
    assert len(ms) == len(me) == len(entries)
    got = [bytes(buf[s:e]) for s, e in zip(ms.tolist(), me.tolist())]
    assert got == payloads  # each span: the entry's bytes after its field's tag and length
    want = (ms.copy(), me.copy())
    del buf, raw
    gc.collect()
    ms[:] += 0  # still writable memory of their own after the buffer went
    assert ms.tolist() == want[0].tolist() and me.tolist() == want[1].tolist()
    assert np.concatenate([ms, me]).sum() == want[0].sum() + want[1].sum()
