"""Bare planes (issue 32, round 26; `_scan.BARE_MODE`): a plane whose strip mode is 2 (the
reader's GPU planes of a file of many planes) and of which nothing is left for upb but one
id and one valid name is not put in the skeleton; the split gives its name and id, and its
view reads as the upb skeleton's plane would (name, id, no stats, no entries, no stat
metadata; its plain stats read from the file, `_scan.plane_stats`). Every other plane is in
the skeleton, in order, as before. Inputs are written
here, byte by byte where upb's writer cannot write the case."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from overlap.trace import reader, wire
from tests.trace.test_columns import assert_same_columns
from tests.trace.wire_bytes import field

pytestmark = pytest.mark.skipif(wire.SCANNER is None, reason="the compiled scanner is not built")


def _entry(k: int, name: bytes) -> bytes:
    """An event_metadata map entry: key k, value {id: k, name}."""
    return field(4, 2, field(1, 0, k) + field(2, 2, field(1, 0, k) + field(2, 2, name)))


def _line() -> bytes:
    ev = field(1, 0, 1) + field(2, 0, 10) + field(3, 0, 5)  # metadata 1, offset, duration
    return field(3, 2, field(1, 0, 1) + field(2, 2, b"Stream #1") + field(3, 0, 1000)
                 + field(4, 2, ev))


def _gpu(d: int, *extra: bytes, name: bytes | None = None, entry_first: bool = False) -> bytes:
    """A GPU plane of one entry and one line; `extra` fields after its id and name."""
    head = field(1, 0, d) + field(2, 2, name if name is not None else b"/device:GPU:%d" % d)
    body = _entry(1, b"kernel_x") + _line()
    return field(1, 2, (body + head if entry_first else head + body) + b"".join(extra))


CASES = {  # plane -> bare?
    "plain": (_gpu(3), True),
    "no id": (field(1, 2, field(2, 2, b"/device:GPU:4") + _entry(1, b"k") + _line()), True),
    "big id": (_gpu((1 << 64) - 5), True),  # (read as int64: -5, as upb reads it)
    # plain stats: left in the file, their spans the view's (`Plane.plane_stats` reads them)
    "a stat": (_gpu(5, field(6, 2, field(1, 0, 1) + field(4, 0, 7))), True),
    "stats": (_gpu(12, field(5, 2, field(1, 0, 1) + field(2, 2, field(2, 2, b"memory_size"))),
                   field(6, 2, field(1, 0, 1) + field(3, 0, 5)),
                   field(6, 2, field(1, 0, 1) + field(5, 2, b"again")),
                   field(6, 2, field(1, 0, 2) + field(7, 0, 1))), True),
    "a stat upb mends": (_gpu(13, field(6, 2, field(1, 0, 1) + field(5, 2, b"x\xff"))), False),
    "a stat with a group": (_gpu(14, field(6, 2, field(1, 0, 1) + b"\x4b\x4c")), False),
    "an unknown field": (_gpu(6, field(9, 0, 1)), False),
    "two names": (_gpu(7, field(2, 2, b"/device:GPU:77")), False),
    "two ids": (_gpu(8, field(1, 0, 88)), False),
    "invalid UTF-8": (_gpu(9, name=b"/device:GPU:9\xff"), False),  # (not a GPU name: mode 0)
    "name after its entries": (_gpu(10, entry_first=True), False),  # (no name: mode 0)
    "stat metadata": (_gpu(11, field(5, 2, field(1, 0, 1) + field(2, 2, field(2, 2, b"s")))),
                      True),  # (never in the skeleton: the split reads it)
    "host": (field(1, 2, field(1, 0, 99) + field(2, 2, b"/host:CPU")), False),
}


def _parse(raw: bytes, strip) -> tuple[Any, list]:
    xs, views, _ = wire.parse_space(wire.padded(raw), len(raw), strip_meta=strip)
    return xs, views


def test_bare_exactly_where_only_an_id_and_a_name_are_left():
    raw = b"".join(p for p, _ in CASES.values())
    got = wire._scan.split_space(wire.padded(raw), len(raw), reader._strip_many)
    names, ids = got[6]
    assert [n is not None for n in names] == [b for _, b in CASES.values()]
    want = wire.space_message(raw)  # (upb, the invalid name read with replacement)
    for name, pid, pl in zip(names, ids.tolist(), want.planes):
        if name is not None:
            assert (name, pid) == (pl.name, pl.id)
    # the skeleton holds the other planes, as the split without bare planes wrote them
    plain = wire._scan.split_space(wire.padded(raw), len(raw), reader._strip_many, -1, (),
                                   False)
    assert plain[6] is None
    kept = wire.space_message(got[0]).planes
    assert [p.name for p in kept] == [p.name for p, (_, b) in zip(want.planes, CASES.values())
                                      if not b]
    assert [p.SerializeToString() for p in kept] == [
        p.SerializeToString() for p, (_, b) in
        zip(wire.space_message(plain[0]).planes, CASES.values()) if not b]



@pytest.mark.parametrize("protobuf_first", [False, True])
def test_views_read_as_the_skeleton_planes_would(protobuf_first):
    """Each view's name, id, stats, entries and stat metadata as the views of the same bytes
    parsed with no bare plane (every plane's message from the skeleton); whichever decoder
    read the skeleton (the Python one where protobuf is not loaded yet)."""
    raw = b"".join(p for p, _ in CASES.values()) * 3
    if protobuf_first:
        import overlap.trace.protos  # noqa: F401
    xs, views = _parse(raw, reader._strip_many)
    wire.BARE_PLANES[0] = False
    try:
        _, plain = _parse(raw, reader._strip_many)
    finally:
        wire.BARE_PLANES[0] = True
    assert len(xs.planes) == sum(not b for _, b in CASES.values()) * 3
    assert [v.name for v in views] == [v.name for v in plain]
    for v, w in zip(views, plain):
        assert (v.msg.name, v.msg.id) == (w.msg.name, w.msg.id)
        assert list(v.stats) == list(w.stats)  # (upb's, of the bare plane's spans)
        assert dict(v.event_metadata) == dict(w.event_metadata)
        assert dict(v.msg.stat_metadata) == dict(w.msg.stat_metadata)
        assert wire.Plane(v).plane_stats() == wire.Plane(w).plane_stats()
        assert wire.Plane(v).meta_keys() == wire.Plane(w).meta_keys()
        assert v._at == w._at
    bare = [v for v, (_, b) in zip(views, list(CASES.values()) * 3) if b]
    assert bare and all(v._msg is None and isinstance(v._xs, np.ndarray) for v in bare)


def test_a_damaged_id_is_refused_as_before():
    """An id whose varint runs past 10 bytes: the same refusal, bare mode or not."""
    bad = field(1, 2, b"\x08" + b"\xff" * 11 + b"\x01" + field(2, 2, b"/device:GPU:1")
                + _entry(1, b"k") + _line())
    raw = _gpu(0) + bad
    errors = []
    for strip in (reader._strip_many, None):
        with pytest.raises(wire.Corrupt) as e:
            wire._scan.split_space(wire.padded(raw), len(raw), strip)
        errors.append(str(e.value))
    assert errors[0] == errors[1]


def test_a_file_of_many_tiny_planes_reads_them_bare(tmp_path):
    """Through the reader (`_parse_file`: many planes, `_strip_many`): the tiny GPU planes
    are bare, and the file's report is what the planes read from upb's skeleton give."""
    n = 80
    raw = b"".join(_gpu(d) for d in range(n)) + field(1, 2, field(2, 2, b"/host:CPU"))
    f = tmp_path / "tiny.xplane.pb"
    f.write_bytes(raw)
    xs, views = reader._parse_file(f)
    assert sum(v._msg is None and isinstance(v._xs, np.ndarray) for v in views) == n
    got = reader.read_host_file(f)
    wire.BARE_PLANES[0] = False
    try:  # the same file with no bare plane
        assert not any(v._msg is None and isinstance(v._xs, np.ndarray)
                       for v in reader._parse_file(f)[1])
        want = reader.read_host_file(f)
    finally:
        wire.BARE_PLANES[0] = True
    assert got["capture"] == want["capture"]
    a, b = (reader.combine_parts([p], [f]) for p in (got, want))
    for k in ("transfers", "compute", "devices", "lines"):
        assert_same_columns(a.columns(k), b.columns(k))
