"""Read JAX profiler captures (XSpace, `*.xplane.pb`) into columnar trace tables.

`read_trace(path)` (`overlap.trace.read_trace`, in `distributed.py`: it maps this module's
`read_host_file` over a session's host files) accepts one `.xplane.pb`, a
`plugins/profile/<timestamp>/` directory, or a run directory holding
`plugins/profile/<timestamp>/<host>.xplane.pb` (the newest capture by default, every host file
of it). It returns a `Trace` whose tables are pandas DataFrames (built on first use from the
columns the reader makes; `Trace.columns` gives those without pandas):

* `transfers`: device<->host copies (D2H/H2D) with their spans, bytes and memory kinds.
* `compute`: device compute ops (GPU kernels, TPU XLA ops, XLA:CPU thunks).
* `steps`: step windows from `jax.profiler.StepTraceAnnotation` roots (`_r` stat).
* `memory`: allocator events (BFC `MemoryAllocation`/`MemoryDeallocation`) where the capture has
  them.
* `modules`: the HLO protos that `/host:metadata` carries, one row per program.
* `devices`: one row per device plane with its hardware facts.

Time. Every `*_ps` column is an integer number of picoseconds on one clock per host whose zero is
the capture's `profile_start_time` (the `Task Environment` plane; `Trace.capture[host]` keeps the
absolute Unix-epoch nanoseconds). JAX writes line timestamps relative to that start already; a
line whose timestamp is absolute is shifted onto the same zero. Hosts are never compared on one
clock: their start times come from different machines.

Classification (see docs/xspace.md for the evidence behind each rule):

* GPU: a transfer is an event named `MemcpyD2H`/`MemcpyH2D` on a `/device:GPU:N` plane; bytes and
  memory kinds come from its `memcpy_details` stat. The same names on host planes are driver-API
  calls, not transfers; D2D/P2P/Other copies are not host transfers. A kernel is any device event
  with `kernel_details` (whatever its stream); CUDA-graph executions count as compute too.
  Classification is per event, never by a line's name, because stream names mix kinds.
* AMD ROCm (`overlap.trace.vendors`): a `__amd_rocclr_copy*` kernel correlated
  (`correlation_id`) with a `hipMemcpyHtoD*`/`DtoH*` call on `/host:CPU` is a transfer (the
  call gives direction and, where it records one, the size: `bytes_known`); ROCm copy and fill
  kernels are never compute. Shapes outside every rule go to `capture[host]
  ["transfer_unknowns"]` ("cannot tell"), each device's vendor to `capture[host]["vendors"]`.
* TPU: a transfer is an `Async XLA Ops` span of an async start op that moves data across host
  memory space `S(5)`; without that line, the start..done pair of such an op from `XLA Ops`.
  The ops: `copy-start` (direction from where `S(5)` sits in its tuple, element 0 being the
  destination; read from the program's HLO proto where `/host:metadata` carries it, once per
  program, else from the op's HLO text: `overlap.trace.programs`) and
  `dynamic-update-slice-start` into / `dynamic-slice-start` out of an `S(5)` buffer, which
  is how the real XLA:TPU compiler offloads a scan's residuals (bytes = the slice; the same
  rule as `overlap.hlo.program.offload_inventory`, checked on its v5e output). Blind spot:
  with an `Async XLA Ops` line, only the ops it shows are counted (as xprof does).
  Compute is every `XLA Ops` (and `Sparse Core Ops`) event that is not itself an async
  start/done op, like xprof's analysis.
* CPU: XLA:CPU thunks (host events carrying `hlo_op`) are compute. XLA:CPU compiles host
  offload away, so a CPU capture has no transfers; that is reported, not raised.

Speed: `read_trace` reads the file with the compiled scanner (`overlap/trace/_scan.pyx`, see
`wire`): upb parses only the rest (names, metadata, plane stats; `skeleton` decodes it where
that gives upb's answer, and protobuf is then never imported: ~26 ms and ~3.5 MiB), and each
line's events are decoded in one compiled pass into arrays (metadata id, offset, duration,
the stats the rules read, typed): no Python object per event. Where the scanner was not built
(no C compiler at install) upb parses the whole file and the same arrays are built from its
messages: the same tables, several times slower (said once on stderr).
TPU planes' event metadata (one op's HLO text per entry, most of a TPU file) is not given to
upb: `wire.MetaTable` decodes the entries' names and stats for many ids at once, and the
per-op rules work on whole columns (async boundaries on display-name bytes, copy directions
once per result-tuple head), so a capture where every copy is its own op costs ~1-2 us of
Python per distinct op; upb reads the map only where the table cannot (and would then
refuse a damaged entry as before). In a file of many planes (`groups.MANY_PLANES`), GPU
planes' event metadata is kept from upb too and decoded for all of them at once
(`groups.MetaRows`: 100k one-line planes paid a upb map each).
Lines of fewer than `_SMALL_LINE` events on GPU planes are read together, several planes at
once (`groups.PlaneGroup`): a capture with thousands of small device planes does not pay numpy's
fixed cost per line. The rules above are still applied per event; nothing is decided per line
or per metadata id alone. The scanner checks wire types and lengths of every line it decodes
(a damaged event is an `InputError`, as a parse failure is) but does not validate UTF-8 inside
event string stats (decoded with replacement). Events whose metadata id can never give a row
(host-plane Python-tracer `$...`, `end: ...` and `ThreadpoolListener::*` events, the `Async
XLA Ops` line where only metadata decides, and host events of non-memory metadata on a plane
with no `_r`/`hlo_op` stat at all) keep no stats.

Memory: the file is read in chunks (`files.read_chunks`): the host plane and each TPU plane
in a buffer of its own, every other field together. The host plane is read first (wherever the
file has it), each plane's bytes are freed once it is read, and all of them before the tables
are built; then freed heap pages go back to the system (glibc keeps them otherwise, and the
analysis would sit on top of them). At the peak a reader holds the plane being decoded, the
rows of the planes read so far and the decoder's arrays for one line.

Blind spots: events aggregated with `num_occurrences` have no position and are skipped; GPU time
is CUPTI time shifted once onto wall time (no drift correction); a memcpy that XLA issues outside
an annotated thunk has no `hlo_op`.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
from collections import defaultdict
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np

from overlap.errors import InputError
from overlap.trace import groups, tpu, tpu_chips, vendors
from overlap.trace.files import (
    TASK_ENV_PLANE,
    _check_space,
    _corrupt,
    _read_file,
    check_lines_fit,
    read_chunks,
)
from overlap.trace.files import _find_files as _find_files
from overlap.trace.files import load_xspace as load_xspace
from overlap.trace.gpu import _read_gpu_planes
from overlap.trace.hlotext import _DTYPE_BYTES as _DTYPE_BYTES
from overlap.trace.hlotext import _TUPLE_HEAD_RE as _TUPLE_HEAD_RE
from overlap.trace.hlotext import HOST_MEMORY_SPACE as HOST_MEMORY_SPACE
from overlap.trace.hlotext import _copy_start_direction_slow as _copy_start_direction_slow
from overlap.trace.hlotext import array_bytes as array_bytes
from overlap.trace.hlotext import async_boundaries_by_bytes as async_boundaries_by_bytes
from overlap.trace.hlotext import copy_directions as copy_directions
from overlap.trace.hlotext import copy_start_direction as copy_start_direction
from overlap.trace.hlotext import host_transfer_directions as host_transfer_directions
from overlap.trace.hlotext import instruction_name as instruction_name
from overlap.trace.hlotext import instruction_names as instruction_names
from overlap.trace.hlotext import is_async_boundary as is_async_boundary
from overlap.trace.hlotext import shape_bytes as shape_bytes
from overlap.trace.host import _read_host_plane
from overlap.trace.lines import EVENTS, ID, TIMESTAMP_NS, LineTable, adjacent_runs, events_of, wide
from overlap.trace.names import (
    GPU_PLANE_RE,
    HOST_PLANE,
    METADATA_PLANE,
    SYNTHETIC_MARK,
    TPU_PLANE_RE,
)
from overlap.trace.names import parse_details as parse_details
from overlap.trace.programs import ProgramCopies
from overlap.trace.tables import (
    COMPUTE_COLUMNS,
    DEVICE_COLUMNS,
    LINE_COLUMNS,
    MEMORY_COLUMNS,
    MODULE_COLUMNS,
    STEP_COLUMNS,
    TABLES,
    TRANSFER_COLUMNS,
    Columns,
    Deferred,
    Trace,
    _frame,
    as_columns,
    concat,
    factorize,
    frame_columns,
    made,
    n_rows,
    object_runs,
    take,
)
from overlap.trace.tpu import _program_copies, _read_tpu_plane
from overlap.trace.tpu_twins import twins
from overlap.trace.wire import (
    BAD_STRINGS,
    INVALID_EVENTS,
    INVALID_REASONS,
    PAD,
    TIME_LIMIT_PS,
    Cols,
    Corrupt,
    Plane,
    PlaneView,
    as_id,
    as_int,
    as_text,
    check_lines,
    object_array,
    padded,
    parse_errors,
    parse_space,
)

# ---------------------------------------------------------------------------------------------
# Loading


@contextlib.contextmanager
def gc_paused():
    """Hold off Python's cyclic garbage collector for a read.

    Why: a read allocates hundreds of thousands of small objects (a name per distinct op, a
    dict of stats per metadata) and makes no reference cycles, but the allocations trigger
    full collections that scan every object the *process* holds. After another large job in
    the same process (xprof's reader in `bench_shapes.py`, a dashboard's cached runs) the same
    read took 2.3 s instead of 1.3 s. Reference counting still frees everything at once;
    cycles made meanwhile elsewhere wait for the next collection.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def read_host_file(f: str | os.PathLike) -> dict[str, Any]:
    """One host's `.xplane.pb` -> its tables (`Columns`, see `Trace.columns`; picklable) and
    facts: the map step of `read_trace` (`combine_parts` makes the Trace)."""
    with gc_paused():
        return _read_host_file(Path(f))


def _read_host_file(f: Path) -> dict[str, Any]:
    bad_before = BAD_STRINGS[0]
    xs, planes = _parse_file(f)
    _check_space(f, xs)
    check_lines_fit(f, f.stat().st_size if f.is_file() else 0,
                    sum(len(pl.lines) for pl in planes if pl is not None))
    host = _host_name(xs, f)
    try:
        with np.errstate(over="raise", invalid="ignore"):
            # `planes` is handed over: each plane's bytes are freed once it is read
            out = _read_space(xs, planes, host=host, source=f)
        _trim_heap()
        out["capture"]["strings_replaced"] = BAD_STRINGS[0] - bad_before
        return out
    except Corrupt as e:
        raise _corrupt(f, e) from None
    except (OverflowError, FloatingPointError, ValueError, TypeError) as e:
        # Valid protobuf, values no profiler writes (what the rules above do not cover):
        # refuse the file with one line rather than report numbers built on them.
        raise InputError(f, f"unsupported value in the capture: {type(e).__name__}: "
                            f"{' '.join(str(e).split())[:200]}") from None


class _Space:
    """The skeletons of several parsed chunks of one file as one XSpace (its fields the
    reader reads): planes, host names, errors and warnings, in file order."""

    def __init__(self, parts: list, planes: list) -> None:
        # (the parts' planes' views in file order, as `_parse_chunks` has them: the reader
        # reads a space's planes' names, `_check_space`)
        self.planes = planes
        self.hostnames = [h for xs in parts for h in xs.hostnames]
        self.errors = [e for xs in parts for e in xs.errors]
        self.warnings = [w for xs in parts for w in xs.warnings]


def _parse_file(f: Path) -> tuple[Any, list[PlaneView]]:
    """The file's XSpace skeleton and planes (the scanner down to the lines, upb for the rest;
    see "Speed"; a damaged event surfaces in the decoder instead of the parser, with the same
    message).

    The file is read in chunks of whole planes (`files.read_chunks`), so that `_read_space`
    can free each plane's bytes once it is read: a GPU file's host plane (a third of it) is
    gone before the device planes' events are decoded. Where the file cannot be cut, or a
    chunk does not parse, the whole file is read and parsed at once, as before, and a damaged
    file is refused with the same message."""
    chunks = read_chunks(f, PAD, alone=_read_alone)
    if chunks is not None:
        many = sum(len(c[2]) for c in chunks) >= groups.MANY_PLANES
        got = _parse_chunks(chunks, _strip_many if many else _strip_meta)
        if got is not None:
            return got
    data, n = _read_file(f, PAD)
    try:
        xs, planes, _ = parse_space(data, n, strip_meta=_strip_meta)
    except parse_errors() as e:
        raise _corrupt(f, e) from None
    return xs, planes


def _read_alone(plane_name: str) -> bool:
    """Planes read on their own, whose bytes `_read_space` frees once read: the host plane
    and TPU planes (GPU planes' small lines are decoded together, over one buffer)."""
    return plane_name == HOST_PLANE or TPU_PLANE_RE.match(plane_name) is not None


def _parse_chunks(chunks: list[tuple[np.ndarray, int, list[int], bool]], strip_meta
                  ) -> tuple[Any, list[PlaneView]] | None:
    """`_parse_file` of `read_chunks`'s chunks (consumed: the planes' views keep their chunk,
    nothing else does), the planes in file order; None where a chunk does not parse or a
    plane read alone is not one `_read_alone` accepts (a name the peek got wrong)."""
    parts: list = []
    planes: list[tuple[int, PlaneView]] = []  # (file offset, view)
    bad_before = BAD_STRINGS[0]  # a chunk refused: the whole file is parsed again
    try:
        while chunks:
            buf, n, offsets, alone = chunks.pop(0)
            xs, got, _ = parse_space(buf, n, strip_meta=strip_meta)
            if len(got) != len(offsets) or (alone and not _read_alone(got[0].name)):
                BAD_STRINGS[0] = bad_before
                return None
            parts.append(xs)
            planes += zip(offsets, got)
    except parse_errors():
        BAD_STRINGS[0] = bad_before
        return None
    if len(parts) > 1:  # (one chunk's planes are in file order)
        planes.sort(key=lambda t: t[0])
    # (the space's planes are the views, which name their planes as the skeletons' do: the
    # skeletons' planes are not walked again, a wrapper each from upb, 100k planes in a
    # capture of small ones)
    views = [pv for _, pv in planes]
    return _Space(parts, views), views


@functools.cache
def _malloc_trim() -> Any:
    try:
        import ctypes

        return ctypes.CDLL(None).malloc_trim  # glibc
    except (OSError, AttributeError, TypeError):  # another C library, another system
        return None


@functools.cache
def _heap_top() -> Any:
    """A call giving the free bytes at the top of the heap (glibc's `mallinfo2().keepcost`,
    glibc 2.33 and later), or None where there is no such call (then every read trims)."""
    try:
        import ctypes

        class _Info(ctypes.Structure):
            _fields_ = [(n, ctypes.c_size_t) for n in (
                "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
                "uordblks", "fordblks", "keepcost")]

        info = ctypes.CDLL(None).mallinfo2
        info.argtypes = []
        info.restype = _Info
        return lambda: int(info().keepcost)
    except (OSError, AttributeError, TypeError):
        return None


# Free bytes at the heap's top from which a read gives its freed memory back (`_trim_heap`).
TRIM_TOP_MIN = 32 << 20


def _trim_heap() -> None:
    """Give the pages of the decoder's freed temporaries back to the system (glibc keeps
    freed heap memory for reuse: the analysis after a read then sits on top of it, and the
    process peak grows by the reader's temporaries, ~30 MiB on a 1M-event TPU file), where
    at least `TRIM_TOP_MIN` of them lie at the heap's top.

    Why not always: below that the analysis reuses what is kept, and `malloc_trim` also
    hands back every free page inside the heap, which the analysis then faults in again,
    besides the trim's own walk of the heap (1-1.8 ms). Measured (`report --json`, whole
    processes, peak RSS and minor faults, always trimmed -> never): TPU 1M (45 MiB at the
    top) peak 104 -> 111 MiB, so it trims; GPU 1M (13 MiB at the top) 166.6 -> 166.5 MiB,
    faults 24.4k -> 18.0k; compact GPU 1M 111.3 -> 111.0 MiB, 25.4k -> 22.7k; many-ops
    (none at the top) 88.4 -> 88.2 MiB, 16.8k -> 13.9k; clocked many-ops 95.9 -> 95.9 MiB,
    19.2k -> 15.9k; the small captures alike either way."""
    trim = _malloc_trim()
    if trim is None:
        return
    top = _heap_top()
    if top is not None and top() < TRIM_TOP_MIN:
        return
    trim(0)


def _host_name(xs, f: Path) -> str:
    """JAX names each host's file `<host>.xplane.pb`; fall back to XSpace.hostnames."""
    name = f.name
    stem = name[: -len(".xplane.pb")] if name.endswith(".xplane.pb") else f.stem
    if stem and stem != "xplane":
        return stem
    return xs.hostnames[0] if xs.hostnames and xs.hostnames[0] else "host"


def _sort_by_device_start(t: Any) -> Any:
    """Stable sort by (host, device, start_ps), as `sort_values(kind="stable")` would, of a
    table's `Columns` (returns `Columns`) or a DataFrame (returns a DataFrame, index reset).

    Sorting on object columns is slow at millions of rows; sorted factor codes keep the
    lexicographic order, and `np.lexsort` is stable. The codes come from `tables.factorize`
    (once per run of equal names: a host file's host is one value, its devices a few runs),
    and a table already in order (one device, one line, or sorted before) is returned as
    it is, without a sort or a copy of its columns.
    """
    if isinstance(t, dict):
        order = _device_start_take(t["host"], t["device"], t["start_ps"])
        return t if order is None else take(t, order)
    if len(t) < 2:
        return t.reset_index(drop=True)
    order = _device_start_take(t["host"].to_numpy(object), t["device"].to_numpy(object),
                               t["start_ps"].to_numpy(np.int64))
    return t.reset_index(drop=True) if order is None else t.take(order).reset_index(drop=True)


def _device_start_take(host: np.ndarray, dev: np.ndarray, start: np.ndarray
                       ) -> np.ndarray | None:
    """The row order of `_sort_by_device_start`, or None where the rows are in it already."""
    if len(start) < 2:
        return None
    if len(object_runs(host)) == 1 == len(object_runs(dev)) \
            and np.all(start[1:] >= start[:-1]):  # one host file's one device, in order
        return None
    h, _ = factorize(host, sort=True)
    d, _ = factorize(dev, sort=True)
    if _in_order(h, d, start):
        return None
    return _device_start_order(h, d, start)


def _device_start_order(h: np.ndarray, d: np.ndarray, start: np.ndarray) -> np.ndarray:
    """`np.lexsort((start, d, h))`, as one stable argsort of (host, device)-major int64 keys
    where they fit: a table is a few sorted runs (one per line), which the stable sort merges
    (20 ms where lexsort took 75 on a million rows of 8 devices)."""
    g = (h + 1) * (int(d.max()) + 2) + (d + 1)  # >= 0, in (h, d) order
    lo, hi = int(start.min()), int(start.max())
    span = hi - lo + 1
    if span * (int(g.max()) + 1) >= 2**62:  # times too far apart to share one int64 key
        return np.lexsort((start, d, h))
    return np.argsort((start - lo) + g * span, kind="stable")


def _in_order(h: np.ndarray, d: np.ndarray, start: np.ndarray) -> bool:
    """Whether rows are already sorted by (h, d, start), in one pass of neighbour tests."""
    if not (np.any(h != h[0]) or np.any(d != d[0])):  # one device: the common case
        return bool(np.all(start[1:] >= start[:-1]))
    key = h * (int(d.max()) + 2) + d  # codes are < len(df), so this cannot overflow
    dk = np.diff(key)
    return bool(np.all((dk > 0) | ((dk == 0) & (start[1:] >= start[:-1]))))


def combined_backend(backends: list[str]) -> str:
    """One backend name for a capture whose host files may disagree (GPU wins, then TPU)."""
    kinds = set(backends)
    if len(kinds) == 1:
        return next(iter(kinds))
    return "gpu" if "gpu" in kinds else "tpu" if "tpu" in kinds else "cpu"


def combine_parts(parts: list[dict], files: list[Path]) -> Trace:
    """One Trace from the `read_host_file` parts of `files` (same order), as one read gives.

    A part's table may be `Columns` (what `read_host_file` gives), a DataFrame (`read_xspace`,
    a caller's) or a dict of column lists; the Trace holds the tables' columns, concatenated
    in part order (`pd.concat`'s rows), transfers and compute sorted by device and start."""

    def cat(key: str, schema: dict[str, str]) -> Any:
        tabs = [_part_columns(p[key], schema) for p in parts]
        tabs = [t for t in tabs if n_rows(t)]
        if not tabs:
            return as_columns(None, schema)
        # (one part's `Deferred` lines table stays one: made if a caller reads it)
        return tabs[0] if len(tabs) == 1 else concat([made(t) for t in tabs])

    backend = combined_backend([p["backend"] for p in parts])
    # Host names come from file names, which are unique within a session directory.
    capture = {p["host"]: p["capture"] for p in parts}
    transfers = cat("transfers", TRANSFER_COLUMNS)
    compute = cat("compute", COMPUTE_COLUMNS)
    transfers = _sort_by_device_start(transfers)
    compute = _sort_by_device_start(compute)
    return Trace(
        sources=list(files), backend=backend, transfers=transfers, compute=compute,
        steps=cat("steps", STEP_COLUMNS), memory=cat("memory", MEMORY_COLUMNS),
        modules=cat("modules", MODULE_COLUMNS), devices=cat("devices", DEVICE_COLUMNS),
        lines=cat("lines", LINE_COLUMNS), capture=capture,
        synthetic=any(p["synthetic"] for p in parts),
    )


def _part_columns(table: Any, schema: dict[str, str]) -> Columns | Deferred:
    if isinstance(table, (Columns, Deferred)):
        return table
    if isinstance(table, dict):
        return as_columns(table, schema)
    return frame_columns(table, schema)


# ---------------------------------------------------------------------------------------------
# One XSpace


def read_xspace(xs, host: str = "host", source: Path | None = None) -> dict[str, Any]:
    """Extract the tables of one host's XSpace. Returns a dict of DataFrames and facts.

    `xs` is a parsed XSpace message (any schema with the same field numbers); it is serialized
    and read the way `read_trace` reads files (`read_host_file`'s part, its tables as
    DataFrames).
    """
    raw = xs.SerializeToString()
    bad_before = BAD_STRINGS[0]
    xs, planes, _ = parse_space(padded(raw), len(raw), strip_meta=_strip_meta)
    out = _read_space(xs, planes, host, source)
    out["capture"]["strings_replaced"] = BAD_STRINGS[0] - bad_before
    return part_frames(out)


def part_frames(part: dict[str, Any]) -> dict[str, Any]:
    """A `read_host_file` part with its tables as the reader's DataFrames (`_frame`), as
    `read_xspace` returns it: for callers and tests that want pandas."""
    out = dict(part)
    for key, schema in TABLES.items():
        if isinstance(out[key], (dict, Deferred)):
            out[key] = _frame(made(out[key]), schema)
    return out


def _strip_meta(plane_name: str) -> bool | int:
    """Planes whose event_metadata upb need not parse up front: TPU planes, whose reading uses
    only `MetaTable` (one op's HLO text per entry: most of a TPU file's bytes), GPU planes
    of many entries (3: `_scan.META_STRIP_MIN` or more: a million distinct event names, the
    fuzz campaign's, were a upb map of 220 MiB and a million strings), and a host plane of
    more entries than the pure-Python skeleton decoder reads (4: `SKELETON_STRIP_MIN`: GPU
    captures' 2,800-5,000 had protobuf imported, ~20 ms and ~3-5 MiB of a report, where the
    host rules read them through the table; a rule that asks the map has it parsed then)."""
    if plane_name == HOST_PLANE:
        return 4
    if TPU_PLANE_RE.match(plane_name) is not None:
        return True
    return 3 if GPU_PLANE_RE.match(plane_name) is not None else False


def _strip_many(plane_name: str) -> bool | int:
    """`_strip_meta` of a file of many planes (`groups.MANY_PLANES` or more): GPU planes'
    entries too, checked by the scanner and kept out of upb's skeleton (2: nothing decoded
    per plane), for `groups.MetaRows` to decode at once. Why: 100k one-line GPU planes held
    a upb map each, ~34 MiB of the read's peak, that no rule read once `MetaRows` answered
    for them; a plane read on its own still gets its map, parsed when first asked
    (`Plane.meta`)."""
    if GPU_PLANE_RE.match(plane_name) is not None:  # (first: 100k GPU planes, one match each)
        return 2
    return 4 if plane_name == HOST_PLANE else TPU_PLANE_RE.match(plane_name) is not None


# What each answers for a GPU plane, said to the scanner, which then answers the planes named
# `/device:GPU:` + ASCII digits without a call (`_scan._GPU_MODE`: 100k calls were ~60 ms)
_strip_meta.gpu_plane_mode = 3  # type: ignore[attr-defined]
_strip_many.gpu_plane_mode = 2  # type: ignore[attr-defined]


def _read_space(xs, planes: list, host: str = "host",
                source: Path | None = None) -> dict[str, Any]:
    """The tables of one host's XSpace. `planes` is consumed: each plane is dropped from it
    once read, so that its bytes can be freed while the others are read."""
    invalid_before = INVALID_EVENTS[0]
    reasons_before = dict(INVALID_REASONS)
    # (the plane's view, not the skeleton's message: the scanner keeps stat metadata out of
    # the skeleton, `PlaneView.stat_names`)
    task = next((pl for pl in planes if pl.name == TASK_ENV_PLANE), None)
    start_ns = stop_ns = None
    if task is not None:
        ts = Plane(task).plane_stats()
        start_ns = as_int(ts.get("profile_start_time"))
        stop_ns = as_int(ts.get("profile_stop_time"))
    # (its view holds the file's bytes, as every plane's does: a name left bound to it kept
    # them mapped until the tables were built; 10k planes: 9.3 MiB at the vendor facts'
    # step, past that file's peak, which is in the GPU walk)
    del task
    if start_ns is not None and not 0 <= start_ns < TIME_LIMIT_PS:
        start_ns = None
    origin_ns = start_ns or 0
    if not origin_ns:
        # No Task Environment plane (another producer): absolute line timestamps, if any, are
        # put on a zero of their own, the earliest of them (in a function: no block, which
        # holds the file's bytes, is left bound here)
        origin_ns = _earliest_absolute(pl.lines.block for pl in planes)
    line_base_ps = LineBase(origin_ns)

    # (each given its schema: small chunks, a TPU chip's rows, are joined as they come)
    tr, co = Cols(TRANSFER_COLUMNS), Cols(COMPUTE_COLUMNS)
    st: dict[str, list] = defaultdict(list)
    mem = Cols(MEMORY_COLUMNS)
    mods: dict[str, list] = defaultdict(list)
    devs = _DeviceRows()  # per device plane, its row of the `devices` table
    lines = _LineRows()  # per plane, its rows of the `lines` table
    facts: dict[str, Any] = {
        "host": host, "source": str(source) if source else None,
        "profile_start_time_ns": start_ns, "profile_stop_time_ns": stop_ns,
        "hostnames": list(xs.hostnames), "errors": list(xs.errors),
        "warnings": list(xs.warnings),
    }
    synthetic = any(SYNTHETIC_MARK in w for w in xs.warnings)
    backend = "cpu"
    cpu_compute_seen = False
    gpu_planes: list[Plane] = []  # (and each one's device, `gpu_devices`)
    gpu_devices: list[str] = []
    side = vendors.GpuSide()  # what the GPU rules set aside (ROCm copies, odd shapes)
    hip_calls = Cols()
    raw_vendor = _RawVendors()  # per device: device_vendor, events, tpu
    other_planes: list[tuple[str, int]] = []  # /device: planes of no kind we read

    meta_plane = next((pl for pl in planes if pl.name == METADATA_PLANE), None)

    @functools.cache
    def programs() -> ProgramCopies | None:
        """TPU copy facts from the programs the capture carries (built once, on first use)."""
        if meta_plane is None or not tpu._PROGRAM_FACTS:
            return None
        return _program_copies(meta_plane)

    plane: Any = None
    P: Plane | None = None
    table: Any = None  # (the plane's `LineTable`)
    # The host plane first, wherever the file has it: its bytes are freed before the device
    # planes' events are decoded (a TPU file writes its device planes first). Its rows go to
    # tables no device plane writes, except XLA:CPU compute, which a TPU/GPU run drops.
    host_lines: dict[int, Any] = {}
    for i in range(len(planes)):
        if planes[i].name == HOST_PLANE:
            cpu_compute_seen |= _read_host_plane(Plane(planes[i]), host, line_base_ps, co, st,
                                                 mem, hip_calls)
            host_lines[i] = _LineRows.of(planes[i].lines)
            check_lines(planes[i])  # (lines no rule read are checked as upb would)
            planes[i] = None  # read: its bytes can go (see `_parse_file`)
    # each GPU plane's device, at once (runs of GPU planes are read a run at a time below;
    # the names, not the matches: 100k of those were 14 MiB on the read's peak)
    gpu_device = _gpu_devices(planes)
    # chips whose metadata is the same bytes share their per-op answers (`tpu_twins`)
    twin_of = twins([None if d else pl for pl, d in zip(planes, gpu_device)],
                    lambda name: TPU_PLANE_RE.match(name) is not None)
    solo_until = 0  # (a run of twins that was not read as one: its chips one at a time)

    def chip_rows(P: Plane, with_lines: bool = False) -> str:
        """A TPU chip's rows of the devices and vendors tables (and of the lines table, where
        asked); its device."""
        plane = P.plane
        if with_lines:
            lines.add(plane.name, plane.lines.block.cols, plane.lines.a, plane.lines.b)
        device = f"TPU:{TPU_PLANE_RE.match(plane.name).group(1)}"  # type: ignore[union-attr]
        if "SparseCore" not in plane.name:
            devs.add(device, plane, P)
            raw_vendor.add(device, None, 0, True)
        return device

    i = 0
    while i < len(planes):
        if i in host_lines:
            lines.add(HOST_PLANE, *host_lines.pop(i))
            i += 1
            continue
        if gpu_device[i]:
            j = i + 1
            while j < len(planes) and gpu_device[j]:
                j += 1
            backend = "gpu"
            _gpu_run(planes[i:j], gpu_device[i:j], lines, devs, raw_vendor, gpu_planes,
                     gpu_devices)
            i = j
            continue
        if i >= solo_until and (j := tpu_chips.run_end(planes, i, twin_of)) > i + 1:
            if tpu_chips.read_run(planes, i, j, chip_rows, host, line_base_ps, tr, co,
                                  programs, twin_of.get(i)):
                if backend != "gpu":
                    backend = "tpu"
                i = j
                continue
            solo_until = j
        plane = planes[i]
        i += 1
        P = Plane(plane)
        # (no loop variable: a line left bound would keep its plane's bytes alive)
        table = plane.lines
        lines.add(plane.name, table.block.cols, table.a, table.b)

        if TPU_PLANE_RE.match(plane.name):
            if backend != "gpu":
                backend = "tpu"
            _read_tpu_plane(P, chip_rows(P), host, line_base_ps, tr, co, programs,
                            twin_of.get(i - 1))
            check_lines(plane)
            planes[i - 1] = None
        elif plane.name == METADATA_PLANE:
            ps = P.plane_stats()
            for key in ("jax_version", "jaxlib_version", "cpu_version"):
                if key in ps:  # text whatever the stat's type (bytes_value included)
                    facts[key] = as_text(ps[key])
            if "process_id" in ps:
                facts["process_id"] = as_int(ps["process_id"])
            for md in plane.event_metadata.values():
                s = P.stats(md.stats)
                proto = s.get("Hlo Proto")
                if not isinstance(proto, bytes):
                    # a proto is a bytes_value: any other type is no program (as the TPU copy
                    # rules read it; bytes() of an int n would be n zero bytes)
                    continue
                mods["host"].append(host)
                pid = as_id(s.get("program_id"))
                mods["program_id"].append(pid)
                mods["name"].append(md.name)
                mods["hlo_proto"].append(proto)
        elif plane.name == TASK_ENV_PLANE:
            continue
        elif plane.name.startswith("/device:") and not plane.name.startswith("/device:CUSTOM:"):
            other_planes.append((plane.name, table.events()))

    del plane, P, table, gpu_device
    # After the loop: small lines of many GPU planes are read together.
    _read_gpu_planes(gpu_planes, gpu_devices, host, line_base_ps, tr, co, side)
    # Every line is decoded (or checked, where no rule reads it): the file's bytes go before
    # the tables are built.
    # (no loop variable: one left bound to the last plane kept the file's bytes alive while
    # the tables were built, 29 MiB on the compact GPU 1M file)
    check_lines(*[pl for pl in planes if pl is not None])
    planes.clear()
    gpu_planes.clear()
    meta_plane = None
    programs.cache_clear()
    twin_of.clear()  # (their first planes' views hold the file's bytes)
    _gpu_vendor_facts(facts, side, hip_calls, host, tr, raw_vendor, other_planes)
    keep_compute = None
    if backend != "cpu":
        # XLA:CPU thunks on the host of a GPU/TPU program are host work, not device compute.
        def keep_compute(cols):
            return not cols.get("_cpu")
    elif not cpu_compute_seen:
        # Host planes without XLA:CPU ops are not a CPU run: a GPU/TPU job whose device planes
        # are missing looks the same. Say what is missing rather than blame XLA:CPU.
        backend = "unknown"

    facts["backend"] = backend
    facts["synthetic"] = synthetic
    facts["events_dropped_invalid"] = INVALID_EVENTS[0] - invalid_before
    facts["events_dropped_reasons"] = {k: n for k, v in INVALID_REASONS.items()
                                       if (n := v - reasons_before.get(k, 0))}
    # Tables as `Columns`: the rules make names and ids with None where missing; only the
    # raw stat values (a module or allocator name stat written as a NaN double) are looked at.
    return {
        "host": host, "backend": backend, "capture": facts, "synthetic": synthetic,
        "transfers": as_columns(tr.rows(TRANSFER_COLUMNS), TRANSFER_COLUMNS,
                                checked=("hlo_module",)),
        "compute": as_columns(co.rows(COMPUTE_COLUMNS, keep_compute), COMPUTE_COLUMNS,
                              checked=("hlo_module",)),
        "steps": as_columns(st, STEP_COLUMNS),
        "memory": as_columns(mem.rows(MEMORY_COLUMNS), MEMORY_COLUMNS, checked=("allocator",)),
        "modules": as_columns(mods, MODULE_COLUMNS),
        "devices": as_columns(devs.columns(host), DEVICE_COLUMNS),
        "lines": lines.table(host),
    }


def _gpu_run(run: list, devices: list[str], lines: _LineRows, devs: _DeviceRows,
             raw_vendor: _RawVendors, gpu_planes: list[Plane], gpu_devices: list[str]) -> None:
    """`_read_space` of consecutive GPU planes (`run`, and each one's device): its
    rows of the lines, devices and vendor columns and its planes for `_read_gpu_planes`, a
    run at a time (100k small planes: a handful of calls and ~2 us a plane less than one
    plane at a time)."""
    Ps = list(map(Plane, run))
    tables = [pl.lines for pl in run]
    names = [pl.name for pl in run]
    lines.add_many(names, tables)
    # (read once here, not kept on each plane: 10k GPU planes' were 5 MiB through the read)
    stats = [P.plane_stats(keep=False) for P in Ps]
    devs.add_many(devices, names, stats)
    gpu_planes += Ps
    gpu_devices += devices
    raw_vendor.add_many(devices, [ps.get("device_vendor") for ps in stats],
                        events_of(tables), False)


def _gpu_devices(planes: list) -> list[Any]:
    """Per plane, `GPU:<n>` of a GPU plane's name (`GPU_PLANE_RE`), else None (and for None);
    a name of ASCII digits after the prefix without the regex, no call a plane (100k planes:
    ~30 ms of matches, ~10 ms of calls)."""
    return [None if pl is None or not (n := pl.name).startswith("/device:GPU:") else "GPU:" + d
            if (d := n[12:]).isdigit() and d.isascii() else
            f"GPU:{m.group(1)}" if (m := GPU_PLANE_RE.match(n)) else None for pl in planes]


def _earliest_absolute(blocks) -> int:
    """The earliest absolute line timestamp (ns) among the blocks' lines (`ts * 1000 >=
    TIME_LIMIT_PS`, in int64: `ts` at least its ceiling over 1000), 0 where none is."""
    absolute = []
    for b in {id(b): b for b in blocks}.values():
        ts = wide(b.rec[:, TIMESTAMP_NS])
        ts = ts[ts >= -(-TIME_LIMIT_PS // 1000)]
        if ts.size:
            absolute.append(int(ts.min()))
    return min(absolute) if absolute else 0


class _LineRows:
    """The `lines` table's rows as `_read_space` collects them: per plane its name, its
    block's (records, names) and its range of them (not the block: that holds the file's
    bytes, freed plane by plane as they are read). Columns, not a tuple per plane (100k
    small planes: ~5 MiB on the read's peak)."""

    def __init__(self) -> None:
        self.plane: list[str] = []
        self.cols: list[tuple] = []
        self.a: list[int] = []
        self.b: list[int] = []

    @staticmethod
    def of(t: LineTable) -> tuple:
        """A plane's (block columns, first row, end row), for `add`."""
        return t.block.cols, t.a, t.b

    def add(self, plane: str, cols: tuple, a: int, b: int) -> None:
        self.plane.append(plane)
        self.cols.append(cols)
        self.a.append(a)
        self.b.append(b)

    def add_many(self, planes: list[str], tables: list) -> None:
        """`add` of each plane's name and `LineTable`, in order."""
        self.plane += planes
        self.cols += [t.block.cols for t in tables]
        self.a += [t.a for t in tables]
        self.b += [t.b for t in tables]

    def table(self, host: str) -> Deferred:
        """The `lines` table: one row per line of each plane (host, plane, line id, name,
        events), in the planes' order, from their blocks' columns: one slice per run of
        planes that lie one after the other in a block, not per plane or per line. The ids
        and event counts are taken now (the blocks' records go with the read); the names,
        planes and host when the table is read (`Deferred`)."""
        runs = adjacent_runs(self.cols, self.a, self.b)
        counts = np.subtract(self.b, self.a, dtype=np.int64)

        def col(j: int) -> np.ndarray:
            got = [cols[0][a:b, j] for cols, a, b in runs]
            return np.concatenate(got) if got else np.zeros(0, np.int64)

        ids, events = col(ID), col(EVENTS)
        name_runs = [(cols[1], a, b) for cols, a, b in runs]
        planes = self.plane

        def make() -> dict[str, np.ndarray]:
            return {"host": np.repeat(object_array([host] * len(planes)), counts),
                    "plane": np.repeat(object_array(planes), counts),
                    "line_id": ids, "events": events,
                    "line": object_array(list(chain.from_iterable(
                        names[a:b] for names, a, b in name_runs)))}

        return Deferred(make, len(ids), LINE_COLUMNS)


class LineBase:
    """A line's origin on the capture's clock, in ps (`timestamp_ns` from the session start:
    `origin_ns` off where the producer wrote absolute ones); `Corrupt` naming the line where
    it is out of range for this capture's clock. `many` does it for many lines at once."""

    # |ts * 1000| < TIME_LIMIT_PS, for int64 ts: |ts| <= (TIME_LIMIT_PS - 1) // 1000
    _BOUND = (TIME_LIMIT_PS - 1) // 1000

    def __init__(self, origin_ns: int) -> None:
        self.origin_ns = origin_ns

    def __call__(self, line) -> int:
        ts = line.timestamp_ns
        # JAX normalizes line timestamps to the session start; files from other producers may
        # keep absolute ones.
        if self.origin_ns and ts >= self.origin_ns:
            ts -= self.origin_ns
        if not -TIME_LIMIT_PS < ts * 1000 < TIME_LIMIT_PS:
            raise Corrupt(f"line {line.name!r} has timestamp_ns {line.timestamp_ns}, "
                          "out of range for this capture's clock")
        return ts * 1000

    def many(self, ts: np.ndarray, name_of) -> np.ndarray:
        """`self(line)` of lines whose timestamps are `ts` (int64), in order: the first out
        of range raises, named by `name_of(its index)`."""
        out = ts.copy()
        if self.origin_ns:
            late = out >= self.origin_ns
            out[late] -= self.origin_ns
        bad = (out < -self._BOUND) | (out > self._BOUND)
        if bad.any():
            j = int(np.argmax(bad))
            raise Corrupt(f"line {name_of(j)!r} has timestamp_ns {int(ts[j])}, "
                          "out of range for this capture's clock")
        out *= 1000
        return out


def _gpu_vendor_facts(facts: dict[str, Any], side: vendors.GpuSide, hip_calls: Cols, host: str,
                      tr: Cols, raw_vendor: _RawVendors,
                      other_planes: list[tuple[str, int]]) -> None:
    """ROCm copies into `tr`; per device its vendor (`facts["vendors"]`) and the shapes the
    rules cannot read (`facts["transfer_unknowns"]`: host, device, events, reason, as the
    analysis' result has them, `vendors.shape_unknowns`). See `overlap.trace.vendors`."""
    has_hip = bool(hip_calls.chunks)
    # (a few entries, one per device at most)
    unknown = [{"host": host, **u} for u in vendors.rocm_transfers(side, hip_calls, host, tr)]
    rv = raw_vendor
    # (once per distinct value and type, in order of first use: 100k small planes name a
    # vendor or two; no call a plane, ~25 ms of them)
    once = dict.fromkeys(zip(map(type, rv.vendor), rv.vendor, rv.tpu), "")
    for k in once:
        once[k] = vendors.plane_vendor(k[1], tpu=k[2], hip_calls=has_hip)
    # per device, its vendor's name and events (a device met twice: its last plane's, at its
    # first place, as a dict's assignments); from the columns, no tuple of the raw facts
    # per device beside it (100k small planes: ~10 MiB on the read's peak)
    named = dict(zip(rv.device, zip(map(once.__getitem__, zip(
        map(type, rv.vendor), rv.vendor, rv.tpu)), rv.events)))
    tpu = {d for d, t in zip(rv.device, rv.tpu) if t}  # (a device's name says its kind)
    unknown += vendors.shape_unknowns(
        side, {d: v for d, v in named.items() if d not in tpu} if tpu else named,
        other_planes, host)
    facts["vendors"] = {dev: v for dev, (v, _) in sorted(named.items())}
    facts["transfer_unknowns"] = unknown


class _RawVendors:
    """Per device plane as `_read_space` meets it: its device, `device_vendor` stat, events
    and whether it is a TPU's, as columns (a tuple and a dict entry per plane: ~10 MiB of
    100k small planes, on the read's peak), read by `_gpu_vendor_facts`."""

    def __init__(self) -> None:
        self.device: list[str] = []
        self.vendor: list[Any] = []
        self.events: list[int] = []
        self.tpu: list[bool] = []

    def add(self, device: str, vendor: Any, events: int, tpu: bool) -> None:
        self.device.append(device)
        self.vendor.append(vendor)
        self.events.append(events)
        self.tpu.append(tpu)

    def add_many(self, devices: list[str], vendors: list, events: list[int], tpu: bool) -> None:
        self.device += devices
        self.vendor += vendors
        self.events += events
        self.tpu += [tpu] * len(devices)


class _DeviceRows:
    """The `devices` table's rows (`DEVICE_COLUMNS` in order) as `_read_space` meets device
    planes, from each plane's own stats: per row its device, plane name and facts (None for
    a plane without stats: another producer's, or 100k small ones; the Nones added when
    the table is made). Columns, not a tuple per row (~5 MiB of 100k small planes)."""

    def __init__(self) -> None:
        self.device: list[str] = []
        self.plane: list[str] = []
        self.facts: list[tuple | None] = []

    def add(self, device: str, plane, P: Plane) -> None:
        self.device.append(device)
        self.plane.append(plane.name)
        self.facts.append(_device_facts(P.plane_stats()))

    def add_many(self, devices: list[str], planes: list[str], stats: list[dict]) -> None:
        """`add` of each device, its plane's name and its plane's stats, in order. Equal
        facts are one tuple (10k GPU planes of one kind: a tuple and its texts each, 1.4
        MiB through the read)."""
        self.device += devices
        self.plane += planes
        seen: dict[tuple | None, tuple | None] = {}
        # (planes whose facts' stats are equal: their facts once, the stats' values the
        # key, where each is a str, int, bytes or None: of those, equal values are of one
        # type and read alike; a float is not keyed, -0.0 and 0.0 are equal but print
        # apart, nor a bool, equal to 1. 10k GPU planes: ~2.5 us a plane -> ~1)
        memo: dict[tuple, tuple | None] = {}
        facts: list[tuple | None] = []
        for ps in stats:
            if not ps:
                facts.append(None)
                continue
            raw = tuple(map(ps.get, _FACT_STATS))
            key = raw if _EXACT_TYPES.issuperset(map(type, raw)) else None
            f = memo.get(key) if key is not None else None
            if f is None:  # (a plane with stats has facts: `_device_facts` gives a tuple)
                got = _device_facts(ps)
                f = seen.setdefault(got, got)
                if key is not None:
                    memo[key] = f
            facts.append(f)
        self.facts += facts

    def columns(self, host: str) -> dict[str, list]:
        """The table's columns ({} where there is no device plane)."""
        if not self.device:
            return {}
        full = [_NO_DEVICE_FACTS if f is None else f for f in self.facts]
        return dict(zip(DEVICE_COLUMNS, [[host] * len(self.device), self.device, self.plane,
                                         *(list(c) for c in zip(*full))]))


# The plane stats `_device_facts` reads, and the value types whose equal values it reads
# alike (`_DeviceRows.add_many`)
_FACT_STATS = ("device_vendor", "gpu_device_name", "device_type_string", "device_name",
               "memory_size", "memory_bandwidth", "clock_rate", "core_count",
               "compute_cap_major", "compute_cap_minor")
_EXACT_TYPES = frozenset((str, int, bytes, type(None)))


def _device_facts(ps: dict[str, Any]) -> tuple | None:
    """A device row's facts from its plane's stats (None: the plane has none)."""
    if not ps:
        return None
    major, minor = ps.get("compute_cap_major"), ps.get("compute_cap_minor")
    return (as_text(ps.get("device_vendor")),
            as_text(ps.get("gpu_device_name")) or as_text(ps.get("device_type_string"))
            or as_text(ps.get("device_name")),
            as_int(ps.get("memory_size")), as_int(ps.get("memory_bandwidth")),
            as_int(ps.get("clock_rate")), as_int(ps.get("core_count")),
            f"{as_text(major)}.{as_text(minor)}" if major is not None else None)


# `_DeviceRows`' facts of a plane without stats (`as_text(None)`, `as_int(None)`: None)
_NO_DEVICE_FACTS = (None,) * (len(DEVICE_COLUMNS) - 3)
