"""Read JAX profiler captures (XSpace, `*.xplane.pb`) into columnar trace tables.

`read_trace(path)` accepts one `.xplane.pb`, a `plugins/profile/<timestamp>/` directory, or a run
directory holding `plugins/profile/<timestamp>/<host>.xplane.pb` (the newest capture by default,
every host file of it). It returns a `Trace` whose tables are pandas DataFrames:

* `transfers`: device<->host copies (D2H/H2D) with their spans, bytes and memory kinds.
* `compute`: device compute ops (GPU kernels, TPU XLA ops, XLA:CPU thunks).
* `steps`: step windows from `jax.profiler.StepTraceAnnotation` roots (`_r` stat).
* `memory`: allocator events (BFC `MemoryAllocation`/`MemoryDeallocation`) where the capture has them.
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
* TPU: a transfer is an `Async XLA Ops` span whose HLO text has host memory space `S(5)`; without
  that line, a `copy-start`..`copy-done` pair from `XLA Ops`. Direction comes from where `S(5)`
  sits in the copy-start tuple (element 0 is the destination). Compute is every `XLA Ops` (and
  `Sparse Core Ops`) event that is not itself an async start/done op, like xprof's analysis.
* CPU: XLA:CPU thunks (host events carrying `hlo_op`) are compute. XLA:CPU compiles host
  offload away, so a CPU capture has no transfers; that is reported, not raised.

Blind spots: events aggregated with `num_occurrences` have no position and are skipped; GPU time
is CUPTI time shifted once onto wall time (no drift correction); a memcpy that XLA issues outside
an annotated thunk has no `hlo_op`.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections import defaultdict, deque
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd
from google.protobuf.message import DecodeError

from overlap.errors import InputError
from overlap.protos import XSpace

# ---------------------------------------------------------------------------------------------
# Names (xla/tsl/profiler/utils/xplane_schema.cc); stable strings across versions.

GPU_PLANE_RE = re.compile(r"^/device:GPU:(\d+)$")
# TensorCore planes only; SparseCore planes are folded into their chip's compute below.
TPU_PLANE_RE = re.compile(r"^/device:TPU:(\d+)(?: SparseCore.*)?$")
HOST_PLANE = "/host:CPU"
METADATA_PLANE = "/host:metadata"
TASK_ENV_PLANE = "Task Environment"

TPU_OPS_LINES = frozenset({"XLA Ops", "Sparse Core Ops"})
TPU_ASYNC_LINE = "Async XLA Ops"

MEMCPY_DIRECTIONS = {"MemcpyD2H": "D2H", "MemcpyH2D": "H2D"}
MEMORY_EVENT_KINDS = {"MemoryAllocation": "alloc", "MemoryDeallocation": "free"}

# `<base>-start[.N]` / `<base>-done[.N]` and bare `send`/`recv`: async start/done ops, which are
# not compute (xprof's async_overlap uses the same rule, so TPU answers agree with it).
_START_DONE_RE = re.compile(r"^(?P<base>.+)-(?P<role>start|done)(?P<n>\.\d+)?$")
_SEND_RECV_RE = re.compile(r"^(?:send|recv)(?:\.\d+)?$")
# Host memory space in an HLO shape layout, e.g. `f32[8,128]{1,0:T(8,128)S(5)}`.
HOST_MEMORY_SPACE = "S(5)"

SYNTHETIC_MARK = "overlap-synthetic"

TRANSFER_COLUMNS = {
    "host": "object", "device": "object", "direction": "object", "start_ps": "int64",
    "end_ps": "int64", "bytes": "int64", "src_kind": "object", "dst_kind": "object",
    "async": "boolean", "stream": "int64", "line": "object", "hlo_op": "object",
    "hlo_module": "object", "program_id": "UInt64",
}
COMPUTE_COLUMNS = {
    "host": "object", "device": "object", "start_ps": "int64", "end_ps": "int64",
    "name": "object", "hlo_op": "object", "hlo_module": "object", "stream": "int64",
    "line": "object",
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
    for col, dtype in schema.items():
        values = rows.get(col, [])
        data[col] = pd.array(values, dtype=dtype) if dtype != "object" else pd.Series(
            values, dtype=object)
    return pd.DataFrame(data)


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

    @property
    def hosts(self) -> list[str]:
        return sorted(self.capture)


# ---------------------------------------------------------------------------------------------
# Stats


class _Plane:
    """Per-plane lookups: stat names by id, metadata names, and metadata-level stats."""

    def __init__(self, plane):
        self.plane = plane
        self.stat_names: dict[int, str] = {k: v.name for k, v in plane.stat_metadata.items()}
        self.stat_ids: dict[str, list[int]] = defaultdict(list)
        for k, name in self.stat_names.items():
            self.stat_ids[name].append(k)
        self.meta = plane.event_metadata
        self._meta_stats: dict[int, dict[str, Any]] = {}

    def ids(self, *names: str) -> dict[int, str]:
        """Stat-metadata ids whose name is one of `names` (several ids may share a name)."""
        out = {}
        for n in names:
            for k in self.stat_ids.get(n, ()):
                out[k] = n
        return out

    def value(self, stat) -> Any:
        kind = stat.WhichOneof("value")
        if kind == "ref_value":
            # Interned strings: the value is the *name* of another stat metadata entry.
            return self.stat_names.get(stat.ref_value, "")
        if kind is None:
            return None
        return getattr(stat, kind)

    def stats(self, stats: Iterable, wanted: dict[int, str] | None = None) -> dict[str, Any]:
        """Stats as a dict; the first occurrence of a repeated key wins."""
        out: dict[str, Any] = {}
        for s in stats:
            k = s.metadata_id
            if wanted is not None and k not in wanted:
                continue
            name = self.stat_names.get(k)
            if name is not None and name not in out:
                out[name] = self.value(s)
        return out

    def meta_stats(self, metadata_id: int) -> dict[str, Any]:
        cached = self._meta_stats.get(metadata_id)
        if cached is None:
            md = self.meta.get(metadata_id)
            cached = self.stats(md.stats) if md is not None else {}
            self._meta_stats[metadata_id] = cached
        return cached

    def name(self, metadata_id: int) -> str:
        md = self.meta.get(metadata_id)
        return md.name if md is not None else ""

    def display_name(self, metadata_id: int) -> str:
        md = self.meta.get(metadata_id)
        return md.display_name if md is not None else ""

    def plane_stats(self) -> dict[str, Any]:
        return self.stats(self.plane.stats)


def _as_int(v: Any) -> int | None:
    if v is None:
        return None
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, float):
        return int(v)
    if isinstance(v, (str, bytes)):
        try:
            return int(v)
        except ValueError:
            return None
    return None


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


def _line_events(line) -> tuple[np.ndarray, np.ndarray, np.ndarray, list]:
    """(metadata_id, start_ps, duration_ps, events) of a line's positioned events."""
    evs = line.events
    n = len(evs)
    if n == 0:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty, []
    raw = np.array([(e.metadata_id, e.offset_ps, e.duration_ps, e.num_occurrences) for e in evs],
                   dtype=np.int64).reshape(n, 4)
    keep = raw[:, 3] == 0  # aggregated events have no position
    events = list(evs)
    if not keep.all():
        events = [e for e, k in zip(events, keep) if k]
        raw = raw[keep]
    return raw[:, 0], raw[:, 1], raw[:, 2], events


# ---------------------------------------------------------------------------------------------
# HLO text helpers (TPU event names are full HLO text)


def instruction_name(name: str) -> str:
    """`%copy-start.5 = (...) copy-start(...)` -> `copy-start.5`; bare names pass through."""
    name = name.strip()
    if name.startswith("%"):
        name = name[1:].split(" = ", 1)[0].strip()
    return name


def is_async_boundary(instr: str) -> bool:
    return bool(_START_DONE_RE.match(instr) or _SEND_RECV_RE.match(instr))


def _split_top_level(s: str) -> list[str]:
    """Split `a, b{c,d}, e[1,2]` on commas outside brackets/braces/parens."""
    parts, depth, cur = [], 0, []
    for ch in s:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if cur:
        parts.append("".join(cur).strip())
    return parts


_DTYPE_BYTES = {
    "pred": 1, "s4": 0.5, "u4": 0.5, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "s32": 4, "u32": 4,
    "s64": 8, "u64": 8, "f16": 2, "bf16": 2, "f32": 4, "f64": 8, "c64": 8, "c128": 16,
    "f8e4m3fn": 1, "f8e5m2": 1, "f8e4m3": 1, "f8e3m4": 1, "f8e4m3fnuz": 1, "f8e5m2fnuz": 1,
    "f8e4m3b11fnuz": 1, "f8e8m0fnu": 1, "f4e2m1fn": 0.5,
}
_ARRAY_SHAPE_RE = re.compile(r"^([a-z0-9]+)\[([0-9,\s]*)\]")


def shape_bytes(shape: str) -> int | None:
    """Bytes of one array shape such as `bf16[2,2048,4096]{2,1,0:S(5)}`."""
    m = _ARRAY_SHAPE_RE.match(shape.strip())
    if not m or m.group(1) not in _DTYPE_BYTES:
        return None
    dims = [int(d) for d in m.group(2).replace(" ", "").split(",") if d]
    n = int(np.prod(dims, dtype=np.int64)) if dims else 1
    return int(n * _DTYPE_BYTES[m.group(1)])


def copy_start_direction(hlo_text: str) -> tuple[str | None, int | None]:
    """Direction and bytes of a `copy-start` from its HLO text.

    The result tuple is `(destination, source, u32[] context)`: `S(5)` on element 0 means the
    copy writes host memory (D2H), on element 1 that it reads host memory (H2D).
    """
    _, _, rhs = hlo_text.partition(" = ")
    rhs = rhs.strip()
    if not rhs.startswith("("):
        return None, None
    depth = 0
    for i, ch in enumerate(rhs):
        depth += ch in "([{"
        depth -= ch in ")]}"
        if depth == 0:
            inner = rhs[1:i]
            break
    else:
        return None, None
    elems = _split_top_level(inner)
    if len(elems) < 2:
        return None, None
    if HOST_MEMORY_SPACE in elems[0]:
        return "D2H", shape_bytes(elems[0])
    if HOST_MEMORY_SPACE in elems[1]:
        return "H2D", shape_bytes(elems[1])
    return None, None


# ---------------------------------------------------------------------------------------------
# Loading


def load_xspace(path: str | os.PathLike) -> Any:
    """Parse one `.xplane.pb` file; every failure is an `InputError` naming the file."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise InputError(p, "no such file") from None
    except IsADirectoryError:
        raise InputError(p, "is a directory, expected an .xplane.pb file") from None
    except OSError as e:
        raise InputError(p, f"cannot read: {e.strerror or e}") from None
    if not data:
        raise InputError(p, "empty file (a capture that was cut off before it was written?)")
    if data[:2] == b"\x1f\x8b":
        raise InputError(p, "gzip-compressed; decompress it first (gunzip)")
    xs = XSpace()
    try:
        xs.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as e:
        raise InputError(p, f"not a readable XSpace protobuf (truncated or corrupt): {e}") from None
    if not xs.planes or not any(pl.name for pl in xs.planes):
        raise InputError(p, "not an XSpace capture: it holds no named planes")
    # Random bytes can parse as a protobuf full of unknown fields; a real XSpace names its planes
    # with the profiler's prefixes.
    if not any(pl.name.startswith(("/host:", "/device:", TASK_ENV_PLANE, "#")) for pl in xs.planes):
        raise InputError(p, "not an XSpace capture: no /host: or /device: planes")
    return xs


def _find_files(path: str | os.PathLike, session: str | None) -> list[Path]:
    from overlap.paths import find_xplane_files

    return find_xplane_files(path, session)


def read_trace(path: str | os.PathLike, session: str | None = None) -> Trace:
    """Read a capture into trace tables. See the module docstring for what `path` may be."""
    files = _find_files(path, session)
    parts = []
    for f in files:
        xs = load_xspace(f)
        host = _host_name(xs, f)
        parts.append(read_xspace(xs, host=host, source=f))
    return _concat(parts, files)


def _host_name(xs, f: Path) -> str:
    """JAX names each host's file `<host>.xplane.pb`; fall back to XSpace.hostnames."""
    name = f.name
    stem = name[: -len(".xplane.pb")] if name.endswith(".xplane.pb") else f.stem
    if stem and stem != "xplane":
        return stem
    return xs.hostnames[0] if xs.hostnames and xs.hostnames[0] else "host"


def _concat(parts: list[dict], files: list[Path]) -> Trace:
    def cat(key, schema):
        frames = [p[key] for p in parts if len(p[key])]
        if not frames:
            return _frame(None, schema)
        return pd.concat(frames, ignore_index=True)

    backends = {p["backend"] for p in parts}
    backend = next(iter(backends)) if len(backends) == 1 else (
        "gpu" if "gpu" in backends else "tpu" if "tpu" in backends else "cpu")
    hosts_seen: dict[str, int] = {}
    capture = {}
    for p in parts:
        h = p["host"]
        if h in hosts_seen:  # two files naming the same host: keep both, apart
            hosts_seen[h] += 1
        else:
            hosts_seen[h] = 0
        capture[h] = p["capture"]
    transfers = cat("transfers", TRANSFER_COLUMNS)
    compute = cat("compute", COMPUTE_COLUMNS)
    transfers = transfers.sort_values(["host", "device", "start_ps"], kind="stable",
                                      ignore_index=True)
    compute = compute.sort_values(["host", "device", "start_ps"], kind="stable",
                                  ignore_index=True)
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
    """Extract the tables of one host's XSpace. Returns a dict of DataFrames and facts."""
    task = next((pl for pl in xs.planes if pl.name == TASK_ENV_PLANE), None)
    start_ns = stop_ns = None
    if task is not None:
        ts = _Plane(task).plane_stats()
        start_ns = _as_int(ts.get("profile_start_time"))
        stop_ns = _as_int(ts.get("profile_stop_time"))
    origin_ns = start_ns or 0

    def line_base_ps(line) -> int:
        ts = line.timestamp_ns
        # JAX normalizes line timestamps to the session start; files from other producers may
        # keep absolute ones.
        if origin_ns and ts >= origin_ns:
            ts -= origin_ns
        return ts * 1000

    tr: dict[str, list] = defaultdict(list)
    co: dict[str, list] = defaultdict(list)
    st: dict[str, list] = defaultdict(list)
    mem: dict[str, list] = defaultdict(list)
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

    for plane in xs.planes:
        P = _Plane(plane)
        for line in plane.lines:
            lines["host"].append(host)
            lines["plane"].append(plane.name)
            lines["line_id"].append(line.id)
            lines["line"].append(line.name)
            lines["events"].append(len(line.events))

        if m := GPU_PLANE_RE.match(plane.name):
            backend = "gpu"
            device = f"GPU:{m.group(1)}"
            _device_row(devs, host, device, plane, P)
            _read_gpu_plane(P, device, host, line_base_ps, tr, co)
        elif m := TPU_PLANE_RE.match(plane.name):
            if backend != "gpu":
                backend = "tpu"
            device = f"TPU:{m.group(1)}"
            if "SparseCore" not in plane.name:
                _device_row(devs, host, device, plane, P)
            _read_tpu_plane(P, device, host, line_base_ps, tr, co)
        elif plane.name == HOST_PLANE:
            cpu_compute_seen |= _read_host_plane(P, host, line_base_ps, co, st, mem)
        elif plane.name == METADATA_PLANE:
            ps = P.plane_stats()
            for key in ("jax_version", "jaxlib_version", "cpu_version", "process_id"):
                if key in ps:
                    facts[key] = ps[key]
            for mid, md in plane.event_metadata.items():
                s = P.stats(md.stats)
                proto = s.get("Hlo Proto")
                if proto is None:
                    continue
                mods["host"].append(host)
                pid = _as_int(s.get("program_id"))
                mods["program_id"].append(pid)
                mods["name"].append(md.name)
                mods["hlo_proto"].append(bytes(proto) if proto is not None else None)
        elif plane.name == TASK_ENV_PLANE:
            continue

    if backend != "cpu":
        # XLA:CPU thunks on the host of a GPU/TPU program are host work, not device compute.
        keep = [not d.startswith("CPU:") for d in co["device"]]
        for col in list(co):
            co[col] = [v for v, k in zip(co[col], keep) if k]
    elif not cpu_compute_seen and not any(pl.name == HOST_PLANE for pl in xs.planes):
        backend = "unknown"

    facts["backend"] = backend
    facts["synthetic"] = synthetic
    return {
        "host": host, "backend": backend, "capture": facts, "synthetic": synthetic,
        "transfers": _frame(tr, TRANSFER_COLUMNS), "compute": _frame(co, COMPUTE_COLUMNS),
        "steps": _frame(st, STEP_COLUMNS), "memory": _frame(mem, MEMORY_COLUMNS),
        "modules": _frame(mods, MODULE_COLUMNS), "devices": _frame(devs, DEVICE_COLUMNS),
        "lines": _frame(lines, LINE_COLUMNS),
    }


def _device_row(devs, host, device, plane, P: _Plane) -> None:
    ps = P.plane_stats()
    devs["host"].append(host)
    devs["device"].append(device)
    devs["plane"].append(plane.name)
    devs["vendor"].append(ps.get("device_vendor"))
    devs["name"].append(ps.get("gpu_device_name") or ps.get("device_type_string")
                        or ps.get("device_name"))
    devs["memory_size"].append(_as_int(ps.get("memory_size")))
    devs["memory_bandwidth"].append(_as_int(ps.get("memory_bandwidth")))
    devs["clock_rate_khz"].append(_as_int(ps.get("clock_rate")))
    devs["core_count"].append(_as_int(ps.get("core_count")))
    major, minor = ps.get("compute_cap_major"), ps.get("compute_cap_minor")
    devs["compute_capability"].append(f"{major}.{minor}" if major is not None else None)


def _read_gpu_plane(P: _Plane, device, host, line_base_ps, tr, co) -> None:
    wanted = P.ids("memcpy_details", "kernel_details", "hlo_op", "hlo_module", "program_id")
    memcpy_mids = {k: MEMCPY_DIRECTIONS[md.name] for k, md in P.meta.items()
                   if md.name in MEMCPY_DIRECTIONS}
    graph_mids = {k for k, md in P.meta.items() if md.name.startswith("CudaGraphExec")}
    for line in P.plane.lines:
        mids, offs, durs, events = _line_events(line)
        if not events:
            continue
        base = line_base_ps(line)
        starts = offs + base
        for i, e in enumerate(events):
            mid = int(mids[i])
            direction = memcpy_mids.get(mid)
            s = P.stats(e.stats, wanted)
            ms = P.meta_stats(mid)
            if ms:  # stats may sit on the metadata; the event's own win
                s = {**ms, **s}
            if direction is not None:
                det = parse_details(s.get("memcpy_details"))
                tr["host"].append(host)
                tr["device"].append(device)
                tr["direction"].append(direction)
                tr["start_ps"].append(int(starts[i]))
                tr["end_ps"].append(int(starts[i] + durs[i]))
                tr["bytes"].append(_as_int(det.get("size")) or 0)
                tr["src_kind"].append(det.get("kind_src", "unknown"))
                tr["dst_kind"].append(det.get("kind_dst", "unknown"))
                a = det.get("async")
                tr["async"].append(None if a is None else a == "1")
                tr["stream"].append(line.id)
                tr["line"].append(line.name)
                tr["hlo_op"].append(_clean_hlo_op(s.get("hlo_op")))
                tr["hlo_module"].append(s.get("hlo_module"))
                tr["program_id"].append(_as_int(s.get("program_id")))
            elif "kernel_details" in s or mid in graph_mids:
                co["host"].append(host)
                co["device"].append(device)
                co["start_ps"].append(int(starts[i]))
                co["end_ps"].append(int(starts[i] + durs[i]))
                co["name"].append(P.name(mid))
                co["hlo_op"].append(_clean_hlo_op(s.get("hlo_op")))
                co["hlo_module"].append(s.get("hlo_module"))
                co["stream"].append(line.id)
                co["line"].append(line.name)


def _clean_hlo_op(v: Any) -> str | None:
    """`hlo_op` can be a `::`-joined stack of annotations (xprof splits it); keep the last."""
    if v is None or v == "":
        return None
    v = str(v)
    return v.rsplit("::", 1)[-1] if "::" in v else v


def _read_tpu_plane(P: _Plane, device, host, line_base_ps, tr, co) -> None:
    by_name = {line.name: line for line in P.plane.lines}
    async_line = by_name.get(TPU_ASYNC_LINE)
    op_lines = [by_name[n] for n in sorted(TPU_OPS_LINES) if n in by_name]
    a_ids = P.ids("_a")

    def op_events(line):
        mids, offs, durs, events = _line_events(line)
        base = line_base_ps(line)
        return mids, offs + base, durs, events

    starts_done: list[tuple[int, int, int, str]] = []  # (start, end, mid, instr)
    for line in op_lines:
        mids, starts, durs, events = op_events(line)
        for i, e in enumerate(events):
            mid = int(mids[i])
            instr = P.display_name(mid) or instruction_name(P.name(mid))
            if a_ids and any(s.metadata_id in a_ids for s in e.stats):
                continue
            if is_async_boundary(instr):
                if line.name == "XLA Ops":
                    starts_done.append((int(starts[i]), int(starts[i] + durs[i]), mid, instr))
                continue
            co["host"].append(host)
            co["device"].append(device)
            co["start_ps"].append(int(starts[i]))
            co["end_ps"].append(int(starts[i] + durs[i]))
            co["name"].append(instr)
            co["hlo_op"].append(instr)
            hm = P.meta_stats(mid).get("hlo_module")
            co["hlo_module"].append(hm)
            co["stream"].append(line.id)
            co["line"].append(line.name)

    def add_transfer(start, end, hlo_text, mid, line, done_op=None):
        direction, nbytes = copy_start_direction(hlo_text)
        if direction is None:
            return
        ms = P.meta_stats(mid)
        if nbytes is None:
            nbytes = _as_int(ms.get("raw_bytes_accessed")) or _as_int(ms.get("bytes_accessed")) or 0
        tr["host"].append(host)
        tr["device"].append(device)
        tr["direction"].append(direction)
        tr["start_ps"].append(start)
        tr["end_ps"].append(end)
        tr["bytes"].append(nbytes)
        tr["src_kind"].append("host" if direction == "H2D" else "device")
        tr["dst_kind"].append("host" if direction == "D2H" else "device")
        tr["async"].append(True)
        tr["stream"].append(line.id)
        tr["line"].append(line.name)
        tr["hlo_op"].append(instruction_name(hlo_text))
        tr["hlo_module"].append(ms.get("hlo_module"))
        tr["program_id"].append(_as_int(ms.get("program_id")))

    if async_line is not None and len(async_line.events):
        mids, starts, durs, events = op_events(async_line)
        for i in range(len(events)):
            mid = int(mids[i])
            text = P.name(mid)
            if HOST_MEMORY_SPACE not in text or "copy-start" not in text.split(" = ", 1)[-1]:
                continue
            add_transfer(int(starts[i]), int(starts[i] + durs[i]), text, mid, async_line)
        return

    # No Async XLA Ops line: pair each copy-start with the next copy-done of the same key.
    open_starts: dict[str, deque] = defaultdict(deque)
    for start, end, mid, instr in sorted(starts_done):
        m = _START_DONE_RE.match(instr)
        if not m or not m["base"].endswith("copy"):
            continue
        key = m["base"] + (m["n"] or "")
        if m["role"] == "start":
            open_starts[key].append((start, mid))
        elif open_starts[key]:
            s0, smid = open_starts[key].popleft()
            text = P.name(smid)
            if HOST_MEMORY_SPACE in text:
                add_transfer(s0, end, text, smid, by_name["XLA Ops"])


def _read_host_plane(P: _Plane, host, line_base_ps, co, st, mem) -> bool:
    """Steps, allocator events and XLA:CPU compute from the host plane."""
    wanted = P.ids("_r", "step_num", "hlo_op", "hlo_module", "device_ordinal",
                   "allocator_name", "bytes_allocated", "bytes_reserved", "peak_bytes_in_use",
                   "requested_bytes", "allocation_bytes", "index_on_host")
    mem_mids = {k: MEMORY_EVENT_KINDS[md.name] for k, md in P.meta.items()
                if md.name in MEMORY_EVENT_KINDS}
    # Python-tracer frames ("$file.py:12 fn") are most of a host plane and never steps/compute.
    skip = {k for k, md in P.meta.items() if md.name.startswith("$")
            or md.name.startswith("end: ") or md.name.startswith("ThreadpoolListener::")}
    saw_compute = False
    step_rows = []
    for line in P.plane.lines:
        mids, offs, durs, events = _line_events(line)
        if not events:
            continue
        base = line_base_ps(line)
        for i, e in enumerate(events):
            mid = int(mids[i])
            if mid in skip:
                continue
            s = P.stats(e.stats, wanted)
            ms = P.meta_stats(mid)
            if ms:
                s = {**ms, **s}
            if not s:
                continue
            start = int(offs[i]) + base
            if mid in mem_mids:
                alloc = s.get("allocator_name")
                if alloc is None and "index_on_host" in s:
                    alloc = f"index_on_host:{s['index_on_host']}"
                mem["host"].append(host)
                mem["time_ps"].append(start)
                mem["allocator"].append(alloc)
                mem["device"].append(_allocator_device(alloc))
                mem["kind"].append(mem_mids[mid])
                for col in ("bytes_allocated", "bytes_reserved", "peak_bytes_in_use",
                            "requested_bytes", "allocation_bytes"):
                    mem[col].append(_as_int(s.get(col)) or 0)
                continue
            if s.get("_r"):
                step_rows.append((start, start + int(durs[i]), _as_int(s.get("step_num")),
                                  P.name(mid)))
                continue
            if "hlo_op" in s:
                saw_compute = True
                ordinal = _as_int(s.get("device_ordinal")) or 0
                co["host"].append(host)
                co["device"].append(f"CPU:{ordinal}")
                co["start_ps"].append(start)
                co["end_ps"].append(start + int(durs[i]))
                co["name"].append(P.name(mid))
                co["hlo_op"].append(_clean_hlo_op(s.get("hlo_op")))
                co["hlo_module"].append(s.get("hlo_module"))
                co["stream"].append(line.id)
                co["line"].append(line.name)
    step_rows.sort()
    for k, (start, end, num, name) in enumerate(step_rows):
        st["host"].append(host)
        st["step"].append(num if num is not None else k)
        st["name"].append(name)
        st["start_ps"].append(start)
        st["end_ps"].append(end)
    return saw_compute


_ALLOCATOR_RE = re.compile(r"^GPU_(\d+)_bfc$")


def _allocator_device(name: str | None) -> str | None:
    """PjRt GPU names device allocators `GPU_<ordinal>_bfc`; the host staging one is not a device."""
    if not name:
        return None
    m = _ALLOCATOR_RE.match(name)
    return f"GPU:{m.group(1)}" if m else None
