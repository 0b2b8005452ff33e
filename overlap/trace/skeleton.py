"""A plane skeleton's XSpace bytes -> message-like objects, in pure Python (no protobuf import).

Why: with the compiled scanner, upb parses only the skeleton `_scan.split_space` leaves of a
file (plane names, plane stats, the event metadata of planes not read through `MetaTable`;
the scanner reads stat metadata itself, `wire._stat_names`): a few hundred bytes on a TPU
capture, where `import google.protobuf` (descriptor pool and all) costs ~26 ms and ~3.5 MiB
of RSS, more than the parse. `decode_space` reads such a skeleton into objects with the
fields and methods of the upb messages the reader uses (`WhichOneof`, scalar defaults, maps
as dicts); upb stays the reference decoder.

Invariant: `decode_space` answers only where upb would answer the same, else None, and the
caller hands the bytes to upb (which accepts them, or refuses with its own message). Refused:
a skeleton that would take longer here than upb, its import included (more than `LIMIT` bytes;
or, where the caller says how many event metadata entries it holds, more than `MAX_ENTRIES` of
them: most of a host skeleton's bytes can be a few `Hlo Proto` blobs, which cost one slice
each, `MAX_FIELDS` plane fields and `MAX_PLANE_STATS` stats a plane at most either way), a
malformed varint or
length (a tag or length prefix longer than 5 bytes included: upb refuses those, whatever
the process read before), a known field with an unexpected wire type, groups, field number
0, a map entry with a repeated value field or an unknown field (upb keeps such an entry out
of the map), lines inside a plane (skeletons have none), invalid UTF-8 in a string field
(upb refuses it; `wire.sanitize` then reads it with replacement), and, where the installed
protobuf is not a upb whose int tables `upb_int_order` follows (7.36-7.37), any map whose
keys are not dense (every key in [0, entries]). Maps are iterated in upb's order, the order
readers that iterate one would have seen (the `/host:metadata` modules: entries keyed by
program id; host-plane names): upb iterates an int map in its hash table's slot order, which
is ascending for dense keys (checked against upb for maps of 0 to 10,000 entries inserted in
random order, duplicates included) and `upb_int_order`'s for any keys (checked against upb
on maps of up to 3,000 entries of every key shape, tests/trace/test_skeleton.py). Blind
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
# ~12-16 ms (a CPU capture's skeleton: 520 KB, 514 entries, 3-4 ms here). The scanner keeps
# a host plane of this many out of the skeleton (`_scan.SKELETON_STRIP_MIN`, the same number:
# tests/trace/test_host_plane_stripped.py holds them equal).
MAX_ENTRIES = 1500
# Plane-level fields (metadata entries of both kinds, plane stats) decoded at most: a skeleton
# of many stat metadata but few event metadata is refused once it has cost ~4 ms.
MAX_FIELDS = 5000
# Plane stats of one plane decoded at most: a `/host:__ScopeRangeCallStack__` plane holds one
# per call stack (106 to 1,911 on the H100 captures here, ~3 us each), where device and host
# planes hold a dozen. (Set when a GPU capture of offloaded copies loaded protobuf for its
# HloProtos anyway; the scanner reads those since round 39, `programs.hlo_message`, and the
# call-stack plane's stats stay in the file's bytes, `_scan._LAZY_STATS_PLANE`.)
MAX_PLANE_STATS = 128


class Refused(Exception):
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
    except (Refused, IndexError, UnicodeDecodeError, struct.error):
        return None


_I64 = 1 << 63
_U64 = 1 << 64


def _varint(b: bytes, i: int, end: int) -> tuple[int, int]:
    x = b[i]
    if x < 0x80:
        if i >= end:
            raise Refused
        return x, i + 1
    v = x & 0x7F
    shift = 7
    i += 1
    while True:
        if i >= end or shift > 63:
            raise Refused
        x = b[i]
        i += 1
        v |= (x & 0x7F) << shift
        if x < 0x80:
            break
        shift += 7
    if v >= _U64:
        raise Refused
    return v, i


def _tag(b: bytes, i: int, end: int) -> tuple[int, int, int]:
    t = b[i]
    if t < 0x80 and i < end:  # one byte (fields 1-15), as `_varint` would read it
        if t < 8:
            raise Refused  # field number 0
        return t >> 3, t & 7, i + 1
    i0 = i
    t, i = _varint(b, i, end)
    fn, wt = t >> 3, t & 7
    # upb's limits (as the scanner's): a tag of at most 5 bytes, below 2**32
    if fn == 0 or t >= 1 << 32 or i - i0 > 5:
        raise Refused
    return fn, wt, i


def _len(b: bytes, i: int, end: int) -> tuple[int, int]:
    n = b[i]
    if n < 0x80 and i < end:  # one byte, as `_varint` would read it
        i += 1
        if i + n > end:
            raise Refused
        return i, i + n
    i0 = i
    n, i = _varint(b, i, end)
    # upb's limits: a length prefix of at most 5 bytes, below 2**31 - 1
    if i + n > end or i - i0 > 5 or n >= (1 << 31) - 1:
        raise Refused
    return i, i + n


def _skip(b: bytes, i: int, end: int, wt: int) -> int:
    if wt == 0:
        return _varint(b, i, end)[1]
    if wt == 1 or wt == 5:
        i += 8 if wt == 1 else 4
        if i > end:
            raise Refused
        return i
    if wt == 2:
        return _len(b, i, end)[1]
    raise Refused  # groups (3, 4) and invalid wire types


def _signed(v: int) -> int:
    return v - _U64 if v >= _I64 else v


def _int64(b: bytes, i: int, end: int, wt: int) -> tuple[int, int]:
    """An int64 field's value (a varint, two's complement) and the position after it."""
    if wt != 0:
        raise Refused
    v = b[i]
    if v < 0x80 and i < end:  # one byte, as `_varint` would read it
        return v, i + 1
    v, i = _varint(b, i, end)
    return _signed(v), i


def _text(b: bytes, s: int, e: int) -> str:
    return b[s:e].decode("utf-8")  # strict: invalid UTF-8 is refused (upb refuses it too)


def _space(b: bytes, budget: list[int]) -> SpaceMsg:
    """`budget`: plane-level fields left to decode (`MAX_FIELDS`)."""
    out = SpaceMsg()
    written: list[tuple[list[int], list[int]]] = []  # per plane, its maps' keys as written
    i, end = 0, len(b)
    while i < end:
        fn, wt, i = _tag(b, i, end)
        if 1 <= fn <= 4:
            if wt != 2:
                raise Refused
            s, i = _len(b, i, end)
            if fn == 1:
                p, ekeys, skeys = _plane(b, s, i, budget)
                out.planes.append(p)
                written.append((ekeys, skeys))
            else:
                (out.errors, out.warnings, out.hostnames)[fn - 2].append(_text(b, s, i))
        else:
            i = _skip(b, i, end, wt)
    # the maps in upb's order, once every plane is read (a refusal costs no ordering)
    for p, (ekeys, skeys) in zip(out.planes, written):
        p.event_metadata = in_upb_order(p.event_metadata, ekeys)
        p.stat_metadata = in_upb_order(p.stat_metadata, skeys)
    return out


def _plane(b: bytes, i: int, end: int, budget: list[int]
           ) -> tuple[PlaneMsg, list[int], list[int]]:
    """The plane (its maps in the order written: `_space` orders them) and each map's keys as
    written."""
    p = PlaneMsg()
    ekeys: list[int] = []  # each map's keys as written (`in_upb_order`)
    skeys: list[int] = []
    while i < end:
        budget[0] -= 1
        if budget[0] < 0:
            raise Refused  # upb is the faster here
        fn, wt, i = _tag(b, i, end)
        if fn == 1:
            p.id, i = _int64(b, i, end, wt)
        elif fn in (2, 3, 4, 5, 6):
            if wt != 2 or fn == 3:  # lines: never in a skeleton
                raise Refused
            s, i = _len(b, i, end)
            if fn == 2:
                p.name = _text(b, s, i)
            elif fn == 6:
                if len(p.stats) >= MAX_PLANE_STATS:
                    raise Refused  # upb is the faster here
                p.stats.append(_stat(b, s, i))
            else:
                k, v = _entry(b, s, i, _event_metadata if fn == 4 else _stat_metadata)
                (p.event_metadata if fn == 4 else p.stat_metadata)[k] = v
                (ekeys if fn == 4 else skeys).append(k)
        else:
            i = _skip(b, i, end, wt)
    return p, ekeys, skeys


def in_upb_order(m: dict[int, Any], written: list[int]) -> dict[int, Any]:
    """The map `m` (each key's last value) in the order upb iterates it, its keys inserted as
    `written` (file order, duplicates included). Dense keys (every key in [0, entries]):
    ascending (checked against upb for maps of 0 to 10,000 entries, any insertion order);
    other keys: `upb_int_order`, where the installed protobuf's upb is the one it follows."""
    if not m:
        return m
    if min(m) >= 0 and max(m) <= len(m):
        return dict(sorted(m.items()))
    if _UPB_INTTABLE[0] is None:
        _UPB_INTTABLE[0] = _upb_inttable()  # (once, where a map of other keys is met)
    if not _UPB_INTTABLE[0]:
        raise Refused  # an int map in another upb's order: let upb build the map
    return {k: m[k] for k in upb_int_order(written)}


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
                raise Refused
            s, i = _len(b, i, end)
            got = value(b, s, i)
        else:  # upb keeps an entry with unknown fields as unknown bytes, not in the map
            raise Refused
    return key, got if got is not None else value(b, 0, 0)


def _event_metadata(b: bytes, i: int, end: int) -> EventMetadata:
    m = EventMetadata()
    while i < end:
        fn, wt, i = _tag(b, i, end)
        if fn == 1:
            m.id, i = _int64(b, i, end, wt)
        elif fn in (2, 3, 4, 5):
            if wt != 2:
                raise Refused
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
                raise Refused
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
                raise Refused
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
        t = b[i]
        if t < 0x80:  # a one-byte tag (i < end here), as `_tag` reads it: inline, per stat
            if t < 8:
                raise Refused
            fn, wt, i = t >> 3, t & 7, i + 1
        else:
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
            raise Refused
        if wt == 1:
            if i + 8 > end:
                raise Refused
            val: Any = _DOUBLE.unpack_from(b, i)[0]
            i += 8
        elif wt == 0:
            v = b[i]
            if v < 0x80 and i < end:
                i += 1
            else:
                v, i = _varint(b, i, end)
            val = _signed(v) if fn == 4 else v
        else:
            s, i = _len(b, i, end)
            val = _text(b, s, i) if fn == 5 else b[s:i]
        st._kind, st._value = name, val  # the last field of the oneof wins
    return st


# ---------------------------------------------------------------------------------------------
# upb's int map order
#
# upb (protobuf 7.36 and 7.37's, python/google/protobuf 7.36.x) keeps a map of int64 keys in a
# `upb_inttable`: a hash table of 2**k slots (8 at first), hash = the key's low 32 bits XOR its
# high 32 (as uint64), slot = hash & (size - 1), collisions chained through free slots (Lua's
# scheme with Brent's variation: a key in another key's main slot is moved out of it), grown
# to twice the size, the old slots re-inserted in slot order, when an insert finds 7/8 of the
# slots taken. The decoder inserts each entry as written, removing the key first (a key
# written twice moves). Iteration is slot order. Older upbs (7.35 and before: an array part
# for small keys, or string-keyed tables) order other keys otherwise: there, such maps are
# left to upb (`_UPB_INTTABLE`).

_NO_NEXT = -1  # an occupied slot that ends its chain (None: an empty slot)


def upb_int_order(written: list[int]) -> list[int]:
    """The keys of an int64-keyed map in upb's iteration order, its entries decoded in the
    order `written` (duplicates included: each is removed and inserted again)."""
    size = 8
    key = [0] * size
    nxt: list[int | None] = [None] * size
    count = 0

    def slot(k: int) -> int:
        return ((k & 0xFFFFFFFF) ^ (k >> 32)) & (size - 1)

    def insert(k: int) -> None:
        nonlocal count
        count += 1
        mp = slot(k)
        if nxt[mp] is None:
            key[mp], nxt[mp] = k, _NO_NEXT
            return
        new = next((j for j in range(mp + 1, size) if nxt[j] is None), None)
        if new is None:
            new = next(j for j in range(size) if nxt[j] is None)
        chain = slot(key[mp])
        if chain == mp:  # the occupant heads our chain: append after it
            key[new], nxt[new], nxt[mp] = k, nxt[mp], new
            return
        # the occupant belongs to another chain: move it out, take its slot
        key[new], nxt[new] = key[mp], nxt[mp]
        while nxt[chain] != _NO_NEXT and nxt[chain] != mp:
            chain = nxt[chain]  # type: ignore[assignment]
        nxt[chain] = new
        key[mp], nxt[mp] = k, _NO_NEXT

    def remove(k: int) -> None:
        nonlocal count
        c = slot(k)
        if nxt[c] is None:
            return
        if key[c] == k:
            m = nxt[c]
            if m != _NO_NEXT:
                key[c], nxt[c], nxt[m] = key[m], nxt[m], None  # type: ignore[index]
            else:
                nxt[c] = None
            count -= 1
            return
        while nxt[c] != _NO_NEXT and key[nxt[c]] != k:  # type: ignore[index]
            c = nxt[c]  # type: ignore[assignment]
        r = nxt[c]
        if r != _NO_NEXT:
            nxt[c], nxt[r] = nxt[r], None  # type: ignore[index]
            count -= 1

    for k in written:
        k &= 0xFFFFFFFFFFFFFFFF  # the key as upb's uintptr_t
        remove(k)
        if count == size - (size >> 3):  # full: twice the slots, re-inserted in slot order
            old = [key[i] for i in range(size) if nxt[i] is not None]
            size *= 2
            key, nxt, count = [0] * size, [None] * size, 0
            for o in old:
                insert(o)
        insert(k)
    return [k - (1 << 64) if k >= 1 << 63 else k for k, n in zip(key, nxt) if n is not None]


def _upb_inttable() -> bool:
    """Whether the installed protobuf decodes with the upb `upb_int_order` follows: its upb
    backend (the default; not the pure-Python or C++ one an environment variable asks for),
    version 7.36 or 7.37. Its version is read from the package's `__init__.py` text, not by
    importing it (~1 ms; a report that never needs protobuf does not load it)."""
    import os

    if os.environ.get("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "upb") != "upb":
        return False
    import importlib.util
    import re

    try:
        spec = importlib.util.find_spec("google.protobuf")
        with open(spec.origin or "", encoding="utf-8") as f:  # type: ignore[union-attr]
            text = f.read()
    except (ImportError, AttributeError, ValueError, OSError):
        return False
    m = re.search(r"^__version__ = ['\"](\d+)\.(\d+)\.", text, re.M)
    return m is not None and (7, 36) <= (int(m.group(1)), int(m.group(2))) < (7, 38)


_UPB_INTTABLE: list[bool | None] = [None]  # `_upb_inttable()`, asked on first need
