"""The reader's output: the trace tables' columns and dtypes, and `Trace`, which holds them.

Every `*_ps` column is integer picoseconds on its host's clock (see `overlap.trace.reader`,
which fills them and re-exports these names).

Two forms of one table. The reader makes `Columns`: one numpy array per schema column, in the
representation `Trace.columns` documents (missing values None, nullable ids as Python ints).
A `Trace` keeps them and builds a table's pandas DataFrame (`_frame`, the schema's dtypes) the
first time its attribute is read, so a caller that only reads columns (`overlap report` on one
capture) never imports pandas (~0.3 s and ~43 MiB). A DataFrame a caller sets is kept as it
is, and `Trace.columns` converts it to the same representation. The reader's `lines` table is
`Deferred`: its row count known, its columns made when first read (`overlap inspect` reads
them; a report never does).

Blind spot: a name column that holds a raw stat value (`hlo_module`, a memory allocator name)
written as a NaN double reads as None (missing), in the columns and in the frame alike.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

# pandas-free, shared with the analysis; re-exported here for the reader's callers
from overlap.arrays import (  # noqa: F401
    factorize,
    filled,
    is_repeated,
    object_addresses,
    object_runs,
    repeated,
    repeated_join,
    run_starts,
)

if TYPE_CHECKING:
    import pandas as pd

# A transfer's `src_kind` / `dst_kind` as one of two shared objects, indexed by 0 (device)
# or 1 (host): not a `str` made per transfer (2 MiB a column on 36k TPU copies; 100k ROCm
# copies' two columns were 12 MiB on the read's peak). The TPU and ROCm rules take them here.
MEMORY_KINDS = np.array(["device", "host"], object)

TRANSFER_COLUMNS = {
    "host": "object", "device": "object", "direction": "object", "start_ps": "int64",
    "end_ps": "int64", "bytes": "int64", "src_kind": "object", "dst_kind": "object",
    "async": "boolean", "stream": "int64", "line": "object", "hlo_op": "object",
    "hlo_module": "object", "program_id": "UInt64",
    # False where the capture does not record the copy's size (ROCm host API events write
    # `size:0`): `bytes` is then 0 and every byte total says how many copies it leaves out.
    "bytes_known": "bool",
    # TPU: the copy's start begin to its done's end on the chip's own clock (the events'
    # `device_offset_ps`/`device_duration_ps`; overlap.trace.tpu), None where the capture has
    # no such clock (GPU, or a TPU capture without those stats): its duration, where
    # start_ps/end_ps are the host-aligned timeline the overlap is measured on.
    "device_span_ps": "Int64",
}
# Columns a producer may leave out (older callers, other rules): filled with this value.
COLUMN_DEFAULTS = {"bytes_known": True}
COMPUTE_COLUMNS = {
    "host": "object", "device": "object", "start_ps": "int64", "end_ps": "int64",
    "name": "object", "hlo_op": "object", "hlo_module": "object", "stream": "int64",
    "line": "object",
    # Which compile of `hlo_module` ran (a sweep compiles several programs of one name; the
    # memory views pick the program that executed by it). XLA:CPU and TPU ops only: per GPU
    # kernel it cost 10-18% of a 1M-event read, and `overlap capture` records the program id
    # in run.json anyway. None elsewhere.
    "program_id": "UInt64",
}
STEP_COLUMNS = {
    "host": "object", "step": "int64", "name": "object", "start_ps": "int64", "end_ps": "int64",
}
MEMORY_COLUMNS = {
    "host": "object", "time_ps": "int64", "allocator": "object", "device": "object",
    "kind": "object", "bytes_allocated": "int64", "bytes_reserved": "int64",
    "peak_bytes_in_use": "int64", "requested_bytes": "int64", "allocation_bytes": "int64",
}
MODULE_COLUMNS = {
    "host": "object", "program_id": "UInt64", "name": "object", "hlo_proto": "object",
}
DEVICE_COLUMNS = {
    "host": "object", "device": "object", "plane": "object", "vendor": "object",
    "name": "object", "memory_size": "Int64", "memory_bandwidth": "Int64",
    "clock_rate_khz": "Int64", "core_count": "Int64", "compute_capability": "object",
}
LINE_COLUMNS = {"host": "object", "plane": "object", "line_id": "int64", "line": "object",
                "events": "int64"}


# Each table of a `Trace`, by attribute name.
TABLES = {"transfers": TRANSFER_COLUMNS, "compute": COMPUTE_COLUMNS, "steps": STEP_COLUMNS,
          "memory": MEMORY_COLUMNS, "modules": MODULE_COLUMNS, "devices": DEVICE_COLUMNS,
          "lines": LINE_COLUMNS}


def _frame(rows: dict[str, list] | None, schema: dict[str, str]) -> pd.DataFrame:
    """A DataFrame with exactly `schema`'s columns and dtypes, from column lists."""
    import pandas as pd

    rows = rows or {}
    data = {}
    n = max((len(v) for v in rows.values()), default=0)
    for col, dtype in schema.items():
        values: Any = rows.get(col, [])
        if is_repeated(values):  # a frame's columns are its own, writable arrays
            values = np.array(values)
        if n and not len(values) and col not in COLUMN_DEFAULTS and dtype != "int64":
            values = [None] * n  # a column a producer leaves out is missing (None) there
        if col in COLUMN_DEFAULTS:
            values = _with_default(values, n, COLUMN_DEFAULTS[col])
        # copy=False: the column arrays are ours alone (built for this frame)
        data[col] = (_nullable(values, dtype) if dtype in _NULLABLE
                     else pd.array(values, dtype=dtype, copy=False) if dtype != "object"
                     else pd.Series(values, dtype=object, copy=False))
    return pd.DataFrame(data, copy=False)


_NULLABLE_INTS = {"UInt64": np.uint64, "Int64": np.int64}
_NULLABLE = {*_NULLABLE_INTS, "boolean"}


def _nullable(values: Any, dtype: str) -> Any:
    """`pd.array(values, dtype)` for a nullable dtype (program ids, `async` flags), converting
    each distinct object of an object column once: a reader's column holds a few (one int per
    op's metadata, None for a whole line, True/False), and pandas coerces per element (0.14 s
    for an all-None million-row id column; 8.6 ms for 58k async flags).

    The distinct objects are found by their addresses (`object_addresses`): runs of one
    object, else a hash of the addresses. Their conversion is spread with `take`; the same
    objects give the same values, and where pandas refuses one the whole column goes through
    pandas, which raises as before."""
    import pandas as pd

    n = len(values)
    if isinstance(values, np.ndarray) and values.dtype == object and values.ndim == 1 and n > 8:
        found = _distinct_objects(values)
        if found is not None:
            codes, first = found
            try:
                heads = _convert(values[first], dtype)
            except (OverflowError, TypeError, ValueError):
                heads = None
            if isinstance(heads, pd.api.extensions.ExtensionArray):
                return heads.take(codes)
    return _convert(values, dtype)


def _convert(values: Any, dtype: str) -> Any:
    import pandas as pd

    return _ints(values, dtype) if dtype in _NULLABLE_INTS else \
        pd.array(values, dtype=dtype, copy=False)


def _distinct_objects(values: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(per element, the number of its object; each number's first element), with numbers
    for at most an eighth of the elements, else None (`_nullable` converts every element)."""
    import pandas as pd  # building a frame: pandas hashes the addresses (no sort)

    n = len(values)
    starts = _heads(values)
    if starts is not None:
        return _run_codes(starts, n), starts
    codes, uniq = pd.factorize(object_addresses(values))
    if len(uniq) > n // 8:
        return None
    # codes number the objects in order of first appearance: where their running maximum
    # grows is each object's first element
    grow = np.maximum.accumulate(codes)
    return codes, np.flatnonzero(np.r_[True, grow[1:] != grow[:-1]])


def _ints(values: Any, dtype: str) -> Any:
    import pandas as pd

    obj = isinstance(values, np.ndarray) and values.dtype == object and len(values) > 0
    if obj and pd.api.types.infer_dtype(values, skipna=True) == "integer":
        mask = np.asarray(pd.isna(values), bool)
        data = np.zeros(len(values), _NULLABLE_INTS[dtype])
        try:
            data[~mask] = values[~mask].astype(data.dtype)
            return pd.arrays.IntegerArray(data, mask)
        except (OverflowError, TypeError, ValueError):
            pass  # pandas says what it cannot hold
    return pd.array(values, dtype=dtype, copy=False)


def _with_default(values, n: int, default: Any) -> np.ndarray:
    """`values` with None (or a missing column: no values at all) read as `default`."""
    if not len(values):
        return np.full(n, default)
    if isinstance(values, np.ndarray) and values.dtype == type(default):
        return values  # nothing missing (a bool array has no None)
    v = np.asarray(values, dtype=object)
    return np.where(missing_mask(v), default, v).astype(type(default))


# ---------------------------------------------------------------------------------------------
# Tables as columns (what `overlap report` reads: no pandas)


class Columns(dict):
    """A table as one numpy array per schema column, in `Trace.columns`' representation
    (`as_columns` made it, or `frame_columns`): a `Trace` given one keeps it as it is."""


def n_rows(t: dict[str, np.ndarray] | Deferred) -> int:
    """Rows of a column table (a `Columns`, any dict of equally long arrays, a `Deferred`)."""
    if isinstance(t, Deferred):
        return t.n
    return len(next(iter(t.values()))) if t else 0


class Deferred:
    """A table of `n` rows whose columns `make()` gives (as `as_columns` takes them), made
    the first time they are read (`columns`) and kept. The reader's `lines` table: its names
    (a million one-event lines: 76 MiB of `str` and ~0.05 s to decode) are read by `overlap
    inspect`, never by a report. It pickles as its `Columns` (a worker's part)."""

    __slots__ = ("_make", "_schema", "_cols", "n")

    def __init__(self, make: Callable[[], dict], n: int, schema: dict[str, str]) -> None:
        self._make: Callable[[], dict] | None = make
        self._schema, self.n = schema, n
        self._cols: Columns | None = None

    def columns(self) -> Columns:
        if self._cols is None:
            assert self._make is not None
            self._cols = as_columns(self._make(), self._schema)
            self._make = None  # (what it held goes)
        return self._cols

    def __reduce__(self) -> tuple:
        return (Columns, (dict(self.columns()),))


def made(t: Any) -> Any:
    """`t`, or a `Deferred` table's columns."""
    return t.columns() if isinstance(t, Deferred) else t


def take(t: dict[str, np.ndarray], idx: np.ndarray) -> Any:
    """The rows `idx` (positions or a mask) of every column, as the same kind of dict
    (`DataFrame.take`; a `Columns` stays one, which `combine_parts` and `Trace` keep as
    they are)."""
    return type(t)({k: _take(v, idx) for k, v in t.items()})


def _take(v: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """`v[idx]`; a `repeated` column stays one (of the rows taken)."""
    if not is_repeated(v):
        return v[idx]
    idx = np.asarray(idx)
    if idx.dtype == bool:
        if idx.shape != v.shape:
            return v[idx]  # (the IndexError it raises)
        n = int(np.count_nonzero(idx))
    else:
        n = len(idx)
        if n and not -len(v) <= int(idx.min()) <= int(idx.max()) < len(v):
            return v[idx]
    return repeated(n, v[0], v.dtype)


def concat(tables: Sequence[dict[str, np.ndarray]]) -> Any:
    """The rows of `tables` (the same columns each) one after the other, as the first one's
    kind of dict (`pd.concat(..., ignore_index=True)`)."""
    return type(tables[0])({k: _concat([t[k] for t in tables]) for k in tables[0]})


def _concat(arrays: list[np.ndarray]) -> np.ndarray:
    """`np.concatenate`; `repeated` where every array repeats one same object (or number)."""
    arrays = [np.asarray(a) for a in arrays]
    got = repeated_join(arrays)
    return np.concatenate(arrays) if got is None else got


_BOOL_OBJECTS = np.array([False, True, None], object)


def as_columns(rows: Any, schema: dict[str, str], *,
               checked: Any = None) -> Columns:
    """`rows` (column name -> list or array, what `_frame` takes) in `Trace.columns`'
    representation, without pandas: "int64" an int64 array; "object" an object array whose
    missing values (NaN, pd.NA) are None; "UInt64"/"Int64" an object array of Python int or
    None; "boolean" an object array of True/False/None; "bool" a bool array with
    `COLUMN_DEFAULTS` applied. A column `rows` lacks (no key, or no values in a table that has
    rows) is all None (missing), its default for "bool", and an error for "int64".

    `checked`: the columns held as object arrays whose values are looked at (default: all).
    The reader names the few that hold a capture's raw stat values (a NaN double where a name
    belongs); its other columns are names and ids its rules made, None where missing, and are
    taken as they are (looking costs ~14 ms per million rows of a column that alternates
    between values)."""
    rows = rows or {}
    n = max((len(v) for v in rows.values()), default=0)
    out = Columns()
    for col, dtype in schema.items():
        v = rows.get(col)
        if v is None or (n and not len(v)):
            if dtype == "int64":
                if n:
                    raise ValueError(f"column {col!r} has no values for {n} rows")
                out[col] = np.zeros(0, np.int64)
            elif dtype == "bool":
                out[col] = np.full(n, COLUMN_DEFAULTS.get(col, False), bool)
            else:
                out[col] = filled(n, None)
            continue
        if dtype == "int64":
            out[col] = np.asarray(v, np.int64)
        elif (checked is not None and col not in checked and isinstance(v, np.ndarray)
              and v.dtype == object and dtype != "bool"):
            out[col] = v  # made by the reader's rules: already so
        elif dtype == "object":
            out[col] = _none_for_missing(_objects(v))
        elif dtype in _NULLABLE_INTS:
            out[col] = _int_objects(v)
        elif dtype == "boolean":
            out[col] = _bool_objects(v)
        elif dtype == "bool":
            out[col] = _bools(v, COLUMN_DEFAULTS.get(col, False))
        else:
            raise ValueError(f"column {col!r}: no columns representation for dtype {dtype!r}")
    return out


def _objects(v: Any) -> np.ndarray:
    """A 1-d object array of `v`'s elements (tuples stay elements, never a second axis)."""
    if isinstance(v, np.ndarray):
        return v if v.dtype == object else v.astype(object)
    # Each element as it is, in C: `out[:] = v` first looks into every element for a nested
    # sequence (and would make a tuple a second axis), ~80 ns an element where they are
    # None (100k GPU planes' device rows: ~60 ms); `fromiter` takes each one whole, ~12 ns.
    return np.fromiter(v, object, len(v))


def _heads(a: np.ndarray) -> np.ndarray | None:
    """The start of each run of one object in an object array, where runs are at most an
    eighth of the elements (a reader's column of a few distinct objects), else None."""
    if len(a) <= 8:
        return None
    starts = object_runs(a)
    return starts if len(starts) <= len(a) // 8 else None


def _run_codes(starts: np.ndarray, n: int) -> np.ndarray:
    """Per element of `n`, the number of the run (begun at `starts`) it lies in."""
    return np.repeat(np.arange(len(starts)), np.diff(np.append(starts, n)))


def _spread(a: np.ndarray, starts: np.ndarray, heads: np.ndarray) -> np.ndarray:
    """`a` with each run's elements replaced by its new head value."""
    return heads[_run_codes(starts, len(a))]


def missing_mask(a: np.ndarray) -> np.ndarray:
    """Per element of an object array: None, NaN or another value pandas calls missing."""
    pd = sys.modules.get("pandas")
    if pd is not None:  # pd.NA and NaT can only exist once pandas is imported
        return np.asarray(pd.isna(a), bool)
    miss = np.equal(a, None)  # type: ignore[call-overload]
    try:  # NaN is the one value that is not equal to itself
        miss |= np.not_equal(a, a)
    except (TypeError, ValueError):  # a value whose != answers no bool
        miss |= np.array([x is not None and bool(x != x) for x in a.tolist()], bool)
    return miss


def _none_for_missing(a: np.ndarray) -> np.ndarray:
    """An object array with missing values (NaN, pd.NA) as None; `a` itself where none is."""
    starts = _heads(a)
    if starts is not None:
        h = a[starts]
        miss = missing_mask(h) & ~np.equal(h, None)  # type: ignore[call-overload]
        if not miss.any():
            return a
        h = h.copy()
        h[miss] = None
        return _spread(a, starts, h)
    miss = missing_mask(a) & ~np.equal(a, None)  # type: ignore[call-overload]
    if not miss.any():
        return a
    a = a.copy()
    a[miss] = None
    return a


def _int_objects(v: Any) -> np.ndarray:
    """An object array of Python int or None (a nullable integer column)."""
    if isinstance(v, np.ndarray) and v.dtype.kind in "iu":
        # (one `astype`: the same Python ints as through a list, ~1.5 ms less on the clocked
        # many-ops file's 36k `device_span_ps`; `as_columns` runs once the planes are freed)
        return v.astype(object)
    return _typed_objects(v, int, _as_int)


def _bool_objects(v: Any) -> np.ndarray:
    """An object array of True, False or None (a nullable boolean column)."""
    if isinstance(v, np.ndarray) and v.dtype.kind in "biu":
        return _BOOL_OBJECTS[v.astype(bool).astype(np.intp)]
    return _typed_objects(v, bool, _as_bool)


def _typed_objects(v: Any, kind: type, convert: Any) -> np.ndarray:
    """An object array of `v`'s values as `kind` objects or None: missing values None, the
    others through `convert` (once per run of one object, where the column is a few runs),
    unless every one is a `kind` already."""
    a = _none_for_missing(_objects(v))
    starts = _heads(a)
    h = a if starts is None else a[starts]
    lst = h.tolist()
    if set(map(type, lst)) <= {kind, type(None)}:
        return a
    h = np.empty(len(lst), object)
    h[:] = [x if x is None else convert(x) for x in lst]
    return h if starts is None else _spread(a, starts, h)


def _as_int(x: Any) -> int:
    """An integral value as a Python int (numpy integers, 3.0); anything else is refused."""
    i = int(x)
    if i != x or isinstance(x, (bool, np.bool_)):
        raise TypeError(f"not an integer: {x!r}")
    return i


def _as_bool(x: Any) -> bool:
    """True/False of a boolean value (numpy bools, 0 and 1); anything else is refused."""
    if x in (0, 1) and not isinstance(x, str):
        return bool(x)
    raise TypeError(f"not a boolean: {x!r}")


def _bools(v: Any, default: bool) -> np.ndarray:
    if isinstance(v, np.ndarray) and v.dtype.kind in "biu":
        return v.astype(bool, copy=False)
    if is_repeated(v):
        # one value in every row (`arrays.repeated`: a TPU plane's transfers' `async`): its
        # answer once, not a missing-value test and a truth test per row (52k: ~1.6 ms)
        return np.full(len(v), _bools(v[:1], default)[0], bool)
    a = _objects(v)
    return np.where(missing_mask(a), default, a).astype(bool)


def frame_columns(df: Any, schema: dict[str, str]) -> Columns:
    """A DataFrame's table in `Trace.columns`' representation (see `as_columns`). A schema
    column the frame lacks is all None, its default for "bool"; an "int64" one it lacks is
    left out where the frame has rows (what `df[col]` would refuse)."""
    import pandas as pd

    n = len(df)
    out = Columns()
    for col, dtype in schema.items():
        if col not in df.columns:
            if dtype != "int64" or not n:
                out[col] = as_columns({"_": np.zeros(n)}, {col: dtype})[col]
            continue
        s = df[col]
        if dtype == "int64":
            out[col] = s.to_numpy(np.int64)
        elif dtype == "object":
            a = s.to_numpy(dtype=object)
            miss = np.asarray(pd.isna(a), bool) & ~np.equal(a, None)  # type: ignore
            if miss.any():
                a = a.copy()
                a[miss] = None
            out[col] = a
        elif dtype in _NULLABLE_INTS:
            arr: Any = pd.array(s, dtype=dtype)
            data = arr.to_numpy(dtype=_NULLABLE_INTS[dtype], na_value=0)
            a = _objects(data.tolist())
            a[np.asarray(arr.isna(), bool)] = None
            out[col] = a
        elif dtype == "boolean":
            arr = pd.array(s, dtype="boolean")
            out[col] = _BOOL_OBJECTS[arr.to_numpy(dtype=np.intp, na_value=2)]
        elif dtype == "bool":
            out[col] = (s.to_numpy(bool) if s.dtype == bool else
                        _bools(s.to_numpy(dtype=object), COLUMN_DEFAULTS.get(col, False)))
        else:
            raise ValueError(f"column {col!r}: no columns representation for dtype {dtype!r}")
    return out


# ---------------------------------------------------------------------------------------------
# Trace


class _Stored:
    """One table of a `Trace`: its columns (a `Deferred` table's made on first use), its
    DataFrame, or both (the frame built from the columns on first use)."""

    __slots__ = ("cols", "frame")

    def __init__(self, cols: Columns | Deferred | None, frame: Any) -> None:
        self.cols, self.frame = cols, frame

    def columns(self) -> Columns | None:
        """The columns (a `Deferred` table's made now), None where a frame was set."""
        if isinstance(self.cols, Deferred):
            self.cols = self.cols.columns()
        return self.cols


class _Table:
    """A `Trace` table attribute. Reading it gives a DataFrame, built from the table's columns
    the first time it is read (`_frame`, the same frame the reader always gave) and kept;
    setting it takes a DataFrame (kept as given), a `Columns` or `Deferred` (kept) or a dict
    of column lists (`as_columns`)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name
        self.schema = TABLES[name]

    def __get__(self, obj: Any, owner: Any = None) -> pd.DataFrame:
        if obj is None:  # no default for the dataclass field
            raise AttributeError(self.name)
        st: _Stored = obj.__dict__[self.name]
        if st.frame is None:
            st.frame = _frame(st.columns(), self.schema)
        return st.frame

    def __set__(self, obj: Any, value: Any) -> None:
        if isinstance(value, (Columns, Deferred)):
            obj.__dict__[self.name] = _Stored(value, None)
        elif isinstance(value, dict):
            obj.__dict__[self.name] = _Stored(as_columns(value, self.schema), None)
        else:
            obj.__dict__[self.name] = _Stored(None, value)


@dataclasses.dataclass
class Trace:
    """Everything the reader extracts from one capture (one or more host files).

    Tables (`transfers`, `compute`, `steps`, `memory`, `modules`, `devices`, `lines`) read as
    pandas DataFrames with the dtypes of the `*_COLUMNS` schemas above. The reader hands them
    over as columns, and each DataFrame is built the first time its attribute is read:
    `columns(name)` gives a table's numpy columns without pandas (`overlap report` on one
    capture never imports it)."""

    sources: list[Path]
    backend: str  # "gpu", "tpu", "cpu" or "unknown"
    transfers: _Table = _Table()
    compute: _Table = _Table()
    steps: _Table = _Table()
    memory: _Table = _Table()
    modules: _Table = _Table()
    devices: _Table = _Table()
    lines: _Table = _Table()
    # per host: start/stop time, versions, warnings
    capture: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    synthetic: bool = False
    # "all", or a sentence saying which compute events a multi-host read kept (see
    # overlap.analysis.pod): the analysis always used every event, on its host's worker.
    compute_scope: str = "all"
    # Set by that multi-host read: the per-transfer analysis table's columns (overlap.analysis.
    # overlap.transfer_columns: `transfer_table` without its DataFrame) computed on each host's
    # worker from all its compute, with its thresholds.
    analysed_transfers: Any = None
    # Set by that multi-host read: compute time per HLO module over all events (for
    # overlap.analysis.memory.executed_module, which would otherwise rank the kept ones).
    module_time_ps: dict[str, int] | None = None
    # Host files of the session that could not be read, `{"path", "problem"}` each: the tables
    # hold the other hosts only (see overlap.trace.distributed.split_readable).
    unreadable: list[dict[str, str]] = dataclasses.field(default_factory=list)

    @property
    def hosts(self) -> list[str]:
        return sorted(self.capture)

    def columns(self, name: str) -> Columns:
        """Table `name` as one numpy array per column of its schema (`TABLES[name]`), the
        same for a table the reader gave and a DataFrame a caller set: "int64" an int64 array;
        "object" an object array, missing values None (never NaN or pd.NA); "UInt64"/"Int64"
        an object array of Python int or None; "boolean" an object array of True/False/None;
        "bool" a bool array (`COLUMN_DEFAULTS` applied to missing values).

        No pandas for a table the reader gave, and no copy: the arrays are the table's own
        (do not modify them). A DataFrame set by a caller is converted on each call (pandas
        is imported then anyway), so it may be modified in between; the frame built from the
        reader's columns is not read back (modify a table by setting its attribute)."""
        st: _Stored = self.__dict__[name]
        cols = st.columns()
        return Columns(cols if cols is not None else frame_columns(st.frame, TABLES[name]))

    def rows(self, name: str) -> int:
        """The number of rows of table `name` (without building its DataFrame)."""
        st: _Stored = self.__dict__[name]
        return n_rows(st.cols) if st.cols is not None else len(st.frame)
