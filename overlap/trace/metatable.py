"""`MetaTable`: a plane's event_metadata entries decoded as arrays by the compiled scanner
(see the class)."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

import numpy as np

from overlap.arrays import sorted_unique
from overlap.trace.values import _K_I64, _K_U64, GROUP_STRIDE, INT64_MAX, _stat_objects, as_id

try:
    _scan: Any = importlib.import_module("overlap.trace._scan")
except ImportError:  # no C compiler at install: planes read their metadata through upb
    _scan = None


class MetaTable:
    """A plane's event_metadata entries as arrays, decoded from the file's bytes by the
    scanner, so that the names and stats of many metadata are read at once (`Plane.names`,
    `Plane.meta_columns`).

    Why: reading one entry through upb costs ~1.3 us for a name and 10-15 us for its stats (the
    map lookup, a wrapper per XStat, a oneof test per value); a capture where every copy is its
    own op has tens of thousands of entries the reader needs. Here every entry is decoded once
    and only wanted values become Python objects.

    What is kept: per entry its key and where its name, display name and value message lie
    in the buffer. Stats are checked when the table is built (`decode_meta`) and decoded only
    for the entries and stat ids a rule asks about (`_stats`, `decode_meta_stats`): on the
    many-ops capture the 540k records of 108k entries took 11 MiB kept (16 while built) at the
    read's peak, for rules that read 1-3 stats of a third of the entries.

    Semantics are upb's: of a key written twice the last entry counts; of a string field
    written twice the last value; within an entry the first stat of a name wins (as
    `Plane.stats`). An entry field other than the int64 key and the value message, a value
    written twice (upb merges the messages), or damage makes the table refuse (`ok` False):
    callers then read through upb.
    """

    def __init__(self, buf: np.ndarray, ms: np.ndarray, me: np.ndarray, checked: bool = False,
                 decoded: dict | None = None):
        """`checked`: every entry [ms, me) was checked already by `split_space` (the plane's
        metadata was stripped from upb's parse: `PlaneView.meta_stripped`), stats included:
        they are stepped over, not checked again (`decode_meta`'s `checked`). `decoded`:
        `decode_meta` of these entries as `split_space` made it while checking them (with
        `narrow` as here), so not walked again."""
        self.buf = buf
        # spans as int32 where the buffer is under 2 GiB (`_narrow_spans`), and a table
        # written newest first reversed in place by the scanner: no copies of the columns
        d = decoded if decoded is not None and checked else \
            _scan.decode_meta(buf, np.ascontiguousarray(ms, np.int64),
                              np.ascontiguousarray(me, np.int64), narrow=self._narrow_ok(),
                              checked=checked)
        self.ok = bool(d["ok"])
        self.keys = np.zeros(0, np.int64)
        self._dense = False  # keys are a run of consecutive ids (`_rows`)
        if not self.ok:
            return
        key = d["key"]
        n = len(key)
        up = n < 2 or bool((key[1:] > key[:-1]).all())
        if up or bool((key[1:] < key[:-1]).all()):
            # each key once, in order or in reverse order (what producers write: upb
            # serializes a map newest first): every entry is kept as decoded, without a sort
            if up:
                self.keys = key
                self.name, self.disp, self.value = d["name"], d["disp"], d["value"]
            else:
                self.keys = key[::-1].copy()
                self.name, self.disp, self.value = (d[c][:, ::-1].copy()
                                                    for c in ("name", "disp", "value"))
            # ids 1..n (or any run without gaps): a row is the id minus the first, no search
            self._dense = bool(n) and int(self.keys[-1]) - int(self.keys[0]) == n - 1
            self._narrow_spans()
            return
        # the last entry of each key: the last of its run in a stable sort (np.unique would
        # take the same, slower)
        o = np.argsort(key, kind="stable")
        ks = key[o]
        end = np.ones(n, bool)
        end[:-1] = ks[1:] != ks[:-1]
        self.keys, last = ks[end], o[end]
        self.name = d["name"][:, last]  # [start; end] of the name ("" where absent)
        self.disp = d["disp"][:, last]
        self.value = d["value"][:, last]
        self._narrow_spans()

    def _narrow_ok(self) -> bool:
        """Whether every position in the buffer fits an int32 (under 2 GiB)."""
        return len(self.buf) <= np.iinfo(np.int32).max

    def _narrow_spans(self) -> None:
        """The spans as int32 where the buffer is under 2 GiB (every position fits): 12 bytes
        less per entry for as long as the table lives (108k entries on the many-ops capture,
        held at the read's peak). (The scanner gives them so: no copy then.)"""
        if self._narrow_ok():
            self.name, self.disp, self.value = (a.astype(np.int32, copy=False)
                                                for a in (self.name, self.disp, self.value))

    def _stats(self, ent: np.ndarray, sids) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """The stat records of the entries `ent` (ascending, distinct entry indices) whose
        stat id is one of `sids`: (per record its position in `ent`, int64; the records' sid,
        kind, ival, vpos), each entry's in the order written."""
        d = _scan.decode_meta_stats(self.buf, self.value[0, ent].astype(np.int64),
                                    self.value[1, ent].astype(np.int64),
                                    np.fromiter(sids, np.int64))
        return d["ev"].astype(np.int64), {c: d[c] for c in ("sid", "kind", "ival", "vpos")}

    def _entries(self, mids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(positions in `mids` that have an entry, the distinct entries among them ascending,
        each position's index into those)."""
        rows, ent = self._rows(mids)
        if not rows.size:
            return rows, ent, ent
        if len(ent) < 2 or bool((ent[1:] > ent[:-1]).all()):  # ids asked once, in order
            return rows, ent, np.arange(len(ent))
        u = sorted_unique(ent)
        return rows, u, np.searchsorted(u, ent)

    def _rows(self, mids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(positions in `mids` that have an entry, those entries' indices)."""
        if not len(self.keys):
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        if self._dense:
            k0, n = int(self.keys[0]), len(self.keys)
            if len(mids) and int(mids.min()) >= k0 and int(mids.max()) - k0 < n:
                # every id within the run of keys: each has its entry, the id minus the
                # first key (no clip, no gather of keys and no compare per id)
                return np.arange(len(mids)), mids - k0
            # the candidate row by a subtraction (checked below: exact, even where it wraps
            # around)
            i = np.clip(mids - self.keys[0], 0, len(self.keys) - 1)
        else:
            i = np.minimum(np.searchsorted(self.keys, mids), len(self.keys) - 1)
        rows = np.flatnonzero(self.keys[i] == mids)
        return rows, (i if len(rows) == len(i) else i[rows])  # (every id found: no take)

    def spans(self, mids, display: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Where the name (or display name) of each id of `mids` lies in `buf`: (starts,
        ends), an empty span where there is no entry."""
        mids = np.asarray(mids, np.int64)
        pos = self.disp if display else self.name
        rows, ent = self._rows(mids)
        if len(rows) == len(mids):  # every id has an entry: its span, no empty ones to leave
            return pos[0, ent].astype(np.int64), pos[1, ent].astype(np.int64)
        fs = np.zeros(len(mids), np.int64)
        fe = np.zeros(len(mids), np.int64)
        fs[rows], fe[rows] = pos[0, ent], pos[1, ent]
        return fs, fe

    def gather(self, fs: np.ndarray, fe: np.ndarray, sep: int | None = None) -> np.ndarray:
        """The bytes of the spans [fs, fe) of `buf`, concatenated (with the byte `sep` after
        each span where given), as uint8 (`gather_spans`)."""
        return MetaTable.gather_spans(self.buf, fs, fe, sep)

    @staticmethod
    def gather_spans(buf: np.ndarray, fs: np.ndarray, fe: np.ndarray,
                     sep: int | None = None) -> np.ndarray:
        """The bytes of the spans [fs, fe) of the uint8 array `buf`, concatenated (with the
        byte `sep` after each span where given). Read-only where the spans are long and the
        scanner was not built.

        How: the scanner's `gather_spans` (a memcpy per span) where it is built; else short
        spans (names) by one index array built by a cumulative sum and one take, ~10 ns per
        byte (8 bytes of index per byte gathered); long ones (HLO texts) by joining buffer
        slices, ~0.3 us per span. A Python str per value would cost more than the rules
        applied to it."""
        if _scan is not None:  # one memcpy per span, no index array or slice objects
            return _scan.gather_spans(np.asarray(buf, np.uint8).reshape(-1),
                                      np.ascontiguousarray(fs, np.int64),
                                      np.ascontiguousarray(fe, np.int64),
                                      -1 if sep is None else sep)
        fs = np.asarray(fs, np.int64)
        ln = np.asarray(fe, np.int64) - fs
        if sep is None:  # empty spans add nothing (and would share an output position)
            k = ln > 0
            fs, ln = fs[k], ln[k]
            w = ln
        else:
            w = ln + 1
        if not len(w):
            return np.zeros(0, np.uint8)
        total = int(w.sum())
        if total == len(w) and sep is not None:  # only empty spans: the separators
            return np.full(total, sep, np.uint8)
        if total > 48 * len(w):
            mv = memoryview(buf)  # type: ignore[arg-type]  # an ndarray is a buffer
            parts = [mv[p:q] for p, q in zip(fs.tolist(), (fs + ln).tolist())]
            if sep is None:
                return np.frombuffer(b"".join(parts), np.uint8)
            s = bytes((sep,))
            return np.frombuffer(s.join(parts) + s, np.uint8)
        off = np.cumsum(w) - w  # each span's first byte in the output
        # output byte i reads buf[idx[i]]: +1 within a span, a jump at each span's start
        # (with `sep`, the slot after a span reads the byte after it, then is overwritten)
        d = np.ones(total, np.intp)  # (int32 indices cost more: numpy converts them)
        jump = fs.copy()
        jump[1:] -= fs[:-1] + w[:-1] - 1
        d[off] = jump
        out = buf.take(np.cumsum(d, out=d), mode="clip")
        if sep is not None:
            out[off + ln] = sep
        return out

    def strings(self, mids: np.ndarray, display: bool) -> list[str] | None:
        """Names (or display names) of the entries of `mids` ("" where absent), or None where
        a value holds a NUL or is not UTF-8 (the caller then uses upb)."""
        return self.span_strings(*self.spans(mids, display))

    def span_strings(self, fs: np.ndarray, fe: np.ndarray) -> list[str] | None:
        """The spans [fs, fe) of `buf` as Python strs, or None where a value holds a NUL or
        is not UTF-8.

        Every value becomes a Python str, but not through upb: the values are gathered into
        one NUL-separated buffer (`gather`), decoded and split once (~0.1 us per value; upb's
        map lookup and attribute read ~1.3 us)."""
        return MetaTable.span_strings_of(self.buf, fs, fe)

    @staticmethod
    def span_strings_of(buf: np.ndarray, fs: np.ndarray, fe: np.ndarray) -> list[str] | None:
        """`span_strings` of the spans [fs, fe) of the uint8 array `buf`."""
        if not len(fs):
            return []
        joined = MetaTable.gather_spans(buf, fs, fe, 0).tobytes()
        try:
            got = joined.decode("utf-8").split("\0")
        except UnicodeDecodeError:
            return None
        got.pop()  # after the last separator
        return got if len(got) == len(fs) else None

    def string_bytes(self, mids: np.ndarray, display: bool) -> tuple[np.ndarray, np.ndarray]:
        """The names (or display names) of the entries of `mids` as bytes, without a Python
        object each: (all their bytes concatenated as uint8, each one's length; 0 where
        absent), for byte-level rules over many names at once."""
        fs, fe = self.spans(mids, display)
        return self.gather(fs, fe), fe - fs

    def has_stat(self, mids: np.ndarray, sids) -> np.ndarray:
        """Per id of `mids`: does its entry hold a stat whose id is one of `sids`?"""
        out = np.zeros(len(mids), bool)
        if not len(sids):  # (no such stat in the plane: no entry looked up, nor ids copied)
            return out
        mids = np.asarray(mids, np.int64)
        rows, ent, at = self._entries(mids)
        if not rows.size:
            return out
        st_row, _ = self._stats(ent, sids)
        hit = np.zeros(len(ent), bool)
        hit[st_row] = True
        out[rows] = hit[at]
        return out

    def has_keyed_stat(self, skeys) -> np.ndarray:
        """`has_stat` of every entry of a `PlaneGroup`'s table (keys `plane * GROUP_STRIDE +
        id`), where each plane's stat ids differ: per entry, does it hold a stat whose key in
        its plane (`plane * GROUP_STRIDE + stat id`) is one of `skeys`? Only the entries of
        planes that have such ids are decoded."""
        out = np.zeros(len(self.keys), bool)
        if not len(skeys) or not len(self.keys):
            return out
        skeys = sorted_unique(np.asarray(skeys, np.int64))
        plane = self.keys // GROUP_STRIDE
        ent = np.flatnonzero(np.isin(plane, sorted_unique(skeys // GROUP_STRIDE)))
        if not ent.size:
            return out
        st_row, rec = self._stats(ent, sorted_unique(skeys % GROUP_STRIDE))
        hit = np.isin(plane[ent[st_row]] * GROUP_STRIDE + rec["sid"], skeys)
        out[ent[st_row[hit]]] = True
        return out

    def columns(self, mids: np.ndarray, wanted: dict[int, str], names: tuple[str, ...],
                stat_names: Mapping[int, str], ids: tuple[str, ...] = ()) -> dict[str, np.ndarray]:
        """Per id of `mids`: the first stat whose id is in `wanted` (id -> name), per name of
        `names`, as object columns (None where absent); the names in `ids` as `as_id` of
        that value (`id_objects`: integers converted once per distinct value)."""
        mids = np.asarray(mids, np.int64)
        out = {k: np.empty(len(mids), object) for k in names}  # (np.empty's are None)
        rows, ent, at = self._entries(mids)
        if not rows.size or not wanted:
            return out
        # the records of the entries and stats asked for, only
        st_row, st = self._stats(ent, wanted.keys())
        if not len(st_row):
            return out
        name_ix = {k: j for j, k in enumerate(names)}
        one = {name_ix.get(v, -1) for v in wanted.values()}
        if len(one) == 1 and (k := one.pop()) >= 0 and (
                len(st_row) < 2 or bool((st_row[1:] > st_row[:-1]).all())):
            # one name asked of the stats and each entry one record of it (a copy op's
            # program id): every record is its (entry, name)'s first, the name needs no
            # lookup per record and the records no sort or take (~0.15 ms per 4096 copy ops
            # of a many-ops capture, nine times)
            vals = (id_objects if names[k] in ids else _stat_objects)(self.buf, st,
                                                                        stat_names)
            if len(st_row) == len(mids) and _ascending(at):
                # (every id asked once, in order, each with its record: `rows`, `ent` and
                # the records are each 0..n-1, so the values are the column)
                out[names[k]] = vals
            else:
                _put(out[names[k]], rows, at, st_row, vals, len(ent))
            return out
        wid = np.fromiter(wanted.keys(), np.int64)
        wname = np.array([name_ix.get(wanted[k], -1) for k in wanted], np.int64)
        sids = st["sid"]
        lo, hi = int(sids.min()), int(sids.max())
        if lo >= 0 and hi < (1 << 20) and len(names) < (1 << 15):
            # small stat ids (the usual): the name index by a lookup per record (no search)
            lut = np.full(hi + 1, -1, np.int16)
            inside = (wid >= 0) & (wid <= hi)
            lut[wid[inside]] = wname[inside]
            nm = lut[sids].astype(np.int64)
            rec = np.flatnonzero(nm >= 0)
            nm = nm[rec]
        else:
            o = np.argsort(wid)
            wid, wname = wid[o], wname[o]
            j = np.minimum(np.searchsorted(wid, sids), len(wid) - 1)
            rec = np.flatnonzero((wid[j] == sids) & (wname[j] >= 0))
            nm = wname[j[rec]]
        if not rec.size:
            return out
        entry = st_row[rec]
        # records keep each entry's order: the first of each (entry, name) is the earliest
        # (the start of its run in a stable sort, as np.unique's return_index, faster)
        k2 = entry * len(names) + nm
        if len(k2) < 2 or bool((k2[1:] > k2[:-1]).all()):
            # each (entry, name) once, in order (one stat asked, or the names written in
            # the order asked): every record is its pair's first, no sort
            first = np.arange(len(k2))
        else:
            o = np.argsort(k2, kind="stable")
            k2 = k2[o]
            start = np.ones(len(k2), bool)
            start[1:] = k2[1:] != k2[:-1]
            first = o[start]
        sel = rec[first]
        entry, nm = entry[first], nm[first]
        idn = [k for k, name in enumerate(names) if name in ids]
        if idn:
            vals = np.empty(len(sel), object)
            isid = np.isin(nm, idn)
            for m, fn in ((~isid, _stat_objects), (isid, id_objects)):
                at_m = sel[m]
                if at_m.size:  # (no call on no records)
                    vals[m] = fn(self.buf, {k: v[at_m] for k, v in st.items()}, stat_names)
        else:
            vals = _stat_objects(self.buf, {k: v[sel] for k, v in st.items()}, stat_names)
        for k, name in enumerate(names):
            m = nm == k
            _put(out[name], rows, at, entry[m], vals[m], len(ent))
        return out


def names_of(t: MetaTable | None, mids, display: bool, one) -> list[str]:
    """Names (or display names) of the metadata ids `mids` from the table `t` where there is
    one and it can answer (`strings`), else `one(id)` each (upb's map)."""
    mids = np.asarray(mids, np.int64)
    got = t.strings(mids, display) if t is not None else None
    return got if got is not None else [one(m) for m in mids.tolist()]


def _ascending(at: np.ndarray) -> bool:
    """Whether `at` is 0, 1, ..., len - 1 (`MetaTable._entries`' ids asked once, in order)."""
    return not len(at) or (int(at[0]) == 0 and int(at[-1]) == len(at) - 1 and (
        len(at) < 2 or bool((at[1:] > at[:-1]).all())))


def _put(col: np.ndarray, rows: np.ndarray, at: np.ndarray, entry: np.ndarray,
         vals: np.ndarray, n_ent: int) -> None:
    """`col[rows] = v[at]` where `v` is a column over the `n_ent` entries holding `vals` at
    `entry` (None elsewhere): `MetaTable.columns`' values to the rows that asked for them."""
    if len(at) == n_ent and _ascending(at):
        # ids asked once, in order (`_entries`' own arange): the entry at each place is that
        # row's, so the values go straight to their rows (no object column per entry and no
        # gather of it per name: ~0.2 ms per 4096 copy ops of a many-ops capture)
        col[rows[entry]] = vals
        return
    v = np.empty(n_ent, object)
    v[entry] = vals
    col[rows] = v[at]


def id_objects(buf, d: dict, stat_names: Mapping[int, str]) -> np.ndarray:
    """`as_id` of each stat record's value (`_stat_objects`' records): an int64 from 0, or
    any uint64, as a Python int made once per distinct value (all of a many-ops capture's
    36k copy ops name one program: one int, not 36k converted and numbered again); every
    other kind through its object, as `as_id` reads it."""
    kind, ival = d["kind"], d["ival"]
    out = np.empty(len(kind), object)  # (None)
    ints = (kind == _K_U64) | ((kind == _K_I64) & (ival <= np.uint64(INT64_MAX)))
    i = np.flatnonzero(ints)
    if i.size:
        v = ival[i]
        if bool((v == v[0]).all()):
            out[i] = int(v[0])
        else:
            u, inv = np.unique(v, return_inverse=True)
            out[i] = np.array(u.tolist() + [None], object)[:-1][inv.reshape(-1)]
    rest = np.flatnonzero(~ints & (kind != _K_I64))  # (a negative int64 is no id: None)
    if rest.size:
        objs = _stat_objects(buf, {k: v[rest] for k, v in d.items()}, stat_names)
        out[rest] = [as_id(x) for x in objs.tolist()]
    return out
