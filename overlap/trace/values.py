"""Stat values and column helpers shared by the decoders and the plane rules: value kinds of
a decoded stat record, their Python objects (`_stat_objects`), the conversions the rules apply
(`as_id`, `as_int`, `as_text`), per-distinct-value application (`map_unique`, `per_mid`,
`unique_inverse`) and column chunks concatenated once (`Cols`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from overlap.arrays import factorize, labels_at, repeated, repeated_join

# Metadata and stat ids of several planes read as one (`PlaneGroup`) become keys
# `plane index * GROUP_STRIDE + id`. Only planes whose ids all lie in [0, GROUP_IDS) are
# grouped; an event or stat whose id lies outside gets key -1, which names nothing (as an id
# missing from its plane's metadata does when the plane is read alone).
GROUP_IDS = 1 << 31
# Above every id, and not a power of two. Why: Python's sets and dicts place an int by its
# low bits, and with a stride of 2**31 every plane's key of one id had the same low bits
# (its id): each of 10k planes' keys for a stat name probed ~6 rounds of a chain of
# collisions as it went into a frozenset or dict (~790 instructions an insert; ~8% of a
# report of 10k GPU planes). With 2**15 + 1 more, the low bits are the plane's index times
# 2**15 + 1 plus the id: spread over the table. Keys stay in plane order, then id order.
GROUP_STRIDE = GROUP_IDS + (1 << 15) + 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1

# Value kinds of a decoded stat record: the XStat value field numbers (0: no value).
_K_NONE, _K_DOUBLE, _K_U64, _K_I64, _K_STR, _K_BYTES, _K_REF = 0, 2, 3, 4, 5, 6, 7


def _group_keys(plane: np.ndarray, ids: np.ndarray) -> np.ndarray:
    ids = ids.view(np.int64) if ids.dtype == np.uint64 else ids.astype(np.int64, copy=False)
    ok = (ids >= 0) & (ids < GROUP_IDS)
    return np.where(ok, plane.astype(np.int64) * GROUP_STRIDE + ids, -1)


def as_id(v: Any) -> int | None:
    """An identifier stat (program_id, a uint64): a value in [0, 2**64), else None."""
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        v = int(v)
    else:
        v = as_int(v)
    return v if v is not None and 0 <= v < (1 << 64) else None


def ids_of(values: np.ndarray) -> np.ndarray:
    """`as_id` of each value of an object column, as an object column. Where every value is
    a plain `int` (a uint64 stat as the decoders give it) or None, the ints themselves, None
    outside [0, 2**64), without a call per value. Why: a ROCm capture's copy kernels and HIP calls
    each carry their own correlation id; 100k copies made 200k `as_id` calls (~0.12 s)."""
    vals = values.tolist()
    types = set(map(type, vals))
    if len(vals) < 64 or not types <= {int, type(None)}:
        return object_array([as_id(v) for v in vals])
    out = object_array(vals)
    # (None stays None, as `as_id` gives it: the ints alone are compared)
    at: Any = slice(None)
    if type(None) in types:
        at = np.flatnonzero([x is not None for x in vals])
    v = out[at]
    bad = np.flatnonzero(~((v >= 0) & (v < (1 << 64))))
    if len(bad):
        v[bad] = None
        out[at] = v
    return out


def as_text(v: Any) -> str | None:
    """A name or version stat as text, whatever type the producer stored it as: `bytes_value`
    is decoded as UTF-8 (undecodable bytes as `\\xNN` escapes), numbers are formatted, an
    empty value is None. Renderers then only ever see `str`."""
    if v is None:
        return None
    if isinstance(v, (bytes, bytearray, memoryview)):
        v = bytes(v).decode("utf-8", "backslashreplace")
    elif not isinstance(v, str):
        v = str(v)
    return v or None


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


def object_array(values: list) -> np.ndarray:
    """A 1-d object array of the values, each one element (never a 2-d one, whatever the
    values are: `fromiter` does not look into them, ~2x as fast as `np.array` of the list
    with a trailing None, a million line names)."""
    return np.fromiter(values, object, len(values))


def _stat_objects(buf, d, stat_names: Mapping[int, str], plane=None) -> np.ndarray:
    """Python values of decoded stats, as `Plane.stats` gives them (refs resolved to names;
    with `plane`, each record's plane index in a `PlaneGroup`, refs are that plane's ids).
    `d`: the records' `kind` and either `obj` (from upb) or `ival`/`vpos` (from the scanner:
    the integer, the double's bits or a string's length, and where a string lies in `buf`)."""
    kind = d["kind"]
    m = np.flatnonzero(kind == _K_REF)
    if "obj" in d:
        out = d["obj"].copy()
        ref = out[m].astype(np.uint64)
    else:
        ival, vpos = d["ival"], d["vpos"]
        out = np.full(len(kind), None, object)
        ref = ival[m]
        for k, tolist in ((_K_I64, lambda x: x.view(np.int64).tolist()),
                          (_K_U64, lambda x: x.tolist()),
                          (_K_DOUBLE, lambda x: x.view(np.float64).tolist())):
            i = np.flatnonzero(kind == k)
            if i.size:
                out[i] = tolist(ival[i])
        mv = memoryview(buf)
        for k in (_K_STR, _K_BYTES):
            i = np.flatnonzero(kind == k)
            seen: dict[bytes, Any] = {}  # one object per distinct value, not per event
            for j, p, ln in zip(i.tolist(), vpos[i].tolist(), ival[i].tolist()):
                b = bytes(mv[p:p + ln])
                v = seen.get(b)
                if v is None:
                    v = seen[b] = b.decode("utf-8", "replace") if k == _K_STR else b
                out[j] = v
    if m.size:
        if plane is not None:
            ref = _group_keys(plane[m], ref)
        uniq, inv = np.unique(ref, return_inverse=True)
        many = getattr(stat_names, "names_of", None)  # (`statids.LazyStatNames`)
        names = many(uniq) if many is not None else \
            np.array([stat_names.get(int(u), "") for u in uniq] + [None], object)[:-1]
        out[m] = names[inv]
    return out


def id_table_base(n: int, lo: int, hi: int) -> int | None:
    """Where a lookup table over `n` integer ids in [lo, hi] starts (`unique_inverse`,
    `isin_ids`, `unique_inverse_at`, `tpu._OpIndex`): None where the range is not small
    (wider than 2n + 65536: a sort or a search costs less than the table), 0 where the ids
    can index it as they are (none negative, none beyond that width), else `lo`."""
    width = 2 * n + (1 << 16)
    if hi - lo > width:
        return None
    return 0 if lo >= 0 and hi <= width else lo


def unique_inverse(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`np.unique(a, return_inverse=True)` for integers; without a sort where their range is
    small (metadata ids of one plane: a lookup table over the range, O(n))."""
    a = np.asarray(a)
    if len(a) < 1024 or a.dtype.kind not in "iu":
        return np.unique(a, return_inverse=True)
    lo, hi = int(a.min()), int(a.max())
    base = id_table_base(len(a), lo, hi)
    if base is None:
        return np.unique(a, return_inverse=True)
    if base == 0 and a.dtype == np.intp:
        lo = 0  # the ids index the table as they are: no array of differences
        rel = a
    else:
        rel = np.subtract(a, lo, dtype=np.intp)  # (one array, not a difference and its copy)
    seen = np.zeros(hi - lo + 1, bool)
    seen[rel] = True
    rank = np.cumsum(seen) - 1
    return (np.flatnonzero(seen) + lo).astype(a.dtype), rank[rel]


def isin_ids(values: np.ndarray, keys) -> np.ndarray:
    """`np.isin(values, keys)` for integer ids of a small range (metadata ids of one plane): a
    bool table over the values' range and one gather, ~0.7 ms per million events where
    numpy's own table (range checks, a masked copy) takes ~5 ms for 50 keys. Elsewhere (few
    events, ids of a `PlaneGroup`, non-integer keys) `np.isin` itself. A few keys are compared
    one at a time: ~0.25 ms per key per million events, under the table's ~0.8 ms up to 4."""
    values = np.asarray(values)
    keys = list(keys)
    if len(keys) <= 4:
        out = np.zeros(len(values), bool)
        for k in keys:
            out |= values == k
        return out
    keys = np.asarray(keys)
    if len(values) < 1024 or not len(keys) or values.dtype.kind not in "iu" \
            or keys.dtype.kind not in "iu":
        return np.isin(values, keys)
    lo, hi = int(values.min()), int(values.max())
    base = id_table_base(len(values), lo, hi)
    if base is None:
        return np.isin(values, keys)
    lo = base  # (0: the ids index the table as they are, no array of differences)
    table = np.zeros(hi - lo + 1, bool)
    k = keys[(keys >= lo) & (keys <= hi)]
    table[np.subtract(k, lo, dtype=np.intp)] = True
    return table[values] if lo == 0 else table[np.subtract(values, lo, dtype=np.intp)]


_BLOCK = 1 << 16  # rows per block of `unique_inverse_at`


def unique_inverse_at(a: np.ndarray, idx: np.ndarray,
                      offset: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """`unique_inverse(a[idx])` with `offset` added to the codes, in the narrowest int dtype
    that holds them, read in blocks of `idx`: no array of `a[idx]` and no int64 code per row
    (a million kernels' metadata ids: 15 MB less at the read's peak). Where `a`'s range is
    not small, `unique_inverse` of the rows taken."""
    a = np.asarray(a)
    idx = np.asarray(idx)
    if len(idx) < 1024 or a.dtype.kind not in "iu" or not len(a):
        uniq, inv = unique_inverse(a[idx])
        return uniq, narrow_codes(inv + offset, len(uniq) + offset)
    lo, hi = int(a.min()), int(a.max())
    if id_table_base(len(a), lo, hi) is None:
        uniq, inv = unique_inverse(a[idx])
        return uniq, narrow_codes(inv + offset, len(uniq) + offset)
    rows, base = _block_rows(a, idx, lo, hi)
    seen = np.zeros(hi - base + 1, bool)  # is the id at each place of the table some row's
    for b in range(0, len(idx), _BLOCK):
        seen[rows(b)] = True
    present = np.flatnonzero(seen)
    rank = narrow_codes(np.cumsum(seen) - 1 + offset, len(present) + offset)
    out = np.empty(len(idx), rank.dtype)
    for b in range(0, len(idx), _BLOCK):
        out[b:b + _BLOCK] = rank[rows(b)]
    return (present + base).astype(a.dtype), out


def _block_rows(a: np.ndarray, idx: np.ndarray, lo: int, hi: int):
    """For `unique_inverse_at`: (block `b`'s rows of `a[idx]` as indices into a
    table over `a`'s range, the id at the table's 0): `a`'s own slice where `idx` is every row
    in order (a kernel-only line: no gather), the ids themselves where they are intp from 0
    (no subtraction; the table starts at 0 then, else at `lo`). ~2 ms less per million
    rows."""
    whole = len(idx) == len(a) and idx[0] == 0 and idx[-1] == len(a) - 1 \
        and bool((idx[1:] > idx[:-1]).all())
    direct = a.dtype == np.intp and id_table_base(len(a), lo, hi) == 0

    def rows(b: int) -> np.ndarray:
        v = a[b:b + _BLOCK] if whole else a[idx[b:b + _BLOCK]]
        return v if direct else np.subtract(v, lo, dtype=np.intp)
    return rows, 0 if direct else lo


def map_unique(values: np.ndarray, fn) -> np.ndarray:
    """`fn(v)` for each value of an object column, computed once per distinct value."""
    if not len(values):
        return np.zeros(0, object)
    try:
        codes, uniq = factorize(values)
    except TypeError:  # unhashable values (never for stat values, but be safe)
        return np.array([fn(v) for v in values.tolist()] + [None], object)[:-1]
    # missing values (None, NaN) get code -1: the trailing entry, fn(None)
    out = np.array([fn(u) for u in uniq.tolist()] + [fn(None), None], object)[:-1]
    return out[codes]


def per_mid(mids: np.ndarray, fn, many=None, at: np.ndarray | None = None,
            coded: bool = False) -> Any:
    """`fn(mid)` for each event (each of `mids[at]` where `at` is given), computed once per
    distinct metadata id (by `many(ids)`, the same for many ids at once, where given); equal
    texts one object (upb makes a new `str` per name it is asked: 100k planes' "kernel_x"
    were 100k objects, 5 MiB, kept with the events). `at`: no copy of the ids taken and
    narrow codes (`unique_inverse_at`: a line of a million events no rule reads, 15 MB less
    at its read's peak). `coded`: as a `Coded` column for `Cols` (the object column made
    when the chunks are joined: a million such events, 7 MB less on the read's peak)."""
    uniq, inv = unique_inverse(mids) if at is None else unique_inverse_at(mids, at)
    got = many(uniq) if many is not None else [fn(u) for u in uniq.tolist()]
    if len(got) > 1:
        # (texts only: 1, 1.0 and True are equal keys, and one would stand for the others)
        seen: dict[str, str] = {}
        got = [seen.setdefault(v, v) if type(v) is str else v for v in got]
    return Coded(inv, object_array(got)) if coded else object_array(got)[inv]


def narrow_codes(codes: np.ndarray, n_values: int) -> np.ndarray:
    """Non-negative codes into `n_values` values in the narrowest signed int dtype that
    holds them (a million kernels of 50 names: 1 MB of int8 instead of 8 MB of int64)."""
    for dt, top in _NARROW:
        if n_values <= top:
            return codes.astype(dt, copy=False)
    return codes.astype(np.int64, copy=False)


# (each dtype's largest value, found once: `np.iinfo` per call was ~2 us, three calls a TPU
# chip)
_NARROW = [(dt, int(np.iinfo(dt).max)) for dt in (np.int8, np.int16, np.int32)]


class Coded:
    """A chunk's object column as `values[codes]` (`Cols.add`), built by `Cols.rows`: the
    reader hands a line's names this way, so that the million-row object column exists only
    once the file's bytes and the line's decoded arrays are freed (the read's peak), and a
    column of one value becomes `repeated` without ever being built. Every code is valid."""

    __slots__ = ("codes", "values")

    def __init__(self, codes: np.ndarray, values: np.ndarray) -> None:
        self.values = values
        self.codes = narrow_codes(codes, len(values))

    def __len__(self) -> int:
        return len(self.codes)

    def column(self) -> np.ndarray:
        """The object column (`repeated` where every code is one)."""
        return labels_at(self.values, self.codes)


class Cols:
    """Column chunks (arrays, `Coded` columns or one scalar per chunk), concatenated once at
    the end.

    Given the table's `schema`, small chunks are joined `JOIN_EVERY` at a time as they come
    (`_join_tail`): what `rows` makes of a run of chunks, the run's columns as one chunk. Why:
    a TPU host file of thousands of chips adds a chunk of a row or two per chip, each a dict
    of a dozen small arrays (~1.7 KiB a chip for one copy): 11 MiB of a 4,096-chip file's
    6 MB on the read's peak. Keys that are no schema column (a chunk's marks, as `_cpu`,
    which `rows`' `keep` reads) are kept: only chunks of equal marks are joined."""

    def __init__(self, schema: dict[str, str] | None = None):
        self.chunks: list[tuple[int, dict[str, Any]]] = []
        self._schema = schema
        self._loose = 0  # chunks at the end not joined yet

    def add(self, n: int, **cols) -> None:
        if n:
            self.chunks.append((n, cols))
            if self._schema is not None:
                self._loose += 1
                if self._loose >= JOIN_EVERY:
                    self._join_tail()

    def _join_tail(self) -> None:
        """The last `_loose` chunks, where they are small (`JOIN_ROWS` rows in all: larger
        ones cost little per row, and a join would copy them), as runs of equal marks, each
        run one chunk of its columns (`_joined_columns`: the values, dtypes and one-value
        views `rows` gives the run, so `rows` of the joined chunks is `rows` of them all)."""
        schema = self._schema
        assert schema is not None
        k, self._loose = self._loose, 0
        tail = self.chunks[-k:]
        if sum(n for n, _ in tail) > JOIN_ROWS:
            return
        del self.chunks[-k:]
        run: list[tuple[int, dict[str, Any]]] = []
        marks: dict[str, Any] = {}
        for n, cols in tail:
            m = {c: v for c, v in cols.items() if c not in schema}
            if run and m != marks:
                self.chunks += self._run_chunks(run, marks, schema)
                run = []
            run.append((n, cols))
            marks = m
        self.chunks += self._run_chunks(run, marks, schema)

    @staticmethod
    def _run_chunks(run: list[tuple[int, dict[str, Any]]], marks: dict[str, Any],
                    schema: dict[str, str]) -> list[tuple[int, dict[str, Any]]]:
        """A run of chunks of equal marks as one, or as they are where a column would not
        keep its values (`_joined_columns`)."""
        cols = _joined_columns(run, schema, join=True) if len(run) > 1 else None
        return run if cols is None else [(sum(n for n, _ in run), {**cols, **marks})]

    def rows(self, schema: dict[str, str], keep=None) -> dict[str, Any]:
        """The chunks' columns, each concatenated once. A column of one value over all
        chunks (a file's host, a line's name and stream, None where no chunk has it) is a
        `repeated` view of it: no 8 bytes per row; the others are written into one array
        (no per-chunk filled arrays, no concatenation's second copy)."""
        chunks = [c for c in self.chunks if keep is None or keep(c[1])]
        self.chunks = []  # the frame owns the columns now
        out = _joined_columns(chunks, schema)
        assert out is not None
        return out


JOIN_EVERY = 64  # chunks `Cols` joins at a time, where they are small: ...
JOIN_ROWS = 1 << 14  # ... this many rows or fewer in all


def _joined_columns(chunks: list[tuple[int, dict[str, Any]]], schema: dict[str, str],
                    join: bool = False) -> dict[str, Any] | None:
    """`Cols.rows` of `chunks`: each schema column of them all. `join`: for `_join_tail`,
    None where a column's values would not stay what they are: a column of several dtypes
    joined into one that is not object (bool beside int64 is int64, uint64 beside int64
    float64), which `rows` would make an object column of each chunk's own values where
    another chunk gives None or text (True stays True there, not 1)."""
    out: dict[str, Any] = {}
    made: dict[int, np.ndarray] = {}  # one column per `Coded` given for several
    ns: list[int] | None = None
    for col, dtype in schema.items():
        if len(chunks) > 1:
            vals = [cols.get(col) for _, cols in chunks]
            if not any(isinstance(v, (np.ndarray, Coded)) for v in vals):
                # a scalar per chunk (a plane's host, device, line: 4,000 TPU chips'
                # chunks), joined at once, not a `repeated` view per chunk first:
                # what `_joined` makes of those views
                ns = ns if ns is not None else [n for n, _ in chunks]
                out[col] = got = _scalars_joined(vals, ns, dtype)
                if join and got.dtype != object and len(
                        {_scalar_dtype(v, dtype) for v in vals}) > 1:
                    return None
                continue
        parts = [(n, _chunk_part(cols.get(col), n, dtype)) for n, cols in chunks]
        if len(parts) == 1 and isinstance(parts[0][1], Coded):
            c = parts[0][1]
            out[col] = made.get(id(c))
            if out[col] is None:
                out[col] = made[id(c)] = c.column()
            continue
        if not parts:
            out[col] = []
            continue
        out[col] = joined = _joined(parts)
        if join and joined.dtype != object and any(
                (a.values if isinstance(a, Coded) else a).dtype != joined.dtype
                for _, a in parts):
            return None
    return out


def _scalars_joined(vals: list, ns: list[int], dtype: str) -> np.ndarray:
    """`_joined` of chunks `ns` long, chunk i all `vals[i]` (`_chunk_part`'s `repeated` of
    it): each value as the one-element array that view repeats, then a `repeated` view where
    `repeated_join` gives one, else each chunk's element repeated (the same values)."""
    if dtype == "object":
        first = vals[0]
        if all(v is first for v in vals):
            return repeated(sum(ns), first, object)
        return np.repeat(object_array(vals), ns)
    heads = []
    for v in vals:
        one = np.empty(1, _scalar_dtype(v, dtype))
        one[0] = v
        heads.append(one)
    got = repeated_join(heads)
    if got is not None:
        return repeated(sum(ns), got[0], got.dtype)
    return np.repeat(np.concatenate(heads), ns)


def _chunk_part(v: Any, n: int, dtype: str) -> Any:
    """One chunk's column: an array (object where the schema says so), or a scalar as the
    array it stands for: `repeated` (a flag stays a flag: True filled as int64 read as 1,
    which pandas refuses beside another chunk's True in a boolean column (fuzz N3))."""
    if isinstance(v, np.ndarray):
        return v if dtype != "object" else v.astype(object, copy=False)
    if isinstance(v, Coded):
        return v.column() if len(v.values) <= 1 or len(v) <= 1 else v
    return repeated(n, v, _scalar_dtype(v, dtype))


def _scalar_dtype(v: Any, dtype: str) -> Any:
    """The dtype of the column a chunk's scalar `v` stands for, in a column of schema type
    `dtype`: object where the schema says so or `v` is None, bool for a flag (a flag stays a
    flag), else int64."""
    return object if dtype == "object" or v is None else \
        bool if isinstance(v, (bool, np.bool_)) else np.int64


def _joined(parts: list[tuple[int, Any]]) -> np.ndarray:
    """`np.concatenate` of the parts (arrays or `Coded`), a `repeated` view where every part
    repeats one same object (or one equal number), a part itself where it is the only one."""
    if len(parts) == 1:
        p = parts[0][1]
        return p.column() if isinstance(p, Coded) else p
    arrays = [a for _, a in parts]
    if not any(isinstance(a, Coded) for a in arrays):
        got = repeated_join(arrays)
        if got is not None:
            return got
    out = np.empty(sum(len(a) for a in arrays),
                   np.result_type(*[a.values if isinstance(a, Coded) else a for a in arrays]))
    pos = 0
    for a in arrays:
        if isinstance(a, Coded):
            np.take(a.values, a.codes, out=out[pos:pos + len(a)])
        else:
            out[pos:pos + len(a)] = a
        pos += len(a)
    return out
