"""XSpace wire decoding with numpy: protobuf varints, field walks, XEvent/XStat records.

This module knows the protobuf encoding and the field numbers of the XSpace schema (XPlane,
XLine, XEvent, XStat; see `protos/xplane.proto`) and nothing about what events mean: which
event is a transfer, which line is compute, how clocks line up is `reader.py`'s business.

What goes in: a file's bytes (padded with `PAD` zero bytes). What comes out: an upb-parsed
plane skeleton (names, metadata, plane stats; a plane's event metadata left out where the
caller asks, `parse_space(strip_meta=...)`) plus, per line (or per segment of several small
lines, `merge_lines`, read against a `PlaneGroup` of their planes' lookups), arrays of event
headers (`metadata_id`, `offset_ps`, `duration_ps`) and lazily decoded stats, and per plane
where its event_metadata entries lie, which `MetaTable` decodes for many ids at once.

Invariant: every varint read stays inside the buffer (the zero padding); a record whose
lengths or wire types do not add up raises `Corrupt`, which the reader turns into one line
naming the file.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable

import numpy as np
import pandas as pd
from google.protobuf.message import DecodeError

from overlap.trace.protos import XPlane, XSpace

# ---------------------------------------------------------------------------------------------
# Stats


class Plane:
    """Per-plane lookups: stat names by id, metadata names, and metadata-level stats."""

    def __init__(self, plane):
        self.plane = plane
        self.stat_names: dict[int, str] = {k: v.name for k, v in plane.stat_metadata.items()}
        self.stat_ids: dict[str, list[int]] = defaultdict(list)
        for k, name in self.stat_names.items():
            self.stat_ids[name].append(k)
        self._meta = None if getattr(plane, "meta_stripped", False) else plane.event_metadata
        self._meta_stats: dict[int, dict[str, Any]] = {}
        self._wanted: dict[tuple, dict[int, str]] = {}
        self._table: MetaTable | None | bool = False  # built on first use

    @property
    def meta(self):
        """The upb event_metadata map. For a plane whose entries upb skipped (`parse_space`'s
        `strip_meta`), parsed from the located entries on first use: the same map, and a
        damaged entry is `Corrupt` as it would have been up front."""
        if self._meta is None:
            pv = self.plane
            ms, me = pv.meta_pos
            mv = memoryview(pv.buf)
            raw = b"".join(b"\x22" + _enc_varint(int(q - p)) + mv[p:q]
                           for p, q in zip(ms.tolist(), me.tolist()))
            try:
                self._meta = XPlane.FromString(raw).event_metadata
            except DecodeError as e:
                raise Corrupt(f"event metadata: {e}") from None
        return self._meta

    def meta_keys(self):
        """The event_metadata ids (from the `MetaTable` where there is one)."""
        t = self.table()
        return t.keys.tolist() if t is not None else self.meta.keys()

    def meta_items(self):
        return self.meta.items()

    def ids(self, *names: str) -> dict[int, str]:
        """Stat-metadata ids whose name is one of `names` (several ids may share a name)."""
        out = {}
        for n in names:
            for k in self.stat_ids.get(n, ()):
                out[k] = n
        return out

    def stats(self, stats: Iterable, wanted: dict[int, str] | None = None) -> dict[str, Any]:
        """Stats as a dict; the first occurrence of a repeated key wins."""
        out: dict[str, Any] = {}
        names = self.stat_names
        # `wanted` maps the wanted ids to their names, so one lookup decides both; the value
        # is read inline: this runs once per stat of every metadata.
        lookup = names if wanted is None else wanted
        for s in stats:
            name = lookup.get(s.metadata_id)
            if name is None or name in out:
                continue
            kind = s.WhichOneof("value")
            if kind == "ref_value":  # interned: the name of another stat metadata entry
                out[name] = names.get(s.ref_value, "")
            else:
                out[name] = None if kind is None else getattr(s, kind)
        return out

    def meta_stats(self, metadata_id: int) -> dict[str, Any]:
        cached = self._meta_stats.get(metadata_id)
        if cached is None:
            md = self.meta.get(metadata_id)
            cached = self.stats(md.stats) if md is not None else {}
            self._meta_stats[metadata_id] = cached
        return cached

    def _wanted_ids(self, names: tuple[str, ...]) -> dict[int, str]:
        wanted = self._wanted.get(names)
        if wanted is None:
            wanted = self._wanted[names] = self.ids(*names)
        return wanted

    def meta_some(self, metadata_id: int, names: tuple[str, ...]) -> dict[str, Any]:
        """Only the metadata stats named `names` (decoding the others costs, per metadata)."""
        if metadata_id in self._meta_stats:
            full = self._meta_stats[metadata_id]
            return {k: full[k] for k in names if k in full}
        wanted = self._wanted_ids(names)
        if not wanted:
            return {}
        md = self.meta.get(metadata_id)
        return self.stats(md.stats, wanted) if md is not None else {}

    def meta_columns(self, mids, names: tuple[str, ...]) -> dict[str, np.ndarray]:
        """`meta_some` for many metadata ids at once: per name, an object column over `mids`
        (None where the stat is absent). Decoded from the file's bytes (`MetaTable`) where the
        plane came from `parse_space`, else through upb one id at a time."""
        mids = np.asarray(mids, np.int64)
        wanted = self._wanted_ids(names)
        t = self.table()
        if t is not None:
            return t.columns(mids, wanted, names, self.stat_names)
        out = {k: np.full(len(mids), None, object) for k in names}
        for i, m in enumerate(mids.tolist()):
            for k, v in self.meta_some(m, names).items():
                out[k][i] = v
        return out

    def table(self) -> "MetaTable | None":
        """The plane's `MetaTable`, if it came from `parse_space` and the table agrees with
        upb's map (built on first use)."""
        if self._table is False:
            pv = self.plane
            t = None
            if getattr(pv, "meta_pos", None) is not None and len(pv.meta_pos[0]):
                t = MetaTable(pv.buf, *pv.meta_pos)
                # the entries located must be exactly the map upb read, or the table is unused
                # (where upb skipped them, every plane-level field 4 was located: all of them)
                if not t.ok or (not pv.meta_stripped and len(t.keys) != len(self.meta)):
                    t = None
            self._table = t
        return self._table

    def name_bytes(self, mids, display: bool = False):
        """`MetaTable.string_bytes` where the plane has a table, else None."""
        t = self.table()
        return None if t is None else t.string_bytes(mids, display)

    def names(self, mids, display: bool = False) -> list[str]:
        """`name` (or `display_name`) of many metadata ids at once."""
        mids = np.asarray(mids, np.int64)
        t = self.table()
        if t is not None:
            got = t.strings(mids, display)
            if got is not None:
                return got
        one = self.display_name if display else self.name
        return [one(m) for m in mids.tolist()]

    def name(self, metadata_id: int) -> str:
        md = self.meta.get(metadata_id)
        return md.name if md is not None else ""

    def display_name(self, metadata_id: int) -> str:
        md = self.meta.get(metadata_id)
        return md.display_name if md is not None else ""

    def plane_stats(self) -> dict[str, Any]:
        return self.stats(self.plane.stats)


# Metadata and stat ids of several planes read as one (`PlaneGroup`) become keys
# `plane index * GROUP_STRIDE + id`. Only planes whose ids all lie in [0, GROUP_STRIDE) are
# grouped; an event or stat whose id lies outside gets key -1, which names nothing (as an id
# missing from its plane's metadata does when the plane is read alone).
GROUP_STRIDE = 1 << 31


def _group_keys(plane: np.ndarray, ids: np.ndarray) -> np.ndarray:
    ids = ids.view(np.int64) if ids.dtype == np.uint64 else ids.astype(np.int64, copy=False)
    ok = (ids >= 0) & (ids < GROUP_STRIDE)
    return np.where(ok, plane.astype(np.int64) * GROUP_STRIDE + ids, -1)


def groupable(P: Plane) -> bool:
    """Can this plane's ids be keyed inside a `PlaneGroup`?"""
    return all(0 <= k < GROUP_STRIDE for k in P.meta.keys()) and \
        all(0 <= k < GROUP_STRIDE for k in P.stat_names)


class PlaneGroup:
    """Several planes' lookups as one `Plane`, keyed `plane index * GROUP_STRIDE + id`.

    Why: a capture with thousands of device planes of a few events each (one per GPU of a
    large job, or another producer's layout) would otherwise pay numpy's fixed cost per line,
    milliseconds per plane. Small lines of many planes are read as one `merge_lines` segment
    against this group instead.
    """

    def __init__(self, planes: list[Plane]):
        self.planes = planes
        self.stat_names = _GroupStatNames(planes)
        self.stat_ids = _GroupStatIds(planes)

    def meta_items(self):
        for i, P in enumerate(self.planes):
            o = i * GROUP_STRIDE
            for k, md in P.meta.items():
                yield o + k, md

    def meta_stats(self, key: int) -> dict[str, Any]:
        if key < 0:
            return {}
        i, k = divmod(key, GROUP_STRIDE)
        return self.planes[i].meta_stats(k)

    def name(self, key: int) -> str:
        if key < 0:
            return ""
        i, k = divmod(key, GROUP_STRIDE)
        return self.planes[i].name(k)


class _GroupStatNames:
    """`PlaneGroup.stat_names`: key -> stat name, looked up in the key's plane (no table of
    every plane's stats is built: only ref values are ever looked up)."""

    def __init__(self, planes: list[Plane]):
        self.planes = planes

    def get(self, key: int, default=None):
        if key < 0:
            return default
        i, k = divmod(key, GROUP_STRIDE)
        return self.planes[i].stat_names.get(k, default) if i < len(self.planes) else default


class _GroupStatIds:
    """`PlaneGroup.stat_ids`: stat name -> the keys of every plane's ids of that name, built
    for the few names the reader asks for."""

    def __init__(self, planes: list[Plane]):
        self.planes = planes
        self._cache: dict[str, list[int]] = {}

    def get(self, name: str, default=None):
        got = self._cache.get(name)
        if got is None:
            got = self._cache[name] = [i * GROUP_STRIDE + k for i, P in enumerate(self.planes)
                                       for k in P.stat_ids.get(name, ())]
        return got or default


def merge_lines(lines: list) -> Any:
    """One segment of several lines' events (of one file's buffer), in the given order, for
    `LineEvents`; each line's own position arrays are freed."""
    seg = _Line()
    seg.buf = lines[0].buf
    seg.ev_start = np.concatenate([ln.ev_start for ln in lines])
    seg.ev_end = np.concatenate([ln.ev_end for ln in lines])
    seg.n_events = len(seg.ev_start)
    for ln in lines:
        ln.ev_start = ln.ev_end = None
    return seg


INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
# Event offsets, durations and line origins are accepted below 2**61 ps (26 days): sums of two
# or three of them can never wrap int64. Anything beyond is not a time a profiler wrote.
TIME_LIMIT_PS = 1 << 61

# Events dropped because a time field is out of range (negative duration, offset beyond
# TIME_LIMIT_PS); the reader resets and reads this per file and reports the count.
INVALID_EVENTS = [0]


def as_id(v: Any) -> int | None:
    """An identifier stat (program_id, a uint64): a value in [0, 2**64), else None."""
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        v = int(v)
    else:
        v = as_int(v)
    return v if v is not None and 0 <= v < (1 << 64) else None


def as_int(v: Any) -> int | None:
    """An integer stat value, or None when there is none that fits int64 (NaN, inf, 1e300,
    uint64 max, text that is not a number, a value of another type)."""
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, (int, np.integer)):
        v = int(v)
    elif isinstance(v, (float, np.floating)):
        if not np.isfinite(v):
            return None
        v = int(v)
    elif isinstance(v, (str, bytes)):
        try:
            v = int(v)
        except ValueError:
            return None
    else:
        return None
    return v if INT64_MIN <= v <= INT64_MAX else None


# ---------------------------------------------------------------------------------------------
# Fast path: events decoded straight from the file's bytes with numpy
#
# Building a Python object per event and per stat costs ~250 ns each through upb (that was 95% of
# the reader's time), and even one Python bytes object per event costs more than upb's whole
# parse. So `read_trace` walks the XSpace wire format itself down to the lines: upb parses only a
# *skeleton* (every plane without its lines: names, metadata, plane stats), line headers are
# decoded here, each line's event records are located in the file buffer itself (vectorized, see
# `_event_run`; no copy, no per-event object), and their XEvent/XStat fields are decoded for
# whole lines at once with vectorized varint reads.


class Corrupt(ValueError):
    """The bytes are not a valid XSpace (a damaged event, line or plane)."""


PAD = 16  # zero bytes after the data: a varint read never runs past the buffer


def _uvarint(b, p: int) -> tuple[int, int]:
    """One varint at `p` of bytes-like `b`: (value, position after it)."""
    try:
        x = b[p]
        if x < 0x80:
            return x, p + 1
        v, s = x & 0x7F, 7
        p += 1
        while True:
            x = b[p]
            p += 1
            v |= (x & 0x7F) << s
            if x < 0x80:
                return v, p
            s += 7
            if s > 63:
                raise Corrupt("varint longer than 10 bytes")
    except IndexError:
        raise Corrupt("truncated varint") from None


def _field(b, p: int, end: int) -> tuple[int, int, int, int, int]:
    """The field at `p`: (number, wire type, varint value or length, value position, next)."""
    tag, p = _uvarint(b, p)
    wt, fn = tag & 7, tag >> 3
    if fn == 0:
        raise Corrupt("field number 0")
    if wt == 0:
        v, q = _uvarint(b, p)
    elif wt == 2:
        v, p = _uvarint(b, p)
        q = p + v
    elif wt == 1:
        v, q = 0, p + 8
    elif wt == 5:
        v, q = 0, p + 4
    else:
        raise Corrupt("unsupported wire type")
    if q > end:
        raise Corrupt("field runs past its message")
    return fn, wt, v, p, q


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def _text(b, p: int, q: int) -> str:
    try:
        return bytes(b[p:q]).decode("utf-8")
    except UnicodeDecodeError:
        raise Corrupt("invalid UTF-8 in a string field") from None


def _enc_varint(v: int) -> bytes:
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


class _Line:
    """One XLine: its header fields, and where its events' payloads lie in the buffer."""

    __slots__ = ("id", "display_id", "name", "display_name", "timestamp_ns", "duration_ps",
                 "buf", "ev_start", "ev_end", "n_events")


class PlaneView:
    """A skeleton XPlane message (no lines) plus its `_Line`s, and where its event_metadata
    map entries lie in the file's buffer (`buf`), for `MetaTable`."""

    def __init__(self, msg, lines: list[_Line], buf: np.ndarray | None = None,
                 meta_pos: tuple[np.ndarray, np.ndarray] | None = None,
                 meta_stripped: bool = False):
        self.msg = msg
        self.lines = lines
        self.buf = buf
        self.meta_pos = meta_pos
        # the entries are not in `msg` (upb never saw them): `Plane.meta` parses them on demand
        self.meta_stripped = meta_stripped

    def __getattr__(self, name):
        return getattr(self.msg, name)


_CHUNK = 1 << 20  # line bytes per vectorized step of `_event_run` (bounds its temporaries)
_SMALL_RUN = 1024  # line bytes below which `_event_run` walks the records in Python


def _pos_dtype(a: np.ndarray):
    """Byte positions (and event/stat counts, never larger) as int32 where the buffer allows."""
    return np.int32 if len(a) < (1 << 31) - 64 else np.int64


def _len_varints(a: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Varints of at most 5 bytes at `pos` (lengths): (values, sizes); longer ones get a huge
    value (never raises: most positions here are only candidates)."""
    b = a[pos]
    val = (b & 0x7F).astype(np.int64)
    n = np.ones(len(pos), np.int64)
    cont = np.flatnonzero(b >= 0x80)
    shift = 7
    while cont.size:
        if shift > 28:
            val[cont] = 1 << 60
            break
        bb = a[pos[cont] + n[cont]]
        val[cont] |= (bb & 0x7F).astype(np.int64) << shift
        n[cont] += 1
        cont = cont[bb >= 0x80]
        shift += 7
    return val, n


# First bytes an XEvent payload can start with: tags of fields 1, 2, 3 (varints), 4 (stats,
# length-delimited) and 5 (num_occurrences). Accepting all of them keeps events whose zero
# metadata_id proto3 omitted on the vectorized path (they used to break the chain every time).
_EVENT_FIRST = np.zeros(256, bool)
_EVENT_FIRST[[0x08, 0x10, 0x18, 0x22, 0x28]] = True


def _event_run(a: np.ndarray, b, p: int, e: int, starts: list, ends: list,
               tag: int = 0x22) -> int:
    """Locate a run of consecutive event records (`0x22 len payload`) that starts at `p`.

    `tag`: another length-delimited field whose payloads start like an event's (map entries
    of `event_metadata` 0x22 and `stat_metadata` 0x2a in a plane, whose key is field 1).

    The chain is sequential, but it need not be walked per event: take every 0x22 byte of a
    chunk as a candidate record and compute where each would end. Keep candidates whose payload
    starts like an XEvent's (`0x08`) and whose record ends on another 0x22 byte or at the line's
    end (true records do, but for the run's last one), then those that no earlier kept
    candidate's record covers (a running max): stat records nested in an event (also tag 0x22)
    are covered by their event. What remains is then
    *verified*: a prefix of it is the true chain exactly as far as each kept record ends where
    the next kept one starts (the chain from `p` is deterministic). Where a stray 0x22 byte
    breaks that, a few records are walked in Python and the vectorized step resumes. Appends
    payload (start, end) arrays; returns the position after the run.
    """
    if e - p < _SMALL_RUN:
        # A few events (a line of a small plane): numpy's fixed cost per call would dominate.
        return _records_in_python(a, b, p, e, starts, ends, e - p, tag)
    chunk = _CHUNK
    while p < e and a[p] == tag:
        ce = min(e, p + chunk)
        c = np.flatnonzero(a[p:ce] == tag)
        c += p
        ln, hl = _len_varints(a, c + 1)
        ps = c + 1 + hl
        nx = ps + ln
        del ln, hl
        # Plausible records: the payload starts with an XEvent field tag (metadata_id, or,
        # when proto3 omits a zero metadata_id, offset/duration/stats/num_occurrences) and the
        # record ends on a 0x22 byte or the line's end.
        land = (nx <= e) & _EVENT_FIRST[a[ps]]
        land[land] = a[nx[land]] == tag
        land |= nx == e
        land[0] = True
        if not land.all():
            k = np.flatnonzero(land)
            c, ps, nx = c[k], ps[k], nx[k]
        del land
        unc = np.empty(len(c), bool)
        unc[0] = True
        if len(c) > 1:
            pm = np.maximum.accumulate(nx[:-1])
            np.less_equal(pm, c[1:], out=unc[1:])
            del pm
        s = np.flatnonzero(unc)
        del unc
        ok = nx[s[:-1]] == c[s[1:]]
        k = len(s) - 1 if ok.all() else int(np.argmin(ok))
        sel = s[:k + 1]
        t = int(nx[sel[-1]])
        if t > e:
            raise Corrupt("field runs past its message")
        dt = _pos_dtype(a)
        starts.append(ps[sel].astype(dt))
        ends.append(nx[sel].astype(dt))
        del c, ps, nx, s, ok, sel
        # A chain that breaks early would make every pass rescan a whole chunk for a few
        # records (quadratic): size the next chunk to what this pass verified.
        chunk = _CHUNK if t >= ce else max(1 << 12, min(_CHUNK, 4 * (t - p)))
        p = t
        if p < ce and a[p] == tag:
            # a stray 0x22 (or the run's last record) broke the chain: a few records in Python
            p = _records_in_python(a, b, p, e, starts, ends, 16, tag)
    return p


def _records_in_python(a: np.ndarray, b, p: int, e: int, starts: list, ends: list,
                       limit: int, tag: int = 0x22) -> int:
    """Up to `limit` consecutive `tag len payload` records from `p`, one at a time."""
    one_s, one_e = [], []
    for _ in range(limit):
        if p >= e or b[p] != tag:
            break
        ln1, q = _uvarint(b, p + 1)
        t = q + ln1
        if t > e:
            raise Corrupt("field runs past its message")
        one_s.append(q)
        one_e.append(t)
        p = t
    starts.append(np.array(one_s, _pos_dtype(a)))
    ends.append(np.array(one_e, _pos_dtype(a)))
    return p


def _read_line(a: np.ndarray, b, s: int, e: int) -> _Line:
    ln = _Line()
    ln.buf = a
    ln.id = ln.display_id = ln.timestamp_ns = ln.duration_ps = 0
    ln.name = ln.display_name = ""
    starts: list = []
    ends: list = []
    p = s
    while p < e:
        if b[p] == 0x22:  # events (field 4, length-delimited)
            p = _event_run(a, b, p, e, starts, ends)
            continue
        fn, wt, v, vp, q = _field(b, p, e)
        if wt == 0:
            if fn == 1:
                ln.id = _signed(v)
            elif fn == 3:
                ln.timestamp_ns = _signed(v)
            elif fn == 9:
                ln.duration_ps = _signed(v)
            elif fn == 10:
                ln.display_id = _signed(v)
        elif wt == 2:
            if fn == 2:
                ln.name = _text(b, vp, q)
            elif fn == 11:
                ln.display_name = _text(b, vp, q)
            elif fn == 4:  # an event with a non-canonical tag encoding
                starts.append(np.array([vp], _pos_dtype(a)))
                ends.append(np.array([q], _pos_dtype(a)))
        p = q
    if len(starts) == 1:
        ln.ev_start, ln.ev_end = starts[0], ends[0]
    elif starts:
        ln.ev_start, ln.ev_end = np.concatenate(starts), np.concatenate(ends)
    else:
        ln.ev_start = ln.ev_end = np.zeros(0, _pos_dtype(a))
    ln.n_events = len(ln.ev_start)
    return ln


def _split_plane(a: np.ndarray, b, s: int, e: int, strip_meta=None
                 ) -> tuple[bytes, list[_Line], tuple[np.ndarray, np.ndarray], bool]:
    """An XPlane's bytes without its lines (for upb), its lines decoded here, where its
    event_metadata entries lie, and whether they were left out of the bytes too.

    `strip_meta(plane name)`: leave the entries out of upb's bytes when true for the name
    written before the first entry (the plane's `Plane` then reads them through `MetaTable`,
    and through upb only when asked for the whole map)."""
    parts = []
    lines = []
    meta_s: list = []  # event_metadata map entries' payloads, kept for `MetaTable`
    meta_e: list = []
    name = None
    strip = None  # decided at the first entry, for all of them
    run = p = s

    def entries_at(fs: int, q: int) -> None:
        """Entries lie in [fs, q): leave them out of upb's bytes if this plane is stripped."""
        nonlocal strip, run
        if strip is None:
            strip = bool(strip_meta and name is not None and strip_meta(name))
        if strip:
            if fs > run:
                parts.append(bytes(b[run:fs]))
            run = q

    while p < e:
        if b[p] == 0x22:
            # a run of event_metadata map entries (tens of thousands with many distinct ops):
            # located like events, not field by field
            fs = p
            p = _event_run(a, b, p, e, meta_s, meta_e, 0x22)
            entries_at(fs, p)
            continue
        if b[p] == 0x2A:  # stat_metadata entries (a few dozen per plane, thousands of planes)
            p = _event_run(a, b, p, e, [], [], 0x2A)
            continue
        fs = p
        fn, wt, v, vp, q = _field(b, p, e)
        if fn == 3 and wt == 2:
            if fs > run:
                parts.append(bytes(b[run:fs]))
            lines.append(_read_line(a, b, vp, q))
            run = q
        elif fn == 4 and wt == 2:  # an event_metadata entry with a non-canonical tag
            meta_s.append(np.array([vp], _pos_dtype(a)))
            meta_e.append(np.array([q], _pos_dtype(a)))
            entries_at(fs, q)
        elif fn == 2 and wt == 2:
            name = bytes(b[vp:q]).decode("utf-8", "replace")
        p = q
    if e > run:
        parts.append(bytes(b[run:e]))
    meta_pos = (np.concatenate(meta_s).astype(np.int64) if meta_s else np.zeros(0, np.int64),
                np.concatenate(meta_e).astype(np.int64) if meta_e else np.zeros(0, np.int64))
    return b"".join(parts), lines, meta_pos, bool(strip)


def parse_space(data, n: int, strip_meta=None) -> tuple[Any, list[PlaneView], np.ndarray]:
    """Parse XSpace bytes `data[:n]` (followed by >= `PAD` zero bytes).

    Returns (skeleton XSpace message, planes with their lines, the buffer as uint8 array).
    `strip_meta(plane name)`: planes whose event_metadata upb does not parse up front (see
    `_split_plane`). Raises `Corrupt` or DecodeError on damaged input.
    """
    a = np.frombuffer(data, np.uint8)
    skel = []
    plines = []
    run = p = 0
    while p < n:
        fs = p
        fn, wt, v, vp, q = _field(data, p, n)
        if fn == 1 and wt == 2:
            if fs > run:
                skel.append(bytes(data[run:fs]))
            body, lines, meta_pos, stripped = _split_plane(a, data, vp, q, strip_meta)
            skel.append(b"\x0a" + _enc_varint(len(body)) + body)
            plines.append((lines, meta_pos, stripped))
            run = q
        p = q
    if n > run:
        skel.append(bytes(data[run:n]))
    xs = XSpace.FromString(b"".join(skel))
    if len(xs.planes) != len(plines):
        raise Corrupt("plane count mismatch")
    return xs, [PlaneView(m, ls, a, mp, st) for m, (ls, mp, st) in zip(xs.planes, plines)], a


def padded(raw: bytes) -> bytearray:
    buf = bytearray(len(raw) + PAD)
    buf[: len(raw)] = raw
    return buf


_M7 = np.uint64(0x7F)


def _varint_at(buf: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Varints starting at byte positions `p`: (values as uint64, lengths).

    One-byte varints (tags, ids, short lengths) take one gather; longer ones are decoded from
    one unaligned 8-byte little-endian word each (bit masks, no loop per byte), and the rare
    varints longer than 8 bytes byte by byte. `buf` must be followed by >= 16 readable bytes.
    """
    b = buf[p]
    val = b.astype(np.uint64)
    n = np.ones(len(p), np.int64)
    cont = np.flatnonzero(b >= 0x80)
    if not cont.size:
        return val, n
    # Two-byte varints (lengths of 128 B-16 KiB: HLO texts, stats) take one more gather.
    b2 = buf[p[cont] + 1]
    two = b2 < 0x80
    i2 = cont[two]
    val[i2] = (b[i2] & 0x7F).astype(np.uint64) | (b2[two].astype(np.uint64) << np.uint64(7))
    n[i2] = 2
    cont = cont[~two]
    if not cont.size:
        return val, n
    pc = p[cont]
    words = np.ndarray((len(buf) - 7,), "<u8", buffer=buf, strides=(1,))
    w = words[pc]
    term = ~w & np.uint64(0x8080808080808080)  # high bits of bytes that end the varint
    long_ = term == 0
    lb = term & (~term + np.uint64(1))  # lowest terminating byte's high bit
    mask = (lb << np.uint64(1)) - np.uint64(1)  # the varint's bytes
    w &= mask
    v = w & _M7
    for k in range(1, 8):
        v |= (w >> np.uint64(k)) & (_M7 << np.uint64(7 * k))
    val[cont] = v
    n[cont] = ((mask & np.uint64(0x0101010101010101)) * np.uint64(0x0101010101010101)
               >> np.uint64(56)).astype(np.int64)
    if long_.any():  # more than 8 bytes: finish byte by byte
        li = cont[long_]
        val[li] = v[long_] & np.uint64((1 << 56) - 1)
        n[li] = 8
        c2 = li
        shift = 56
        while c2.size:
            if shift > 63:
                raise Corrupt("varint longer than 10 bytes")
            bb = buf[p[c2] + n[c2]].astype(np.uint64)
            val[c2] |= (bb & _M7) << np.uint64(shift)
            n[c2] += 1
            c2 = c2[(bb & np.uint64(0x80)) != 0]
            shift += 7
    return val, n


def _walk(buf: np.ndarray, start: np.ndarray, end: np.ndarray, on_field) -> None:
    """Walk the fields of many messages at once: pass k handles every message's k-th field.

    `on_field(rows, field, wire_type, value, value_pos, next_pos)` gets the message indices of
    this pass; `value` is the varint (wire type 0) or length (2), `value_pos` where the value or
    payload starts. Messages are done when their position reaches `end`.
    """
    pos = start.copy()
    act = np.flatnonzero(pos < end)
    while act.size:
        p = pos[act]
        tag, tl = _varint_at(buf, p)
        vp = p + tl
        wt = (tag & np.uint64(7)).astype(np.int64)
        fld = (tag >> np.uint64(3)).astype(np.int64)
        val = np.zeros(len(act), np.uint64)
        nxt = np.empty(len(act), np.int64)
        vi = np.flatnonzero((wt == 0) | (wt == 2))
        if vi.size:
            v, vl = _varint_at(buf, vp[vi])
            val[vi] = v
            lim = end[act[vi]]
            isl = wt[vi] == 2
            if (v[isl] > np.uint64(1 << 40)).any():
                raise Corrupt("length out of range")
            nxt[vi] = vp[vi] + vl + np.where(isl, v, 0).astype(np.int64)
            vp[vi] += vl  # payload / value start after the length varint
            del lim
        fixed = np.flatnonzero((wt == 1) | (wt == 5))
        nxt[fixed] = vp[fixed] + np.where(wt[fixed] == 1, 8, 4)
        if ((wt == 3) | (wt == 4) | (wt > 5)).any():
            raise Corrupt("unsupported wire type")
        lim = end[act]
        if (nxt > lim).any():
            raise Corrupt("field runs past its message")
        on_field(act, fld, wt, val, vp, nxt)
        pos[act] = nxt
        act = act[nxt < lim]


def _canonical_header(buf: np.ndarray, s: np.ndarray, e: np.ndarray):
    """One check-and-decode pass over event headers in the layout every writer uses:
    `08 metadata_id [10 offset_ps] [18 duration_ps]`, then only stat records (`_stat_chains`).

    Returns (metadata ids, offsets, durations, canonical mask, position after the header);
    events outside the mask must go through the generic `_walk` (their values here are
    meaningless).
    """
    n = len(s)
    good = buf[s] == 0x08
    p = s.astype(np.int64) + 1
    if good.all():
        v, ln = _varint_at(buf, p)
        mid = v.view(np.int64)
        p += ln
    else:  # decode only what is a varint: garbage could raise as an over-long one
        mid = np.zeros(n, np.int64)
        gi = np.flatnonzero(good)
        v, ln = _varint_at(buf, p[gi])
        mid[gi] = v.view(np.int64)
        p[gi] += ln
    good &= p <= e
    vals = []
    for tag in (0x10, 0x18):  # offset_ps, duration_ps (omitted when zero)
        out = np.zeros(n, np.int64)
        p[~good] = s[~good]  # keep reads inside the buffer
        idx = np.flatnonzero(good & (p < e) & (buf[p] == tag))
        if idx.size:
            v, ln = _varint_at(buf, p[idx] + 1)
            out[idx] = v.view(np.int64)
            p[idx] += 1 + ln
            good[idx] &= p[idx] <= e[idx]
        vals.append(out)
    return mid, vals[0], vals[1], good, p


def _stat_chains(buf: np.ndarray, act: np.ndarray, pos: np.ndarray, e: np.ndarray,
                 good: np.ndarray, tag: int = 0x22):
    """Stat records (`22 len payload`; `tag` 0x2a in an XEventMetadata) from `pos` to the end
    of messages `act` (indices into `e` and `good`), one vectorized pass per record index. A
    message whose tail is anything else is cleared in `good` (and its records dropped).
    Returns (message indices, payload starts, ends), record index by record index."""
    dt = _pos_dtype(buf)
    st_ev, st_pos, st_end = [], [], []
    end = e[act].astype(np.int64)
    live = pos < end
    act, pos, end = act[live], pos[live], end[live]
    while act.size:  # pass k: every event's k-th stat record
        ok = buf[pos] == tag
        if not ok.all():
            good[act[~ok]] = False
            act, pos, end = act[ok], pos[ok], end[ok]
        v, ln = _varint_at(buf, pos + 1)
        ok = v <= np.uint64(1 << 40)
        sp = pos + 1 + ln
        nx = sp + np.where(ok, v, 0).astype(np.int64)
        ok &= nx <= end
        if not ok.all():
            good[act[~ok]] = False
            act, sp, nx, end = act[ok], sp[ok], nx[ok], end[ok]
        st_ev.append(act.astype(dt))
        st_pos.append(sp.astype(dt))
        st_end.append(nx.astype(dt))
        live = nx < end
        act, pos, end = act[live], nx[live], end[live]
    del pos, end
    if st_ev:
        ev, sp, se = np.concatenate(st_ev), np.concatenate(st_pos), np.concatenate(st_end)
        del st_ev, st_pos, st_end
        if not good.all():  # records of events that failed at a later record
            k = good[ev]
            ev, sp, se = ev[k], sp[k], se[k]
    else:
        ev = sp = se = np.zeros(0, dt)
    return ev, sp, se


class LineEvents:
    """One line's positioned events as arrays, plus lazy access to their stats.

    `skip_mids`: metadata ids whose events' stats can never matter. Those events get their
    header fields only (their stats are neither located nor checked); the caller must never
    ask for their stats.
    """

    def __init__(self, line, base_ps, skip_mids=None, plane_of: np.ndarray | None = None):
        """`base_ps`: the line's origin, or one per event (a `merge_lines` segment);
        `plane_of`: per event, its plane's index in a `PlaneGroup` (metadata and stat ids then
        become that group's keys)."""
        self.buf = line.buf  # the whole file's bytes; events are located in place
        start, end = line.ev_start, line.ev_end
        line.ev_start = line.ev_end = None  # each line is read once: free them with this
        dt = _pos_dtype(self.buf)
        n = len(start)
        mid, off, dur, good, p = _canonical_header(self.buf, start, end)
        if skip_mids:
            act = np.flatnonzero(good & ~np.isin(mid, np.fromiter(skip_mids, np.int64)))
        else:
            act = np.flatnonzero(good)
        cev, csp, cse = _stat_chains(self.buf, act, p[act], end, good)
        del act, p
        agg = np.zeros(n, bool)
        st_ev, st_pos, st_end = [cev], [csp], [cse]
        del cev, csp, cse

        # The closures run only before the `del`s below; ruff's F821 sees the later `del`.
        def on_field(rows, fld, wt, val, vp, nxt):
            v = val.view(np.int64)
            for f, arr in ((1, mid), (2, off), (3, dur)):  # noqa: F821
                m = (fld == f) & (wt == 0)
                if m.any():
                    arr[rows[m]] = v[m]
            m = (fld == 5) & (wt == 0)  # num_occurrences: aggregated, no position
            if m.any():
                agg[rows[m]] = True
                off[rows[m]] = 0  # noqa: F821
            m = (fld == 2) & (wt == 0)  # the oneof's last field wins
            if m.any():
                agg[rows[m]] = False
            m = (fld == 4) & (wt == 2)
            if m.any():
                st_ev.append(rows[m].astype(dt))  # noqa: F821
                st_pos.append(vp[m].astype(dt))  # noqa: F821
                st_end.append(nxt[m].astype(dt))  # noqa: F821

        bad = np.flatnonzero(~good)
        if bad.size:  # anything else: the generic walk, field by field
            mid[bad] = off[bad] = dur[bad] = 0

            def on_bad(rows, *rest):
                on_field(bad[rows], *rest)  # noqa: F821

            _walk(self.buf, start[bad], end[bad], on_bad)
        del start, end, good, bad
        # Times a profiler cannot have written (negative durations, offsets beyond 26 days,
        # wrapped uint64s) are dropped and counted, never passed on to become impossible spans.
        invalid = (off < 0) | (off >= TIME_LIMIT_PS) | (dur < 0) | (dur >= TIME_LIMIT_PS)
        invalid &= ~agg
        if invalid.any():
            INVALID_EVENTS[0] += int(invalid.sum())
            agg |= invalid
        keep = ~agg
        self.all_positioned = bool(keep.all())
        self._keep = None if self.all_positioned else keep
        if plane_of is not None:
            mid = _group_keys(plane_of, mid)
        if self.all_positioned:
            self.mids, self.starts, self.durs = mid, off + base_ps, dur
            self._plane = plane_of
        else:
            self.mids = mid[keep]
            self.starts = off[keep] + (base_ps[keep] if isinstance(base_ps, np.ndarray)
                                       else base_ps)
            self.durs = dur[keep]
            self._plane = None if plane_of is None else plane_of[keep]
        del mid, off, dur
        self.n = len(self.mids)
        ev = np.concatenate(st_ev) if len(st_ev) > 1 else st_ev[0]
        sp = np.concatenate(st_pos) if len(st_pos) > 1 else st_pos[0]
        se = np.concatenate(st_end) if len(st_end) > 1 else st_end[0]
        del st_ev, st_pos, st_end
        if not self.all_positioned:
            k = keep[ev]
            remap = (np.cumsum(keep) - 1).astype(dt)  # old index -> new (aggregated dropped)
            ev, sp, se = remap[ev[k]], sp[k], se[k]
        self._st_ev, self._st_pos, self._st_end = ev, sp, se
        self._sids: np.ndarray | None = None
        self._decoded: dict | None = None

    def _stat_sids(self) -> np.ndarray:
        """Each stat record's metadata_id (canonical writers put it first: `0x08 varint`)."""
        if self._sids is None:
            sp = self._st_pos
            first = self.buf[sp] == 0x08
            sids = np.zeros(len(sp), np.int64)
            if first.all():
                v, _ = _varint_at(self.buf, sp + 1)
                sids[:] = v.view(np.int64)
            else:
                sids[:] = self._decode_all()["sid"]
            if self._plane is not None:
                sids = _group_keys(self._plane[self._st_ev], sids)
            self._sids = sids
        return self._sids

    def _decode_all(self) -> dict:
        if self._decoded is None:
            self._decoded = _decode_stats(self.buf, self._st_pos, self._st_end)
        return self._decoded

    def has_stat(self, sids) -> np.ndarray:
        """Per event: does it carry a stat with one of these metadata ids?"""
        out = np.zeros(self.n, bool)
        if len(self._st_ev) and sids:
            sel = np.isin(self._stat_sids(), np.fromiter(sids, np.int64))
            out[self._st_ev[sel]] = True
        return out

    def first_stat(self, sids, stat_names: dict[int, str]) -> tuple[np.ndarray, np.ndarray]:
        """(event indices, values as objects) of the first stat with one of `sids` per event."""
        if not len(self._st_ev) or not sids:
            return np.zeros(0, np.int64), np.zeros(0, object)
        sel = np.flatnonzero(np.isin(self._stat_sids(), np.fromiter(sids, np.int64)))
        # records are stored pass by pass, so the first record of an event is its earliest stat
        evs, first = np.unique(self._st_ev[sel], return_index=True)
        rec = sel[first]
        d = _decode_stats(self.buf, self._st_pos[rec], self._st_end[rec])
        plane = None if self._plane is None else self._plane[evs]
        return evs, _stat_objects(self.buf, d, stat_names, plane)

    def kept(self, per_event: Any) -> Any:
        """A per-event array of the line(s) given to the constructor, for the events kept here
        (events with no position or an impossible time are dropped); scalars pass through."""
        if self._keep is None or not isinstance(per_event, np.ndarray):
            return per_event
        return per_event[self._keep]


_K_NONE, _K_DOUBLE, _K_U64, _K_I64, _K_STR, _K_BYTES, _K_REF = 0, 2, 3, 4, 5, 6, 7


# XStat value fields (2..7) and the wire type each is written with.
_STAT_TAGS = np.zeros(256, np.int8)
for _f, _w in ((2, 1), (3, 0), (4, 0), (5, 2), (6, 2), (7, 0)):
    _STAT_TAGS[_f << 3 | _w] = _f
del _f, _w


def _decode_stats(buf, sp, se) -> dict:
    n = len(sp)
    sid = np.zeros(n, np.int64)
    kind = np.zeros(n, np.int64)
    ival = np.zeros(n, np.uint64)
    vpos = np.zeros(n, np.int64)
    # The layout every writer uses, in one pass: `08 metadata_id`, then at most one value
    # field ending exactly at the record's end. Anything else: the generic walk below.
    good = buf[sp] == 0x08
    gi = np.flatnonzero(good)
    v, ln = _varint_at(buf, sp[gi] + 1)
    p = sp[gi] + 1 + ln
    e = se[gi].astype(np.int64)
    ok = p <= e
    p[~ok] = e[~ok]
    sid[gi] = v.view(np.int64)
    val = p < e  # has a value field
    f = np.zeros(len(gi), np.int64)
    f[val] = _STAT_TAGS[buf[p[val]]]
    ok &= ~val | (f > 0)
    nxt = p.copy()
    vp = p + 1
    fixed = f == 2
    nxt[fixed] = p[fixed] + 9
    vi = np.flatnonzero(ok & val & ~fixed)
    if vi.size:
        v, ln = _varint_at(buf, vp[vi])
        vp[vi] += ln
        nxt[vi] = vp[vi] + np.where(f[vi] >= 5, np.where(f[vi] == 7, 0, v), 0).astype(np.int64)
        ok[vi] &= (f[vi] < 5) | (f[vi] == 7) | (v <= np.uint64(1 << 40))
        iv = np.zeros(len(gi), np.uint64)
        iv[vi] = v
    else:
        iv = np.zeros(len(gi), np.uint64)
    ok &= nxt == e
    k = np.flatnonzero(ok & val)
    kind[gi[k]] = f[k]
    ival[gi[k]] = iv[k]
    vpos[gi[k]] = vp[k]
    good[gi[~ok]] = False
    del gi, p, e, f, nxt, vp, iv, ok, val
    bad = np.flatnonzero(~good)
    if not bad.size:
        return {"sid": sid, "kind": kind, "ival": ival, "vpos": vpos}
    sid[bad] = kind[bad] = ival[bad] = vpos[bad] = 0

    def on_field(rows, fld, wt, val, vp, nxt):
        rows = bad[rows]
        m = (fld == 1) & (wt == 0)
        sid[rows[m]] = val[m].view(np.int64)
        m = (fld >= 2) & (fld <= 7)  # the value oneof; the last one written wins
        r = rows[m]
        kind[r] = fld[m]
        ival[r] = val[m]
        vpos[r] = vp[m]

    _walk(buf, sp[bad], se[bad], on_field)
    return {"sid": sid, "kind": kind, "ival": ival, "vpos": vpos}


def _stat_objects(buf, d, stat_names: dict[int, str], plane=None) -> np.ndarray:
    """Python values of decoded stats, as `Plane.value` gives them (refs resolved to names;
    with `plane`, each record's plane index in a `PlaneGroup`, refs are that plane's ids)."""
    kind, ival, vpos = d["kind"], d["ival"], d["vpos"]
    out = np.full(len(kind), None, object)
    m = np.flatnonzero(kind == _K_REF)
    if m.size:
        ref = ival[m]
        if plane is not None:
            ref = _group_keys(plane[m], ref)
        uniq, inv = np.unique(ref, return_inverse=True)
        names = np.array([stat_names.get(int(u), "") for u in uniq] + [None], object)[:-1]
        out[m] = names[inv]
    m = np.flatnonzero(kind == _K_I64)
    if m.size:
        out[m] = ival[m].view(np.int64).tolist()
    m = np.flatnonzero(kind == _K_U64)
    if m.size:
        out[m] = ival[m].tolist()
    m = np.flatnonzero(kind == _K_DOUBLE)
    if m.size:
        idx = vpos[m][:, None] + np.arange(8)
        out[m] = buf[idx].copy().view("<f8").ravel().tolist()
    for k in (_K_STR, _K_BYTES):
        m = np.flatnonzero(kind == k)
        seen: dict[bytes, Any] = {}  # one object per distinct value, not per event
        for i, p, ln in zip(m.tolist(), vpos[m].tolist(), ival[m].tolist()):
            b = buf[p:p + ln].tobytes()
            v = seen.get(b)
            if v is None:
                v = seen[b] = b.decode("utf-8", "replace") if k == _K_STR else b
            out[i] = v
    return out


class MetaTable:
    """A plane's event_metadata entries as arrays, decoded from the file's bytes, so that the
    names and stats of many metadata are read at once (`Plane.names`, `Plane.meta_columns`).

    Why: reading one entry through upb costs ~1.3 us for a name and 10-15 us for its stats (the
    map lookup, a wrapper per XStat, a oneof test per value); a capture where every copy is its
    own op has tens of thousands of entries the reader needs. Here every entry is decoded once,
    vectorized (the layout every writer uses, `08 id 12 name [1a metadata] [22 display_name]
    2a stat...`, in a few array passes; anything else through the generic field walk), and only
    wanted values become Python objects.

    Semantics are upb's: of a key written twice the last entry counts; of a string field
    written twice the last value; within an entry the first stat of a name wins (as
    `Plane.stats`). An entry field other than the int64 key and the value message, or a value
    written twice (upb merges the messages), makes the table refuse (`ok` False): callers
    then read through upb.
    """

    def __init__(self, buf: np.ndarray, ms: np.ndarray, me: np.ndarray):
        self.buf = buf
        n = len(ms)
        key = np.zeros(n, np.int64)
        vs = np.zeros(n, np.int64)
        ve = np.zeros(n, np.int64)
        nval = np.zeros(n, np.int64)
        odd = [False]

        def on_entry(rows, fld, wt, val, vp, nxt):
            m = (fld == 1) & (wt == 0)
            key[rows[m]] = val[m].view(np.int64)
            v = (fld == 2) & (wt == 2)
            r = rows[v]  # distinct within a pass
            vs[r] = vp[v]
            ve[r] = nxt[v]
            nval[r] += 1
            if not (m | v).all():
                odd[0] = True

        self.ok = True
        self.keys = np.zeros(0, np.int64)
        try:
            # the layout every writer uses, `08 key 12 len value`, in a few array steps; the
            # rest field by field
            good = buf[ms] == 0x08
            gi = np.flatnonzero(good)  # varints decoded only where one starts (no garbage)
            v, ln = _varint_at(buf, ms[gi] + 1)
            p = ms[gi] + 1 + ln
            ok = (p < me[gi]) & (buf[np.minimum(p, me[gi])] == 0x12)
            gi, v, p = gi[ok], v[ok], p[ok]
            L, ll = _varint_at(buf, p + 1)
            q = p + 1 + ll
            ok = q + np.minimum(L, np.uint64(1 << 40)).astype(np.int64) == me[gi]
            gi, v, q = gi[ok], v[ok], q[ok]
            key[gi] = v.view(np.int64)
            vs[gi], ve[gi], nval[gi] = q, me[gi], 1
            good[:] = False
            good[gi] = True
            bad = np.flatnonzero(~good)
            if bad.size:
                _walk(buf, ms[bad], me[bad], lambda r, *rest: on_entry(bad[r], *rest))
            # the last entry of each key: first occurrence in the reversed order
            uk, first_rev = np.unique(key[::-1], return_index=True)
            last = n - 1 - first_rev
            self.keys = uk
            self._decode(vs[last], ve[last])
        except Corrupt:
            odd[0] = True
        if odd[0] or (nval > 1).any():
            self.ok = False

    _BLOCK = 8192  # entries decoded together: their bytes (~2 MB) stay in cache across passes

    def _decode(self, s: np.ndarray, e: np.ndarray) -> None:
        """Name and display-name positions and stat records of the XEventMetadata payloads
        [s, e) (an absent value message is the empty payload, s == e == 0).

        Entries are taken in file order, a block at a time: every pass of the decode gathers
        bytes of each entry, and entries spread over tens of MB (in key order, all over the
        file) would make each pass a cache miss per entry."""
        buf, n = self.buf, len(s)
        self.name = np.zeros((2, n), np.int64)  # [start; end] of the name ("" where absent)
        self.disp = np.zeros((2, n), np.int64)
        good = np.ones(n, bool)
        order = np.argsort(s, kind="stable")
        rr, rs, re_ = [], [], []
        for b0 in range(0, n, self._BLOCK):
            idx = order[b0:b0 + self._BLOCK]
            g = np.ones(len(idx), bool)
            r, a, z = self._decode_block(s[idx], e[idx], g, idx)
            good[idx] = g
            rr.append(idx[r])
            rs.append(a)
            re_.append(z)
        bad = np.flatnonzero(~good)
        if bad.size:  # anything else: field by field
            self.name[:, bad] = 0
            self.disp[:, bad] = 0

            def on_field(r, fld, wt, val, vp, nxt):
                r = bad[r]
                for f, where in ((2, self.name), (4, self.disp)):
                    m = (fld == f) & (wt == 2)  # the last one written wins
                    where[0, r[m]], where[1, r[m]] = vp[m], nxt[m]
                m = (fld == 5) & (wt == 2)
                rr.append(r[m])
                rs.append(vp[m])
                re_.append(nxt[m])

            _walk(buf, s[bad], e[bad], on_field)
        # stat records, each entry's in the order written (blocks and walked entries are
        # disjoint, and each block's records are pass by pass)
        self.st_row, self.st_s, self.st_e = (
            np.concatenate(x).astype(np.int64) if x else np.zeros(0, np.int64)
            for x in (rr, rs, re_))

    def _decode_block(self, s: np.ndarray, e: np.ndarray, good: np.ndarray, idx: np.ndarray):
        """`_decode` for entries `idx` (payloads [s, e)) in the layout every writer uses;
        clears `good` for the others. Returns their stat records (block row, start, end)."""
        buf = self.buf
        p = s.copy()
        for tag, where in ((0x08, None), (0x12, self.name), (0x1A, None), (0x22, self.disp)):
            at = np.flatnonzero(good & (p < e))
            at = at[buf[p[at]] == tag]
            if not at.size:
                continue
            v, ln = _varint_at(buf, p[at] + 1)
            vp = p[at] + 1 + ln
            nx = vp if tag == 0x08 else vp + np.minimum(v, np.uint64(1 << 40)).astype(np.int64)
            ok = nx <= e[at]
            good[at[~ok]] = False
            at, vp, nx = at[ok], vp[ok], nx[ok]
            if where is not None:
                where[0, idx[at]], where[1, idx[at]] = vp, nx
            p[at] = nx
        act = np.flatnonzero(good)
        return _stat_chains(buf, act, p[act], e, good, tag=0x2A)

    def _rows(self, mids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(positions in `mids` that have an entry, those entries' indices)."""
        if not len(self.keys):
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        i = np.minimum(np.searchsorted(self.keys, mids), len(self.keys) - 1)
        rows = np.flatnonzero(self.keys[i] == mids)
        return rows, i[rows]

    def _spans(self, mids, display: bool) -> tuple[np.ndarray, np.ndarray]:
        """Where the name (or display name) of each id of `mids` lies: (starts, ends), an
        empty span where there is no entry."""
        mids = np.asarray(mids, np.int64)
        pos = self.disp if display else self.name
        rows, ent = self._rows(mids)
        fs = np.zeros(len(mids), np.int64)
        fe = np.zeros(len(mids), np.int64)
        fs[rows], fe[rows] = pos[0, ent], pos[1, ent]
        return fs, fe

    def strings(self, mids: np.ndarray, display: bool) -> list[str] | None:
        """Names (or display names) of the entries of `mids` ("" where absent), or None where
        a value holds a NUL (the caller then uses upb).

        Every value becomes a Python str, but not through upb: the values are joined into one
        NUL-separated buffer, decoded and split once (~0.5 us per value, upb's map lookup and
        attribute read ~1.3 us)."""
        fs, fe = self._spans(mids, display)
        mv = memoryview(self.buf)
        # buffer slices joined with NULs (bytes.join takes buffers): no object per value
        joined = b"\0".join([mv[p:q] for p, q in zip(fs.tolist(), fe.tolist())])
        try:
            got = joined.decode("utf-8").split("\0")
        except UnicodeDecodeError:
            return None
        return got if len(got) == len(fs) else None

    def string_bytes(self, mids: np.ndarray, display: bool) -> tuple[np.ndarray, np.ndarray]:
        """The names (or display names) of the entries of `mids` as bytes, without a Python
        object each: (all their bytes concatenated as uint8, each one's length; 0 where
        absent), for byte-level rules over many names at once."""
        fs, fe = self._spans(mids, display)
        ln = fe - fs
        total = int(ln.sum())
        first = np.cumsum(ln) - ln  # each value's offset in the output
        idx = np.repeat(fs - first, ln) + np.arange(total)
        return self.buf[idx], ln

    def has_stat(self, mids: np.ndarray, sids) -> np.ndarray:
        """Per id of `mids`: does its entry hold a stat whose id is one of `sids`?"""
        mids = np.asarray(mids, np.int64)
        out = np.zeros(len(mids), bool)
        rows, ent = self._rows(mids)
        if not rows.size or not len(sids) or not len(self.st_row):
            return out
        sid = _decode_stats(self.buf, self.st_s, self.st_e)["sid"]
        hit = np.zeros(len(self.keys), bool)
        hit[self.st_row[np.isin(sid, np.fromiter(sids, np.int64))]] = True
        out[rows] = hit[ent]
        return out

    def columns(self, mids: np.ndarray, wanted: dict[int, str], names: tuple[str, ...],
                stat_names: dict[int, str]) -> dict[str, np.ndarray]:
        """Per id of `mids`: the first stat whose id is in `wanted` (id -> name), per name of
        `names`, as object columns (None where absent)."""
        mids = np.asarray(mids, np.int64)
        out = {k: np.full(len(mids), None, object) for k in names}
        rows, ent = self._rows(mids)
        if not rows.size or not wanted or not len(self.st_row):
            return out
        need = np.zeros(len(self.keys), bool)
        need[ent] = True
        rec = np.flatnonzero(need[self.st_row])
        d = _decode_stats(self.buf, self.st_s[rec], self.st_e[rec])
        sid = d["sid"]
        wid = np.fromiter(wanted.keys(), np.int64)
        name_ix = {k: j for j, k in enumerate(names)}
        wname = np.array([name_ix.get(wanted[k], -1) for k in wanted], np.int64)
        o = np.argsort(wid)
        wid, wname = wid[o], wname[o]
        j = np.minimum(np.searchsorted(wid, sid), len(wid) - 1)
        hit = np.flatnonzero((wid[j] == sid) & (wname[j] >= 0))
        if not hit.size:
            return out
        entry, nm = self.st_row[rec[hit]], wname[j[hit]]
        # records keep each entry's order: the first of each (entry, name) is the earliest
        _, first = np.unique(entry * len(names) + nm, return_index=True)
        sel = hit[first]
        vals = _stat_objects(self.buf, {k: v[sel] for k, v in d.items()}, stat_names)
        entry, nm = entry[first], nm[first]
        for k, name in enumerate(names):
            m = nm == k
            col = np.full(len(self.keys), None, object)
            col[entry[m]] = vals[m]
            out[name][rows] = col[ent]
        return out


def stat_column(P: "Plane", ev: LineEvents, idx: np.ndarray, name: str) -> np.ndarray:
    """Values of stat `name` for events `idx`: the event's first such stat, else its metadata's."""
    out = np.full(len(idx), None, object)
    if not len(idx):
        return out
    pos = np.full(ev.n, -1, np.int64)
    pos[idx] = np.arange(len(idx))
    have = np.zeros(len(idx), bool)
    sids = P.stat_ids.get(name)
    if sids:
        evs, vals = ev.first_stat(sids, P.stat_names)
        where = pos[evs]
        ok = where >= 0
        out[where[ok]] = vals[ok]
        have[where[ok]] = True
    missing = np.flatnonzero(~have)
    if missing.size:  # fall back to the metadata's stats, once per metadata id
        mids = ev.mids[idx[missing]]
        uniq, inv = np.unique(mids, return_inverse=True)
        mv = np.array([P.meta_stats(int(u)).get(name) for u in uniq] + [None], object)[:-1]
        out[missing] = mv[inv]
    return out


def map_unique(values: np.ndarray, fn) -> np.ndarray:
    """`fn(v)` for each value of an object column, computed once per distinct value."""
    if not len(values):
        return np.zeros(0, object)
    try:
        codes, uniq = pd.factorize(pd.Series(values, dtype=object))
    except TypeError:  # unhashable values (never for stat values, but be safe)
        return np.array([fn(v) for v in values.tolist()] + [None], object)[:-1]
    # missing values (None, NaN) get code -1: the trailing entry, fn(None)
    out = np.array([fn(u) for u in uniq.tolist()] + [fn(None), None], object)[:-1]
    return out[codes]


def per_mid(mids: np.ndarray, fn) -> np.ndarray:
    """`fn(mid)` for each event, computed once per distinct metadata id."""
    uniq, inv = np.unique(mids, return_inverse=True)
    vals = np.array([fn(int(u)) for u in uniq] + [None], object)[:-1]
    return vals[inv]


class Cols:
    """Column chunks (arrays or one scalar per chunk), concatenated once at the end."""

    def __init__(self):
        self.chunks: list[tuple[int, dict[str, Any]]] = []

    def add(self, n: int, **cols) -> None:
        if n:
            self.chunks.append((n, cols))

    def rows(self, schema: dict[str, str], keep=None) -> dict[str, Any]:
        chunks = [c for c in self.chunks if keep is None or keep(c[1])]
        out: dict[str, Any] = {}
        for col, dtype in schema.items():
            parts = []
            for n, cols in chunks:
                v = cols.get(col)
                if isinstance(v, np.ndarray):
                    parts.append(v if dtype != "object" else v.astype(object, copy=False))
                else:
                    parts.append(np.full(n, v, dtype=object if dtype == "object" or v is None
                                         else np.int64))
            out[col] = (parts[0] if len(parts) == 1 else np.concatenate(parts)) if parts else []
        self.chunks = []  # the frame owns the columns now
        return out


