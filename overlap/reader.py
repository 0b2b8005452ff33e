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

Speed: `read_trace` parses files with a lite schema in which `XLine.events` stays raw bytes, and
decodes every line's XEvent/XStat fields at once with numpy (see "Fast path" below). The rules
above are still applied per event; nothing is decided per line or per metadata id alone. The
decoder checks wire types and lengths (a damaged event is an `InputError`, as a parse failure is)
but does not validate UTF-8 inside event string stats (they are decoded with replacement).

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


# ---------------------------------------------------------------------------------------------
# Fast path: events as raw wire bytes, decoded with numpy
#
# Building a Python object per event and per stat costs ~250 ns each through upb (that was 95% of
# the reader's time). So files are parsed with a *lite* schema, identical to XSpace except that
# `XLine.events` is `repeated bytes`: upb then only slices each event's bytes, and the XEvent and
# XStat fields are decoded here for whole lines at once with vectorized varint reads.


def _lite_xspace_class():
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    from overlap.protos import _HERE

    fds = descriptor_pb2.FileDescriptorSet.FromString((_HERE / "xplane.desc").read_bytes())
    fd = fds.file[0]
    old = "." + fd.package + "."
    fd.name, fd.package = "overlap_xplane_lite.proto", "overlap.xspace_lite"

    def fix(msg):
        for f in msg.field:
            if f.type_name.startswith(old):
                f.type_name = ".overlap.xspace_lite." + f.type_name[len(old):]
        for m in msg.nested_type:
            fix(m)

    for m in fd.message_type:
        fix(m)
        if m.name == "XLine":
            for f in m.field:
                if f.name == "events":  # same field number 4, kept as raw bytes
                    f.type = descriptor_pb2.FieldDescriptorProto.TYPE_BYTES
                    f.ClearField("type_name")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("overlap.xspace_lite.XSpace"))


XSpaceLite = _lite_xspace_class()


class _Corrupt(ValueError):
    """An event's bytes are not a valid XEvent."""


_PAD = bytes(16)  # zero padding: a varint read never runs past the buffer


def _varint_at(buf: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Varints starting at byte positions `p`: (values as uint64, lengths)."""
    b = buf[p].astype(np.uint64)
    val = b & np.uint64(0x7F)
    n = np.ones(len(p), np.int64)
    cont = np.flatnonzero(b & np.uint64(0x80))
    shift = 7
    while cont.size:
        if shift > 63:
            raise _Corrupt("varint longer than 10 bytes")
        bb = buf[p[cont] + n[cont]].astype(np.uint64)
        val[cont] |= (bb & np.uint64(0x7F)) << np.uint64(shift)
        n[cont] += 1
        cont = cont[(bb & np.uint64(0x80)) != 0]
        shift += 7
    return val, n


def _walk(buf: np.ndarray, start: np.ndarray, end: np.ndarray, on_field) -> None:
    """Walk the fields of many messages at once: pass k handles every message's k-th field.

    `on_field(rows, field, wire_type, value, value_pos, next_pos)` gets the message indices of
    this pass; `value` is the varint (wire type 0) or length (2), `value_pos` where the value or
    payload starts. Messages are done when their position reaches `end`.
    """
    pos = start.copy()
    act = np.flatnonzero(pos < end)
    while act.size:
        p = pos[act]
        tag, tl = _varint_at(buf, p)
        vp = p + tl
        wt = (tag & np.uint64(7)).astype(np.int64)
        fld = (tag >> np.uint64(3)).astype(np.int64)
        val = np.zeros(len(act), np.uint64)
        nxt = np.empty(len(act), np.int64)
        vi = np.flatnonzero((wt == 0) | (wt == 2))
        if vi.size:
            v, vl = _varint_at(buf, vp[vi])
            val[vi] = v
            lim = end[act[vi]]
            isl = wt[vi] == 2
            if (v[isl] > np.uint64(1 << 40)).any():
                raise _Corrupt("length out of range")
            nxt[vi] = vp[vi] + vl + np.where(isl, v, 0).astype(np.int64)
            vp[vi] += vl  # payload / value start after the length varint
            del lim
        fixed = np.flatnonzero((wt == 1) | (wt == 5))
        nxt[fixed] = vp[fixed] + np.where(wt[fixed] == 1, 8, 4)
        if ((wt == 3) | (wt == 4) | (wt > 5)).any():
            raise _Corrupt("unsupported wire type")
        lim = end[act]
        if (nxt > lim).any():
            raise _Corrupt("field runs past its message")
        on_field(act, fld, wt, val, vp, nxt)
        pos[act] = nxt
        act = act[nxt < lim]


class _LineEvents:
    """One line's positioned events as arrays, plus lazy access to their stats."""

    def __init__(self, line, base_ps: int):
        raw = list(line.events)  # bytes objects: one cheap slice each, no XEvent objects
        n = len(raw)
        lens = np.fromiter(map(len, raw), np.int64, n)
        self.buf = np.frombuffer(b"".join(raw) + _PAD, np.uint8)
        del raw
        end = np.cumsum(lens)
        start = end - lens
        mid = np.zeros(n, np.int64)
        off = np.zeros(n, np.int64)
        dur = np.zeros(n, np.int64)
        agg = np.zeros(n, bool)
        st_ev, st_pos, st_end = [], [], []

        def on_field(rows, fld, wt, val, vp, nxt):
            v = val.view(np.int64)
            for f, arr in ((1, mid), (2, off), (3, dur)):
                m = (fld == f) & (wt == 0)
                if m.any():
                    arr[rows[m]] = v[m]
            m = (fld == 5) & (wt == 0)  # num_occurrences: aggregated, no position
            if m.any():
                agg[rows[m]] = True
                off[rows[m]] = 0
            m = (fld == 2) & (wt == 0)  # the oneof's last field wins
            if m.any():
                agg[rows[m]] = False
            m = (fld == 4) & (wt == 2)
            if m.any():
                st_ev.append(rows[m])
                st_pos.append(vp[m])
                st_end.append(nxt[m])

        _walk(self.buf, start, end, on_field)
        keep = ~agg
        self.all_positioned = bool(keep.all())
        # Old index -> new index (aggregated events dropped), for the stat records.
        self._remap = np.cumsum(keep) - 1
        self._keep = keep
        self.mids = mid[keep]
        self.starts = off[keep] + base_ps
        self.durs = dur[keep]
        self.n = len(self.mids)
        if st_ev:
            ev = np.concatenate(st_ev)
            sp = np.concatenate(st_pos)
            se = np.concatenate(st_end)
            k = keep[ev]
            self._st_ev, self._st_pos, self._st_end = self._remap[ev[k]], sp[k], se[k]
        else:
            self._st_ev = self._st_pos = self._st_end = np.zeros(0, np.int64)
        self._sids: np.ndarray | None = None
        self._decoded: dict | None = None

    def _stat_sids(self) -> np.ndarray:
        """Each stat record's metadata_id (canonical writers put it first: `0x08 varint`)."""
        if self._sids is None:
            sp = self._st_pos
            first = self.buf[sp] == 0x08
            sids = np.zeros(len(sp), np.int64)
            if first.all():
                v, _ = _varint_at(self.buf, sp + 1)
                sids[:] = v.view(np.int64)
            else:
                sids[:] = self._decode_all()["sid"]
            self._sids = sids
        return self._sids

    def _decode_all(self) -> dict:
        if self._decoded is None:
            self._decoded = _decode_stats(self.buf, self._st_pos, self._st_end)
        return self._decoded

    def has_stat(self, sids) -> np.ndarray:
        """Per event: does it carry a stat with one of these metadata ids?"""
        out = np.zeros(self.n, bool)
        if len(self._st_ev) and sids:
            sel = np.isin(self._stat_sids(), np.fromiter(sids, np.int64))
            out[self._st_ev[sel]] = True
        return out

    def first_stat(self, sids, stat_names: dict[int, str]) -> tuple[np.ndarray, np.ndarray]:
        """(event indices, values as objects) of the first stat with one of `sids` per event."""
        if not len(self._st_ev) or not sids:
            return np.zeros(0, np.int64), np.zeros(0, object)
        sel = np.flatnonzero(np.isin(self._stat_sids(), np.fromiter(sids, np.int64)))
        # records are stored pass by pass, so the first record of an event is its earliest stat
        evs, first = np.unique(self._st_ev[sel], return_index=True)
        rec = sel[first]
        d = _decode_stats(self.buf, self._st_pos[rec], self._st_end[rec])
        return evs, _stat_objects(self.buf, d, stat_names)


_K_NONE, _K_DOUBLE, _K_U64, _K_I64, _K_STR, _K_BYTES, _K_REF = 0, 2, 3, 4, 5, 6, 7


def _decode_stats(buf, sp, se) -> dict:
    n = len(sp)
    sid = np.zeros(n, np.int64)
    kind = np.zeros(n, np.int64)
    ival = np.zeros(n, np.uint64)
    vpos = np.zeros(n, np.int64)

    def on_field(rows, fld, wt, val, vp, nxt):
        m = (fld == 1) & (wt == 0)
        sid[rows[m]] = val[m].view(np.int64)
        m = (fld >= 2) & (fld <= 7)  # the value oneof; the last one written wins
        r = rows[m]
        kind[r] = fld[m]
        ival[r] = val[m]
        vpos[r] = vp[m]

    _walk(buf, sp, se, on_field)
    return {"sid": sid, "kind": kind, "ival": ival, "vpos": vpos}


def _stat_objects(buf, d, stat_names: dict[int, str]) -> np.ndarray:
    """Python values of decoded stats, as `_Plane.value` gives them (refs resolved to names)."""
    kind, ival, vpos = d["kind"], d["ival"], d["vpos"]
    out = np.full(len(kind), None, object)
    m = np.flatnonzero(kind == _K_REF)
    if m.size:
        uniq, inv = np.unique(ival[m], return_inverse=True)
        names = np.array([stat_names.get(int(u), "") for u in uniq] + [None], object)[:-1]
        out[m] = names[inv]
    m = np.flatnonzero(kind == _K_I64)
    if m.size:
        out[m] = ival[m].view(np.int64).tolist()
    m = np.flatnonzero(kind == _K_U64)
    if m.size:
        out[m] = ival[m].tolist()
    m = np.flatnonzero(kind == _K_DOUBLE)
    if m.size:
        idx = vpos[m][:, None] + np.arange(8)
        out[m] = buf[idx].copy().view("<f8").ravel().tolist()
    for k in (_K_STR, _K_BYTES):
        m = np.flatnonzero(kind == k)
        for i in m.tolist():
            p, ln = int(vpos[i]), int(ival[i])
            b = buf[p:p + ln].tobytes()
            out[i] = b.decode("utf-8", "replace") if k == _K_STR else b
    return out


def _stat_column(P: "_Plane", ev: _LineEvents, idx: np.ndarray, name: str) -> np.ndarray:
    """Values of stat `name` for events `idx`: the event's first such stat, else its metadata's."""
    out = np.full(len(idx), None, object)
    if not len(idx):
        return out
    pos = np.full(ev.n, -1, np.int64)
    pos[idx] = np.arange(len(idx))
    have = np.zeros(len(idx), bool)
    sids = P.stat_ids.get(name)
    if sids:
        evs, vals = ev.first_stat(sids, P.stat_names)
        where = pos[evs]
        ok = where >= 0
        out[where[ok]] = vals[ok]
        have[where[ok]] = True
    missing = np.flatnonzero(~have)
    if missing.size:  # fall back to the metadata's stats, once per metadata id
        mids = ev.mids[idx[missing]]
        uniq, inv = np.unique(mids, return_inverse=True)
        mv = np.array([P.meta_stats(int(u)).get(name) for u in uniq] + [None], object)[:-1]
        out[missing] = mv[inv]
    return out


def _per_mid(mids: np.ndarray, fn) -> np.ndarray:
    """`fn(mid)` for each event, computed once per distinct metadata id."""
    uniq, inv = np.unique(mids, return_inverse=True)
    vals = np.array([fn(int(u)) for u in uniq] + [None], object)[:-1]
    return vals[inv]


class _Cols:
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
                    parts.append(np.full(n, v, dtype=object if dtype == "object" or v is None
                                         else np.int64))
            out[col] = np.concatenate(parts) if parts else []
        return out


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
    return _load(path, XSpace)


def _load(path: str | os.PathLike, cls) -> Any:
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
    xs = cls()
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
        # The lite schema leaves events as bytes (decoded in bulk below); a damaged event then
        # surfaces in the decoder instead of the parser, with the same message.
        xs = _load(f, XSpaceLite)
        host = _host_name(xs, f)
        try:
            parts.append(read_xspace(xs, host=host, source=f))
        except _Corrupt as e:
            raise InputError(f, f"not a readable XSpace protobuf (truncated or corrupt): {e}"
                             ) from None
    return _concat(parts, files)


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

    `xs` is a parsed XSpace (any schema with the same field numbers) or an `XSpaceLite`, which
    `read_trace` parses directly; other messages are re-read as lite (serialize + parse).
    """
    if type(xs) is not XSpaceLite:
        xs = XSpaceLite.FromString(xs.SerializeToString())
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

    tr, co = _Cols(), _Cols()
    st: dict[str, list] = defaultdict(list)
    mem = _Cols()
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

    keep_compute = None
    if backend != "cpu":
        # XLA:CPU thunks on the host of a GPU/TPU program are host work, not device compute.
        def keep_compute(cols):
            return not cols.get("_cpu")
    elif not cpu_compute_seen and not any(pl.name == HOST_PLANE for pl in xs.planes):
        backend = "unknown"

    facts["backend"] = backend
    facts["synthetic"] = synthetic
    return {
        "host": host, "backend": backend, "capture": facts, "synthetic": synthetic,
        "transfers": _frame(tr.rows(TRANSFER_COLUMNS), TRANSFER_COLUMNS),
        "compute": _frame(co.rows(COMPUTE_COLUMNS, keep_compute), COMPUTE_COLUMNS),
        "steps": _frame(st, STEP_COLUMNS),
        "memory": _frame(mem.rows(MEMORY_COLUMNS), MEMORY_COLUMNS),
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


def _read_gpu_plane(P: _Plane, device, host, line_base_ps, tr: _Cols, co: _Cols) -> None:
    memcpy_mids = {k: MEMCPY_DIRECTIONS[md.name] for k, md in P.meta.items()
                   if md.name in MEMCPY_DIRECTIONS}
    graph_mids = {k for k, md in P.meta.items() if md.name.startswith("CudaGraphExec")}
    # Metadata-level kernel_details also makes a kernel (stats merge event over metadata).
    kd_meta = {k for k in P.meta.keys() if "kernel_details" in P.meta_stats(k)}
    kd_sids = P.stat_ids.get("kernel_details", [])
    details_cache: dict[Any, dict[str, str]] = {}
    for line in P.plane.lines:
        if not len(line.events):
            continue
        ev = _LineEvents(line, line_base_ps(line))
        if not ev.n:
            continue
        mids = ev.mids
        is_mc = np.isin(mids, list(memcpy_mids)) if memcpy_mids else np.zeros(ev.n, bool)
        # Per event, never per line or per metadata alone: any event may carry kernel_details.
        is_k = ~is_mc & (ev.has_stat(kd_sids) | np.isin(mids, list(kd_meta | graph_mids)))
        idx = np.flatnonzero(is_mc)
        if idx.size:
            det_raw = _stat_column(P, ev, idx, "memcpy_details")
            dets = []
            for d in det_raw.tolist():
                key = d if isinstance(d, (str, bytes)) or d is None else str(d)
                got = details_cache.get(key)
                if got is None:
                    got = details_cache[key] = parse_details(d)
                dets.append(got)
            asyn = [det.get("async") for det in dets]
            tr.add(len(idx), host=host, device=device,
                   direction=_per_mid(mids[idx], memcpy_mids.get),
                   start_ps=ev.starts[idx], end_ps=ev.starts[idx] + ev.durs[idx],
                   bytes=np.array([_as_int(det.get("size")) or 0 for det in dets], np.int64),
                   src_kind=np.array([det.get("kind_src", "unknown") for det in dets], object),
                   dst_kind=np.array([det.get("kind_dst", "unknown") for det in dets], object),
                   **{"async": np.array([None if a is None else a == "1" for a in asyn],
                                        object)},
                   stream=line.id, line=line.name,
                   hlo_op=_clean_column(_stat_column(P, ev, idx, "hlo_op")),
                   hlo_module=_stat_column(P, ev, idx, "hlo_module"),
                   program_id=np.array([_as_int(v) for v in
                                        _stat_column(P, ev, idx, "program_id").tolist()],
                                       object))
        idx = np.flatnonzero(is_k)
        if idx.size:
            co.add(len(idx), host=host, device=device, start_ps=ev.starts[idx],
                   end_ps=ev.starts[idx] + ev.durs[idx], name=_per_mid(mids[idx], P.name),
                   hlo_op=_clean_column(_stat_column(P, ev, idx, "hlo_op")),
                   hlo_module=_stat_column(P, ev, idx, "hlo_module"),
                   stream=line.id, line=line.name)


def _clean_hlo_op(v: Any) -> str | None:
    """`hlo_op` can be a `::`-joined stack of annotations (xprof splits it); keep the last."""
    if v is None or v == "":
        return None
    v = str(v)
    return v.rsplit("::", 1)[-1] if "::" in v else v


def _clean_column(values: np.ndarray) -> np.ndarray:
    """`_clean_hlo_op` over a column, once per distinct value."""
    cache: dict[Any, Any] = {}
    out = np.empty(len(values), object)
    for i, v in enumerate(values.tolist()):
        try:
            c = cache[v]
        except KeyError:
            c = cache[v] = _clean_hlo_op(v)
        except TypeError:  # unhashable (never for stat values, but be safe)
            c = _clean_hlo_op(v)
        out[i] = c
    return out


def _read_tpu_plane(P: _Plane, device, host, line_base_ps, tr: _Cols, co: _Cols) -> None:
    by_name = {line.name: line for line in P.plane.lines}
    async_line = by_name.get(TPU_ASYNC_LINE)
    op_lines = [by_name[n] for n in sorted(TPU_OPS_LINES) if n in by_name]
    a_ids = P.ids("_a")
    instr_of: dict[int, str] = {}

    def instr(mid: int) -> str:
        s = instr_of.get(mid)
        if s is None:
            s = instr_of[mid] = P.display_name(mid) or instruction_name(P.name(mid))
        return s

    starts_done: list[tuple[int, int, int, str]] = []  # (start, end, mid, instr)
    for line in op_lines:
        if not len(line.events):
            continue
        ev = _LineEvents(line, line_base_ps(line))
        mids = ev.mids
        keep = ~ev.has_stat(a_ids) if a_ids else np.ones(ev.n, bool)
        names = _per_mid(mids, instr)
        bnd = _per_mid(mids, lambda m: is_async_boundary(instr(m))).astype(bool)
        if line.name == "XLA Ops":
            for i in np.flatnonzero(keep & bnd).tolist():
                starts_done.append((int(ev.starts[i]), int(ev.starts[i] + ev.durs[i]),
                                    int(mids[i]), names[i]))
        idx = np.flatnonzero(keep & ~bnd)
        co.add(len(idx), host=host, device=device, start_ps=ev.starts[idx],
               end_ps=ev.starts[idx] + ev.durs[idx], name=names[idx], hlo_op=names[idx],
               hlo_module=_per_mid(mids[idx], lambda m: P.meta_stats(m).get("hlo_module")),
               stream=line.id, line=line.name)

    transfer_of: dict[int, tuple | None] = {}

    def transfer_facts(mid: int, text: str):
        got = transfer_of.get(mid, False)
        if got is False:
            direction, nbytes = copy_start_direction(text)
            got = None
            if direction is not None:
                ms = P.meta_stats(mid)
                if nbytes is None:
                    nbytes = (_as_int(ms.get("raw_bytes_accessed"))
                              or _as_int(ms.get("bytes_accessed")) or 0)
                got = (direction, nbytes, instruction_name(text), ms.get("hlo_module"),
                       _as_int(ms.get("program_id")))
            transfer_of[mid] = got
        return got

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

    if async_line is not None and len(async_line.events):
        ev = _LineEvents(async_line, line_base_ps(async_line))

        def facts_for(mid: int):
            text = P.name(mid)
            if HOST_MEMORY_SPACE not in text or "copy-start" not in text.split(" = ", 1)[-1]:
                return None
            return transfer_facts(mid, text)

        facts = _per_mid(ev.mids, facts_for)
        sel = np.flatnonzero(np.array([f is not None for f in facts.tolist()], bool))
        add_transfers(ev.starts[sel], ev.starts[sel] + ev.durs[sel], facts[sel].tolist(),
                      async_line)
        return

    # No Async XLA Ops line: pair each copy-start with the next copy-done of the same key.
    open_starts: dict[str, deque] = defaultdict(deque)
    s_list, e_list, f_list = [], [], []
    for start, end, mid, ins in sorted(starts_done):
        m = _START_DONE_RE.match(ins)
        if not m or not m["base"].endswith("copy"):
            continue
        key = m["base"] + (m["n"] or "")
        if m["role"] == "start":
            open_starts[key].append((start, mid))
        elif open_starts[key]:
            s0, smid = open_starts[key].popleft()
            text = P.name(smid)
            if HOST_MEMORY_SPACE in text:
                f = transfer_facts(smid, text)
                if f is not None:
                    s_list.append(s0)
                    e_list.append(end)
                    f_list.append(f)
    add_transfers(s_list, e_list, f_list, by_name.get("XLA Ops"))


_HOST_WANTED = ("_r", "step_num", "hlo_op", "hlo_module", "device_ordinal", "allocator_name",
                "bytes_allocated", "bytes_reserved", "peak_bytes_in_use", "requested_bytes",
                "allocation_bytes", "index_on_host")


def _read_host_plane(P: _Plane, host, line_base_ps, co: _Cols, st, mem: _Cols) -> bool:
    """Steps, allocator events and XLA:CPU compute from the host plane."""
    wanted = P.ids(*_HOST_WANTED)
    mem_mids = {k: MEMORY_EVENT_KINDS[md.name] for k, md in P.meta.items()
                if md.name in MEMORY_EVENT_KINDS}
    # Python-tracer frames ("$file.py:12 fn") are most of a host plane and never steps/compute.
    skip = {k for k, md in P.meta.items() if md.name.startswith("$")
            or md.name.startswith("end: ") or md.name.startswith("ThreadpoolListener::")}
    meta_nonempty = {k for k in P.meta.keys() if k not in skip and P.meta_stats(k)}
    saw_compute = False
    step_rows = []
    for line in P.plane.lines:
        if not len(line.events):
            continue
        ev = _LineEvents(line, line_base_ps(line))
        if not ev.n:
            continue
        mids = ev.mids
        cand = ~np.isin(mids, list(skip)) if skip else np.ones(ev.n, bool)
        # The old per-event rule: the merged (wanted event stats + metadata stats) dict is
        # non-empty.
        ok = cand & (ev.has_stat(wanted) | np.isin(mids, list(meta_nonempty)))
        if not ok.any():
            continue
        is_mem = ok & np.isin(mids, list(mem_mids))
        idx = np.flatnonzero(is_mem)
        if idx.size:
            col = {c: _stat_column(P, ev, idx, c) for c in (
                "allocator_name", "index_on_host", "bytes_allocated", "bytes_reserved",
                "peak_bytes_in_use", "requested_bytes", "allocation_bytes")}
            alloc = []
            for a, ioh in zip(col["allocator_name"].tolist(), col["index_on_host"].tolist()):
                if a is None and ioh is not None:
                    a = f"index_on_host:{ioh}"
                alloc.append(a)
            mem.add(len(idx), host=host, time_ps=ev.starts[idx],
                    allocator=np.array(alloc + [None], object)[:-1],
                    device=np.array([_allocator_device(a) for a in alloc] + [None], object)[:-1],
                    kind=_per_mid(mids[idx], mem_mids.get),
                    **{c: np.array([_as_int(v) or 0 for v in col[c].tolist()], np.int64)
                       for c in ("bytes_allocated", "bytes_reserved", "peak_bytes_in_use",
                                 "requested_bytes", "allocation_bytes")})
        rest = np.flatnonzero(ok & ~is_mem)
        if not rest.size:
            continue
        r_vals = _stat_column(P, ev, rest, "_r")
        is_step = np.array([bool(v) for v in r_vals.tolist()], bool)
        sidx = rest[is_step]
        if sidx.size:
            nums = _stat_column(P, ev, sidx, "step_num").tolist()
            names = _per_mid(mids[sidx], P.name).tolist()
            for i, num, name in zip(sidx.tolist(), nums, names):
                start = int(ev.starts[i])
                step_rows.append((start, start + int(ev.durs[i]), _as_int(num), name))
        cidx = rest[~is_step]
        if cidx.size:
            hlo = _stat_column(P, ev, cidx, "hlo_op")
            # `"hlo_op" in s`: present, even with an empty value
            present = np.zeros(len(cidx), bool)
            hsids = P.stat_ids.get("hlo_op")
            if hsids:
                present |= ev.has_stat(hsids)[cidx]
            present |= _per_mid(mids[cidx], lambda m: "hlo_op" in P.meta_stats(m)).astype(bool)
            cidx, hlo = cidx[present], hlo[present]
            if cidx.size:
                saw_compute = True
                ords = _stat_column(P, ev, cidx, "device_ordinal").tolist()
                co.add(len(cidx), _cpu=True, host=host,
                       device=np.array([f"CPU:{_as_int(o) or 0}" for o in ords], object),
                       start_ps=ev.starts[cidx], end_ps=ev.starts[cidx] + ev.durs[cidx],
                       name=_per_mid(mids[cidx], P.name), hlo_op=_clean_column(hlo),
                       hlo_module=_stat_column(P, ev, cidx, "hlo_module"),
                       stream=line.id, line=line.name)
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
    """PjRt GPU names device allocators `GPU_<ordinal>_bfc`; the host staging one is not a device."""
    if not name:
        return None
    m = _ALLOCATOR_RE.match(name)
    return f"GPU:{m.group(1)}" if m else None
