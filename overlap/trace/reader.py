"""Read JAX profiler captures (XSpace, `*.xplane.pb`) into columnar trace tables.

`read_trace(path)` (`overlap.trace.read_trace`, in `distributed.py`: it maps this module's
`read_host_file` over a session's host files) accepts one `.xplane.pb`, a
`plugins/profile/<timestamp>/` directory, or a run directory holding
`plugins/profile/<timestamp>/<host>.xplane.pb` (the newest capture by default, every host file
of it). It returns a `Trace` whose tables are pandas DataFrames:

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
`wire`): upb parses only the rest (names, metadata, plane stats), and each line's events are
decoded in one compiled pass into arrays (metadata id, offset, duration, the stats the rules
read, typed): no Python object per event. Where the scanner was not built (no C compiler at
install) upb parses the whole file and the same arrays are built from its messages: the same
tables, several times slower (said once on stderr).
TPU planes' event metadata (one op's HLO text per entry, most of a TPU file) is not given to
upb: `wire.MetaTable` decodes the entries' names and stats for many ids at once, and the
per-op rules work on whole columns (async boundaries on display-name bytes, copy directions
once per result-tuple head), so a capture where every copy is its own op costs ~1-2 us of
Python per distinct op; upb reads the map only where the table cannot (and would then
refuse a damaged entry as before).
Lines of fewer than `_SMALL_LINE` events on GPU planes are read together, several planes at
once (`wire.PlaneGroup`): a capture with thousands of small device planes does not pay numpy's
fixed cost per line. The rules above are still applied per event; nothing is decided per line
or per metadata id alone. The scanner checks wire types and lengths of every line it decodes
(a damaged event is an `InputError`, as a parse failure is) but does not validate UTF-8 inside
event string stats (decoded with replacement). Events whose metadata id can never give a row
(host-plane Python-tracer `$...`, `end: ...` and `ThreadpoolListener::*` events, the `Async
XLA Ops` line where only metadata decides, and host events of non-memory metadata on a plane
with no `_r`/`hlo_op` stat at all) keep no stats.

Blind spots: events aggregated with `num_occurrences` have no position and are skipped; GPU time
is CUPTI time shifted once onto wall time (no drift correction); a memcpy that XLA issues outside
an annotated thunk has no `hlo_op`.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import re
from collections import defaultdict, deque
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from google.protobuf.message import DecodeError

from overlap.errors import InputError
from overlap.trace import vendors
from overlap.trace.files import TASK_ENV_PLANE, _check_space, _corrupt, _read_file
from overlap.trace.files import _find_files as _find_files
from overlap.trace.files import load_xspace as load_xspace
from overlap.trace.hlotext import _DTYPE_BYTES as _DTYPE_BYTES
from overlap.trace.hlotext import (
    _SEND_RECV_RE,
    _START_DONE_RE,
    array_bytes,
    async_boundaries_by_bytes,
    host_transfer_directions,
    instruction_names,
    is_host_async_start,
)
from overlap.trace.hlotext import _TUPLE_HEAD_RE as _TUPLE_HEAD_RE
from overlap.trace.hlotext import HOST_MEMORY_SPACE as HOST_MEMORY_SPACE
from overlap.trace.hlotext import _copy_start_direction_slow as _copy_start_direction_slow
from overlap.trace.hlotext import copy_directions as copy_directions
from overlap.trace.hlotext import copy_start_direction as copy_start_direction
from overlap.trace.hlotext import instruction_name as instruction_name
from overlap.trace.hlotext import is_async_boundary as is_async_boundary
from overlap.trace.hlotext import shape_bytes as shape_bytes
from overlap.trace.programs import ProgramCopies, program_key
from overlap.trace.tables import (
    COMPUTE_COLUMNS,
    DEVICE_COLUMNS,
    LINE_COLUMNS,
    MEMORY_COLUMNS,
    MODULE_COLUMNS,
    STEP_COLUMNS,
    TRANSFER_COLUMNS,
    Trace,
    _frame,
)
from overlap.trace.wire import (
    GROUP_STRIDE,
    INVALID_EVENTS,
    INVALID_REASONS,
    PAD,
    TIME_LIMIT_PS,
    Cols,
    Corrupt,
    LineEvents,
    Plane,
    PlaneGroup,
    PlaneView,
    as_id,
    as_int,
    as_text,
    groupable,
    map_unique,
    merge_lines,
    padded,
    parse_space,
    per_mid,
    stat_column,
    stat_keys,
)

# ---------------------------------------------------------------------------------------------
# Names (xla/tsl/profiler/utils/xplane_schema.cc); stable strings across versions.

GPU_PLANE_RE = re.compile(r"^/device:GPU:(\d+)$")
# TensorCore planes only; SparseCore planes are folded into their chip's compute below.
TPU_PLANE_RE = re.compile(r"^/device:TPU:(\d+)(?: SparseCore.*)?$")
HOST_PLANE = "/host:CPU"
METADATA_PLANE = "/host:metadata"

TPU_OPS_LINES = frozenset({"XLA Ops", "Sparse Core Ops"})
TPU_ASYNC_LINE = "Async XLA Ops"

MEMCPY_DIRECTIONS = {"MemcpyD2H": "D2H", "MemcpyH2D": "H2D"}
MEMORY_EVENT_KINDS = {"MemoryAllocation": "alloc", "MemoryDeallocation": "free"}

SYNTHETIC_MARK = "overlap-synthetic"

def parse_details(text: str | None) -> dict[str, str]:
    """Parse a CUPTI `*_details` stat, `"kind_src:device kind_dst:pinned size:64 ..."`.

    Split on spaces, then on the first `:`; xprof's own helper looks for `num_bytes` and misses
    `size`, so we parse it ourselves.
    """
    out: dict[str, str] = {}
    if not text:
        return out
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    for tok in str(text).split():
        key, sep, val = tok.partition(":")
        if sep:
            out[key] = val
    return out


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
    """One host's `.xplane.pb` -> its tables and facts (the map step of `read_trace`)."""
    with gc_paused():
        return _read_host_file(Path(f))


def _read_host_file(f: Path) -> dict[str, Any]:
    # The scanner down to the lines, upb for the rest (see "Speed"); a damaged
    # event surfaces in the decoder instead of the parser, with the same message.
    data, n = _read_file(f, PAD)
    try:
        xs, planes, _ = parse_space(data, n, strip_meta=_strip_meta)
    except (Corrupt, DecodeError, RuntimeError, ValueError) as e:
        raise _corrupt(f, e) from None
    _check_space(f, xs)
    host = _host_name(xs, f)
    try:
        with np.errstate(over="raise", invalid="ignore"):
            return _read_space(xs, planes, host=host, source=f)
    except Corrupt as e:
        raise _corrupt(f, e) from None
    except (OverflowError, FloatingPointError, ValueError, TypeError) as e:
        # Valid protobuf, values no profiler writes (what the rules above do not cover):
        # refuse the file with one line rather than report numbers built on them.
        raise InputError(f, f"unsupported value in the capture: {type(e).__name__}: "
                            f"{' '.join(str(e).split())[:200]}") from None


def _host_name(xs, f: Path) -> str:
    """JAX names each host's file `<host>.xplane.pb`; fall back to XSpace.hostnames."""
    name = f.name
    stem = name[: -len(".xplane.pb")] if name.endswith(".xplane.pb") else f.stem
    if stem and stem != "xplane":
        return stem
    return xs.hostnames[0] if xs.hostnames and xs.hostnames[0] else "host"


def _sort_by_device_start(df: pd.DataFrame) -> pd.DataFrame:
    """Stable sort by (host, device, start_ps), as `sort_values(kind="stable")` would.

    Sorting on object columns is slow at millions of rows; sorted factor codes keep the
    lexicographic order, and `np.lexsort` is stable.
    """
    if len(df) < 2:
        return df.reset_index(drop=True)
    h, _ = pd.factorize(df["host"], sort=True)
    d, _ = pd.factorize(df["device"], sort=True)
    order = np.lexsort((df["start_ps"].to_numpy(np.int64), d, h))
    if (order == np.arange(len(order))).all():
        return df.reset_index(drop=True)
    return df.take(order).reset_index(drop=True)


def combined_backend(backends: list[str]) -> str:
    """One backend name for a capture whose host files may disagree (GPU wins, then TPU)."""
    kinds = set(backends)
    if len(kinds) == 1:
        return next(iter(kinds))
    return "gpu" if "gpu" in kinds else "tpu" if "tpu" in kinds else "cpu"


def combine_parts(parts: list[dict], files: list[Path]) -> Trace:
    """One Trace from the `read_host_file` parts of `files` (same order), as one read gives."""

    def cat(key, schema):
        frames = [p[key] for p in parts if len(p[key])]
        if not frames:
            return _frame(None, schema)
        return pd.concat(frames, ignore_index=True)

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


# ---------------------------------------------------------------------------------------------
# One XSpace


def read_xspace(xs, host: str = "host", source: Path | None = None) -> dict[str, Any]:
    """Extract the tables of one host's XSpace. Returns a dict of DataFrames and facts.

    `xs` is a parsed XSpace message (any schema with the same field numbers); it is serialized
    and read the way `read_trace` reads files.
    """
    raw = xs.SerializeToString()
    xs, planes, _ = parse_space(padded(raw), len(raw), strip_meta=_strip_meta)
    return _read_space(xs, planes, host, source)


def _strip_meta(plane_name: str) -> bool:
    """Planes whose event_metadata upb need not parse up front: TPU planes, whose reading uses
    only `MetaTable` (one op's HLO text per entry: most of a TPU file's bytes)."""
    return TPU_PLANE_RE.match(plane_name) is not None


def _read_space(xs, planes: list[PlaneView], host: str = "host",
                source: Path | None = None) -> dict[str, Any]:
    invalid_before = INVALID_EVENTS[0]
    reasons_before = dict(INVALID_REASONS)
    task = next((pl for pl in xs.planes if pl.name == TASK_ENV_PLANE), None)
    start_ns = stop_ns = None
    if task is not None:
        ts = Plane(task).plane_stats()
        start_ns = as_int(ts.get("profile_start_time"))
        stop_ns = as_int(ts.get("profile_stop_time"))
    if start_ns is not None and not 0 <= start_ns < TIME_LIMIT_PS:
        start_ns = None
    origin_ns = start_ns or 0
    if not origin_ns:
        # No Task Environment plane (another producer): absolute line timestamps, if any, are
        # put on a zero of their own, the earliest of them.
        absolute = [ln.timestamp_ns for pl in planes for ln in pl.lines
                    if ln.timestamp_ns * 1000 >= TIME_LIMIT_PS]
        origin_ns = min(absolute) if absolute else 0

    def line_base_ps(line) -> int:
        ts = line.timestamp_ns
        # JAX normalizes line timestamps to the session start; files from other producers may
        # keep absolute ones.
        if origin_ns and ts >= origin_ns:
            ts -= origin_ns
        if not -TIME_LIMIT_PS < ts * 1000 < TIME_LIMIT_PS:
            raise Corrupt(f"line {line.name!r} has timestamp_ns {line.timestamp_ns}, "
                          "out of range for this capture's clock")
        return ts * 1000

    tr, co = Cols(), Cols()
    st: dict[str, list] = defaultdict(list)
    mem = Cols()
    mods: dict[str, list] = defaultdict(list)
    devs: dict[str, list] = defaultdict(list)
    lines: dict[str, list] = defaultdict(list)
    facts: dict[str, Any] = {
        "host": host, "source": str(source) if source else None,
        "profile_start_time_ns": start_ns, "profile_stop_time_ns": stop_ns,
        "hostnames": list(xs.hostnames), "errors": list(xs.errors),
        "warnings": list(xs.warnings),
    }
    synthetic = any(SYNTHETIC_MARK in w for w in xs.warnings)
    backend = "cpu"
    cpu_compute_seen = False
    gpu_planes: list[tuple[Plane, str]] = []
    side = vendors.GpuSide()  # what the GPU rules set aside (ROCm copies, odd shapes)
    hip_calls = Cols()
    raw_vendor: dict[str, tuple[Any, int, bool]] = {}  # device -> (device_vendor, events, tpu)
    other_planes: list[tuple[str, int]] = []  # /device: planes of no kind we read

    meta_plane = next((pl for pl in planes if pl.name == METADATA_PLANE), None)

    @functools.cache
    def programs() -> ProgramCopies | None:
        """TPU copy facts from the programs the capture carries (built once, on first use)."""
        if meta_plane is None or not _PROGRAM_FACTS:
            return None
        return _program_copies(meta_plane)

    for plane in planes:
        P = Plane(plane)
        for line in plane.lines:
            lines["host"].append(host)
            lines["plane"].append(plane.name)
            lines["line_id"].append(line.id)
            lines["line"].append(line.name)
            lines["events"].append(line.n_events)

        if m := GPU_PLANE_RE.match(plane.name):
            backend = "gpu"
            device = f"GPU:{m.group(1)}"
            _device_row(devs, host, device, plane, P)
            gpu_planes.append((P, device))
            raw_vendor[device] = (P.plane_stats().get("device_vendor"),
                                  sum(ln.n_events for ln in plane.lines), False)
        elif m := TPU_PLANE_RE.match(plane.name):
            if backend != "gpu":
                backend = "tpu"
            device = f"TPU:{m.group(1)}"
            if "SparseCore" not in plane.name:
                _device_row(devs, host, device, plane, P)
                raw_vendor[device] = (None, 0, True)
            _read_tpu_plane(P, device, host, line_base_ps, tr, co, programs)
        elif plane.name == HOST_PLANE:
            cpu_compute_seen |= _read_host_plane(P, host, line_base_ps, co, st, mem,
                                                 hip_calls)
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
                if proto is None:
                    continue
                mods["host"].append(host)
                pid = as_id(s.get("program_id"))
                mods["program_id"].append(pid)
                mods["name"].append(md.name)
                mods["hlo_proto"].append(bytes(proto) if proto is not None else None)
        elif plane.name == TASK_ENV_PLANE:
            continue
        elif plane.name.startswith("/device:") and not plane.name.startswith("/device:CUSTOM:"):
            other_planes.append((plane.name, sum(ln.n_events for ln in plane.lines)))

    # After the loop: small lines of many GPU planes are read together.
    _read_gpu_planes(gpu_planes, host, line_base_ps, tr, co, side)
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
    return {
        "host": host, "backend": backend, "capture": facts, "synthetic": synthetic,
        "transfers": _frame(tr.rows(TRANSFER_COLUMNS), TRANSFER_COLUMNS),
        "compute": _frame(co.rows(COMPUTE_COLUMNS, keep_compute), COMPUTE_COLUMNS),
        "steps": _frame(st, STEP_COLUMNS),
        "memory": _frame(mem.rows(MEMORY_COLUMNS), MEMORY_COLUMNS),
        "modules": _frame(mods, MODULE_COLUMNS), "devices": _frame(devs, DEVICE_COLUMNS),
        "lines": _frame(lines, LINE_COLUMNS),
    }


def _gpu_vendor_facts(facts: dict[str, Any], side: vendors.GpuSide, hip_calls: Cols, host: str,
                      tr: Cols, raw_vendor: dict[str, tuple[Any, int, bool]],
                      other_planes: list[tuple[str, int]]) -> None:
    """ROCm copies into `tr`; per device its vendor (`facts["vendors"]`) and the shapes the
    rules cannot read (`facts["transfer_unknowns"]`: device, events, reason). See
    `overlap.trace.vendors`."""
    has_hip = bool(hip_calls.chunks)
    unknown = vendors.rocm_transfers(side, hip_calls, host, tr)
    named = {dev: (vendors.plane_vendor(raw, tpu=tpu, hip_calls=has_hip), n)
             for dev, (raw, n, tpu) in raw_vendor.items()}
    unknown += vendors.shape_unknowns(
        side, {d: v for d, v in named.items() if not raw_vendor[d][2]}, other_planes)
    facts["vendors"] = {dev: v for dev, (v, _) in sorted(named.items())}
    facts["transfer_unknowns"] = unknown


def _device_row(devs, host, device, plane, P: Plane) -> None:
    ps = P.plane_stats()
    devs["host"].append(host)
    devs["device"].append(device)
    devs["plane"].append(plane.name)
    devs["vendor"].append(as_text(ps.get("device_vendor")))
    devs["name"].append(as_text(ps.get("gpu_device_name")) or as_text(
        ps.get("device_type_string")) or as_text(ps.get("device_name")))
    devs["memory_size"].append(as_int(ps.get("memory_size")))
    devs["memory_bandwidth"].append(as_int(ps.get("memory_bandwidth")))
    devs["clock_rate_khz"].append(as_int(ps.get("clock_rate")))
    devs["core_count"].append(as_int(ps.get("core_count")))
    major, minor = ps.get("compute_cap_major"), ps.get("compute_cap_minor")
    devs["compute_capability"].append(f"{as_text(major)}.{as_text(minor)}"
                                      if major is not None else None)


# Lines with fewer events than this are read together with other planes' small lines (one
# `LineEvents` per segment of up to _SEGMENT events): numpy's fixed cost per call would otherwise
# make a capture of thousands of few-event planes take seconds per thousand planes.
_SMALL_LINE = 512
_SEGMENT = 1 << 16
# Event stats the GPU rules read (the decoder keeps only these; another one asked for costs a
# second pass over the line, never a wrong answer). Not `correlation_id`: only ROCm blit
# kernels read it (vendors.split_kernels), and keeping it for every CUDA kernel costs ~30 MB
# per million kernels.
_GPU_STATS = ("kernel_details", "memcpy_details", "hlo_op", "hlo_module", "program_id")


def _read_gpu_planes(items: list[tuple[Plane, str]], host, line_base_ps, tr: Cols,
                     co: Cols, side: vendors.GpuSide | None = None) -> None:
    """All GPU planes of one file: `items` is (plane, device name) per plane."""
    details_cache: dict[Any, tuple] = {}
    pending: list[tuple[int, Any]] = []  # (index into items, line): small lines to merge
    n_pending = 0

    def flush():
        nonlocal n_pending
        if not pending:
            return
        used = sorted({i for i, _ in pending})
        where = {i: j for j, i in enumerate(used)}
        G = PlaneGroup([items[i][0] for i in used])
        ns = np.array([ln.n_events for _, ln in pending], np.int64)
        rep = functools.partial(np.repeat, repeats=ns)
        plane_of = rep(np.array([where[i] for i, _ in pending], np.int64))
        base = rep(np.array([line_base_ps(ln) for _, ln in pending], np.int64))
        device = rep(np.array([items[i][1] for i, _ in pending], object))
        stream = rep(np.array([ln.id for _, ln in pending], np.int64))
        name = rep(np.array([ln.name for _, ln in pending], object))
        seg = merge_lines([ln for _, ln in pending])
        pending.clear()
        n_pending = 0
        ev = LineEvents(seg, base, plane_of=plane_of, wanted=stat_keys(G, _GPU_STATS))
        if ev.n:
            _gpu_events(G, _gpu_meta_kinds(G), ev, ev.kept(device), ev.kept(stream),
                        ev.kept(name), host, tr, co, details_cache, side)

    for i, (P, device) in enumerate(items):
        small = groupable(P)
        kinds = None
        for line in P.plane.lines:
            if not line.n_events:
                continue
            if small and line.n_events < _SMALL_LINE:
                pending.append((i, line))
                n_pending += line.n_events
                if n_pending >= _SEGMENT:
                    flush()
                continue
            ev = LineEvents(line, line_base_ps(line), wanted=stat_keys(P, _GPU_STATS))
            if ev.n:
                kinds = kinds or _gpu_meta_kinds(P)
                _gpu_events(P, kinds, ev, device, line.id, line.name, host, tr, co,
                            details_cache, side)
            del ev  # before the next line's arrays exist
    flush()


_TABLE_MIN = 256  # metadata entries from which a plane's kinds are read through `MetaTable`


def _gpu_meta_kinds(P) -> tuple[dict[int, str], list[int]]:
    """(memcpy metadata id -> direction, ids whose events are kernels whatever their stats).

    A plane with many entries (one per distinct kernel: tens of thousands in a large model)
    is read through its `MetaTable` (names and the kernel_details test for all entries at
    once, ~0.5 us per entry instead of ~5 us through upb); small planes, thousands of them
    in a `PlaneGroup`, through upb, which costs less than a table each."""
    memcpy_mids, kernel_mids = {}, []
    group = isinstance(P, PlaneGroup)
    for i, Q in enumerate(P.planes if group else [P]):
        off = i * GROUP_STRIDE if group else 0
        t = Q.table() if len(Q.meta) >= _TABLE_MIN else None
        if t is not None:
            keys = t.keys
            rows: Any = zip(keys.tolist(), Q.names(keys),
                       t.has_stat(keys, Q.stat_ids.get("kernel_details", ())).tolist())
        else:
            rows = ((k, md.name, len(md.stats) and "kernel_details" in Q.meta_stats(k))
                    for k, md in Q.meta.items())
        for k, name, has_kd in rows:
            if name in MEMCPY_DIRECTIONS:
                memcpy_mids[k + off] = MEMCPY_DIRECTIONS[name]
            elif name.startswith("CudaGraphExec"):
                kernel_mids.append(k + off)
            # Metadata-level kernel_details also makes a kernel (stats merge event over
            # metadata).
            elif has_kd:
                kernel_mids.append(k + off)
    return memcpy_mids, kernel_mids


def _gpu_events(P, kinds, ev: LineEvents, device, stream, line_name, host, tr: Cols, co: Cols,
                details_cache: dict, side: vendors.GpuSide | None = None) -> None:
    """Transfers and kernels of one line (or one merged segment: `P` is then a `PlaneGroup`,
    and `device`, `stream` and `line_name` are per-event arrays)."""
    def pick(v, idx):
        return v[idx] if isinstance(v, np.ndarray) else v

    memcpy_mids, kernel_mids = kinds
    kd_sids = P.stat_ids.get("kernel_details", [])
    mids = ev.mids
    is_mc = np.isin(mids, list(memcpy_mids)) if memcpy_mids else np.zeros(ev.n, bool)
    # Per event, never per line or per metadata alone: any event may carry kernel_details.
    is_k = ~is_mc & (ev.has_stat(kd_sids) | np.isin(mids, kernel_mids))
    idx = np.flatnonzero(is_mc)
    if idx.size:
        det_raw = stat_column(P, ev, idx, "memcpy_details")
        # (bytes, src kind, dst kind, async) once per distinct details value
        keys = [d if isinstance(d, (str, bytes)) or d is None else str(d)
                for d in det_raw.tolist()]
        codes, uniq = pd.factorize(pd.Series(keys, dtype=object))  # None -> -1
        facts = []
        for d in uniq.tolist() + [None]:
            got = details_cache.get(d)
            if got is None:
                det = parse_details(d)
                a = det.get("async")
                size = as_int(det.get("size"))
                if size is not None and not 0 <= size < (1 << 53):
                    size = None  # no byte count a copy can have: unknown, never negative
                got = details_cache[d] = (size or 0,
                                          det.get("kind_src", "unknown"),
                                          det.get("kind_dst", "unknown"),
                                          None if a is None else a == "1",
                                          # ROCm writes `kind:Unknown size:0` when it did
                                          # not record the size: unknown, not 0 bytes
                                          not ("kind" in det and not size))
            facts.append(got)
        fcols = [np.array([f[j] for f in facts] + [None], object)[:-1] for j in range(5)]
        codes = np.where(codes < 0, len(facts) - 1, codes)
        tr.add(len(idx), host=host, device=pick(device, idx),
               direction=per_mid(mids[idx], memcpy_mids.get),
               start_ps=ev.starts[idx], end_ps=ev.starts[idx] + ev.durs[idx],
               bytes=fcols[0][codes].astype(np.int64),
               src_kind=fcols[1][codes], dst_kind=fcols[2][codes],
               **{"async": fcols[3][codes]}, bytes_known=fcols[4][codes].astype(bool),
               stream=pick(stream, idx), line=pick(line_name, idx),
               hlo_op=_clean_column(stat_column(P, ev, idx, "hlo_op")),
               hlo_module=stat_column(P, ev, idx, "hlo_module"),
               program_id=map_unique(stat_column(P, ev, idx, "program_id"), as_id))
    # Neither a memcpy nor a kernel: the shape checks look at these (vendors.shape_unknowns).
    vendors.note_other_events(P, ev, np.flatnonzero(~is_mc & ~is_k), device, line_name, side)
    idx = np.flatnonzero(is_k)
    if idx.size:
        # ROCm runtime copy/fill kernels are copies and memsets, not compute.
        idx, knames = vendors.split_kernels(P, ev, idx, device, stream, line_name, side)
    if idx.size:
        co.add(len(idx), host=host, device=pick(device, idx), start_ps=ev.starts[idx],
               end_ps=ev.starts[idx] + ev.durs[idx], name=knames,
               hlo_op=_clean_column(stat_column(P, ev, idx, "hlo_op")),
               hlo_module=stat_column(P, ev, idx, "hlo_module"),
               stream=pick(stream, idx), line=pick(line_name, idx))


def _clean_hlo_op(v: Any) -> str | None:
    """`hlo_op` can be a `::`-joined stack of annotations (xprof splits it); keep the last."""
    v = as_text(v)
    if v is None:
        return None
    return v.rsplit("::", 1)[-1] if "::" in v else v


def _clean_column(values: np.ndarray) -> np.ndarray:
    """`_clean_hlo_op` over a column, once per distinct value."""
    out = map_unique(values, _clean_hlo_op)
    # map_unique reads NaN as missing (None); a NaN stat is the text "nan" here
    is_none = np.equal(values, None)  # type: ignore[call-overload]
    nan = np.flatnonzero(pd.isna(values) & ~is_none)
    if nan.size:
        out[nan] = [_clean_hlo_op(v) for v in values[nan].tolist()]
    return out


_COPY_FACTS = ("hlo_module", "program_id", "raw_bytes_accessed", "bytes_accessed")


def _read_tpu_plane(P: Plane, device, host, line_base_ps, tr: Cols, co: Cols,
                    programs=lambda: None) -> None:
    by_name = {line.name: line for line in P.plane.lines}
    async_line = by_name.get(TPU_ASYNC_LINE)
    op_lines = [by_name[n] for n in sorted(TPU_OPS_LINES) if n in by_name]
    a_ids = P.ids("_a")

    def instrs(uniq: np.ndarray) -> list[str]:
        """Instruction names of distinct metadata ids: the display name, else parsed from the
        HLO text."""
        out = P.names(uniq, display=True)
        bare = [i for i, s in enumerate(out) if not s]
        if bare:
            for i, name in zip(bare, instruction_names(P.names(uniq[bare]))):
                out[i] = name
        return out

    def boundaries(uniq: np.ndarray) -> np.ndarray:
        """Per distinct id: 1 if its instruction is an async boundary, 0 if not, -1 unknown
        yet. Decided on the display names' bytes where the plane has a `MetaTable`: an id
        with a display name is its instruction name."""
        got = P.name_bytes(uniq, display=True)
        if got is None:
            return np.full(len(uniq), -1, np.int8)
        return async_boundaries_by_bytes(*got)

    # Without an Async XLA Ops line, copies are paired from the boundary ops' names.
    pairing = async_line is None or not async_line.n_events
    starts_done: list[tuple[int, int, int, str]] = []  # (start, end, mid, instr)
    for line in op_lines:
        if not line.n_events:
            continue
        ev = LineEvents(line, line_base_ps(line), wanted=a_ids)
        mids = ev.mids
        keep = ~ev.has_stat(a_ids) if a_ids else np.ones(ev.n, bool)
        uniq, inv = np.unique(mids, return_inverse=True)  # once per distinct op
        b_u = boundaries(uniq)
        # names only where needed: compute ops, ops not decided yet, boundaries to pair
        need = np.flatnonzero((b_u != 1) | pairing)
        u_names = np.full(len(uniq), None, object)
        u_names[need] = instrs(uniq[need])
        sd, sr = _START_DONE_RE.match, _SEND_RECV_RE.match  # is_async_boundary, inlined
        und = np.flatnonzero(b_u == -1)
        b_u[und] = [bool(sd(n) or sr(n)) for n in u_names[und].tolist()]
        names = u_names[inv]
        bnd = b_u.astype(bool)[inv]
        if line.name == "XLA Ops":
            b = np.flatnonzero(keep & bnd)
            starts_done.extend(zip(ev.starts[b].tolist(), (ev.starts[b] + ev.durs[b]).tolist(),
                                   mids[b].tolist(), names[b].tolist()))
        idx = np.flatnonzero(keep & ~bnd)
        co.add(len(idx), host=host, device=device, start_ps=ev.starts[idx],
               end_ps=ev.starts[idx] + ev.durs[idx], name=names[idx], hlo_op=names[idx],
               hlo_module=_meta_column(P, mids[idx], "hlo_module"),
               program_id=_meta_ids(P, mids[idx], "program_id"),
               stream=line.id, line=line.name)

    def add_transfers(starts, ends, facts, line):
        n = len(facts)
        if not n:
            return
        direction = np.array([f[0] for f in facts], object)
        tr.add(n, host=host, device=device, direction=direction,
               start_ps=np.asarray(starts, np.int64), end_ps=np.asarray(ends, np.int64),
               bytes=np.array([f[1] for f in facts], np.int64),
               src_kind=np.where(direction == "H2D", "host", "device").astype(object),
               dst_kind=np.where(direction == "D2H", "host", "device").astype(object),
               **{"async": True}, stream=line.id, line=line.name,
               hlo_op=np.array([f[2] for f in facts], object),
               hlo_module=np.array([f[3] for f in facts] + [None], object)[:-1],
               program_id=np.array([f[4] for f in facts] + [None], object)[:-1])

    if async_line is not None and async_line.n_events:
        # Only metadata (names, metadata stats) decides here: no event stat is ever read.
        ev = LineEvents(async_line, line_base_ps(async_line), skip_mids=P.meta_keys(),
                        wanted=())

        uniq, inv = np.unique(ev.mids, return_inverse=True)  # once per distinct op
        mids = uniq.tolist()
        texts = P.names(uniq)
        copies = [i for i, t in enumerate(texts) if is_host_async_start(t)]
        facts_u: list[tuple | None] = [None] * len(mids)
        for i, f in zip(copies, _copy_facts(P, [mids[i] for i in copies],
                                            [texts[i] for i in copies], programs())):
            facts_u[i] = f
        facts = np.array(facts_u + [None], object)[:-1][inv]
        sel = np.flatnonzero(np.array([f is not None for f in facts.tolist()], bool))
        add_transfers(ev.starts[sel], ev.starts[sel] + ev.durs[sel], facts[sel].tolist(),
                      async_line)
        return

    # No Async XLA Ops line: pair each copy-start with the next copy-done of the same key, in
    # order of begin time. Tie-break (explicit, not left to the rest of the tuple): at one
    # picosecond a start comes before a done, so a done can close the start issued at that
    # instant. Real XLA:TPU v6e (sample_traces/tpu-v6e-offload, TPU:1-3) has a zero-length
    # copy-start.5 that begins at the same picosecond as its 172 ms copy-done.5; taking the
    # done first (xprof sorts on begin time only) leaves it without a start and shifts every
    # later pair of that op (598 of 600 pairs).
    boundary_ops = []  # (begin, 0 start / 1 done, end, metadata id, key)
    for start, end, mid, ins in starts_done:
        m = _START_DONE_RE.match(ins)
        if not m or not (m["base"].endswith("copy") or m["base"] in _HOST_SLICE_OPS):
            continue
        boundary_ops.append((start, 0 if m["role"] == "start" else 1, end, mid,
                             m["base"] + (m["n"] or "")))
    boundary_ops.sort(key=lambda b: (b[0], b[1], b[2], b[3]))
    open_starts: dict[str, deque] = defaultdict(deque)
    pairs = []  # (copy-start's start, copy-done's end, copy-start's metadata id)
    for start, role, end, mid, key in boundary_ops:
        if role == 0:
            open_starts[key].append((start, mid))
        elif open_starts[key]:
            s0, smid = open_starts[key].popleft()
            pairs.append((s0, end, smid))
    smids = sorted({m for _, _, m in pairs})
    texts = P.names(smids)
    to_host = [i for i, t in enumerate(texts) if is_host_async_start(t)]
    facts_of = dict(zip([smids[i] for i in to_host],
                        _copy_facts(P, [smids[i] for i in to_host],
                                    [texts[i] for i in to_host], programs())))
    kept = [(s0, end, facts_of[m]) for s0, end, m in pairs if facts_of.get(m) is not None]
    add_transfers([k[0] for k in kept], [k[1] for k in kept], [k[2] for k in kept],
                  by_name.get("XLA Ops"))


_HOST_SLICE_OPS = ("dynamic-slice", "dynamic-update-slice")


def _meta_column(P: Plane, mids: np.ndarray, name: str) -> np.ndarray:
    """Per event, its metadata's stat `name` (None where absent), once per distinct id."""
    uniq, inv = np.unique(mids, return_inverse=True)
    return P.meta_columns(uniq, (name,))[name][inv]


def _meta_ids(P: Plane, mids: np.ndarray, name: str) -> np.ndarray:
    """Per event, its metadata's identifier stat `name` (`as_id`; None where absent), converted
    once per distinct metadata id, not once per event."""
    uniq, inv = np.unique(mids, return_inverse=True)
    vals = P.meta_columns(uniq, (name,))[name].tolist()
    return np.array([as_id(v) for v in vals] + [None], object)[:-1][inv]


def _copy_facts(P: Plane, mids: list[int], texts: list[str],
                programs: ProgramCopies | None = None) -> list[tuple | None]:
    """Per host async start op's metadata id (with its HLO text: copy-start or
    dynamic-(update-)slice-start): (direction, bytes, instruction, hlo_module, program_id), or
    None where the text names no host memory side. Both TPU
    paths (`Async XLA Ops` spans and copy-start/copy-done pairs) use it, once per distinct op;
    program ids are converted once per distinct value. Where `programs` holds the op's program
    (its HLO proto), a copy-start's direction and bytes come from there (`overlap.trace.
    programs`: the same rule on the instruction's shape, once per program); the text decides
    the rest."""
    got: list[tuple[str | None, int | None] | None] = [None] * len(mids)
    if programs and mids:
        pids_all = map_unique(P.meta_columns(mids, ("program_id",))["program_id"],
                              as_id).tolist()
        got = [programs.facts(pid, ins) for pid, ins in zip(pids_all, instruction_names(texts))]
    rest = [i for i, d in enumerate(got) if d is None]
    if rest:
        for i, d in zip(rest, host_transfer_directions([texts[i] for i in rest])):
            got[i] = d
    cand, dirs = [], []
    for i, g in enumerate(got):
        if g is not None and g[0] is not None:
            cand.append(i)
            dirs.append(g)
    out: list[tuple | None] = [None] * len(mids)
    if not cand:
        return out
    col = P.meta_columns([mids[i] for i in cand], _COPY_FACTS)
    module, raw, acc = (col[k].tolist() for k in ("hlo_module", "raw_bytes_accessed",
                                                  "bytes_accessed"))
    pids = map_unique(col["program_id"], as_id).tolist()
    instrs = instruction_names([texts[i] for i in cand])
    for j, i in enumerate(cand):
        direction, nbytes = dirs[j]
        if nbytes is None:
            nbytes = as_int(raw[j]) or as_int(acc[j]) or 0
        out[i] = (direction, nbytes, instrs[j], module[j], pids[j])
    return out


# TPU copy facts from the capture's HLO protos where it carries them (tests compare with the
# text rule by turning this off).
_PROGRAM_FACTS = True


def _program_copies(plane) -> ProgramCopies:
    """Program id -> its serialized HloProto, from the `/host:metadata` plane's entries (keyed
    by program id; the proto in their `Hlo Proto` stat)."""
    P = Plane(plane)
    wanted = P.ids("Hlo Proto")
    protos = {}
    if wanted:
        for k, md in plane.event_metadata.items():
            proto = P.stats(md.stats, wanted).get("Hlo Proto")
            if isinstance(proto, bytes) and proto:
                protos[program_key(k)] = proto
    return ProgramCopies(protos, array_bytes)


# Host event stats read besides _HOST_WANTED (the decoder keeps only these; see _GPU_STATS).
_HOST_ALSO = ("program_id", "correlation_id", "memcpy_details")
_HOST_WANTED = ("_r", "step_num", "hlo_op", "hlo_module", "device_ordinal", "allocator_name",
                "bytes_allocated", "bytes_reserved", "peak_bytes_in_use", "requested_bytes",
                "allocation_bytes", "index_on_host")


def _read_host_plane(P: Plane, host, line_base_ps, co: Cols, st, mem: Cols,
                     hip_calls: Cols | None = None) -> bool:
    """Steps, allocator events and XLA:CPU compute from the host plane."""
    wanted = P.ids(*_HOST_WANTED)
    mem_mids = {k: MEMORY_EVENT_KINDS[md.name] for k, md in P.meta.items()
                if md.name in MEMORY_EVENT_KINDS}
    # Python-tracer frames ("$file.py:12 fn") are most of a host plane and never steps/compute.
    skip = {k for k, md in P.meta.items() if md.name.startswith("$")
            or md.name.startswith("end: ") or md.name.startswith("ThreadpoolListener::")}
    if not (P.stat_ids.get("_r") or P.stat_ids.get("hlo_op")):
        # No event can carry `_r` or `hlo_op` (nor can metadata: same stat ids), so only
        # memory events can give a row.
        skip |= {k for k in P.meta.keys() if k not in mem_mids}
    meta_nonempty = {k for k in P.meta.keys() if k not in skip and P.meta_stats(k)}
    # ROCm: HIP copy/memset calls say the direction and size of the copy kernels they issue
    # (vendors.rocm_transfers); their stats must be decoded, whatever else the plane holds.
    hip_mids = vendors.hip_api_mids(P) if hip_calls is not None else {}
    skip -= set(hip_mids)
    saw_compute = False
    step_rows = []
    for line in P.plane.lines:
        if not line.n_events:
            continue
        ev = LineEvents(line, line_base_ps(line), skip_mids=skip,
                        wanted=stat_keys(P, _HOST_WANTED + _HOST_ALSO))
        if not ev.n:
            continue
        mids = ev.mids
        if hip_mids and hip_calls is not None:
            vendors.collect_hip_calls(P, ev, hip_mids, hip_calls)
        cand = ~np.isin(mids, list(skip)) if skip else np.ones(ev.n, bool)
        # The old per-event rule: the merged (wanted event stats + metadata stats) dict is
        # non-empty.
        ok = cand & (ev.has_stat(wanted) | np.isin(mids, list(meta_nonempty)))
        if not ok.any():
            continue
        is_mem = ok & np.isin(mids, list(mem_mids))
        idx = np.flatnonzero(is_mem)
        if idx.size:
            col = {c: stat_column(P, ev, idx, c) for c in (
                "allocator_name", "index_on_host", "bytes_allocated", "bytes_reserved",
                "peak_bytes_in_use", "requested_bytes", "allocation_bytes")}
            alloc = []
            for a, ioh in zip(col["allocator_name"].tolist(), col["index_on_host"].tolist()):
                if a is None and ioh is not None:
                    a = f"index_on_host:{ioh}"
                alloc.append(a)
            mem.add(len(idx), host=host, time_ps=ev.starts[idx],
                    allocator=np.array(alloc + [None], object)[:-1],
                    device=map_unique(np.array(alloc + [None], object)[:-1], _allocator_device),
                    kind=per_mid(mids[idx], mem_mids.get),
                    **{c: map_unique(col[c], lambda v: as_int(v) or 0).astype(np.int64)
                       for c in ("bytes_allocated", "bytes_reserved", "peak_bytes_in_use",
                                 "requested_bytes", "allocation_bytes")})
        rest = np.flatnonzero(ok & ~is_mem)
        if not rest.size:
            continue
        r_vals = stat_column(P, ev, rest, "_r")
        is_step = np.array([bool(v) for v in r_vals.tolist()], bool)
        sidx = rest[is_step]
        if sidx.size:
            nums = stat_column(P, ev, sidx, "step_num").tolist()
            names = per_mid(mids[sidx], P.name).tolist()
            for i, num, name in zip(sidx.tolist(), nums, names):
                start = int(ev.starts[i])
                step_rows.append((start, start + int(ev.durs[i]), as_int(num), name))
        cidx = rest[~is_step]
        if cidx.size:
            hlo = stat_column(P, ev, cidx, "hlo_op")
            # `"hlo_op" in s`: present, even with an empty value
            present = np.zeros(len(cidx), bool)
            hsids = P.stat_ids.get("hlo_op")
            if hsids:
                present |= ev.has_stat(hsids)[cidx]
            present |= per_mid(mids[cidx], lambda m: "hlo_op" in P.meta_stats(m)).astype(bool)
            cidx, hlo = cidx[present], hlo[present]
            if cidx.size:
                saw_compute = True
                ords = stat_column(P, ev, cidx, "device_ordinal").tolist()
                co.add(len(cidx), _cpu=True, host=host,
                       device=np.array([f"CPU:{as_int(o) or 0}" for o in ords], object),
                       start_ps=ev.starts[cidx], end_ps=ev.starts[cidx] + ev.durs[cidx],
                       name=per_mid(mids[cidx], P.name), hlo_op=_clean_column(hlo),
                       hlo_module=stat_column(P, ev, cidx, "hlo_module"),
                       program_id=map_unique(stat_column(P, ev, cidx, "program_id"), as_id),
                       stream=line.id, line=line.name)
        del ev, mids, cand, ok, is_mem, idx, rest  # before the next line's arrays exist
    step_rows.sort(key=lambda r: (r[0], r[1], r[2] if r[2] is not None else -1, r[3]))
    for k, (start, end, num, name) in enumerate(step_rows):
        st["host"].append(host)
        st["step"].append(num if num is not None else k)
        st["name"].append(name)
        st["start_ps"].append(start)
        st["end_ps"].append(end)
    return saw_compute


_ALLOCATOR_RE = re.compile(r"^GPU_(\d+)_bfc$")


def _allocator_device(name: str | None) -> str | None:
    """PjRt GPU names device allocators `GPU_<ordinal>_bfc`; the host staging one is not a
    device."""
    if not name or not isinstance(name, str):
        return None
    m = _ALLOCATOR_RE.match(name)
    return f"GPU:{m.group(1)}" if m else None
