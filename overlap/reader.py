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

Speed: `read_trace` walks the XSpace wire format itself down to the lines, lets upb parse only
the rest (names, metadata, plane stats), locates every line's events in the file buffer, and
decodes their XEvent/XStat fields for whole lines at once with numpy (see "Fast path" below).
The rules above are still applied per event; nothing is decided per line or per metadata id
alone. The decoder checks wire types and lengths (a damaged event is an `InputError`, as a parse
failure is) but does not validate UTF-8 inside event string stats (decoded with replacement).
Events whose metadata id can never give a row (host-plane Python-tracer `$...`, `end: ...` and
`ThreadpoolListener::*` events, the `Async XLA Ops` line where only metadata decides, and host
events of non-memory metadata on a plane with no `_r`/`hlo_op` stat at all) have only their
`metadata_id`/`offset_ps`/`duration_ps` decoded: damage inside their stats goes unnoticed.

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
        # copy=False: the column arrays are ours alone (built for this frame)
        data[col] = pd.array(values, dtype=dtype, copy=False) if dtype != "object" else pd.Series(
            values, dtype=object, copy=False)
    return pd.DataFrame(data, copy=False)


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
# Fast path: events decoded straight from the file's bytes with numpy
#
# Building a Python object per event and per stat costs ~250 ns each through upb (that was 95% of
# the reader's time), and even one Python bytes object per event costs more than upb's whole
# parse. So `read_trace` walks the XSpace wire format itself down to the lines: upb parses only a
# *skeleton* (every plane without its lines: names, metadata, plane stats), line headers are
# decoded here, each line's event records are located in the file buffer itself (vectorized, see
# `_event_run`; no copy, no per-event object), and their XEvent/XStat fields are decoded for
# whole lines at once with vectorized varint reads.


class _Corrupt(ValueError):
    """The bytes are not a valid XSpace (a damaged event, line or plane)."""


_PAD = 16  # zero bytes after the data: a varint read never runs past the buffer


def _uvarint(b, p: int) -> tuple[int, int]:
    """One varint at `p` of bytes-like `b`: (value, position after it)."""
    try:
        x = b[p]
        if x < 0x80:
            return x, p + 1
        v, s = x & 0x7F, 7
        p += 1
        while True:
            x = b[p]
            p += 1
            v |= (x & 0x7F) << s
            if x < 0x80:
                return v, p
            s += 7
            if s > 63:
                raise _Corrupt("varint longer than 10 bytes")
    except IndexError:
        raise _Corrupt("truncated varint") from None


def _field(b, p: int, end: int) -> tuple[int, int, int, int, int]:
    """The field at `p`: (number, wire type, varint value or length, value position, next)."""
    tag, p = _uvarint(b, p)
    wt, fn = tag & 7, tag >> 3
    if fn == 0:
        raise _Corrupt("field number 0")
    if wt == 0:
        v, q = _uvarint(b, p)
    elif wt == 2:
        v, p = _uvarint(b, p)
        q = p + v
    elif wt == 1:
        v, q = 0, p + 8
    elif wt == 5:
        v, q = 0, p + 4
    else:
        raise _Corrupt("unsupported wire type")
    if q > end:
        raise _Corrupt("field runs past its message")
    return fn, wt, v, p, q


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def _text(b, p: int, q: int) -> str:
    try:
        return bytes(b[p:q]).decode("utf-8")
    except UnicodeDecodeError:
        raise _Corrupt("invalid UTF-8 in a string field") from None


def _enc_varint(v: int) -> bytes:
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


class _Line:
    """One XLine: its header fields, and where its events' payloads lie in the buffer."""

    __slots__ = ("id", "display_id", "name", "display_name", "timestamp_ns", "duration_ps",
                 "buf", "ev_start", "ev_end", "n_events")


class _PlaneView:
    """A skeleton XPlane message (no lines) plus its `_Line`s."""

    def __init__(self, msg, lines: list[_Line]):
        self.msg = msg
        self.lines = lines

    def __getattr__(self, name):
        return getattr(self.msg, name)


_CHUNK = 1 << 20  # line bytes per vectorized step of `_event_run` (bounds its temporaries)


def _pos_dtype(a: np.ndarray):
    """Byte positions (and event/stat counts, never larger) as int32 where the buffer allows."""
    return np.int32 if len(a) < (1 << 31) - 64 else np.int64


def _len_varints(a: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Varints of at most 5 bytes at `pos` (lengths): (values, sizes); longer ones get a huge
    value (never raises: most positions here are only candidates)."""
    b = a[pos]
    val = (b & 0x7F).astype(np.int64)
    n = np.ones(len(pos), np.int64)
    cont = np.flatnonzero(b >= 0x80)
    shift = 7
    while cont.size:
        if shift > 28:
            val[cont] = 1 << 60
            break
        bb = a[pos[cont] + n[cont]]
        val[cont] |= (bb & 0x7F).astype(np.int64) << shift
        n[cont] += 1
        cont = cont[bb >= 0x80]
        shift += 7
    return val, n


def _event_run(a: np.ndarray, b, p: int, e: int, starts: list, ends: list) -> int:
    """Locate a run of consecutive event records (`0x22 len payload`) that starts at `p`.

    The chain is sequential, but it need not be walked per event: take every 0x22 byte of a
    chunk as a candidate record and compute where each would end. Keep candidates whose payload
    starts like an XEvent's (`0x08`) and whose record ends on another 0x22 byte or at the line's
    end (true records do, but for the run's last one), then those that no earlier kept candidate's record covers (a running max): stat
    records nested in an event (also tag 0x22) are covered by their event. What remains is then
    *verified*: a prefix of it is the true chain exactly as far as each kept record ends where
    the next kept one starts (the chain from `p` is deterministic). Where a stray 0x22 byte
    breaks that, a few records are walked in Python and the vectorized step resumes. Appends
    payload (start, end) arrays; returns the position after the run.
    """
    while p < e and a[p] == 0x22:
        ce = min(e, p + _CHUNK)
        c = np.flatnonzero(a[p:ce] == 0x22)
        c += p
        ln, hl = _len_varints(a, c + 1)
        ps = c + 1 + hl
        nx = ps + ln
        del ln, hl
        # Plausible records: the payload starts with field 1 (an XEvent's metadata_id; writers
        # never omit it, ids start at 1) and the record ends on a 0x22 byte or the line's end.
        land = (nx <= e) & (a[ps] == 0x08)
        land[land] = a[nx[land]] == 0x22
        land |= nx == e
        land[0] = True
        if not land.all():
            k = np.flatnonzero(land)
            c, ps, nx = c[k], ps[k], nx[k]
        del land
        unc = np.empty(len(c), bool)
        unc[0] = True
        if len(c) > 1:
            pm = np.maximum.accumulate(nx[:-1])
            np.less_equal(pm, c[1:], out=unc[1:])
            del pm
        s = np.flatnonzero(unc)
        del unc
        ok = nx[s[:-1]] == c[s[1:]]
        k = len(s) - 1 if ok.all() else int(np.argmin(ok))
        sel = s[:k + 1]
        t = int(nx[sel[-1]])
        if t > e:
            raise _Corrupt("field runs past its message")
        dt = _pos_dtype(a)
        starts.append(ps[sel].astype(dt))
        ends.append(nx[sel].astype(dt))
        del c, ps, nx, s, ok, sel
        p = t
        if p < ce and a[p] == 0x22:
            # a stray 0x22 (or the run's last record) broke the chain: a few records in Python
            one_s, one_e = [], []
            for _ in range(16):
                if p >= e or b[p] != 0x22:
                    break
                ln1, q = _uvarint(b, p + 1)
                t = q + ln1
                if t > e:
                    raise _Corrupt("field runs past its message")
                one_s.append(q)
                one_e.append(t)
                p = t
            starts.append(np.array(one_s, _pos_dtype(a)))
            ends.append(np.array(one_e, _pos_dtype(a)))
    return p


def _read_line(a: np.ndarray, b, s: int, e: int) -> _Line:
    ln = _Line()
    ln.buf = a
    ln.id = ln.display_id = ln.timestamp_ns = ln.duration_ps = 0
    ln.name = ln.display_name = ""
    starts: list = []
    ends: list = []
    p = s
    while p < e:
        if b[p] == 0x22:  # events (field 4, length-delimited)
            p = _event_run(a, b, p, e, starts, ends)
            continue
        fn, wt, v, vp, q = _field(b, p, e)
        if wt == 0:
            if fn == 1:
                ln.id = _signed(v)
            elif fn == 3:
                ln.timestamp_ns = _signed(v)
            elif fn == 9:
                ln.duration_ps = _signed(v)
            elif fn == 10:
                ln.display_id = _signed(v)
        elif wt == 2:
            if fn == 2:
                ln.name = _text(b, vp, q)
            elif fn == 11:
                ln.display_name = _text(b, vp, q)
            elif fn == 4:  # an event with a non-canonical tag encoding
                starts.append(np.array([vp], _pos_dtype(a)))
                ends.append(np.array([q], _pos_dtype(a)))
        p = q
    if len(starts) == 1:
        ln.ev_start, ln.ev_end = starts[0], ends[0]
    elif starts:
        ln.ev_start, ln.ev_end = np.concatenate(starts), np.concatenate(ends)
    else:
        ln.ev_start = ln.ev_end = np.zeros(0, _pos_dtype(a))
    ln.n_events = len(ln.ev_start)
    return ln


def _split_plane(a: np.ndarray, b, s: int, e: int) -> tuple[bytes, list[_Line]]:
    """An XPlane's bytes without its lines (for upb), and its lines decoded here."""
    parts = []
    lines = []
    run = p = s
    while p < e:
        fs = p
        fn, wt, v, vp, q = _field(b, p, e)
        if fn == 3 and wt == 2:
            if fs > run:
                parts.append(bytes(b[run:fs]))
            lines.append(_read_line(a, b, vp, q))
            run = q
        p = q
    if e > run:
        parts.append(bytes(b[run:e]))
    return b"".join(parts), lines


def _parse_space(data, n: int) -> tuple[Any, list[_PlaneView], np.ndarray]:
    """Parse XSpace bytes `data[:n]` (followed by >= `_PAD` zero bytes).

    Returns (skeleton XSpace message, planes with their lines, the buffer as uint8 array).
    Raises `_Corrupt` or DecodeError on damaged input.
    """
    a = np.frombuffer(data, np.uint8)
    skel = []
    plines = []
    run = p = 0
    while p < n:
        fs = p
        fn, wt, v, vp, q = _field(data, p, n)
        if fn == 1 and wt == 2:
            if fs > run:
                skel.append(bytes(data[run:fs]))
            body, lines = _split_plane(a, data, vp, q)
            skel.append(b"\x0a" + _enc_varint(len(body)) + body)
            plines.append(lines)
            run = q
        p = q
    if n > run:
        skel.append(bytes(data[run:n]))
    xs = XSpace.FromString(b"".join(skel))
    if len(xs.planes) != len(plines):
        raise _Corrupt("plane count mismatch")
    return xs, [_PlaneView(m, ls) for m, ls in zip(xs.planes, plines)], a


def _padded(raw: bytes) -> bytearray:
    buf = bytearray(len(raw) + _PAD)
    buf[: len(raw)] = raw
    return buf


_M7 = np.uint64(0x7F)


def _varint_at(buf: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Varints starting at byte positions `p`: (values as uint64, lengths).

    One-byte varints (tags, ids, short lengths) take one gather; longer ones are decoded from
    one unaligned 8-byte little-endian word each (bit masks, no loop per byte), and the rare
    varints longer than 8 bytes byte by byte. `buf` must be followed by >= 16 readable bytes.
    """
    b = buf[p]
    val = b.astype(np.uint64)
    n = np.ones(len(p), np.int64)
    cont = np.flatnonzero(b >= 0x80)
    if not cont.size:
        return val, n
    pc = p[cont]
    words = np.ndarray((len(buf) - 7,), "<u8", buffer=buf, strides=(1,))
    w = words[pc]
    term = ~w & np.uint64(0x8080808080808080)  # high bits of bytes that end the varint
    long_ = term == 0
    lb = term & (~term + np.uint64(1))  # lowest terminating byte's high bit
    mask = (lb << np.uint64(1)) - np.uint64(1)  # the varint's bytes
    w &= mask
    v = w & _M7
    for k in range(1, 8):
        v |= (w >> np.uint64(k)) & (_M7 << np.uint64(7 * k))
    val[cont] = v
    n[cont] = ((mask & np.uint64(0x0101010101010101)) * np.uint64(0x0101010101010101)
               >> np.uint64(56)).astype(np.int64)
    if long_.any():  # more than 8 bytes: finish byte by byte
        li = cont[long_]
        val[li] = v[long_] & np.uint64((1 << 56) - 1)
        n[li] = 8
        c2 = li
        shift = 56
        while c2.size:
            if shift > 63:
                raise _Corrupt("varint longer than 10 bytes")
            bb = buf[p[c2] + n[c2]].astype(np.uint64)
            val[c2] |= (bb & _M7) << np.uint64(shift)
            n[c2] += 1
            c2 = c2[(bb & np.uint64(0x80)) != 0]
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


def _canonical_header(buf: np.ndarray, s: np.ndarray, e: np.ndarray):
    """One check-and-decode pass over event headers in the layout every writer uses:
    `08 metadata_id [10 offset_ps] [18 duration_ps]`, then only stat records (`_stat_chains`).

    Returns (metadata ids, offsets, durations, canonical mask, position after the header);
    events outside the mask must go through the generic `_walk` (their values here are
    meaningless).
    """
    n = len(s)
    good = buf[s] == 0x08
    p = s.astype(np.int64) + 1
    if good.all():
        v, ln = _varint_at(buf, p)
        mid = v.view(np.int64)
        p += ln
    else:  # decode only what is a varint: garbage could raise as an over-long one
        mid = np.zeros(n, np.int64)
        gi = np.flatnonzero(good)
        v, ln = _varint_at(buf, p[gi])
        mid[gi] = v.view(np.int64)
        p[gi] += ln
    good &= p <= e
    vals = []
    for tag in (0x10, 0x18):  # offset_ps, duration_ps (omitted when zero)
        out = np.zeros(n, np.int64)
        p[~good] = s[~good]  # keep reads inside the buffer
        idx = np.flatnonzero(good & (p < e) & (buf[p] == tag))
        if idx.size:
            v, ln = _varint_at(buf, p[idx] + 1)
            out[idx] = v.view(np.int64)
            p[idx] += 1 + ln
            good[idx] &= p[idx] <= e[idx]
        vals.append(out)
    return mid, vals[0], vals[1], good, p


def _stat_chains(buf: np.ndarray, act: np.ndarray, pos: np.ndarray, e: np.ndarray,
                 good: np.ndarray):
    """Stat records (`22 len payload`) from `pos` to the end of events `act` (indices into `e`
    and `good`), one vectorized pass per record index. An event whose tail is anything else is
    cleared in `good` (and its records dropped). Returns (event indices, payload starts, ends)."""
    dt = _pos_dtype(buf)
    st_ev, st_pos, st_end = [], [], []
    end = e[act].astype(np.int64)
    live = pos < end
    act, pos, end = act[live], pos[live], end[live]
    while act.size:  # pass k: every event's k-th stat record
        ok = buf[pos] == 0x22
        if not ok.all():
            good[act[~ok]] = False
            act, pos, end = act[ok], pos[ok], end[ok]
        v, ln = _varint_at(buf, pos + 1)
        ok = v <= np.uint64(1 << 40)
        sp = pos + 1 + ln
        nx = sp + np.where(ok, v, 0).astype(np.int64)
        ok &= nx <= end
        if not ok.all():
            good[act[~ok]] = False
            act, sp, nx, end = act[ok], sp[ok], nx[ok], end[ok]
        st_ev.append(act.astype(dt))
        st_pos.append(sp.astype(dt))
        st_end.append(nx.astype(dt))
        live = nx < end
        act, pos, end = act[live], nx[live], end[live]
    del pos, end
    if st_ev:
        ev, sp, se = np.concatenate(st_ev), np.concatenate(st_pos), np.concatenate(st_end)
        del st_ev, st_pos, st_end
        if not good.all():  # records of events that failed at a later record
            k = good[ev]
            ev, sp, se = ev[k], sp[k], se[k]
    else:
        ev = sp = se = np.zeros(0, dt)
    return ev, sp, se


class _LineEvents:
    """One line's positioned events as arrays, plus lazy access to their stats.

    `skip_mids`: metadata ids whose events' stats can never matter. Those events get their
    header fields only (their stats are neither located nor checked); the caller must never
    ask for their stats.
    """

    def __init__(self, line, base_ps: int, skip_mids=None):
        self.buf = line.buf  # the whole file's bytes; events are located in place
        start, end = line.ev_start, line.ev_end
        line.ev_start = line.ev_end = None  # each line is read once: free them with this
        dt = _pos_dtype(self.buf)
        n = len(start)
        mid, off, dur, good, p = _canonical_header(self.buf, start, end)
        if skip_mids:
            act = np.flatnonzero(good & ~np.isin(mid, np.fromiter(skip_mids, np.int64)))
        else:
            act = np.flatnonzero(good)
        cev, csp, cse = _stat_chains(self.buf, act, p[act], end, good)
        del act, p
        agg = np.zeros(n, bool)
        st_ev, st_pos, st_end = [cev], [csp], [cse]
        del cev, csp, cse

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
                st_ev.append(rows[m].astype(dt))
                st_pos.append(vp[m].astype(dt))
                st_end.append(nxt[m].astype(dt))

        bad = np.flatnonzero(~good)
        if bad.size:  # anything else: the generic walk, field by field
            mid[bad] = off[bad] = dur[bad] = 0

            def on_bad(rows, *rest):
                on_field(bad[rows], *rest)

            _walk(self.buf, start[bad], end[bad], on_bad)
        del start, end, good, bad
        keep = ~agg
        self.all_positioned = bool(keep.all())
        if self.all_positioned:
            self.mids, self.starts, self.durs = mid, off + base_ps, dur
        else:
            self.mids = mid[keep]
            self.starts = off[keep] + base_ps
            self.durs = dur[keep]
        del mid, off, dur
        self.n = len(self.mids)
        ev = np.concatenate(st_ev) if len(st_ev) > 1 else st_ev[0]
        sp = np.concatenate(st_pos) if len(st_pos) > 1 else st_pos[0]
        se = np.concatenate(st_end) if len(st_end) > 1 else st_end[0]
        del st_ev, st_pos, st_end
        if not self.all_positioned:
            k = keep[ev]
            remap = (np.cumsum(keep) - 1).astype(dt)  # old index -> new (aggregated dropped)
            ev, sp, se = remap[ev[k]], sp[k], se[k]
        self._st_ev, self._st_pos, self._st_end = ev, sp, se
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


# XStat value fields (2..7) and the wire type each is written with.
_STAT_TAGS = np.zeros(256, np.int8)
for _f, _w in ((2, 1), (3, 0), (4, 0), (5, 2), (6, 2), (7, 0)):
    _STAT_TAGS[_f << 3 | _w] = _f
del _f, _w


def _decode_stats(buf, sp, se) -> dict:
    n = len(sp)
    sid = np.zeros(n, np.int64)
    kind = np.zeros(n, np.int64)
    ival = np.zeros(n, np.uint64)
    vpos = np.zeros(n, np.int64)
    # The layout every writer uses, in one pass: `08 metadata_id`, then at most one value
    # field ending exactly at the record's end. Anything else: the generic walk below.
    good = buf[sp] == 0x08
    gi = np.flatnonzero(good)
    v, ln = _varint_at(buf, sp[gi] + 1)
    p = sp[gi] + 1 + ln
    e = se[gi].astype(np.int64)
    ok = p <= e
    p[~ok] = e[~ok]
    sid[gi] = v.view(np.int64)
    val = p < e  # has a value field
    f = np.zeros(len(gi), np.int64)
    f[val] = _STAT_TAGS[buf[p[val]]]
    ok &= ~val | (f > 0)
    nxt = p.copy()
    vp = p + 1
    fixed = f == 2
    nxt[fixed] = p[fixed] + 9
    vi = np.flatnonzero(ok & val & ~fixed)
    if vi.size:
        v, ln = _varint_at(buf, vp[vi])
        vp[vi] += ln
        nxt[vi] = vp[vi] + np.where(f[vi] >= 5, np.where(f[vi] == 7, 0, v), 0).astype(np.int64)
        ok[vi] &= (f[vi] < 5) | (f[vi] == 7) | (v <= np.uint64(1 << 40))
        iv = np.zeros(len(gi), np.uint64)
        iv[vi] = v
    else:
        iv = np.zeros(len(gi), np.uint64)
    ok &= nxt == e
    k = np.flatnonzero(ok & val)
    kind[gi[k]] = f[k]
    ival[gi[k]] = iv[k]
    vpos[gi[k]] = vp[k]
    good[gi[~ok]] = False
    del gi, p, e, f, nxt, vp, iv, ok, val
    bad = np.flatnonzero(~good)
    if not bad.size:
        return {"sid": sid, "kind": kind, "ival": ival, "vpos": vpos}
    sid[bad] = kind[bad] = ival[bad] = vpos[bad] = 0

    def on_field(rows, fld, wt, val, vp, nxt):
        rows = bad[rows]
        m = (fld == 1) & (wt == 0)
        sid[rows[m]] = val[m].view(np.int64)
        m = (fld >= 2) & (fld <= 7)  # the value oneof; the last one written wins
        r = rows[m]
        kind[r] = fld[m]
        ival[r] = val[m]
        vpos[r] = vp[m]

    _walk(buf, sp[bad], se[bad], on_field)
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
        seen: dict[bytes, Any] = {}  # one object per distinct value, not per event
        for i, p, ln in zip(m.tolist(), vpos[m].tolist(), ival[m].tolist()):
            b = buf[p:p + ln].tobytes()
            v = seen.get(b)
            if v is None:
                v = seen[b] = b.decode("utf-8", "replace") if k == _K_STR else b
            out[i] = v
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


def _map_unique(values: np.ndarray, fn) -> np.ndarray:
    """`fn(v)` for each value of an object column, computed once per distinct value."""
    if not len(values):
        return np.zeros(0, object)
    try:
        codes, uniq = pd.factorize(pd.Series(values, dtype=object))
    except TypeError:  # unhashable values (never for stat values, but be safe)
        return np.array([fn(v) for v in values.tolist()] + [None], object)[:-1]
    # missing values (None, NaN) get code -1: the trailing entry, fn(None)
    out = np.array([fn(u) for u in uniq.tolist()] + [fn(None), None], object)[:-1]
    return out[codes]


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
            out[col] = (parts[0] if len(parts) == 1 else np.concatenate(parts)) if parts else []
        self.chunks = []  # the frame owns the columns now
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


def _read_file(p: Path, pad: int = 0) -> tuple[bytearray, int]:
    """The file's bytes followed by `pad` zero bytes (read in place, one copy), and its size."""
    try:
        with open(p, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            buf = bytearray(size + pad)
            mv = memoryview(buf)
            n = 0
            while n < size:
                got = fh.readinto(mv[n:size])
                if not got:
                    break
                n += got
            del mv
            if n < size:  # the file shrank while we read it
                del buf[n:size]
            elif fh.read(1):  # ...or grew: read it whole
                fh.seek(0)
                raw = fh.read()
                n = len(raw)
                buf = bytearray(raw) + bytearray(pad)
    except FileNotFoundError:
        raise InputError(p, "no such file") from None
    except IsADirectoryError:
        raise InputError(p, "is a directory, expected an .xplane.pb file") from None
    except OSError as e:
        raise InputError(p, f"cannot read: {e.strerror or e}") from None
    if not n:
        raise InputError(p, "empty file (a capture that was cut off before it was written?)")
    if buf[:2] == b"\x1f\x8b":
        raise InputError(p, "gzip-compressed; decompress it first (gunzip)")
    return buf, n


def _corrupt(p: Path, e: Exception) -> InputError:
    return InputError(p, f"not a readable XSpace protobuf (truncated or corrupt): {e}")


def _check_space(p: Path, xs) -> None:
    if not xs.planes or not any(pl.name for pl in xs.planes):
        raise InputError(p, "not an XSpace capture: it holds no named planes")
    # Random bytes can parse as a protobuf full of unknown fields; a real XSpace names its planes
    # with the profiler's prefixes.
    if not any(pl.name.startswith(("/host:", "/device:", TASK_ENV_PLANE, "#")) for pl in xs.planes):
        raise InputError(p, "not an XSpace capture: no /host: or /device: planes")


def _load(path: str | os.PathLike, cls) -> Any:
    p = Path(path)
    data, n = _read_file(p)
    xs = cls()
    try:
        xs.ParseFromString(bytes(data))
    except (DecodeError, RuntimeError, ValueError) as e:
        raise _corrupt(p, e) from None
    _check_space(p, xs)
    return xs


def _find_files(path: str | os.PathLike, session: str | None) -> list[Path]:
    from overlap.paths import find_xplane_files

    return find_xplane_files(path, session)


def read_trace(path: str | os.PathLike, session: str | None = None) -> Trace:
    """Read a capture into trace tables. See the module docstring for what `path` may be."""
    files = _find_files(path, session)
    parts = []
    for f in files:
        # Our own wire walk down to the lines, upb for the rest (see "Fast path"); a damaged
        # event surfaces in the decoder instead of the parser, with the same message.
        f = Path(f)
        data, n = _read_file(f, _PAD)
        try:
            xs, planes, _ = _parse_space(data, n)
        except (_Corrupt, DecodeError, RuntimeError, ValueError) as e:
            raise _corrupt(f, e) from None
        _check_space(f, xs)
        host = _host_name(xs, f)
        try:
            parts.append(_read_space(xs, planes, host=host, source=f))
        except _Corrupt as e:
            raise _corrupt(f, e) from None
        del data, planes, xs
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
    xs, planes, _ = _parse_space(_padded(raw), len(raw))
    return _read_space(xs, planes, host, source)


def _read_space(xs, planes: list[_PlaneView], host: str = "host",
                source: Path | None = None) -> dict[str, Any]:
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

    for plane in planes:
        P = _Plane(plane)
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
        if not line.n_events:
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
                    got = details_cache[d] = (_as_int(det.get("size")) or 0,
                                              det.get("kind_src", "unknown"),
                                              det.get("kind_dst", "unknown"),
                                              None if a is None else a == "1")
                facts.append(got)
            fcols = [np.array([f[j] for f in facts] + [None], object)[:-1] for j in range(4)]
            codes = np.where(codes < 0, len(facts) - 1, codes)
            tr.add(len(idx), host=host, device=device,
                   direction=_per_mid(mids[idx], memcpy_mids.get),
                   start_ps=ev.starts[idx], end_ps=ev.starts[idx] + ev.durs[idx],
                   bytes=fcols[0][codes].astype(np.int64),
                   src_kind=fcols[1][codes], dst_kind=fcols[2][codes],
                   **{"async": fcols[3][codes]},
                   stream=line.id, line=line.name,
                   hlo_op=_clean_column(_stat_column(P, ev, idx, "hlo_op")),
                   hlo_module=_stat_column(P, ev, idx, "hlo_module"),
                   program_id=_map_unique(_stat_column(P, ev, idx, "program_id"), _as_int))
        idx = np.flatnonzero(is_k)
        if idx.size:
            co.add(len(idx), host=host, device=device, start_ps=ev.starts[idx],
                   end_ps=ev.starts[idx] + ev.durs[idx], name=_per_mid(mids[idx], P.name),
                   hlo_op=_clean_column(_stat_column(P, ev, idx, "hlo_op")),
                   hlo_module=_stat_column(P, ev, idx, "hlo_module"),
                   stream=line.id, line=line.name)
        del ev, mids, is_mc, is_k, idx  # before the next line's arrays exist


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
        if not line.n_events:
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

    if async_line is not None and async_line.n_events:
        # Only metadata (names, metadata stats) decides here: no event stat is ever read.
        ev = _LineEvents(async_line, line_base_ps(async_line), skip_mids=P.meta.keys())

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
    if not (P.stat_ids.get("_r") or P.stat_ids.get("hlo_op")):
        # No event can carry `_r` or `hlo_op` (nor can metadata: same stat ids), so only
        # memory events can give a row.
        skip |= {k for k in P.meta.keys() if k not in mem_mids}
    meta_nonempty = {k for k in P.meta.keys() if k not in skip and P.meta_stats(k)}
    saw_compute = False
    step_rows = []
    for line in P.plane.lines:
        if not line.n_events:
            continue
        ev = _LineEvents(line, line_base_ps(line), skip_mids=skip)
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
                    device=_map_unique(np.array(alloc + [None], object)[:-1], _allocator_device),
                    kind=_per_mid(mids[idx], mem_mids.get),
                    **{c: _map_unique(col[c], lambda v: _as_int(v) or 0).astype(np.int64)
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
    """PjRt GPU names device allocators `GPU_<ordinal>_bfc`; the host staging one is not a device."""
    if not name:
        return None
    m = _ALLOCATOR_RE.match(name)
    return f"GPU:{m.group(1)}" if m else None
