"""A plane skeleton's XSpace bytes -> message-like objects, in pure Python (no protobuf import).

Why: with the compiled scanner, upb parses only the skeleton `_scan.split_space` leaves of a
file (plane names, stat metadata, plane stats, the event metadata of planes not read through
`MetaTable`): a few hundred bytes on a TPU capture, where `import google.protobuf` (descriptor
pool and all) costs ~26 ms and ~3.5 MiB of RSS, more than the parse. `decode_space` reads such
a skeleton into objects with the fields and methods of the upb messages the reader uses
(`WhichOneof`, scalar defaults, maps as dicts); upb stays the reference decoder.

Invariant: `decode_space` answers only where upb would answer the same, else None, and the
caller hands the bytes to upb (which accepts them, or refuses with its own message). Refused:
a skeleton that would take longer here than upb, its import included (more than `LIMIT` bytes;
or, where the caller says how many event metadata entries it holds, more than `MAX_ENTRIES` of
them: most of a host skeleton's bytes can be a few `Hlo Proto` blobs, which cost one slice
each, `MAX_FIELDS` plane fields at most either way), a malformed varint or
length (a tag or length prefix longer than 5 bytes included: upb refuses those, whatever
the process read before), a known field with an unexpected wire type, groups, field number
0, a map entry with a repeated value field or an unknown field (upb keeps such an entry out
of the map), lines inside a plane (skeletons have none), invalid UTF-8 in a string field
(upb refuses it; `wire.sanitize` then reads it with replacement), and any map whose keys
are not dense (every key in [0, entries]): upb iterates an int map in its hash table's order,
which is ascending key order for such keys (checked against upb for maps of 0 to 10,000
entries inserted in random order, duplicates included); readers that iterate a map (the
`/host:metadata` modules, host-plane names) then see the order they would have seen. So a
real capture's `/host:metadata` plane (entries keyed by program id) is left to upb. Blind
spot: unknown fields are skipped, not kept (nothing re-serializes a skeleton).
"""

from __future__ import annotations

import struct
from typing import Any

# Skeleton bytes decoded here at most: ~4 ms of Python at worst (a host plane of 1,000
# metadata entries), where upb takes 0.1 ms once its ~26 ms import is paid.
LIMIT = 1 << 13
# With the entries' count at hand (`decode_space(entries=)`): the cost is ~6 us per entry
# (its stats included), ~0.1 us per KB of blobs; importing protobuf and a upb parse cost
# ~12-16 ms (a CPU capture's skeleton: 520 KB, 514 entries, 3-4 ms here).
MAX_ENTRIES = 1500
# Plane-level fields (metadata entries of both kinds, plane stats) decoded at most: a skeleton
# of many stat metadata but few event metadata is refused once it has cost ~4 ms.
MAX_FIELDS = 5000


class _Refuse(Exception):
    """Bytes this decoder leaves to upb."""


_ONEOF_DEFAULTS = {"double_value": 0.0, "uint64_value": 0, "int64_value": 0, "str_value": "",
                   "bytes_value": b"", "ref_value": 0}


class Stat:
    """An XStat: `metadata_id` and the `value` oneof (`WhichOneof("value")`; unset fields read
    as their proto3 defaults)."""

    __slots__ = ("metadata_id", "_kind", "_value")

    def __init__(self) -> None:
        self.metadata_id = 0
        self._kind: str | None = None
        self._value: Any = None

    def WhichOneof(self, group: str) -> str | None:  # noqa: N802 - the protobuf API's name
        if group != "value":
            raise ValueError(f'Protocol message has no oneof "{group}" field.')
        return self._kind

    def __getattr__(self, name: str) -> Any:
        if name in _ONEOF_DEFAULTS:
            return self._value if self._kind == name else _ONEOF_DEFAULTS[name]
        raise AttributeError(name)


class EventMetadata:
    __slots__ = ("id", "name", "display_name", "metadata", "stats", "child_id")

    def __init__(self) -> None:
        self.id = 0
        self.name = self.display_name = ""
        self.metadata = b""
        self.stats: list[Stat] = []
        self.child_id: list[int] = []


class StatMetadata:
    __slots__ = ("id", "name", "description")

    def __init__(self) -> None:
        self.id = 0
        self.name = self.description = ""


class PlaneMsg:
    """An XPlane skeleton: no lines (the scanner holds them)."""

    __slots__ = ("id", "name", "lines", "event_metadata", "stat_metadata", "stats")

    def __init__(self) -> None:
        self.id = 0
        self.name = ""
        self.lines: list = []
        self.event_metadata: dict[int, EventMetadata] = {}
        self.stat_metadata: dict[int, StatMetadata] = {}
        self.stats: list[Stat] = []


class SpaceMsg:
    __slots__ = ("planes", "errors", "warnings", "hostnames")

    def __init__(self) -> None:
        self.planes: list[PlaneMsg] = []
        self.errors: list[str] = []
        self.warnings: list[str] = []
        self.hostnames: list[str] = []


def decode_space(data: bytes, entries: int | None = None) -> SpaceMsg | None:
    """The skeleton `data` as a `SpaceMsg`, or None where upb must decide (see the module).
    `entries`: how many event metadata entries the skeleton holds (the scanner located them),
    where the caller knows: then that count, not the size in bytes, says whether this
    decoder is the faster."""
    if (len(data) > LIMIT) if entries is None else (entries > MAX_ENTRIES):
        return None
    try:
        return _space(data, [MAX_FIELDS])
    except (_Refuse, IndexError, UnicodeDecodeError, struct.error):
        return None


_I64 = 1 << 63
_U64 = 1 << 64


def _varint(b: bytes, i: int, end: int) -> tuple[int, int]:
    x = b[i]
    if x < 0x80:
        if i >= end:
            raise _Refuse
        return x, i + 1
    v = x & 0x7F
    shift = 7
    i += 1
    while True:
        if i >= end or shift > 63:
            raise _Refuse
        x = b[i]
        i += 1
        v |= (x & 0x7F) << shift
        if x < 0x80:
            break
        shift += 7
    if v >= _U64:
        raise _Refuse
    return v, i


def _tag(b: bytes, i: int, end: int) -> tuple[int, int, int]:
    i0 = i
    t, i = _varint(b, i, end)
    fn, wt = t >> 3, t & 7
    # upb's limits (as the scanner's): a tag of at most 5 bytes, below 2**32
    if fn == 0 or t >= 1 << 32 or i - i0 > 5:
        raise _Refuse
    return fn, wt, i


def _len(b: bytes, i: int, end: int) -> tuple[int, int]:
    i0 = i
    n, i = _varint(b, i, end)
    # upb's limits: a length prefix of at most 5 bytes, below 2**31 - 1
    if i + n > end or i - i0 > 5 or n >= (1 << 31) - 1:
        raise _Refuse
    return i, i + n


def _skip(b: bytes, i: int, end: int, wt: int) -> int:
    if wt == 0:
        return _varint(b, i, end)[1]
    if wt == 1 or wt == 5:
        i += 8 if wt == 1 else 4
        if i > end:
            raise _Refuse
        return i
    if wt == 2:
        return _len(b, i, end)[1]
    raise _Refuse  # groups (3, 4) and invalid wire types


def _signed(v: int) -> int:
    return v - _U64 if v >= _I64 else v


def _int64(b: bytes, i: int, end: int, wt: int) -> tuple[int, int]:
    """An int64 field's value (a varint, two's complement) and the position after it."""
    if wt != 0:
        raise _Refuse
    v, i = _varint(b, i, end)
    return _signed(v), i


def _text(b: bytes, s: int, e: int) -> str:
    return b[s:e].decode("utf-8")  # strict: invalid UTF-8 is refused (upb refuses it too)


def _space(b: bytes, budget: list[int]) -> SpaceMsg:
    """`budget`: plane-level fields left to decode (`MAX_FIELDS`)."""
    out = SpaceMsg()
    i, end = 0, len(b)
    while i < end:
        fn, wt, i = _tag(b, i, end)
        if 1 <= fn <= 4:
            if wt != 2:
                raise _Refuse
            s, i = _len(b, i, end)
            if fn == 1:
                out.planes.append(_plane(b, s, i, budget))
            else:
                (out.errors, out.warnings, out.hostnames)[fn - 2].append(_text(b, s, i))
        else:
            i = _skip(b, i, end, wt)
    return out


def _plane(b: bytes, i: int, end: int, budget: list[int]) -> PlaneMsg:
    p = PlaneMsg()
    while i < end:
        budget[0] -= 1
        if budget[0] < 0:
            raise _Refuse  # upb is the faster here
        fn, wt, i = _tag(b, i, end)
        if fn == 1:
            p.id, i = _int64(b, i, end, wt)
        elif fn in (2, 3, 4, 5, 6):
            if wt != 2 or fn == 3:  # lines: never in a skeleton
                raise _Refuse
            s, i = _len(b, i, end)
            if fn == 2:
                p.name = _text(b, s, i)
            elif fn == 6:
                p.stats.append(_stat(b, s, i))
            else:
                k, v = _entry(b, s, i, _event_metadata if fn == 4 else _stat_metadata)
                (p.event_metadata if fn == 4 else p.stat_metadata)[k] = v
        else:
            i = _skip(b, i, end, wt)
    for m in (p.event_metadata, p.stat_metadata):
        if m and (min(m) < 0 or max(m) > len(m)):
            raise _Refuse  # upb's iteration order is its hash table's: let upb build the map
    # dense keys: upb iterates them in ascending order, whatever order the file wrote
    p.event_metadata = dict(sorted(p.event_metadata.items()))
    p.stat_metadata = dict(sorted(p.stat_metadata.items()))
    return p


def _entry(b: bytes, i: int, end: int, value) -> tuple[int, Any]:
    """A map entry: (key, value); a missing key is 0, a missing value the empty message."""
    key = 0
    got = None
    while i < end:
        fn, wt, i = _tag(b, i, end)
        if fn == 1:
            key, i = _int64(b, i, end, wt)
        elif fn == 2:
            if wt != 2 or got is not None:  # a second value merges in upb: left to it
                raise _Refuse
            s, i = _len(b, i, end)
            got = value(b, s, i)
        else:  # upb keeps an entry with unknown fields as unknown bytes, not in the map
            raise _Refuse
    return key, got if got is not None else value(b, 0, 0)


def _event_metadata(b: bytes, i: int, end: int) -> EventMetadata:
    m = EventMetadata()
    while i < end:
        fn, wt, i = _tag(b, i, end)
        if fn == 1:
            m.id, i = _int64(b, i, end, wt)
        elif fn in (2, 3, 4, 5):
            if wt != 2:
                raise _Refuse
            s, i = _len(b, i, end)
            if fn == 2:
                m.name = _text(b, s, i)
            elif fn == 4:
                m.display_name = _text(b, s, i)
            elif fn == 3:
                m.metadata = b[s:i]
            else:
                m.stats.append(_stat(b, s, i))
        elif fn == 6:  # repeated int64, packed or not
            if wt == 0:
                v, i = _varint(b, i, end)
                m.child_id.append(_signed(v))
            elif wt == 2:
                s, i = _len(b, i, end)
                while s < i:
                    v, s = _varint(b, s, i)
                    m.child_id.append(_signed(v))
            else:
                raise _Refuse
        else:
            i = _skip(b, i, end, wt)
    return m


def _stat_metadata(b: bytes, i: int, end: int) -> StatMetadata:
    m = StatMetadata()
    while i < end:
        fn, wt, i = _tag(b, i, end)
        if fn == 1:
            m.id, i = _int64(b, i, end, wt)
        elif fn in (2, 3):
            if wt != 2:
                raise _Refuse
            s, i = _len(b, i, end)
            if fn == 2:
                m.name = _text(b, s, i)
            else:
                m.description = _text(b, s, i)
        else:
            i = _skip(b, i, end, wt)
    return m


# XStat's value oneof: field number -> (name, wire type)
_STAT_FIELDS = {2: ("double_value", 1), 3: ("uint64_value", 0), 4: ("int64_value", 0),
                5: ("str_value", 2), 6: ("bytes_value", 2), 7: ("ref_value", 0)}
_DOUBLE = struct.Struct("<d")


def _stat(b: bytes, i: int, end: int) -> Stat:
    st = Stat()
    while i < end:
        fn, wt, i = _tag(b, i, end)
        if fn == 1:
            st.metadata_id, i = _int64(b, i, end, wt)
            continue
        f = _STAT_FIELDS.get(fn)
        if f is None:
            i = _skip(b, i, end, wt)
            continue
        name, want = f
        if wt != want:
            raise _Refuse
        if wt == 1:
            if i + 8 > end:
                raise _Refuse
            val: Any = _DOUBLE.unpack_from(b, i)[0]
            i += 8
        elif wt == 0:
            v, i = _varint(b, i, end)
            val = _signed(v) if fn == 4 else v
        else:
            s, i = _len(b, i, end)
            val = _text(b, s, i) if fn == 5 else b[s:i]
        st._kind, st._value = name, val  # the last field of the oneof wins
    return st
