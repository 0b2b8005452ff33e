"""The reader's output: the trace tables' columns and dtypes, and `Trace`, which holds them.

Every `*_ps` column is integer picoseconds on its host's clock (see `overlap.trace.reader`,
which fills them and re-exports these names).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

# pandas-free, shared with the analysis; re-exported here for the reader's callers
from overlap.arrays import (  # noqa: F401
    factorize,
    object_addresses,
    object_runs,
    run_starts,
)

TRANSFER_COLUMNS = {
    "host": "object", "device": "object", "direction": "object", "start_ps": "int64",
    "end_ps": "int64", "bytes": "int64", "src_kind": "object", "dst_kind": "object",
    "async": "boolean", "stream": "int64", "line": "object", "hlo_op": "object",
    "hlo_module": "object", "program_id": "UInt64",
    # False where the capture does not record the copy's size (ROCm host API events write
    # `size:0`): `bytes` is then 0 and every byte total says how many copies it leaves out.
    "bytes_known": "bool",
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


def _frame(rows: dict[str, list] | None, schema: dict[str, str]) -> pd.DataFrame:
    """A DataFrame with exactly `schema`'s columns and dtypes, from column lists."""
    rows = rows or {}
    data = {}
    n = max((len(v) for v in rows.values()), default=0)
    for col, dtype in schema.items():
        values: Any = rows.get(col, [])
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
    return _ints(values, dtype) if dtype in _NULLABLE_INTS else \
        pd.array(values, dtype=dtype, copy=False)


def _distinct_objects(values: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(per element, the number of its object; each number's first element), with numbers
    for at most an eighth of the elements, else None (`_nullable` converts every element)."""
    n = len(values)
    starts = object_runs(values)
    if len(starts) <= n // 8:
        return np.repeat(np.arange(len(starts)), np.diff(np.append(starts, n))), starts
    codes, uniq = pd.factorize(object_addresses(values))
    if len(uniq) > n // 8:
        return None
    # codes number the objects in order of first appearance: where their running maximum
    # grows is each object's first element
    grow = np.maximum.accumulate(codes)
    return codes, np.flatnonzero(np.r_[True, grow[1:] != grow[:-1]])


def _ints(values: Any, dtype: str) -> Any:
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
    return np.where(pd.isna(v), default, v).astype(type(default))


@dataclasses.dataclass
class Trace:
    """Everything the reader extracts from one capture (one or more host files)."""

    sources: list[Path]
    backend: str  # "gpu", "tpu", "cpu" or "unknown"
    transfers: pd.DataFrame
    compute: pd.DataFrame
    steps: pd.DataFrame
    memory: pd.DataFrame
    modules: pd.DataFrame
    devices: pd.DataFrame
    lines: pd.DataFrame
    capture: dict[str, dict[str, Any]]  # per host: start/stop time, versions, warnings
    synthetic: bool = False
    # "all", or a sentence saying which compute events a multi-host read kept (see
    # overlap.analysis.pod): the analysis always used every event, on its host's worker.
    compute_scope: str = "all"
    # Set by that multi-host read: the per-transfer analysis table (overlap.analysis.overlap.
    # transfer_table) computed on each host's worker from all its compute, with its thresholds.
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
