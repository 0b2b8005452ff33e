"""`_scan.plane_stats` (issue 32, round 26) gives what `wire.Plane.stats` gives of upb's
messages for the same XStat fields: the first stat of a name wins, unnamed ids are left out,
a ref reads its name ("" where none), no value is None, the last value field written wins
(a oneof), ids are int64 and refs uint64 (2**64 - 1 is id -1, and no ref's); and None (the
caller asks upb) exactly where a field is one upb would mend or holds a group. Field bytes
are written here, hypothesis draws them."""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from overlap.trace import wire
from tests.trace.wire_bytes import field

pytestmark = pytest.mark.skipif(wire.SCANNER is None, reason="the compiled scanner is not built")

NAMES = {1: "a", 2: "b", 3: "a", 4: "ref me", (1 << 64) - 1: "top", (1 << 63) + 5: "high"}

_ids = st.sampled_from([0, 1, 2, 3, 4, 5, (1 << 64) - 1, (1 << 63) + 5])
_value = st.one_of(
    st.builds(lambda v: field(2, 1, struct.pack("<d", v)),
              st.floats(allow_nan=False)),
    st.builds(lambda v: field(3, 0, v), st.integers(0, (1 << 64) - 1)),
    st.builds(lambda v: field(4, 0, v), st.integers(0, (1 << 64) - 1)),
    st.builds(lambda v: field(5, 2, v), st.text(max_size=6).map(str.encode)),
    st.builds(lambda v: field(5, 2, v), st.sampled_from([b"\xff", b"a\xc3"])),  # mended
    st.builds(lambda v: field(6, 2, v), st.binary(max_size=6)),
    st.builds(lambda v: field(7, 0, v), _ids),
    st.just(b"\x4b\x4c"),  # an empty group (field 9): upb keeps it as unknown
    st.builds(lambda v: field(9, 0, v), st.integers(0, 300)),  # an unknown field
)
_stat = st.lists(st.one_of(st.builds(lambda v: field(1, 0, v), _ids), _value), max_size=4)


def _plane(stats: list[list[bytes]]) -> tuple[bytes, np.ndarray, int]:
    """A plane's payload: stat metadata for `NAMES`, then the stats; the stats' field spans
    within the XSpace bytes, and the XSpace bytes' length."""
    meta = b"".join(field(5, 2, field(1, 0, k) + field(2, 2, field(2, 2, n.encode())))
                    for k, n in NAMES.items())
    fields = [field(6, 2, b"".join(s)) for s in stats]
    body = meta + b"".join(fields)
    head = field(1, 2, body)
    at = len(head) - len(body) + len(meta)  # (where the first stat field starts)
    spans = []
    for f in fields:
        spans += [at, at + len(f)]
        at += len(f)
    return head, np.array(spans, np.int64), len(head)


def _plain(stat: list[bytes]) -> bool:
    raw = b"".join(stat)
    if b"\x4b\x4c" in raw:
        return False
    for part in stat:
        if part[:1] == b"\x2a":  # (a str_value: valid UTF-8?)
            try:
                part[2:].decode("utf-8")
            except UnicodeDecodeError:
                return False
    return True


@settings(max_examples=300, deadline=None)
@given(st.lists(_stat, max_size=6))
def test_as_upb_reads_them(stats):
    raw, spans, n = _plane(stats)
    msg = wire.space_message(raw).planes[0]
    P = wire.Plane(msg)
    got = wire.SCANNER.plane_stats(wire.padded(raw), spans, P.stat_names)
    if not all(_plain(s) for s in stats):
        assert got is None
        return
    want = P.stats(msg.stats)
    assert got is not None and list(got) == list(want)
    for k in want:
        assert type(got[k]) is type(want[k]), k
        if isinstance(want[k], float):
            assert struct.pack("<d", got[k]) == struct.pack("<d", want[k]) or (
                math.isnan(got[k]) and math.isnan(want[k]))
        else:
            assert got[k] == want[k], k


def test_a_span_that_is_no_stat_field_is_asked_of_upb():
    raw, spans, _ = _plane([[field(1, 0, 1), field(4, 0, 3)]])
    buf = wire.padded(raw)
    assert wire.SCANNER.plane_stats(buf, spans, {1: "a"}) == {"a": 3}
    assert wire.SCANNER.plane_stats(buf, spans - 1, {1: "a"}) is None  # (not its tag)
    with pytest.raises(ValueError):
        wire.SCANNER.plane_stats(buf, spans + len(buf), {1: "a"})
