"""XSpace decoding: the file's bytes -> plane skeletons, line headers, event and stat columns.

This module knows the protobuf encoding and the field numbers of the XSpace schema (XPlane,
XLine, XEvent, XStat; see `protos/xplane.proto`) and nothing about what events mean: which
event is a transfer, which line is compute, how clocks line up is `reader.py`'s business.

What goes in: a file's bytes (padded with `PAD` zero bytes). What comes out: a parsed plane
skeleton (names, event metadata, plane stats; a plane's event metadata left out where the
caller asks, `parse_space(strip_meta=...)`; decoded by `skeleton` without importing protobuf
where that gives upb's answer, else by upb), each plane's stat metadata as the scanner read it
(`PlaneView.stat_names`: never in the skeleton), plus, per line (or per segment of several small
lines, `merge_lines`, read against a `PlaneGroup` of their planes' lookups), arrays of event
headers (`metadata_id`, `offset_ps`, `duration_ps`), stats (per stat name a rule reads, each
event's first such stat as a code into that name's distinct values, `LineEvents(groups=)`;
or typed records, one per stat), and per plane where its event_metadata entries lie, which
`MetaTable` decodes for many ids at once.

Stat values: `stat_column` is the one definition of "the value of stat X for an event": the
event's first stat named X, else its metadata's first (`Plane.stats`), None where neither has
one; a ref is the referenced stat metadata's name. `stat_codes`/`map_stat` give the same
column as codes into distinct values, so that a rule runs once per distinct value. Values
are distinct by type and content (1 and 1.0, 0.0 and -0.0, "a" and b"a" are each their own).

Two decoders give the same arrays: the compiled scanner (`_scan.pyx`, built at install with
the machine's C compiler) and, where it was not built, upb (protobuf's parser: correct,
several times slower, said once on stderr). upb is the reference: property tests compare the
two on every encoding upb accepts (tests/trace/test_scanner.py).

Damaged bytes: one rule, held by both decoders (tests/trace/test_differential.py reads
mutated captures of every backend both ways and compares exit codes and JSON).
* The wire structure is upb's: a tag, a length or a group upb refuses (a tag or length prefix
  written in more than 5 bytes, a field number of 2**29 or more, lengths or wire types that
  do not add up, groups nested deeper than upb's 100 levels counted from the XSpace) raises
  `Corrupt` (or upb's DecodeError) anywhere in the file, in lines no rule reads too, and the
  reader turns it into one line naming the file. Nothing of such a file is reported: where
  the framing is broken, nothing after it can be trusted.
* A `string` field (names, descriptions, string stats, the XSpace's host names, errors and
  warnings) holding invalid UTF-8 is recoverable: its bytes are intact, only their text is
  not. It is read with U+FFFD replacing each invalid sequence (Python's "replace"), as written
  last where a field is written twice (protobuf's rule), and counted: `BAD_STRINGS`, per file
  `strings_replaced` in the reader's facts, `replaced_strings` in the report. upb refuses
  such a file outright; the upb path then parses it with the same schema where those fields
  are `bytes`, replaces, and parses the result (`overlap.trace.lenient.sanitize`).
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Mapping
from itertools import repeat
from typing import Any, Iterable

import numpy as np

from overlap.arrays import sorted_unique
from overlap.trace.groups import PlaneGroup as PlaneGroup
from overlap.trace.groups import groupable as groupable
from overlap.trace.intstats import ints_at_scanned, ints_from_records
from overlap.trace.lenient import sanitize as sanitize
from overlap.trace.lines import LineBlock, LineTable, Records, adjacent_runs, upb_line
from overlap.trace.lines import _Line as _Line
from overlap.trace.lines import merge_lines as merge_lines
from overlap.trace.lines import merge_rows as merge_rows
from overlap.trace.metatable import MetaTable as MetaTable
from overlap.trace.metatable import names_of
from overlap.trace.names import STREAM_LINE_PREFIXES
from overlap.trace.planeview import BAD_STRINGS as BAD_STRINGS
from overlap.trace.planeview import PlaneView as PlaneView
from overlap.trace.planeview import _enc_varint, _strict_or_sanitized, _upb_plane
from overlap.trace.planeview import space_message as space_message
from overlap.trace.skeleton import MAX_FIELDS as SKELETON_FIELDS
from overlap.trace.skeleton import Refused as SkeletonRefused
from overlap.trace.skeleton import decode_space, in_upb_order
from overlap.trace.statcols import coded_stat as coded_stat
from overlap.trace.statcols import map_stat as map_stat
from overlap.trace.statcols import stat_codes as stat_codes
from overlap.trace.statcols import stat_column as stat_column
from overlap.trace.statcols import stat_keys as stat_keys
from overlap.trace.statids import LazyStatNames, ids_key
from overlap.trace.statids import StatIds as _StatIds
from overlap.trace.upb_events import rows_of as _rows_of
from overlap.trace.upb_events import upb_events as _upb_events
from overlap.trace.values import _K_BYTES as _K_BYTES
from overlap.trace.values import _K_DOUBLE as _K_DOUBLE
from overlap.trace.values import _K_I64 as _K_I64
from overlap.trace.values import _K_NONE as _K_NONE
from overlap.trace.values import _K_REF as _K_REF
from overlap.trace.values import _K_STR as _K_STR
from overlap.trace.values import _K_U64 as _K_U64
from overlap.trace.values import GROUP_IDS as GROUP_IDS
from overlap.trace.values import GROUP_STRIDE as GROUP_STRIDE
from overlap.trace.values import INT64_MAX as INT64_MAX
from overlap.trace.values import INT64_MIN as INT64_MIN
from overlap.trace.values import Coded as Coded
from overlap.trace.values import Cols as Cols
from overlap.trace.values import _group_keys as _group_keys
from overlap.trace.values import _stat_objects as _stat_objects
from overlap.trace.values import as_id as as_id
from overlap.trace.values import as_int as as_int
from overlap.trace.values import as_text as as_text
from overlap.trace.values import isin_ids
from overlap.trace.values import map_unique as map_unique
from overlap.trace.values import narrow_codes as narrow_codes
from overlap.trace.values import object_array as object_array
from overlap.trace.values import per_mid as per_mid
from overlap.trace.values import unique_inverse as unique_inverse
from overlap.trace.values import unique_inverse_at as unique_inverse_at

# ---------------------------------------------------------------------------------------------
# Stats


class Plane:
    """Per-plane lookups: stat names by id, metadata names, and metadata-level stats."""

    # (slots, and its lookup tables made when first asked: one per plane, 100k in a capture
    # of small planes, most of which never asks; ~0.4 KiB a plane with an instance dict)
    __slots__ = ("plane", "_stat_names", "_stat_ids", "_meta", "_meta_stats", "_wanted",
                 "_table", "_plane_stats")

    def __init__(self, plane):
        self.plane = plane
        self._stat_names: Mapping[int, str] | None = None  # (read when first asked)
        self._stat_ids: _StatIds | None = None
        self._meta = None  # (read when first asked: `meta`)
        self._meta_stats: dict[int, dict[str, Any]] | None = None
        self._wanted: dict[tuple, dict[int, str]] | None = None
        self._table: MetaTable | None | bool = False  # built on first use
        self._plane_stats: dict[str, Any] | None = None

    @property
    def stat_names(self) -> Mapping[int, str]:
        """Stat metadata id -> name, in upb's iteration order: read by the scanner where the
        plane came from `parse_space` (`_stat_names`: a dict, or `LazyStatNames` for a large
        map), else from upb's map."""
        if self._stat_names is None:
            got = getattr(self.plane, "stat_names", None)
            if isinstance(got, _SparseStatNames):
                got = got.ordered()
            self._stat_names = got if got is not None else _upb_names(self.plane)
        return self._stat_names

    @property
    def stat_ids(self) -> "_StatIds":
        """Stat name -> its ids (`_StatIds`)."""
        if self._stat_ids is None:
            self._stat_ids = _StatIds(self.stat_names)
        return self._stat_ids

    @property
    def meta(self):
        """The upb event_metadata map. For a plane whose entries upb skipped (`parse_space`'s
        `strip_meta`), parsed from the located entries on first use: the same map, and a
        damaged entry is `Corrupt` as it would have been up front."""
        if self._meta is None and not getattr(self.plane, "meta_stripped", False):
            self._meta = self.plane.event_metadata
        if self._meta is None:
            raw = _entry_fields((pv := self.plane).buf, *pv.meta_pos)
            from google.protobuf.message import DecodeError

            from overlap.trace.protos import XPlane
            try:  # (counted when the plane was split: `parse_space`)
                self._meta = _strict_or_sanitized(XPlane, raw, count=False).event_metadata
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
        if self._meta_stats is None:
            self._meta_stats = {}
        cached = self._meta_stats.get(metadata_id)
        if cached is None:
            md = self.meta.get(metadata_id)
            cached = self.stats(md.stats) if md is not None else {}
            self._meta_stats[metadata_id] = cached
        return cached

    def _wanted_ids(self, names: tuple[str, ...]) -> dict[int, str]:
        if self._wanted is None:
            self._wanted = {}
        wanted = self._wanted.get(names)
        if wanted is None:
            wanted = self._wanted[names] = self.ids(*names)
        return wanted

    def meta_some(self, metadata_id: int, names: tuple[str, ...]) -> dict[str, Any]:
        """Only the metadata stats named `names` (decoding the others costs, per metadata)."""
        if self._meta_stats is not None and metadata_id in self._meta_stats:
            full = self._meta_stats[metadata_id]
            return {k: full[k] for k in names if k in full}
        wanted = self._wanted_ids(names)
        if not wanted:
            return {}
        md = self.meta.get(metadata_id)
        return self.stats(md.stats, wanted) if md is not None else {}

    def meta_columns(self, mids, names: tuple[str, ...],
                     ids: tuple[str, ...] = ()) -> dict[str, np.ndarray]:
        """`meta_some` for many metadata ids at once: per name, an object column over `mids`
        (None where the stat is absent; `as_id` of the value for the names in `ids`).
        Decoded from the file's bytes (`MetaTable`) where the plane came from `parse_space`,
        else through upb one id at a time."""
        mids = np.asarray(mids, np.int64)
        wanted = self._wanted_ids(names)
        t = self.table()
        if t is not None:
            return t.columns(mids, wanted, names, self.stat_names, ids)
        out = {k: np.full(len(mids), None, object) for k in names}
        for i, m in enumerate(mids.tolist()):
            for k, v in self.meta_some(m, names).items():
                out[k][i] = v
        for k in ids:
            out[k] = map_unique(out[k], as_id)
        return out

    def table(self) -> "MetaTable | None":
        """The plane's `MetaTable`, if it came from `parse_space` and the table agrees with
        upb's map (built on first use)."""
        if self._table is False:
            pv = self.plane
            t = None
            if getattr(pv, "meta_pos", None) is not None and len(pv.meta_pos[0]):
                # (stripped: split_space checked each entry, stats included: not again)
                ms, me = pv.meta_pos
                t = MetaTable(pv.buf, ms, me, checked=pv.meta_stripped,
                              decoded=pv.meta_decoded)
                pv.meta_decoded = None  # (the table holds what it keeps of them)
                # the entries located must be exactly the map upb read, or the table is unused
                # (where upb skipped them, every plane-level field 4 was located: all of them)
                if not t.ok or (not pv.meta_stripped and len(t.keys) != len(self.meta)):
                    t = None
            self._table = t
        return self._table if isinstance(self._table, MetaTable) else None

    def name_bytes(self, mids, display: bool = False):
        """`MetaTable.string_bytes` where the plane has a table, else None."""
        t = self.table()
        return None if t is None else t.string_bytes(mids, display)

    def names(self, mids, display: bool = False) -> list[str]:
        """`name` (or `display_name`) of many metadata ids at once."""
        return names_of(self.table(), mids, display, lambda m: self._in_map(m, display))

    def name(self, metadata_id: int, display: bool = False) -> str:
        """An entry's name (or display name): a plane's upb never parsed from its table."""
        if getattr(self.plane, "meta_stripped", False):
            return self.names([metadata_id], display)[0]
        return self._in_map(metadata_id, display)

    def display_name(self, metadata_id: int) -> str:  # (`name`'s display name)
        return self.name(metadata_id, True)

    def _in_map(self, metadata_id: int, display: bool) -> str:
        md = self.meta.get(metadata_id)
        return "" if md is None else md.display_name if display else md.name

    def plane_stats(self, keep: bool = True) -> dict[str, Any]:
        """The plane's own stats (read once: the device row and the vendor check both ask;
        callers only read the dict); not kept where `keep` is False (`reader._gpu_run`)."""
        if (got := self._plane_stats) is None:
            # (a plane whose stats were left in the file, `_scan.BARE_MODE`, read from it
            # there at once, where the scanner reads them all plainly, not through upb)
            # (read off a `PlaneView`'s state, not through its properties: two property
            # calls a plane were ~40 ms of 100k planes without stats)
            spans = getattr(self.plane, "_stats", None)
            if spans is False:  # (a view of a plane with no stats: upb's are empty)
                got = _EMPTY
            elif isinstance(spans, np.ndarray) and SCANNER is not None and \
                    (got := SCANNER.plane_stats(self.plane.buf, spans, self.stat_names)) \
                    is not None:
                got = got or _EMPTY
            else:
                got = self.stats(st) if len(st := self.plane.stats) else _EMPTY
            self._plane_stats = got if keep else None
        return got


# One empty map for every plane without stat metadata or stats of its own (read only, as
# `stat_names` and `plane_stats` are: a dict each was 12 MiB of 100k small planes' read)
_EMPTY: dict = {}


# Event offsets, durations and line origins are accepted below 2**61 ps (26 days): sums of two
# or three of them can never wrap int64. Anything beyond is not a time a profiler wrote.
TIME_LIMIT_PS = 1 << 61

# Events dropped because a time field is out of range (negative duration, offset beyond
# TIME_LIMIT_PS); the reader resets and reads this per file and reports the count.
INVALID_EVENTS = [0]
# The same events by reason (each event counts once, under the first reason that applies);
# the values always sum to INVALID_EVENTS[0]'s growth.
DROP_NEGATIVE = "negative offset or duration"
DROP_RANGE = "time beyond 2**61 ps (26 days)"
INVALID_REASONS = {DROP_NEGATIVE: 0, DROP_RANGE: 0}


# ---------------------------------------------------------------------------------------------
# Decoding: the compiled scanner, or upb where it was not built
#
# Building a Python object per event and per stat costs ~250 ns each through upb (that was 95% of
# the reader's time). So where the compiled scanner (`overlap/trace/_scan.pyx`) is built,
# `parse_space` lets upb parse only a *skeleton* (every plane without its lines and stat
# metadata: names, event metadata, plane stats; TPU planes, and GPU planes of a file of many
# planes, without their event metadata),
# and each line's events are decoded from the file's bytes in one compiled pass into arrays
# (`LineEvents`): no Python object per event. Where it is not (no C compiler at install), upb
# parses the whole file and the same arrays are built from its messages: the same tables,
# several times slower; said once.

try:
    # by name: `overlap.trace` answers unknown attributes lazily, so mypy cannot tell a
    # missing compiled module from a present one
    _scan: Any = importlib.import_module("overlap.trace._scan")
except ImportError:  # no C compiler at install: upb decodes (see `parse_space`)
    _scan = None

# The decoder `parse_space` uses: the scanner module, or None for upb (tests set it to compare;
# OVERLAP_SCANNER=0 in the environment makes a process use upb, to measure or to cross-check).
SCANNER = None if os.environ.get("OVERLAP_SCANNER") == "0" else _scan
_WARNED = [False]

if _scan is not None:
    Corrupt = _scan.Corrupt
else:
    class Corrupt(ValueError):  # type: ignore[no-redef]
        """The bytes are not a valid XSpace (a damaged event, line or plane)."""


def parse_errors() -> tuple[type[Exception], ...]:
    """What parsing a capture raises on damaged bytes: `Corrupt`, RuntimeError, ValueError
    and, once protobuf is loaded, upb's DecodeError. protobuf is imported only where upb is
    used (`skeleton`): an `except parse_errors()` clause, evaluated when an exception
    arrives, names DecodeError exactly where one can have been raised."""
    pb = sys.modules.get("google.protobuf.message")
    return (Corrupt, RuntimeError, ValueError) + ((pb.DecodeError,) if pb is not None else ())


def __getattr__(name: str) -> Any:
    # the message classes and DecodeError, for callers that import them from here: loaded on
    # first use (protobuf costs ~26 ms and ~3.5 MiB where the scanner never needs it)
    if name in ("XPlane", "XSpace"):
        from overlap.trace import protos

        return getattr(protos, name)
    if name == "DecodeError":
        from google.protobuf.message import DecodeError

        return DecodeError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# A plane's stat metadata of at least this many entries (read plainly, dense ids) stays in
# the file's bytes, each name decoded when first asked (`LazyStatNames`): real captures
# hold at most ~1.4k; a capture whose copies all differ in size, 100k a plane.
LAZY_STAT_NAMES = 4096
# The line-name prefixes the split marks each distinct line name by (`LineBlock.marks`)
_LINE_PREFIXES = tuple(p.encode() for p in STREAM_LINE_PREFIXES)
PAD = 16  # zero bytes after the data (the scanner never reads them; kept for callers)

def parse_space(data, n: int, strip_meta=None) -> tuple[Any, list[PlaneView], np.ndarray | None]:
    """Parse XSpace bytes `data[:n]` (followed by >= `PAD` zero bytes).

    Returns (skeleton XSpace message (upb's, or `skeleton.SpaceMsg` with the same fields),
    planes with their lines, the buffer as uint8 array).
    `strip_meta(plane name)`: planes whose event_metadata upb does not parse up front (read
    through `MetaTable`, and through upb only when asked for the whole map; the answer 2:
    the entries checked by the split, not decoded per plane, `groups.MetaRows`). Raises `Corrupt`
    or DecodeError on damaged input. Without the scanner (`SCANNER` None) upb parses the
    whole file; the buffer is then None."""
    if SCANNER is None:
        return _parse_space_upb(data, n)
    bad_before = BAD_STRINGS[0]
    try:
        return _parse_scanned(data, n, strip_meta)
    except BaseException:
        BAD_STRINGS[0] = bad_before  # nothing of a refused parse is counted
        raise


# Whether the split leaves bare planes out of the skeleton (`_scan.BARE_MODE`; tests turn it
# off to compare with the planes read through the skeleton)
BARE_PLANES = [True]


def _parse_scanned(data, n: int, strip_meta) -> tuple[Any, list[PlaneView], np.ndarray]:
    scanner: Any = SCANNER
    # (a stripped plane's entries decoded as they are checked: `MetaTable(decoded=)`)
    skel, planes, (rec, names, displays, bad_lines, codes), (ms, me), bounds, stat_names, \
        bare = scanner.split_space(data, n, strip_meta, LAZY_STAT_NAMES, _LINE_PREFIXES,
                                   BARE_PLANES[0])
    # (bare planes, `_scan.BARE_MODE`: not in the skeleton; their names and ids are these)
    bare_names, bare_ids = bare if bare is not None else (None, None)
    n_msgs = len(planes) if bare_names is None else bare_names.count(None)
    # a skeleton is small: decoded without loading protobuf where it can be (`skeleton`; the
    # event metadata entries it holds, located by the split, say what that costs); once
    # protobuf is loaded, upb is the faster decoder, and so it is for more planes than the
    # decoder's budget of plane fields (a plane's name is one: it would walk `MAX_FIELDS` of
    # them, 7-10 ms, to give up)
    lb, eb = (b.tolist() for b in bounds)
    xs = decode_space(skel, sum(eb[i + 1] - eb[i] for i, pl in enumerate(planes) if not pl[0])) \
        if "overlap.trace.protos" not in sys.modules and n_msgs <= SKELETON_FIELDS else None
    if xs is None:
        from overlap.trace.protos import XSpace

        xs = _strict_or_sanitized(XSpace, skel)
    if len(xs.planes) != n_msgs:
        raise Corrupt("plane count mismatch")
    a = np.frombuffer(data, np.uint8)
    stat_names = [_stat_names(got, a) for got in stat_names]
    block = LineBlock(Records(*rec), names, displays, a, codes=codes)
    BAD_STRINGS[0] += bad_lines
    out = []
    spans = (ms, me, eb)
    # (a bare plane's view is given its name, and the split's ids for its id; every other
    # plane its message, the next of the skeleton's, whose place there is its index less the
    # bare planes before it)
    msgs = iter(xs.planes)
    n_bare = 0
    for i, ((stripped, bad, meta, stats), name) in enumerate(
            zip(planes, bare_names if bare_names is not None else repeat(None))):
        if bad:  # each copy written was counted: count as upb reads the entries
            BAD_STRINGS[0] += _entries_bad_strings(a, ms[eb[i]:eb[i + 1]], me[eb[i]:eb[i + 1]])
        if name is None:
            m, of, sk = next(msgs), xs, i - n_bare if n_bare else i
        else:
            m, of, sk = name, bare_ids, -1
            n_bare += 1
        out.append(PlaneView(m, LineTable(block, lb[i], lb[i + 1]), a, spans, i, stripped,
                             meta, stat_names[i], of, stats, sk))
    return xs, out, a


def _stat_names(got, a: np.ndarray) -> "dict[int, str] | _SparseStatNames | LazyStatNames":
    """A plane's stat id -> name, in upb's order, from what `split_space` gives for it: None
    (no stat metadata: the shared empty map `_EMPTY`, not None, which has `Plane` read upb's
    empty map), the map, the
    entries' (id, name span) in the file's bytes `a` (a large map: `LazyStatNames`), or
    (the entries' field bytes, ids as written, the map) where the ids are not dense (ordered
    as upb would when first asked: `_SparseStatNames`) or the entries are not plain (map and
    ids None): upb reads the bytes then, as it read them inside the skeleton (a damaged
    entry refused, a replaced string counted, alike, as the file is parsed)."""
    if got is None:
        return _EMPTY
    if isinstance(got, dict):
        return got
    if isinstance(got, np.ndarray):
        return LazyStatNames(a, got)
    fields, written, plain = got
    if plain is not None:
        return _SparseStatNames(fields, written, plain)
    return _upb_stat_names(fields)


def _upb_stat_names(fields: bytes) -> dict[int, str]:
    """The stat names of a plane's stat_metadata fields (`fields`), as upb reads them."""
    return _upb_names(_upb_plane(fields))


def _upb_names(plane_msg) -> dict[int, str]:
    """A upb XPlane's stat metadata as `Plane.stat_names` reads it: id -> name, map order."""
    return {k: v.name for k, v in plane_msg.stat_metadata.items()}


class _SparseStatNames:
    """Plain stat metadata whose ids are not dense, put in upb's order when `Plane` first
    reads them (`skeleton.in_upb_order`, or upb itself where that cannot follow the installed
    protobuf). Why not at once: the order needs the installed protobuf's version (~0.4 ms to
    read) and the plane that has such ids (a GPU capture's call-stack plane) no rule reads."""

    __slots__ = ("fields", "written", "plain")

    def __init__(self, fields: bytes, written: list[int], plain: dict[int, str]) -> None:
        self.fields, self.written, self.plain = fields, written, plain

    def ordered(self) -> dict[int, str]:
        try:
            return in_upb_order(self.plain, self.written)
        except SkeletonRefused:
            return _upb_stat_names(self.fields)


def _entry_fields(buf: np.ndarray, ms: np.ndarray, me: np.ndarray) -> bytes:
    """The event_metadata entries [ms, me) of `buf` as XPlane field-4 bytes, for upb."""
    mv = buf.data
    return b"".join(b"\x22" + _enc_varint(int(q - p)) + mv[p:q]
                    for p, q in zip(ms.tolist(), me.tolist()))


def _entries_bad_strings(a: np.ndarray, ms: np.ndarray, me: np.ndarray) -> int:
    """Strings with invalid UTF-8 in these event_metadata entries as upb reads the map (a
    key written twice: the last entry; a value written twice: merged)."""
    got = sanitize(_entry_fields(a, ms, me), "XPlane")
    if got is None:
        raise Corrupt("event metadata: damaged")
    return got[1]


def check_lines(*pvs: PlaneView) -> None:
    """Check the events of the planes' lines no rule decoded, as upb would have (`Corrupt`
    where it would refuse them), counting their string stats with invalid UTF-8: so a file
    is refused, and its strings counted, alike whichever lines the rules read. The lines of
    one `LineBlock` are checked in one pass (100k small planes: one call, not 100k)."""
    by_block: dict[int, tuple[LineBlock, list[tuple[int, int]]]] = {}
    ts = [pv.lines for pv in pvs]
    for block, a, b in adjacent_runs([t.block for t in ts], [t.a for t in ts],
                                     [t.b for t in ts]):
        by_block.setdefault(id(block), (block, []))[1].append((a, b))
    for block, runs in by_block.values():
        BAD_STRINGS[0] += block.check(runs, SCANNER)


def _parse_space_upb(data, n: int) -> tuple[Any, list[PlaneView], None]:
    if _scan is None and not _WARNED[0]:
        _WARNED[0] = True
        import logging  # here: ~2 ms of start-up, for a warning a scanner build never gives

        logging.getLogger("overlap").warning(
            "overlap: the compiled XSpace scanner (overlap.trace._scan) was not built at "
            "install (no C compiler?); reading with protobuf, several times slower")
    from overlap.trace.protos import XSpace

    bad_before = BAD_STRINGS[0]
    try:
        xs = _strict_or_sanitized(XSpace, bytes(memoryview(data)[:n]))
    except BaseException:
        BAD_STRINGS[0] = bad_before
        raise
    # one block for all planes, as the scanner's (`merge_rows` reads one block at a time)
    block = LineBlock.of_lines([upb_line(ln) for pl in xs.planes for ln in pl.lines])
    out, a = [], 0
    for pl in xs.planes:
        out.append(PlaneView(pl, LineTable(block, a, a + len(pl.lines))))
        a += len(pl.lines)
    return xs, out, None


def padded(raw: bytes) -> bytearray:
    buf = bytearray(len(raw) + PAD)
    buf[: len(raw)] = raw
    return buf


def _group_spec(groups, presence=None, listed=None) -> tuple[tuple | None, list[frozenset]]:
    """`decode_events`'s `groups` argument from sets of stat ids (keys): `groups` interned,
    `presence` only tested (flag 1), `listed` interned until most values are new, then
    listed (flag 2: a value may repeat in the table); and the sets kept: empty sets, and
    sets sharing an id with an earlier one, are left out (their questions are answered from
    records)."""
    sets: list[frozenset] = []
    only: list[int] = []
    used: set[int] = set()
    for flag, gs in ((0, groups), (1, presence), (2, listed)):
        for g in gs or ():
            ks = ids_key(g)
            if ks and used.isdisjoint(ks):  # (a set given twice is left out the second time)
                sets.append(ks)
                only.append(flag)
                used |= ks
    if not sets:
        return None, []
    # the keys ascending, each with its set's index (the sets are disjoint: one each), by
    # numpy: a sort of Python ints and a dict of every key were ~3% of a report of 10k GPU
    # planes (50k keys a group's line)
    parts = [np.fromiter(ks, np.int64, len(ks)) for ks in sets]
    keys = np.concatenate(parts)
    of = np.repeat(np.arange(len(sets), dtype=np.int32), [len(p) for p in parts])
    order = np.argsort(keys, kind="stable")
    return (keys[order], of[order], len(sets), np.array(only, np.uint8)), sets


class LineEvents:
    """One line's positioned events as arrays (`mids`, `starts`, `durs`), and their stats,
    decoded in one pass by the scanner (or from upb's messages where it was not built).

    Stats come two ways. `groups`: sets of stat ids (keys, in a `PlaneGroup`), one per stat
    name a rule reads: per set, each event's first stat of the set as a code into the set's
    distinct values (`first_codes`), interned while decoding: 4 bytes per event and set, one
    Python object per distinct value. `wanted`: stat ids kept as typed records (event, stat
    id, value), for questions about other sets of ids (a union of ids of several names).

    `skip_mids`: metadata ids whose events can never give a row: those events are not kept
    at all (no row, no stats: the caller must never ask for them; `mids`, `n` and every
    index count the other events), and their impossible times are counted as a kept
    event's are (a host line is mostly Python-tracer frames: 836k of the 843k events of a
    1M-event TPU capture, whose rows cost ~20 ms to write and pass over). `keep_if` (mids,
    sids): events of those mids are kept only where they carry one of those stats (3.1M CUDA
    API calls on a real H200 host line, a few thousand marking steps). Not with `plane_of`.

    `wanted` and `groups` save memory and time on lines of many stats per event; a question
    about other ids is still answered exactly: the line's stats are decoded again for them
    (one more pass), so a rule that reads a stat the caller did not list is slower, never
    wrong."""

    def __init__(self, line, base_ps, skip_mids=None, plane_of: np.ndarray | None = None,
                 wanted=None, groups: Iterable[Iterable[int]] | None = None,
                 presence: Iterable[Iterable[int]] | None = None,
                 keep_if: tuple[Iterable[int], Iterable[int]] | None = None,
                 listed: Iterable[Iterable[int]] | None = None):
        """`base_ps`: the line's origin, or one per event (a `merge_lines` segment);
        `plane_of`: per event, its plane's index in a `PlaneGroup` (metadata and stat ids then
        become that group's keys); `presence`: like `groups`, for sets of ids only ever
        tested (`has_stat`): nothing is interned (a value asked for comes from records);
        `listed`: like `groups`, for sets whose readers take a table of values that may
        repeat (`interned`): interned until most values are new, then each listed (a million
        copies, each its own details text, were a million lookups that found nothing)."""
        self.buf = line.buf  # the whole file's bytes (None from upb); values are read there
        self._line, self._skip, self._plane_of = line, skip_mids, plane_of
        self._cond = self._need = None
        if keep_if is not None:
            cond = sorted_unique(np.fromiter(keep_if[0], np.int64))
            if len(cond):
                if plane_of is not None:
                    raise ValueError("keep_if is not read with plane_of")
                self._cond = cond
                self._need = sorted_unique(np.fromiter(keep_if[1], np.int64))
        want = None if wanted is None else sorted_unique(np.fromiter(wanted, np.int64))
        spec, sets = _group_spec(groups, presence, listed)
        mid, off, dur, agg, st, (codes, tables), bad, times = self._decode(want, spec)
        # counted once per line: a line is decoded again only for other stat ids
        if not getattr(line, "decoded", True):
            BAD_STRINGS[0] += bad
            line.decoded = True
            for part in getattr(line, "parts", None) or ():
                part.decoded = True
        # per row, its event's index among the line's events (None: every event has a row);
        # how many rows are aggregated or of an impossible time
        self._raw, neg, big, odd = times
        if neg or big:  # skipped events left out (`skip_mids`): their times counted
            INVALID_EVENTS[0] += neg + big
            INVALID_REASONS[DROP_NEGATIVE] += neg
            INVALID_REASONS[DROP_RANGE] += big
        if self._raw is not None:
            if isinstance(base_ps, np.ndarray):
                base_ps = base_ps[self._raw]
            if plane_of is not None:
                plane_of = plane_of[self._raw]
        # Times a profiler cannot have written (negative durations, offsets beyond 26 days,
        # wrapped uint64s) are dropped and counted, never passed on to become impossible spans.
        # The decoder counted the rows aggregated or of such a time (`odd`): where there is
        # none, no pass over the rows (~4 ms per million).
        keep = None
        if odd:
            invalid = (off < 0) | (off >= TIME_LIMIT_PS) | (dur < 0) | (dur >= TIME_LIMIT_PS)
            invalid &= ~agg
            if invalid.any():
                INVALID_EVENTS[0] += int(invalid.sum())
                neg = int((invalid & ((off < 0) | (dur < 0))).sum())
                INVALID_REASONS[DROP_NEGATIVE] += neg
                INVALID_REASONS[DROP_RANGE] += int(invalid.sum()) - neg
                agg |= invalid
            keep = ~agg
        self.all_positioned = keep is None or bool(keep.all())
        self._keep = None if self.all_positioned else keep
        if plane_of is not None:
            mid = _group_keys(plane_of, mid)
        if self.all_positioned:
            off += base_ps  # in place: the offsets are ours, and a copy is 8 bytes per event
            self.mids, self.starts, self.durs = mid, off, dur
            self._plane = plane_of
        else:
            self.mids = mid[keep]
            self.starts = off[keep] + (base_ps[keep] if isinstance(base_ps, np.ndarray)
                                       else base_ps)
            self.durs = dur[keep]
            self._plane = None if plane_of is None else plane_of[keep]
            codes = codes[:, keep]
        del mid, off, dur
        if codes.size:
            # Each group's codes in the narrowest dtype its table allows (int8 for the few
            # distinct values most stats take): the decoder writes int32 rows, 4 bytes per
            # event per group, held with the line through the read's peak (a million kernels
            # in 4 groups: 15 MB -> 4 MB). Code -1 (no such stat) fits every signed dtype;
            # consumers that add codes widen first (`stat_codes`).
            codes = narrow_codes(codes, max(len(t["kind"]) for t in tables))
        self.n = len(self.mids)
        # per set of ids: (each event's code, the distinct values' kind/ival/vpos or obj)
        self._groups: dict[frozenset, tuple[np.ndarray, dict]] = {
            ks: (codes[j], tables[j]) for j, ks in enumerate(sets)}
        # (presence-only sets are not; listed ones are, their values perhaps repeated)
        self._interned = {ks for j, ks in enumerate(sets) if spec[3][j] != 1} if spec else set()
        self._first: dict[frozenset, tuple] = {}  # first_codes' answers
        self._sparse: dict[frozenset, tuple] = {}  # codes_at's: (names, events, values)
        # stat batches: (the ids decoded, None for all; their records)
        self._batches: list[tuple[frozenset | None, dict]] = [
            (None if want is None else frozenset(want.tolist()), self._kept_stats(st))]

    def _decode(self, want: np.ndarray | None, groups: tuple | None = None) -> tuple:
        line = self._line
        # skipped events keep no row (`skip_mids`), on both decoders: every decode of the line
        # numbers its rows alike
        drop = bool(self._skip) or self._cond is not None
        if line.events is not None:
            return _upb_events(line.events, self._skip, want, self._plane_of, groups,
                               TIME_LIMIT_PS, drop, self._cond, self._need)
        skip = sorted_unique(np.fromiter(self._skip, np.int64)) if self._skip else None
        return _scan.decode_events(line.buf, line.pay_s, line.pay_e, line.n_events, skip,
                                   want, self._plane_of, GROUP_STRIDE, groups, TIME_LIMIT_PS,
                                   drop, self._cond, self._need, GROUP_IDS)

    def _kept_stats(self, st: dict) -> dict:
        """Stat records of the events kept (indices renumbered)."""
        keep = self._keep
        if keep is not None and len(st["ev"]):
            k = keep[st["ev"]]
            remap = (np.cumsum(keep) - 1).astype(st["ev"].dtype)  # old index -> new
            st = {name: v[k] for name, v in st.items()}
            st["ev"] = remap[st["ev"]]
        return st

    def _stats(self, sids) -> dict:
        """Records holding at least every stat of `sids` (each event's in the order written)."""
        need = ids_key(sids)
        for have, st in self._batches:
            if have is None or have is need or need <= have:
                return st
        st = self._kept_stats(self._decode(sorted_unique(np.fromiter(need, np.int64)))[4])
        self._batches.append((need, st))
        return st

    def has_stat(self, sids) -> np.ndarray:
        """Per event: does it carry a stat with one of these metadata ids?"""
        out = np.zeros(self.n, bool)
        if not (self.n and sids):
            return out
        need = ids_key(sids)
        # (a set of the groups' own: its codes, no union of it made and compared, a group of
        # 10k planes' keys)
        grp = self._groups.get(need)
        if grp is not None:
            out |= grp[0] >= 0
            return out
        parts = [ks for ks in self._groups if ks <= need]
        if parts and frozenset().union(*parts) == need:  # answered by the groups' codes
            for ks in parts:
                out |= self._groups[ks][0] >= 0
            return out
        st = self._stats(need)
        # (`isin_ids`: a few ids compared one by one, not `np.isin`'s ~30 us a call, a TPU
        # chip's)
        out[st["ev"][isin_ids(st["sid"], need)]] = True
        return out

    def first_codes(self, sids, stat_names: Mapping[int, str]) -> tuple[np.ndarray, np.ndarray]:
        """(per event, a code into the values of its first stat with one of `sids`, -1 where
        it has none; the values as objects, as `Plane.stats` gives them). Where `sids` is one
        of the constructor's `groups`, one value per distinct value, else one per event."""
        if not self.n or not sids:
            return np.full(self.n, -1, np.int32), np.zeros(0, object)
        key = ids_key(sids)
        got = self._first.get(key)
        if got is not None and got[0] is stat_names:
            return got[1], got[2]
        grp = self._groups.get(key) if key in self._interned else None
        if grp is not None:
            # refs are already keys of their plane in a grouped read: no plane to apply
            codes, vals = grp[0], _stat_objects(self.buf, grp[1], stat_names)
        else:
            sparse = self._sparse.get(key)  # `codes_at` read these records already
            evs, vals = (sparse[1], sparse[2]) if sparse is not None and sparse[0] is stat_names \
                else self._first_records(key, stat_names)
            codes = np.full(self.n, -1, np.int64)
            codes[evs] = np.arange(len(evs))
        # rules ask for one stat for several sets of events (copies, kernels, vendors' checks)
        self._first[key] = (stat_names, codes, vals)
        return codes, vals

    def interned(self, sids) -> tuple[np.ndarray, dict] | None:
        """For an interned set of `groups` (or `listed`) the scanner decoded: (per event its
        code, -1: none; the values' records, kind/ival/vpos in `buf`: distinct, but for a
        listed set where a value may repeat), no object each; else None."""
        key = ids_key(sids)
        return self._groups[key] if self.buf is not None and key in self._interned else None

    def forget(self, sids) -> None:
        """Keep nothing of stats `sids` (a caller done with them: asked again, decoded again)."""
        key = ids_key(sids)
        for d in (self._groups, self._first, self._sparse):
            d.pop(key, None)
        self._interned.discard(key)

    def codes_at(self, sids, stat_names: Mapping[int, str],
                 idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """`first_codes` for events `idx` only: (their codes, the values). Where the stat comes
        from records, no code per event of the line is made (8 bytes per event, and its
        page faults, on a line of a million events for a few thousand asked)."""
        key = ids_key(sids)
        got = self._first.get(key)
        if (got is not None and got[0] is stat_names) or key in self._interned:
            codes, vals = self.first_codes(sids, stat_names)
            return codes[idx], vals
        sparse = self._sparse.get(key)
        if sparse is None or sparse[0] is not stat_names:
            sparse = self._sparse[key] = (stat_names, *self._first_records(key, stat_names))
        evs, vals = sparse[1], sparse[2]
        if not len(evs):
            return np.full(len(idx), -1, np.int64), vals
        pos = np.minimum(np.searchsorted(evs, idx), len(evs) - 1)
        return np.where(evs[pos] == idx, pos, -1), vals

    def _first_records(self, key: frozenset, stat_names) -> tuple[np.ndarray, np.ndarray]:
        st = self._stats(key)
        sel = np.flatnonzero(isin_ids(st["sid"], key))
        # records are in event order, each event's as written: the first is its earliest stat
        # (where the event index changes: no sort)
        ev_sel = st["ev"][sel]
        first = np.flatnonzero(np.concatenate((np.ones(min(len(ev_sel), 1), bool),
                                               ev_sel[1:] != ev_sel[:-1])))
        evs, rec = ev_sel[first].astype(np.int64), sel[first]
        plane = None if self._plane is None else self._plane[evs]
        vals = _stat_objects(self.buf, {k: st[k][rec] for k in _VALUE_COLS if k in st},
                             stat_names, plane)
        return evs, vals

    def first_stat(self, sids, stat_names: Mapping[int, str]) -> tuple[np.ndarray, np.ndarray]:
        """(event indices, values as objects) of the first stat with one of `sids` per event."""
        codes, vals = self.first_codes(sids, stat_names)
        evs = np.flatnonzero(codes >= 0)
        return evs, vals[codes[evs]]

    def ints_of(self, sid_sets, mids, others=None, at: np.ndarray | None = None,
                at_only: bool = False) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per set of stat ids: (per event, its first stat with one of them as int64; whether
        it has one that is an integer: int64, or uint64 below 2**63), for the events of
        metadata ids `mids` only (no value elsewhere). Typed, no object per event. Read in one
        more pass over the line that decodes those events only (the scanner's
        `decode_events_at` steps over the others by their length; upb's records keep no other
        event's stats): the TPU device clock of copy boundaries, a few events of a line of a
        million, where `wanted` would keep every event's; unless the constructor kept these
        ids. `others`: the line's other metadata ids where the caller has them (else found
        here; upb only). `at`: where the caller knows them, the (sorted) indices of the
        events to read, each of one of `mids`: values there only; with `at_only`, the two
        arrays hold those events' only, in `at`'s order (no two arrays of the line's length
        per set: 17 MB of zeros on a TPU op line of a million events, for 100k asked). Not
        for a `PlaneGroup` read.
        (Added for overlap.trace.tpu's device clock; see notes/32-34.md.)"""
        sets = [ids_key(sids) for sids in sid_sets]
        if at_only and at is None:
            raise ValueError("at_only needs at")
        size = len(at) if at_only and at is not None else self.n
        out = [(np.zeros(size, np.int64), np.zeros(size, bool)) for _ in sets]
        need = frozenset().union(*sets)
        mids = np.asarray(mids, np.int64)  # (sorted where a rule needs it: not with `at`)
        if not (self.n and need and len(mids)) or self._plane_of is not None:
            return out
        st = next((s for have, s in self._batches if have is None or need <= have), None)
        if st is None:
            want = sorted_unique(np.fromiter(need, np.int64))
            line = self._line
            if line.events is not None:
                skip = (np.setdiff1d(sorted_unique(self.mids), mids) if others is None
                        else sorted_unique(np.asarray(others, np.int64)))
                st = _upb_events(line.events, skip.tolist(), want, None)[4]
                if self._raw is not None:  # the line's event indices -> rows (kept events')
                    st = _rows_of(st, self._raw)
                st = self._kept_stats(st)
            else:
                # the scanner decodes these events only, stepping over the others by length
                at = (np.flatnonzero(np.isin(self.mids, mids)) if at is None
                      else np.ascontiguousarray(at, np.int64))  # the scanner takes int64[::1]
                raw_at = at if self._keep is None else np.flatnonzero(self._keep)[at]
                if self._raw is not None:  # rows -> the line's event indices
                    raw_at = self._raw[raw_at]
                if at_only:  # the values in the walk itself, no records (`intstats`)
                    got = ints_at_scanned(_scan, line, np.ascontiguousarray(raw_at, np.int64),
                                          sets)
                    if got is not None:
                        return got
                st = dict(_scan.decode_events_at(line.buf, line.pay_s, line.pay_e, raw_at,
                                                 want))
                if raw_at is not at:  # (else the two numberings are one)
                    # event indices among the line's events -> among the events kept here
                    st["ev"] = at[np.searchsorted(raw_at, st["ev"])].astype(np.int32)
        if at is None:
            def ev_ok(ev):
                return np.isin(self.mids[ev], mids), None
        else:
            def ev_ok(ev):  # the events asked for (`at` is sorted): where each is in `at`
                pos = np.minimum(np.searchsorted(at, ev), max(len(at) - 1, 0))
                return (at[pos] == ev if len(at) else np.zeros(len(ev), bool)), pos
        ints_from_records(st, sets, out, ev_ok, at_only)
        return out

    def kept(self, per_event: Any) -> Any:
        """A per-event array of the line(s) given to the constructor, for the events kept here
        (events with no position or an impossible time are dropped, and skipped ones:
        `skip_mids`); scalars pass through."""
        if not isinstance(per_event, np.ndarray):
            return per_event
        if self._raw is not None:
            per_event = per_event[self._raw]
        return per_event if self._keep is None else per_event[self._keep]


_VALUE_COLS = ("kind", "ival", "vpos", "obj")  # what `_stat_objects` reads of a record
