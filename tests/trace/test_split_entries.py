"""`_scan.split_space` on a stripped plane's event_metadata entries (which upb never sees up
front, so the scanner checks them as upb would): a damage to the plane's own fields is
reported before a damaged entry's, wherever the entry lies; of two damaged entries the
first; an entry of a plane not stripped is left to upb; entries are located and their
invalid strings counted. (Pins the order a fused walk over the plane and its entries must
keep: tried in round 8, no faster on a freshly mapped file.)"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from overlap.trace import wire
from tests.trace.wire_bytes import field, split_planes

pytestmark = pytest.mark.skipif(wire._scan is None, reason="the scanner was not built")

NAME = field(2, 2, b"/device:TPU:0")
OK = field(4, 2, field(1, 0, 6) + field(2, 2, field(1, 0, 6) + field(2, 2, b"x")))
# a stat holding a field of wire type 7
BAD_WT = field(4, 2, field(1, 0, 5) + field(2, 2, field(1, 0, 5) + field(5, 2, b"\x0f")))
# a stat whose varint runs past its end
BAD_TRUNC = field(4, 2, field(1, 0, 7) + field(2, 2, field(1, 0, 7) + field(5, 2, b"\x08\x80")))


def _split(plane: bytes, strip=lambda name: True):
    raw = field(1, 2, plane)
    return split_planes(wire.padded(raw), len(raw), strip)


def _refusal(plane: bytes, strip=lambda name: True) -> str | None:
    try:
        _split(plane, strip)
    except wire.Corrupt as e:
        return str(e)
    return None


def test_damaged_entries_refused_in_order_after_the_planes_own_fields():
    assert _refusal(NAME + OK + BAD_WT) == "unsupported wire type"
    assert _refusal(NAME + BAD_TRUNC + OK + BAD_WT) == "truncated varint"
    assert _refusal(NAME + BAD_WT + BAD_TRUNC) == "unsupported wire type"
    # the plane's own damage, after the damaged entry, is the one reported
    assert _refusal(NAME + OK + BAD_WT + b"\x80") == "truncated varint"
    assert _refusal(NAME + BAD_TRUNC + field(3, 2, b"\x0f")) == "unsupported wire type"
    # not stripped (the name decides at the first entry): the entries are upb's to check
    assert _refusal(NAME + OK + BAD_WT, strip=lambda name: False) is None
    assert _refusal(OK + NAME + BAD_WT) is None  # no name yet at the first entry


def test_entries_located_and_bad_strings_counted():
    bad_name = field(4, 2, field(1, 0, 8) + field(2, 2, field(1, 0, 8) + field(2, 2, b"\xff")))
    skel, planes, _ = _split(NAME + OK + bad_name + OK)
    lines, ms, me, stripped, bad, meta = planes[0]
    assert stripped and bad == 1 and len(ms) == len(me) == 3
    assert meta["ok"] and meta["key"].tolist() == [6, 8, 6]  # decoded in the same walk
    # A plane of a name and its entries alone is bare (`_scan.BARE_MODE`, and so a stripped
    # TPU plane, round 42): not in the skeleton, its name the split's; where planes may not be
    # bare, the skeleton keeps it without its entries.
    assert not skel
    raw = field(1, 2, NAME + OK + bad_name + OK)
    got = wire._scan.split_space(wire.padded(raw), len(raw), lambda name: True)
    assert got[-1][0] == ["/device:TPU:0"]
    kept = wire._scan.split_space(wire.padded(raw), len(raw), lambda name: True, bare=False)
    assert kept[0] and kept[-1] is None


_utf8_piece = st.sampled_from([b"a", b"\xc3\xa9", b"\xe2\x82\xac", b"\xf0\x9f\x98\x80", b"\x80",
                               b"\xff", b"\xed\xa0\x80", b"\xc0\xaf", b"\xf4\x90\x80\x80",
                               b"\x00", b"\xe2\x82"]) | st.integers(0, 70).map(lambda k: b"x" * k)


@settings(max_examples=500, deadline=None)
@given(st.lists(_utf8_piece, max_size=10))
def test_utf8_check_is_pythons_strict_decoder(parts):
    """`_scan.utf8_ok` (every string the scanner checks, 32 and 8 ASCII bytes a step) says
    valid exactly where Python's strict decoder (and upb) accepts the bytes, wherever a bad
    byte falls among long ASCII runs."""
    b = b"".join(parts)
    try:
        b.decode("utf-8")
        want = True
    except UnicodeDecodeError:
        want = False
    assert wire._scan.utf8_ok(np.frombuffer(b, np.uint8)) == want


@pytest.mark.parametrize("bad", [b"\x80", b"\xff", b"\xc3\xa9"])
def test_utf8_check_sees_one_byte_anywhere(bad):
    """The plain-ASCII test (`_ascii`: words OR-ed, the last one overlapping, short strings
    byte by byte) sees a single non-ASCII byte at every position of every length up to 40;
    fails if a tail byte is left out of the words (a valid \\xc3\\xa9 must still pass)."""
    for n in range(41):
        for i in range(n):
            b = b"a" * i + bad + b"a" * (n - i - 1)
            want = bad == b"\xc3\xa9"
            assert wire._scan.utf8_ok(np.frombuffer(b, np.uint8)) == want, (n, i)
