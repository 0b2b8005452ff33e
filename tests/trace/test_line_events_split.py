"""`_scan.split_space` counts each line's events as upb reads them, where runs of short events
(tag 0x22, a one-byte length) are counted in place and everything else by the general
readers: events of every length around the one-byte limit (127/128 bytes), other line fields
between them, over-long lengths, and a length past the line's end (refused by both).

And `tpu._OpIndex` (per-event lookups by metadata id, no inverse array) equals
`unique_inverse`: the distinct ids, each event's index, a per-op fact taken per event.
"""

from __future__ import annotations

import numpy as np
import pytest
from google.protobuf.message import DecodeError
from hypothesis import given, settings
from hypothesis import strategies as st

from overlap.trace import lines, tpu, wire
from overlap.trace.protos import XSpace
from tests.trace.wire_bytes import field, varint

pytestmark = pytest.mark.skipif(wire._scan is None, reason="the scanner was not built")


def _event(size: int) -> bytes:
    """An XEvent payload of `size` bytes (a metadata id whose varint takes 1-3 bytes, then
    an unknown field's bytes as filler; 2 bytes where `size` is 1), or empty."""
    if size == 0:
        return b""
    for mid in (7, 200, 20000):
        body = field(1, 0, mid)
        rest = size - len(body)
        if rest == 0:
            return body
        if rest >= 2:
            filler = field(12, 2, b"x" * (rest - 2 if rest - 2 < 128 else rest - 3))
            if len(body) + len(filler) == size:
                return body + filler
    return field(1, 0, 7)


def _line(parts: list[tuple[str, int]]) -> bytes:
    out = b""
    for kind, v in parts:
        if kind == "event":
            out += field(4, 2, _event(v))
        elif kind == "padded":  # an event whose length is written over-long
            out += field(4, 2, _event(v), pad=1)
        elif kind == "id":
            out += field(1, 0, v)
        else:
            out += field(2, 2, b"n" * v)
    return out


def _space(lines: list[bytes]) -> bytes:
    plane = field(2, 2, b"/device:TPU:0") + b"".join(field(3, 2, ln) for ln in lines)
    return field(1, 2, plane)


def _split_counts(raw: bytes) -> list[int]:
    buf = wire.padded(raw)
    _, _, (rec, _, _, _, _), _, _, _, _ = wire._scan.split_space(buf, len(raw))
    return lines.Records(*rec)[:, lines.EVENTS].tolist()  # (each line's record: its events last)


part = st.one_of(
    st.tuples(st.just("event"), st.one_of(st.integers(0, 20), st.integers(120, 135),
                                           st.integers(250, 300))),
    st.tuples(st.just("padded"), st.integers(0, 10)),
    st.tuples(st.just("id"), st.integers(0, 1 << 40)),
    st.tuples(st.just("name"), st.integers(0, 200)))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(part, max_size=30), min_size=1, max_size=3))
def test_event_counts_equal_upb(lines):
    raw = _space([_line(ln) for ln in lines])
    want = [len(ln.events) for pl in XSpace.FromString(raw).planes for ln in pl.lines]
    assert _split_counts(raw) == want


@pytest.mark.parametrize("short_by", [1, 2, 50])
def test_an_event_past_its_line_is_refused_as_upb_refuses_it(short_by):
    good = field(4, 2, _event(10)) * 3
    last = _event(40)
    # the last event says 40 bytes, the line holds fewer: the line's own length is right
    line = good + b"\x22" + varint(len(last)) + last[:len(last) - short_by]
    raw = _space([line])
    with pytest.raises(DecodeError):
        XSpace.FromString(raw)
    with pytest.raises(wire.Corrupt):
        _split_counts(raw)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 300), max_size=3000), st.integers(0, 1 << 41))
def test_op_index_equals_unique_inverse(ids, shift):
    mids = np.array(ids, np.int64) + (shift if shift % 3 == 0 else 0)  # large ids: searched
    uniq, inv = wire.unique_inverse(mids)
    ops = tpu._OpIndex(mids)
    assert ops.uniq.tolist() == uniq.tolist() and ops.uniq.dtype == mids.dtype
    assert ops.codes(mids).tolist() == inv.tolist()
    fact = np.arange(len(uniq)) % 2 == 0
    assert ops.take(fact, mids).tolist() == fact[inv].tolist()
