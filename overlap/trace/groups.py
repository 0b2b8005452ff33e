"""Many small planes read as one: `PlaneGroup` (their lookups keyed `plane index *
GROUP_STRIDE + id`), `groupable` (may a plane join one), and `MetaRows`, the event_metadata
entries of many planes of one parse decoded at once, from which both are answered without a
upb map per plane.

Why `MetaRows`: a capture of 100k one-line GPU planes (the fuzz campaign's shape; issue 32)
asked every plane's upb map for its key range (`groupable`), then each entry for its name and
stats (`gpu._gpu_meta_kinds`) and each event's metadata for its name (`PlaneGroup.name`):
~1 us a property read, ~0.3 s of that capture's 1.4 s. One `decode_meta` over all the planes'
entries answers the three for every plane with numpy. Semantics are the map's: the entries
are the ones upb parsed (the skeleton's), and where the decode would read any of them
otherwise than upb (`decode_meta`'s `ok`), or a name is not valid UTF-8, every plane is read
through upb as before.
"""

from __future__ import annotations

import importlib
from itertools import chain
from typing import Any

import numpy as np

from overlap.arrays import ranges
from overlap.trace.metatable import MetaTable, names_of
from overlap.trace.statids import GroupStatIds, GroupStatNames, LazyStatNames
from overlap.trace.values import GROUP_IDS, GROUP_STRIDE

try:
    _scan: Any = importlib.import_module("overlap.trace._scan")
except ImportError:  # no C compiler at install: every plane through upb
    _scan = None

# Planes from which their metadata is decoded at once (`MetaRows`): below it, a upb map a
# plane costs less than the arrays (a real host has 1-16 device planes)
MANY_PLANES = 64
_NONE = np.zeros(0, np.int64)


def groupable(P) -> bool:
    """Can this plane's ids be keyed inside a `PlaneGroup`? (A plane whose entries upb never
    parsed: its table's keys, not a map parsed now.)"""
    t = P.table() if getattr(P.plane, "meta_stripped", False) else None
    return _in_stride(t.keys if t is not None else P.meta) and _in_stride(P.stat_names)


def _in_stride(keys) -> bool:
    """Every key of the map (or int64 array) in [0, GROUP_IDS) (min and max over the map
    itself, in C: a generator over `keys()`, a Python-level view on upb's map, cost ~2 us a
    plane, 100k planes in a capture of small ones; a `LazyStatNames`: its ids' array, not
    a Python int per id, ~65 ms a million stat names)."""
    if type(keys) is LazyStatNames:
        keys = keys.key_array()
    if isinstance(keys, np.ndarray):
        return not keys.size or bool(keys.min() >= 0 and keys.max() < GROUP_IDS)
    return not keys or (min(keys) >= 0 and max(keys) < GROUP_IDS)


def groupable_all(planes: list) -> tuple[list[bool], MetaRows | None]:
    """`groupable` of each plane, and the planes' `MetaRows` where there are many planes (or
    any plane's entries were kept from upb undecoded: `reader._strip_many`'s mode 2) and their
    entries decode as upb reads them (else None, and each plane's map or table answers)."""
    rows = MetaRows.of(planes) if len(planes) >= MANY_PLANES or any(
        getattr(P.plane, "meta_stripped", False) == 2 for P in planes) else None
    if rows is None:
        return [groupable(P) for P in planes], None
    # (flags as arrays, one list made: 100k small planes' lists of flags were each 0.8 MB)
    return (rows.keys_in_stride() & _maps_in_stride([P.stat_names for P in planes])).tolist(), \
        rows


def _maps_in_stride(maps: list) -> np.ndarray:
    """`_in_stride` of each plane's stat map (bool per map). Where every one is a dict (the
    split's) of int64 keys, their keys tested at once: a min and a max over each plane's ~20
    keys were ~3.5% of a report of 10k GPU planes' instructions. Else map by map, a map
    shared by planes (the empty one of 100k small planes) tested once."""
    n = len(maps)
    if set(map(type, maps)) <= {dict}:
        sizes = np.fromiter(map(len, maps), np.int64, n)
        try:
            keys = np.fromiter(chain.from_iterable(maps), np.int64, int(sizes.sum()))
        except (OverflowError, TypeError):  # (a key no int64 holds: tested map by map)
            keys = None
        if keys is not None:
            return _runs_in_ids(keys, sizes)
    once: dict[int, bool] = {}

    def ok(names) -> bool:
        got = once.get(id(names))
        if got is None:
            got = once[id(names)] = _in_stride(names)
        return got
    return np.fromiter(map(ok, maps), bool, n)


def _runs_in_ids(keys: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Per plane, whose `counts[i]` keys lie in turn in `keys` (int64), whether every one is
    in [0, GROUP_IDS): the test of both the planes' event metadata (`MetaRows`) and their
    stat maps (`_maps_in_stride`)."""
    out = np.ones(len(counts), bool)
    bad = np.flatnonzero((keys < 0) | (keys >= GROUP_IDS))
    if bad.size:
        out[np.repeat(np.arange(len(counts)), counts)[bad]] = False
    return out


class MetaRows:
    """The event_metadata entries of planes of one parse (`wire.PlaneView`s),
    decoded at once (`_scan.decode_meta`): per entry its key and its name's, display name's
    and value's spans (`d`, int32 where the buffer is under 2 GiB), in plane order;
    `first` and `count` each plane's rows. Made by `of` only where every entry decodes as
    upb read it."""

    def __init__(self, buf: np.ndarray, d: dict, count: np.ndarray) -> None:
        self.buf, self.d, self.count = buf, d, count
        self.first = np.cumsum(count) - count

    @classmethod
    def of(cls, planes: list) -> MetaRows | None:
        """The entries of `planes` (`wire.Plane`s), or None where they are not all views of
        one parse, or any entry decodes otherwise than upb reads it."""
        if _scan is None or not planes:
            return None
        pvs = [P.plane for P in planes]
        spans: Any = getattr(pvs[0], "_spans", None)
        buf = getattr(pvs[0], "buf", None)
        if spans is None or buf is None:
            return None
        for pv in pvs:
            if getattr(pv, "_spans", None) is not spans or pv.buf is not buf:
                return None
        # (entries kept out of upb's skeleton were checked by the split as upb would: their
        # stats are stepped over; any other plane's are checked here)
        checked = all(pv.meta_stripped for pv in pvs)
        ms, me, bounds = spans
        eb = np.asarray(bounds, np.int64)
        at = np.fromiter((pv._at for pv in pvs), np.int64, len(pvs))
        lo = eb[at]
        count = eb[at + 1] - lo
        rows = ranges(lo, count)
        ms, me = ms[rows].astype(np.int64, copy=False), me[rows].astype(np.int64, copy=False)
        # (not narrowed here: where keys strictly descend, a narrow decode reverses the rows)
        d = _scan.decode_meta(buf, ms, me, narrow=False, checked=checked)
        if not d["ok"]:
            return None
        if len(buf) <= np.iinfo(np.int32).max:  # (kept as the tables keep them: `MetaTable`)
            for c in ("name", "disp", "value"):
                d[c] = d[c].astype(np.int32)
        return cls(buf, d, count)

    def keys_in_stride(self) -> np.ndarray:
        """Per plane: every key of its entries in [0, GROUP_IDS) (`_in_stride` of its
        map: the map's keys are its entries' keys)."""
        return _runs_in_ids(self.d["key"], self.count)

    def table(self, idx: np.ndarray) -> MetaTable | None:
        """The entries of planes `idx` (ascending indices, each plane's keys in stride) as one
        `MetaTable` keyed as their `PlaneGroup` (`idx[j] * GROUP_STRIDE + id`): of a key
        written twice in a plane, its last entry, as in the plane's own map."""
        n = self.count[idx]
        sel = ranges(self.first[idx], n)
        d = self.d
        key = d["key"][sel] + np.repeat(np.arange(len(idx), dtype=np.int64) * GROUP_STRIDE, n)
        got = {"ok": True, "key": key, "name": d["name"][:, sel], "disp": d["disp"][:, sel],
               "value": d["value"][:, sel], "reversed": False}
        # (the entries' own spans are not needed: the table is made of what was decoded)
        t = MetaTable(self.buf, _NONE, _NONE, checked=True, decoded=got)
        return t if t.ok else None


class PlaneGroup:
    """Several planes' lookups as one `Plane`, keyed `plane index * GROUP_STRIDE + id`.

    Why: a capture with thousands of device planes of a few events each (one per GPU of a
    large job, or another producer's layout) would otherwise pay numpy's fixed cost per line,
    milliseconds per plane. Small lines of many planes are read as one `merge_lines` segment
    against this group instead. `rows`: (the planes' `MetaRows`, each plane's index there),
    where their entries were decoded at once: names and kinds are then read from one table
    (`table`), not from each plane's upb map.
    """

    def __init__(self, planes: list, rows: tuple[MetaRows, np.ndarray] | None = None,
                 asked: tuple[str, ...] = ()):
        self.planes = planes
        self.stat_names = GroupStatNames(planes)
        self.stat_ids = GroupStatIds(planes, asked)  # (`asked`: the stat names read of it)
        self._rows = rows
        self._table: MetaTable | None | bool = False  # (built on first use)

    def table(self) -> MetaTable | None:
        """The group's metadata as one `MetaTable` (keys as the group's), where its planes'
        entries were decoded at once (else None)."""
        if self._table is False:
            self._table = self._rows[0].table(self._rows[1]) if self._rows is not None \
                else None
        return self._table if isinstance(self._table, MetaTable) else None

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

    def names(self, mids) -> list[str]:
        """`name` of many keys at once (from `table` where there is one)."""
        return names_of(self.table(), mids, False, self.name)
