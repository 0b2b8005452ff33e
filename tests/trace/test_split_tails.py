"""`split_space` checks an op's stat tail once per distinct tail (issue 32, round 12).

The rule (`_scan._value_check`): a stripped plane's metadata values are checked as upb
would check them; a value whose tail (its bytes from its first stat field's tag to its end)
is byte for byte a tail met before that checked clean (no error, no name or display name in
it, no string counted) is checked up to that tail only. These tests hold `split_space` to
what a check of every field gives, on planes whose tails repeat: every copy of a tail with
invalid UTF-8 counted, names written after the stats read as written last, a repeated tail
with one byte changed read afresh (refused where damaged, counted where its text is bad),
and the decoded columns equal to `decode_meta`'s (which walks every field).
"""

from __future__ import annotations

import numpy as np
import pytest

from overlap.trace import wire
from tests.trace.wire_bytes import field, split_planes

pytestmark = pytest.mark.skipif(getattr(wire, "SCANNER", None) is None,
                                reason="the scanner is not used")


def _stat(sid: int, fn: int, wt: int, val) -> bytes:
    return field(5, 2, field(1, 0, sid) + field(fn, wt, val))


_TAIL_A = _stat(2, 5, 2, b"copy-start") + _stat(3, 3, 0, 12190760917235803885) \
    + _stat(5, 4, 0, 4096) + _stat(9, 5, 2, b"(f32[8,128]{1,0:T(8,128)S(5)}, u32[])")
_TAIL_B = _stat(2, 5, 2, b"loop fusion") + _stat(4, 3, 0, 2048)
_TAIL_BAD = _stat(2, 5, 2, b"copy-\xffdone") + _stat(5, 4, 0, 64)  # invalid UTF-8: counted


def _value(mid: int, name: bytes, tail: bytes, after: bytes = b"") -> bytes:
    return field(1, 0, mid) + field(2, 2, name) + field(4, 2, b"op") + tail + after


def _space(values: list[bytes]) -> bytes:
    entries = b"".join(field(4, 2, field(1, 0, i + 1) + field(2, 2, v))
                       for i, v in enumerate(values))
    return field(1, 2, field(2, 2, b"/device:TPU:0") + entries)


def _split(values: list[bytes]):
    raw = _space(values)
    data = bytearray(raw + bytes(wire.PAD))
    _, planes, _ = split_planes(data, len(raw), lambda name: True)
    (lines, ms, me, stripped, bad, meta), = planes
    assert stripped and meta is not None and meta["ok"]
    return data, ms, me, bad, meta


def _names(data, meta) -> list[bytes]:
    name = np.asarray(meta["name"])
    return [bytes(data[a:b]) for a, b in zip(name[0].tolist(), name[1].tolist())]


def _same_as_full_decode(data, ms, me, meta) -> None:
    """The columns equal `decode_meta`'s, which walks every field of every entry."""
    full = wire._scan.decode_meta(data, ms.astype(np.int64), me.astype(np.int64), narrow=True)
    assert full["ok"] and full["reversed"] == meta["reversed"]
    for k in ("key", "name", "disp", "value"):
        assert np.asarray(full[k]).tolist() == np.asarray(meta[k]).tolist()


def test_repeated_clean_tails_read_as_every_field():
    values = [_value(i, b"%%op.%d" % i, (_TAIL_A, _TAIL_B, _TAIL_A + _TAIL_B)[i % 3])
              for i in range(60)]
    data, ms, me, bad, meta = _split(values)
    assert bad == 0
    assert _names(data, meta) == [b"%%op.%d" % i for i in range(60)]
    _same_as_full_decode(data, ms, me, meta)


def test_every_copy_of_a_bad_tail_is_counted():
    values = [_value(i, b"n", _TAIL_BAD if i % 2 else _TAIL_A) for i in range(40)]
    _, _, _, bad, _ = _split(values)
    assert bad == 20


def test_a_name_after_the_stats_is_read_as_written_last():
    # the tail holds a name (and a display name): it is never taken as seen, each value's
    # name is the tail's, not the one before it
    after = field(2, 2, b"last") + field(4, 2, b"shown")
    values = [_value(i, b"first.%d" % i, _TAIL_A, after) for i in range(30)]
    data, ms, me, bad, meta = _split(values)
    assert bad == 0
    assert _names(data, meta) == [b"last"] * 30
    disp = np.asarray(meta["disp"])
    assert {bytes(data[a:b]) for a, b in zip(disp[0].tolist(), disp[1].tolist())} == {b"shown"}
    _same_as_full_decode(data, ms, me, meta)
    bad_after = field(2, 2, b"\xc3") + field(4, 2, b"ok")  # a bad last name: counted each time
    assert _split([_value(i, b"n", _TAIL_A, bad_after) for i in range(12)])[3] == 12


def test_a_tail_changed_by_one_byte_is_read_afresh():
    # the same length as a tail seen, one byte different: damaged (a wire type 7 field
    # inside a stat) -> refused; a bad UTF-8 byte in a string -> counted
    tail = bytearray(_TAIL_A)
    at = tail.index(b"copy-start") - 2  # the tag of the first stat's string value
    assert tail[at] == (5 << 3 | 2)
    damaged = bytes(tail[:at]) + bytes([5 << 3 | 7]) + bytes(tail[at + 1:])
    assert len(damaged) == len(_TAIL_A)
    good = [_value(i, b"n", _TAIL_A) for i in range(10)]
    _split(good)
    with pytest.raises(wire._scan.Corrupt):
        _split(good + [_value(10, b"n", damaged)] + good)
    text = bytes(_TAIL_A).replace(b"copy-start", b"copy\xffstart")
    assert len(text) == len(_TAIL_A)
    assert _split(good + [_value(10, b"n", text)] * 3 + good)[3] == 3


def _records_each_alone(data, vs, ve, sids) -> dict[str, list]:
    """`decode_meta_stats` of each value in a call of its own (no tail met before it)."""
    out: dict[str, list] = {k: [] for k in ("ev", "sid", "kind", "ival", "vpos")}
    for i, (a, b) in enumerate(zip(vs.tolist(), ve.tolist())):
        d = wire._scan.decode_meta_stats(data, np.array([a], np.int64),
                                         np.array([b], np.int64), sids)
        out["ev"] += [i] * len(d["ev"])
        for k in ("sid", "kind", "ival", "vpos"):
            out[k] += d[k].tolist()
    return out


@pytest.mark.parametrize("sids", [[2, 3, 5, 9], [3], [9, 2], [7]])
def test_meta_stats_of_repeated_tails_equal_each_alone(sids):
    # tails repeated, and tails of the same length as one met but other bytes (another
    # value of a string stat, another size): records by content, positions where they lie
    other = _TAIL_A.replace(b"copy-start", b"copy-stark")
    size = _TAIL_A.replace(field(4, 0, 4096), field(4, 0, 4097))
    assert len(other) == len(size) == len(_TAIL_A)
    tails = [_TAIL_A, _TAIL_B, other, _TAIL_A, size, _TAIL_A + _TAIL_B, _TAIL_BAD, _TAIL_A,
             _TAIL_B, other, size, _TAIL_B + field(2, 2, b"x")]
    values = [_value(i, b"n%d" % i, tails[i % len(tails)]) for i in range(5 * len(tails))]
    data, ms, me, bad, meta = _split(values)
    value = np.asarray(meta["value"]).astype(np.int64)
    w = np.array(sids, np.int64)
    got = wire._scan.decode_meta_stats(data, value[0], value[1], w)
    want = _records_each_alone(data, value[0], value[1], w)
    assert {k: v.tolist() for k, v in got.items()} == want
    assert len(want["ev"]) > 0 or sids == [7]
