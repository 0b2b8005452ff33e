"""Stat values and column helpers shared by the decoders and the plane rules: value kinds of
a decoded stat record, their Python objects (`_stat_objects`), the conversions the rules apply
(`as_id`, `as_int`, `as_text`), per-distinct-value application (`map_unique`, `per_mid`,
`unique_inverse`) and column chunks concatenated once (`Cols`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from overlap.arrays import factorize, filled

# Metadata and stat ids of several planes read as one (`PlaneGroup`) become keys
# `plane index * GROUP_STRIDE + id`. Only planes whose ids all lie in [0, GROUP_STRIDE) are
# grouped; an event or stat whose id lies outside gets key -1, which names nothing (as an id
# missing from its plane's metadata does when the plane is read alone).
GROUP_STRIDE = 1 << 31
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1

# Value kinds of a decoded stat record: the XStat value field numbers (0: no value).
_K_NONE, _K_DOUBLE, _K_U64, _K_I64, _K_STR, _K_BYTES, _K_REF = 0, 2, 3, 4, 5, 6, 7


def _group_keys(plane: np.ndarray, ids: np.ndarray) -> np.ndarray:
    ids = ids.view(np.int64) if ids.dtype == np.uint64 else ids.astype(np.int64, copy=False)
    ok = (ids >= 0) & (ids < GROUP_STRIDE)
    return np.where(ok, plane.astype(np.int64) * GROUP_STRIDE + ids, -1)


def as_id(v: Any) -> int | None:
    """An identifier stat (program_id, a uint64): a value in [0, 2**64), else None."""
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        v = int(v)
    else:
        v = as_int(v)
    return v if v is not None and 0 <= v < (1 << 64) else None


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
    """A 1-d object array of scalars (never a 2-d one, whatever the values are)."""
    return np.array(values + [None], object)[:-1]


def _stat_objects(buf, d, stat_names: dict[int, str], plane=None) -> np.ndarray:
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
        names = np.array([stat_names.get(int(u), "") for u in uniq] + [None], object)[:-1]
        out[m] = names[inv]
    return out


def unique_inverse(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`np.unique(a, return_inverse=True)` for integers; without a sort where their range is
    small (metadata ids of one plane: a lookup table over the range, O(n))."""
    a = np.asarray(a)
    if len(a) < 1024 or a.dtype.kind not in "iu":
        return np.unique(a, return_inverse=True)
    lo, hi = int(a.min()), int(a.max())
    if hi - lo > 2 * len(a) + (1 << 16):
        return np.unique(a, return_inverse=True)
    rel = (a - lo).astype(np.intp)
    seen = np.zeros(hi - lo + 1, bool)
    seen[rel] = True
    rank = np.cumsum(seen) - 1
    return (np.flatnonzero(seen) + lo).astype(a.dtype), rank[rel]


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


def per_mid(mids: np.ndarray, fn) -> np.ndarray:
    """`fn(mid)` for each event, computed once per distinct metadata id."""
    uniq, inv = unique_inverse(mids)
    return object_array([fn(u) for u in uniq.tolist()])[inv]


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
                    # a flag stays a flag: True filled as int64 read as 1, which pandas
                    # refuses beside another chunk's True in a boolean column (fuzz N3)
                    parts.append(filled(n, v, object if dtype == "object" or v is None
                                         else bool if isinstance(v, (bool, np.bool_))
                                         else np.int64))
            out[col] = (parts[0] if len(parts) == 1 else np.concatenate(parts)) if parts else []
        self.chunks = []  # the frame owns the columns now
        return out
