"""Array helpers every layer may use (rank 0: no imports from the package).

Why `filled`: `np.full(n, v, object)` converts the fill value once per element (66 ms per million
rows for a name); an empty array filled by assignment takes ~12 ms.

Why `sorted_unique`: numpy 2.3+ answers a plain `np.unique(x)` (no `return_*`) with a hash
table and then sorts the result; on this project's numpy (2.4) that takes ~1.4 s for a million
distinct int64s against ~15 ms for `np.sort`, a cliff on inputs with many distinct values
(metadata ids of a host plane full of Python-tracer frames, bucket indices of a long trace).

Why `bin_sums`: per-bin sums of int64 columns (per step, per copy) by `np.bincount`, whose
float64 sums are exact only below 2**53, else by `np.add.at`'s integer sums: one place that
says when the float sums may stand for the integers.

Why `dict_rows`: the analysis hands out rows as dicts (steps, exposure causes per step), many
alike; copying one template dict and setting each column's values in C costs ~0.15 us a row
and ~0.06 a value, where a dict display per row costs ~1 us.

Why `factorize` (and the object-run helpers it stands on) lives here and not in pandas:
`overlap report` on one capture never imports pandas (~0.3 s and ~43 MiB of a 0.7 s, 160 MiB
process on a 35 MB capture); the reader and the analysis number names with this one, which
gives `pd.factorize`'s answer (see its docstring for the few inputs it hands to pandas).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from itertools import repeat, starmap
from operator import setitem
from typing import Any

import numpy as np


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """The distinct values of a 1-d array, ascending: `np.unique(values)`, by one sort."""
    a = np.sort(np.asarray(values), kind="stable")
    if a.size < 2:
        return a
    keep = np.empty(a.size, bool)
    keep[0] = True
    np.not_equal(a[1:], a[:-1], out=keep[1:])
    return a[keep]


EXACT_FLOAT = 1 << 53  # integers below this are exact as float64


def bin_sums(idx: np.ndarray, values: np.ndarray, n: int, most: int | None = None
             ) -> np.ndarray:
    """Exact int64 sums of the int `values` per bin `idx` (0..n-1). Where no partial sum of a
    bin can reach `EXACT_FLOAT` (`most`: a bound on them the caller knows, else the largest
    |value| times their count) they are bincount's float64 sums (integers float64 holds
    exactly, a pass in C); else integer sums with `np.add.at` (picosecond totals may pass
    2**53)."""
    if is_repeated(values) and not values[0] or not values.any():
        # (a column of zeros: no pass over the bins; a read-only `repeated` 0, as a cause no
        # copy has, told by its one element: no pass over its rows either)
        return np.zeros(n, np.int64)
    if most is None:
        # (the largest |value| from the extremes as Python ints: `np.abs` of int64's least
        # value is that value, negative, which would pass any bound)
        most = max(-int(values.min()), int(values.max())) * len(values)
    if most < EXACT_FLOAT:
        return np.bincount(idx, weights=values, minlength=n).astype(np.int64)
    out = np.zeros(n, np.int64)
    np.add.at(out, idx, values)
    return out


def dict_rows(template: dict, n: int, columns: Iterable[tuple[Any, Any]]) -> list[dict]:
    """`n` dicts, each a copy of `template` (its keys in its order), with each column's
    values set: for (key, values) of `columns`, row i's `key` set to `values[i]` (len n). A
    column at a time, in C (`map` of `setitem`, drained by a zero-length deque): no Python
    step per cell. The rows share the template's values: immutable ones only."""
    # (an empty template: `{}` each, none shared); `starmap` calls the copy in C, no loop
    # frame per row (3,000 20-key rows: ~0.4 -> ~0.27 ms)
    out = list(starmap(template.copy, repeat((), n)))
    for key, values in columns:
        deque(map(setitem, out, repeat(key), values), maxlen=0)
    return out


def filled(n: int, v: object, dtype: object = object) -> np.ndarray:
    """`np.full(n, v, dtype)`, 5x faster for objects (a chunk's host or device name, a lane's
    label)."""
    out = np.empty(n, dtype)  # type: ignore[call-overload]
    out[:] = v
    return out


def repeated(n: int, v: object, dtype: object = object) -> np.ndarray:
    """`filled(n, v, dtype)` as a read-only view of one element (stride 0): a column of one
    value (a host file's host, a line's name or stream) costs no memory per row, where a
    filled object column costs 8 bytes per row (43 MiB of a million-kernel GPU file's
    tables). Indexing it gives an ordinary array; `is_repeated` tells it apart."""
    one = np.empty(1, dtype)  # type: ignore[call-overload]
    one[0] = v
    return np.broadcast_to(one, (n,))


def labels_at(values: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """`values[codes]` (a few labels in an object array, indexed by integer codes), a
    `repeated` column where every code is one: one label over a million copies is no pointer
    a row (a class, a cause, a `Coded` column's kind)."""
    if len(codes) > 1 and (len(values) == 1 or not (codes != codes[0]).any()):
        return repeated(len(codes), values[codes[0]])
    # (np.take of platform-int positions: indexing by narrow codes is ~15% slower)
    return np.take(values, codes.astype(np.intp, copy=False))


def positions(n: int) -> np.ndarray:
    """The positions 0..n-1, int32 where n allows (an index of every row of a million-row
    column: 4 MB, not 8)."""
    return np.arange(n, dtype=np.int32 if n < 1 << 31 else np.int64)


def ranges(lo: np.ndarray, n: np.ndarray) -> np.ndarray:
    """The indices [lo[i], lo[i] + n[i]) of every i, in order, as one int64 array (n >= 0)."""
    total = int(n.sum())
    return np.arange(total, dtype=np.int64) + np.repeat(lo - (np.cumsum(n) - n), n)


def is_repeated(a: Any) -> bool:
    """Whether `a` is a 1-d array of more than one row that repeats one element in memory
    (stride 0: `repeated`, `np.broadcast_to`)."""
    return isinstance(a, np.ndarray) and a.ndim == 1 and len(a) > 1 and a.strides[0] == 0


def repeated_join(arrays: list[np.ndarray]) -> np.ndarray | None:
    """`np.concatenate(arrays)` as one `repeated` column, where every array repeats (or is)
    one element and all are the same object (object arrays) or the same number of one
    dtype; else None."""
    if len(arrays) < 2 or not all(is_repeated(a) or len(a) == 1 for a in arrays):
        return None
    dtype = np.result_type(*arrays)
    heads = [a[0] for a in arrays]
    if dtype.kind == "O":
        same = all(h is heads[0] for h in heads)
    else:
        same = all(a.dtype == dtype for a in arrays) and len(set(heads)) == 1
    return repeated(sum(len(a) for a in arrays), heads[0], dtype) if same else None


class _Addresses:
    """An object array's element pointers as a uintp array (`object_addresses`); holds the
    object array, so the pointers stay valid while the view lives."""

    def __init__(self, values: np.ndarray):
        self._values = values
        self.__array_interface__ = {"data": (values.ctypes.data, True), "version": 3,
                                    "typestr": np.dtype(np.uintp).str, "shape": values.shape,
                                    "strides": values.strides}


def object_addresses(values: np.ndarray) -> np.ndarray:
    """Per element of a 1-D object array, the address of the object it holds (read-only).

    Equal addresses are the same object, hence equal values: whole columns that repeat one
    object (a reader's host and device names, None) are recognised without calling Python's
    comparison per element (0.4 ms instead of 12-36 ms per million rows). A strided 1-d
    object array (a `repeated` column) is read in place: no contiguous copy."""
    if not (isinstance(values, np.ndarray) and values.ndim == 1 and values.dtype == object):
        values = np.ascontiguousarray(values)
    return np.asarray(_Addresses(values))


def at_rows(v: Any, idx: np.ndarray) -> Any:
    """A per-row column's values at rows `idx`; anything else (one value for every row, as
    `Cols.add` takes it) as is."""
    return v[idx] if isinstance(v, np.ndarray) else v


class Later:
    """A value made when first asked for (`now`), then kept: a per-event column that only
    some paths read (a segment's line names: the rows of copies and kernels read them, the
    events no rule reads do not)."""

    __slots__ = ("make", "got")

    def __init__(self, make: Any) -> None:
        self.make, self.got = make, None

    def __call__(self) -> Any:
        if self.make is not None:
            self.got, self.make = self.make(), None
        return self.got


def now(v: Any) -> Any:
    """`v`, made where it is a `Later`."""
    return v() if isinstance(v, Later) else v


class SeenColumns:
    """Answers kept for the last `held` object columns, found again by their rows' identity.

    Why: an analysis numbers one column several times (the many-ops report codes its 36k-row
    `hlo_op` column three times and its direction column five). A column holding the same
    objects at the same rows as a kept one (equal `object_addresses`; the kept copy holds
    each object alive, so no other object can take its address) is that column, whichever
    array holds it; a new column, or one changed in place, is not. Answers are kept per key
    (a numbering's `sort`); callers copy what they hand out, so nobody writes to a kept one.
    Cost: a copy of each kept column (8 bytes a row)."""

    def __init__(self, held: int) -> None:
        self.held = held
        self._kept: list[tuple[np.ndarray, dict[Any, Any]]] = []

    def _answers(self, col: np.ndarray) -> dict[Any, Any] | None:
        addr = object_addresses(col)
        for kept, answers in self._kept:
            if len(kept) == len(col) and bool(np.array_equal(object_addresses(kept), addr)):
                return answers
        return None

    def get(self, col: np.ndarray, key: Any) -> Any:
        """The answer kept for the object column `col` under `key`, or None."""
        answers = self._answers(col)
        return None if answers is None else answers.get(key)

    def put(self, col: np.ndarray, key: Any, answer: Any, hold: np.ndarray | None = None
            ) -> None:
        """Keep `answer` for `col` under `key` (a new column: the oldest kept is forgotten).
        `hold`: an array the caller made that holds the same objects at the same rows as `col`
        and that nobody writes to (the answer's uniques where every row is its own value),
        kept as the column instead of a copy of it (36k op names: ~1M instructions)."""
        answers = self._answers(col)
        if answers is None:
            answers = {}
            if hold is None or len(hold) != len(col) or \
                    not bool(np.array_equal(object_addresses(hold), object_addresses(col))):
                hold = col.copy()
            self._kept[:] = [(hold, answers), *self._kept[:self.held - 1]]
        answers[key] = answer


def object_runs(values: np.ndarray) -> np.ndarray:
    """Indices where a run of one object begins in a 1-D object array (0 included)."""
    n = len(values)
    if not n:
        return np.zeros(0, np.intp)
    return np.flatnonzero(_new_object(values))


def _new_object(values: np.ndarray) -> np.ndarray:
    """Per element: is it another object than the one before (the first: True)?"""
    if is_repeated(values):  # one object in every row (stride 0): no address compared
        new = np.zeros(len(values), bool)
        new[0] = True
        return new
    addr = object_addresses(values)
    new = np.empty(len(values), bool)
    new[0] = True
    np.not_equal(addr[1:], addr[:-1], out=new[1:])
    return new


def run_starts(values: np.ndarray, by_value: bool = True) -> np.ndarray | None:
    """Indices where a run of equal neighbours begins in a 1-D object array (0 included).

    Neighbours are in one run when they are the same object or, with `by_value`, compare
    equal with `==` (asked only where the objects differ, and not at all where more than half
    the neighbours are different objects: a column that alternates is no run column).
    Distinct objects that compare equal are only ever merged by `==`, which is also how
    hash tables (a dict, pandas') match keys. None when a comparison does not answer
    True/False (pd.NA): the caller takes its general path."""
    n = len(values)
    if not n:
        return np.zeros(0, np.intp)
    new = _new_object(values)
    if by_value:
        at = np.flatnonzero(new[1:])
        if len(at) > n // 2:  # values that alternate (directions, op names): not runs
            return np.flatnonzero(new)
        if len(at):
            try:
                same = np.asarray(values[at + 1] == values[at], dtype=bool)
            except (TypeError, ValueError):  # a value whose == is no bool (pd.NA)
                return None
            if same.shape == at.shape:
                new[at[same] + 1] = False
    return np.flatnonzero(new)


def factorize(values: Any, sort: bool = False,
              use_na_sentinel: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """`pd.factorize(values, sort=sort)` without pandas: (codes as int64, uniques).

    Codes number the distinct values in order of first appearance (with `sort`, in ascending
    order of the values); a missing value (None, float NaN) gets -1 and is no unique. Uniques
    are an object array for object input (each value's first object), else the input's dtype.

    How: a numeric array by one stable sort; an object column once per run of equal
    neighbours (`run_starts`: the reader's host and device columns are a few long runs), the
    run heads by a dict (`dict.fromkeys` keeps first appearance and matches keys by hash and
    `==`, as pandas' object hash table does: 1, 1.0 and True are one value). Inputs a dict
    cannot answer as pandas does (unhashable values, pd.NA or other values whose `!=` is no
    bool, values `sort` cannot order) go to pandas itself, which answers or raises as before;
    so does `use_na_sentinel=False` (missing values as a unique: no caller of the report's
    path asks for it).
    """
    if isinstance(values, np.ndarray) and values.dtype.kind in "iub" and use_na_sentinel:
        return _factorize_numbers(values.reshape(-1), sort)
    v = values.to_numpy(dtype=object) if hasattr(values, "to_numpy") else \
        np.asarray(values, dtype=object)
    if not use_na_sentinel:
        return _pandas_factorize(v, sort, use_na_sentinel)
    if v.ndim != 1:
        v = v.reshape(-1)
    if len(v) > 8:
        starts = run_starts(v)
        if starts is not None and len(starts) <= len(v) // 8:
            codes, uniq = _factorize_objects(v[starts], sort)
            counts = np.diff(np.append(starts, len(v)))
            return np.repeat(codes, counts), uniq
    return _factorize_objects(v, sort)


def _factorize_numbers(v: np.ndarray, sort: bool) -> tuple[np.ndarray, np.ndarray]:
    n = len(v)
    if not n:
        return np.zeros(0, np.int64), v[:0].copy()
    order = np.argsort(v, kind="stable")
    sv = v[order]
    new = np.empty(n, bool)
    new[0] = True
    np.not_equal(sv[1:], sv[:-1], out=new[1:])
    rank = np.cumsum(new) - 1  # per sorted element: its value's rank
    codes = np.empty(n, np.int64)
    codes[order] = rank
    uniq = sv[new]
    if sort:
        return codes, uniq
    # first appearance: a value's first element is its run's first in the stable sort
    first = order[new]
    by_first = np.argsort(first, kind="stable")
    renum = np.empty(len(uniq), np.int64)
    renum[by_first] = np.arange(len(uniq))
    return renum[codes], uniq[by_first]


def _factorize_objects(v: np.ndarray, sort: bool) -> tuple[np.ndarray, np.ndarray]:
    keys = v.tolist()
    try:
        table: dict[Any, int] = dict.fromkeys(keys, -1)
        # names and ids (the usual keys) are never missing: one pass over the types, not a
        # Python call per distinct value (36k op names: 20 ms -> 4; 100k ids, None among
        # them: 80 ms -> 3, measured on a ROCm capture's correlation ids before round 38
        # read those as integers)
        types = set(map(type, table))
        uniq = list(table) if types <= _NEVER_MISSING else \
            [k for k in table if k is not None] if types <= _NEVER_MISSING_OR_NONE else \
            [k for k in table if not _missing(k)]
        if sort:
            uniq.sort()
    except TypeError:  # unhashable, a value with no bool `!=` (pd.NA), or unorderable
        return _pandas_factorize(v, sort)
    for i, k in enumerate(uniq):
        table[k] = i
    codes = np.fromiter(map(table.__getitem__, keys), np.int64, len(keys))
    out = np.empty(len(uniq), object)
    out[:] = uniq
    return codes, out


_NEVER_MISSING = frozenset((str, int, bool, bytes, tuple))  # (`_missing` is False for each)
_NEVER_MISSING_OR_NONE = _NEVER_MISSING | {type(None)}


def _missing(k: Any) -> bool:
    """None or a float NaN (what pandas calls missing among the values a dict can hold);
    a value whose `!=` answers no bool (pd.NA) raises TypeError."""
    if k is None:
        return True
    if isinstance(k, float):
        return math.isnan(k)
    return not isinstance(k, (str, int, bytes, tuple)) and bool(k != k)


def _pandas_factorize(v: np.ndarray, sort: bool,
                      use_na_sentinel: bool = True) -> tuple[np.ndarray, np.ndarray]:
    import pandas as pd  # only for inputs a dict cannot answer as pandas does

    codes, uniq = pd.factorize(v, sort=sort, use_na_sentinel=use_na_sentinel)
    return codes.astype(np.int64, copy=False), uniq
