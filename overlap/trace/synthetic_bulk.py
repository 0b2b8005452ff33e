"""SYNTHETIC bulk traces: millions of events in GPU- and TPU-shaped XSpace files, answers known.

Everything this module writes is a test and benchmark tool, not a measurement. Each file carries
the `overlap-synthetic` warning in `XSpace.warnings`, so the reader sets `Trace.synthetic` and
every renderer prints SYNTHETIC next to its results.

The shapes are those of `overlap.trace.synthetic` (see its docstring and docs/xspace.md), at scale:

* GPU: `/device:GPU:0` with stream 7 (`Compute`: kernels with `kernel_details`, `hlo_op`,
  `hlo_module` refs, `program_id`, `correlation_id`, `context_id`, occupancy) and stream 20
  (`MemcpyD2H`/`MemcpyH2D` with `memcpy_details` refs). `/host:CPU` has CUPTI driver-API events
  (`cuLaunchKernel` and the host-side `Memcpy*` duplicates that must be ignored), thunk TraceMes,
  Python-tracer `$` frames, `train` step roots (`_r`, `step_num`) and BFC allocator events.
* TPU: `/device:TPU:0` with `XLA Modules`, `XLA Ops` (fusions with HLO-text metadata, and
  `copy-start.N`/`copy-done.N` ops) and `Async XLA Ops` spans (`_a`, `hlo_op`, `id`); the host
  plane has Python-tracer frames (about one per device op), step roots and allocator events.

Why a second builder: `overlap.trace.synthetic` adds events one protobuf call at a time, which takes
minutes for millions of events. Here a step is laid out once as a small template (a list of event
slots per line), and the template is tiled over all steps: each slot's repeated `XEvent` messages
are encoded straight into protobuf wire format with numpy-vectorized varints, then scattered into
the line's byte buffer. Only metadata and line/plane headers go through the protobuf API.

Ground truth is known by construction: compute ops on a device never overlap each other, each
hidden copy starts at a compute op's start and covers exactly `m` ops (and their gaps), and each
exposed copy sits in the idle tail of its layer, so hidden time per copy is `m * op_ps` or 0.
"""

from __future__ import annotations

import math
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from overlap.trace.protos import XLine, XSpace
from overlap.trace.synthetic import DEFAULT_START_NS, LINE_TIMESTAMP_NS, U64, _PlaneWriter

SYNTHETIC_WARNING = (
    "overlap-synthetic: this file was written by overlap.trace.synthetic_bulk, not captured")

LINE_BASE_PS = LINE_TIMESTAMP_NS * 1000  # every line's timestamp, in ps
_EVENTS_PER_CHUNK = 400_000  # bounds the scatter-index arrays (~50 MB) while encoding

# ---------------------------------------------------------------------------------------------
# Wire-format helpers


def _varint(v: int) -> bytes:
    v &= (1 << 64) - 1  # negative int64 is written as its 10-byte two's complement
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _varints(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Varint-encode a vector: a (n, width) uint8 matrix, left-aligned, and each row's length."""
    x = np.asarray(values).astype(np.uint64)  # int64 -> two's complement, as protobuf does
    lens = np.ones(x.shape[0], np.int64)
    cols = []
    seven = np.uint64(7)
    while True:
        low = (x & np.uint64(0x7F)).astype(np.uint8)
        x = x >> seven
        more = x != 0
        cols.append(low | (more.astype(np.uint8) << 7))
        if not more.any():
            return np.stack(cols, axis=1), lens
        lens += more


def _stat_const(sid: int, kind: str, value) -> bytes:
    """One whole `XEvent.stats` entry (tag 4, length, XStat body) with a fixed value."""
    if kind == "int64":
        val = b"\x20" + _varint(int(value))
    elif kind == "uint64":
        val = b"\x18" + _varint(int(value))
    elif kind == "ref":
        val = b"\x38" + _varint(int(value))
    elif kind == "double":
        val = b"\x11" + struct.pack("<d", float(value))
    elif kind == "str":
        raw = str(value).encode()
        val = b"\x2a" + _varint(len(raw)) + raw
    else:
        raise ValueError(kind)
    body = b"\x08" + _varint(sid) + val
    return b"\x22" + _varint(len(body)) + body


_VALUE_TAG = {"int64": b"\x20", "uint64": b"\x18"}


@dataclass
class _Dyn:
    """A stat whose value changes per step: `a * step + b`, plus the event's start if `at_start`."""

    sid: int
    kind: str  # int64 or uint64
    a: int = 0
    b: int = 0
    at_start: bool = False


@dataclass
class _Slot:
    """One event of the step template: repeated once per step, shifted by the step period."""

    mid: int
    rel_ps: int  # start relative to the step start
    dur_ps: int
    stats: list = field(default_factory=list)  # bytes (fixed stat) or _Dyn


def _encode_line(slots: list[_Slot], step0_ps: np.ndarray, steps: range) -> list[bytes]:
    """Wire bytes of `XLine.events` for `slots` tiled over `steps` (chunks, in event order).

    Events come out step-major, slot-minor; slots are pre-sorted by (start, duration) and every
    slot lies inside its step, so the line stays sorted as `SortXSpace` leaves real lines.
    """
    chunks = []
    t_count = len(slots)
    per = max(1, _EVENTS_PER_CHUNK // max(t_count, 1))
    for r0 in range(steps.start, steps.stop, per):
        r = np.arange(r0, min(r0 + per, steps.stop), dtype=np.int64)
        n = len(r)
        base = step0_ps[r]
        pieces_per_slot = []
        lens = np.empty((n, t_count), np.int64)
        for t, s in enumerate(slots):
            start = base + s.rel_ps
            pieces: list = [b"\x08" + _varint(s.mid) + b"\x10", _varints(start - LINE_BASE_PS)]
            # proto3 omits a zero duration (it has no presence), as real writers do
            tail = b"\x18" + _varint(s.dur_ps) if s.dur_ps else b""
            for st in s.stats:
                if isinstance(st, bytes):
                    tail += st
                    continue
                pieces.append(tail)
                v = st.a * r + st.b
                if st.at_start:
                    v = v + start
                vm = _varints(v)
                head = b"\x08" + _varint(st.sid) + _VALUE_TAG[st.kind]
                pieces += [b"\x22", _varints(len(head) + vm[1]), head, vm]
                tail = b""
            if tail:
                pieces.append(tail)
            body = sum((len(p) if isinstance(p, bytes) else p[1]) for p in pieces)
            body = np.broadcast_to(body, (n,)).astype(np.int64)
            blen = _varints(body)
            pieces = [b"\x22", blen] + pieces
            lens[:, t] = 1 + blen[1] + body
            pieces_per_slot.append(pieces)
        ends = np.cumsum(lens.ravel()).reshape(n, t_count)
        starts = ends - lens
        buf = np.empty(int(ends[-1, -1]), np.uint8)
        for t, pieces in enumerate(pieces_per_slot):
            pos = starts[:, t].copy()
            for p in pieces:
                if isinstance(p, bytes):
                    k = len(p)
                    buf[pos[:, None] + np.arange(k)] = np.frombuffer(p, np.uint8)
                    pos += k
                else:
                    mat, ln = p
                    w = mat.shape[1]
                    idx = pos[:, None] + np.arange(w)
                    if (ln == w).all():
                        buf[idx] = mat
                    else:
                        mask = np.arange(w)[None, :] < ln[:, None]
                        buf[idx[mask]] = mat[mask]
                    pos += ln
        chunks.append(buf.tobytes())
    return chunks


class _Plane:
    """Metadata (through protobuf) plus event-slot templates per line (encoded in bulk)."""

    def __init__(self, xspace_plane_id: int, name: str):
        self.proto = XSpace().planes.add()  # a detached XPlane we fill with metadata only
        self.proto.id = xspace_plane_id
        self.proto.name = name
        self.w = _PlaneWriter(self.proto)
        self.lines: list[tuple[int, str, list[_Slot]]] = []

    def line(self, line_id: int, name: str) -> list[_Slot]:
        slots: list[_Slot] = []
        self.lines.append((line_id, name, slots))
        return slots

    def s(self, key: str, kind: str, value) -> bytes:
        sid = self.w.stat_id(key)
        if kind == "ref":
            value = self.w.stat_id(value)
        return _stat_const(sid, kind, value)

    def dyn(self, key: str, kind: str, **kw) -> _Dyn:
        return _Dyn(self.w.stat_id(key), kind, **kw)

    def encode(self, step0_ps: np.ndarray) -> list[bytes]:
        """The plane as wire-format pieces (concatenate them for the XPlane message)."""
        out = [self.proto.SerializeToString()]
        for line_id, name, slots in self.lines:
            slots.sort(key=lambda s: (s.rel_ps, s.dur_ps))
            header = XLine(id=line_id, name=name, timestamp_ns=LINE_TIMESTAMP_NS)
            body = [header.SerializeToString()]
            if slots:
                body += _encode_line(slots, step0_ps, range(len(step0_ps)))
            size = sum(len(b) for b in body)
            out.append(b"\x1a" + _varint(size))
            out += body
        return out

    def events_per_step(self) -> int:
        return sum(len(slots) for _, _, slots in self.lines)


# ---------------------------------------------------------------------------------------------
# Ground truth


@dataclass
class BulkTruth:
    """What a bulk file holds, by construction (times in integer ps from the profile start)."""

    backend: str
    steps: int
    device_events: int
    host_events: int
    compute: int
    compute_busy_ps: int  # compute never overlaps itself, so this is also its union
    memory_events: int
    transfer_start_ps: np.ndarray
    transfer_end_ps: np.ndarray
    transfer_bytes: np.ndarray
    transfer_direction: np.ndarray  # "D2H"/"H2D"
    transfer_hidden_ps: np.ndarray
    step_start_ps: np.ndarray
    step_end_ps: np.ndarray

    @property
    def transfers(self) -> int:
        return len(self.transfer_start_ps)

    @property
    def transfer_span_ps(self) -> int:
        return int((self.transfer_end_ps - self.transfer_start_ps).sum())

    @property
    def hidden_ps(self) -> int:
        return int(self.transfer_hidden_ps.sum())

    @property
    def bytes(self) -> int:
        return int(self.transfer_bytes.sum())


# ---------------------------------------------------------------------------------------------
# Layout shared by both backends

OP_PS = 20_000_000  # one compute op (kernel / XLA op): 20 us
GAP_PS = 2_000_000  # idle gap after each op: 2 us
PERIOD_PS = OP_PS + GAP_PS
LEAD_PS = 5_000_000  # host-side lead-in before a step's first device op
EXPOSED_EVERY = 4  # every 4th layer's copy sits in the idle tail (fully exposed)
TAIL_PS = 3 * PERIOD_PS  # idle tail of each layer, room for an exposed copy


@dataclass
class _Layout:
    ops_per_layer: int
    layers: int

    @property
    def layer_ps(self) -> int:
        return self.ops_per_layer * PERIOD_PS + TAIL_PS

    @property
    def step_ps(self) -> int:
        return LEAD_PS + self.layers * self.layer_ps + 2_000_000

    def layer0(self, j: int) -> int:
        return LEAD_PS + j * self.layer_ps

    def op_start(self, j: int, i: int) -> int:
        return self.layer0(j) + i * PERIOD_PS

    def copy(self, j: int) -> tuple[str, int, int, int]:
        """(direction, first covered op, covered ops m, bytes) of layer j's copy; m=0: exposed."""
        direction = "D2H" if j % 2 == 0 else "H2D"
        m = 0 if j % EXPOSED_EVERY == EXPOSED_EVERY - 1 else 1 + j % 3
        first = min(2, max(self.ops_per_layer - m, 0))
        return direction, first, m, (j + 1) * (4 << 20)


def _steps_for(device_events: int, per_step: int) -> int:
    return max(1, math.ceil(device_events / per_step))


def _xspace_pieces(planes: list[list[bytes]], host: str) -> list[bytes]:
    head = XSpace()
    head.hostnames.append(host)
    head.warnings.append(SYNTHETIC_WARNING)
    out = [head.SerializeToString()]
    for pieces in planes:
        out.append(b"\x0a" + _varint(sum(len(p) for p in pieces)))
        out += pieces
    return out


def _meta_and_task(end_ps: int) -> list[list[bytes]]:
    meta = XSpace().planes.add()
    meta.name = "/host:metadata"
    w = _PlaneWriter(meta)
    for k, v in {"jax_version": "0.10.2", "jaxlib_version": "0.10.2",
                 "overlap_synthetic": 1}.items():
        w.set_stat(meta.stats.add(), k, v)
    w.event_id("jit_train_step(5)", "", {"Hlo Proto": b"", "program_id": U64(5)})
    task = XSpace().planes.add()
    task.name = "Task Environment"
    tw = _PlaneWriter(task)
    tw.set_stat(task.stats.add(), "profile_start_time", U64(DEFAULT_START_NS))
    tw.set_stat(task.stats.add(), "profile_stop_time",
                U64(DEFAULT_START_NS + end_ps // 1000 + 1))
    return [[meta.SerializeToString()], [task.SerializeToString()]]


def _allocator_slots(hp: _Plane, line: list[_Slot], lay: _Layout, allocator: str) -> int:
    alloc_mid = hp.w.event_id("MemoryAllocation")
    free_mid = hp.w.event_id("MemoryDeallocation")
    for j in range(lay.layers):
        nbytes = (j + 1) << 20
        common = [hp.s("allocator_name", "ref", allocator), hp.s("bytes_reserved", "int64", 0),
                  hp.s("bytes_available", "int64", 1 << 30),
                  hp.s("peak_bytes_in_use", "int64", nbytes),
                  hp.s("requested_bytes", "int64", nbytes),
                  hp.s("allocation_bytes", "int64", nbytes),
                  hp.s("fragmentation", "double", 0.0)]
        line.append(_Slot(alloc_mid, lay.layer0(j) - 1_000_000, 0,
                          [hp.s("bytes_allocated", "int64", nbytes)] + common))
        line.append(_Slot(free_mid, lay.layer0(j) + lay.ops_per_layer * PERIOD_PS, 0,
                          [hp.s("bytes_allocated", "int64", 0)] + common))
    return 2 * lay.layers


def _finish(planes, hp: _Plane, lay: _Layout, steps: int, backend: str, host: str,
            path: Path, per_step_device: int, memory_per_step: int,
            transfers: list[tuple[int, int, int, str, int]]) -> BulkTruth:
    step0 = LINE_BASE_PS + 1_000_000 + np.arange(steps, dtype=np.int64) * lay.step_ps
    # step root: the whole step but its last microsecond
    end_ps = int(step0[-1]) + lay.step_ps
    pieces = _xspace_pieces([p.encode(step0) for p in planes] + _meta_and_task(end_ps), host)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        for p in pieces:
            f.write(p)
    # Ground truth, tiled exactly as the events were.
    rel_s = np.array([t[0] for t in transfers], np.int64)
    rel_e = np.array([t[1] for t in transfers], np.int64)
    tb = np.array([t[2] for t in transfers], np.int64)
    td = np.array([t[3] for t in transfers], object)
    th = np.array([t[4] for t in transfers], np.int64)
    compute_per_step = lay.layers * lay.ops_per_layer
    return BulkTruth(
        backend=backend, steps=steps,
        device_events=steps * per_step_device,
        host_events=steps * hp.events_per_step(),
        compute=steps * compute_per_step,
        compute_busy_ps=steps * compute_per_step * OP_PS,
        memory_events=steps * memory_per_step,
        transfer_start_ps=(step0[:, None] + rel_s[None, :]).ravel(),
        transfer_end_ps=(step0[:, None] + rel_e[None, :]).ravel(),
        transfer_bytes=np.tile(tb, steps), transfer_direction=np.tile(td, steps),
        transfer_hidden_ps=np.tile(th, steps),
        step_start_ps=step0.copy(), step_end_ps=step0 + lay.step_ps - 1_000_000,
    )


# ---------------------------------------------------------------------------------------------
# GPU


def write_gpu(path: str | os.PathLike, device_events: int = 100_000, *,
              ops_per_layer: int = 16, layers: int = 8,
              host: str = "synthetic-host", compact: bool = False) -> BulkTruth:
    """A SYNTHETIC GPU capture with about `device_events` device events; returns its truth.

    `compact`: kernels carry only two refs to stat metadata (`hlo_op`, `kernel_details`; no
    correlation, context, module, program or occupancy stats) and the host has no driver-API
    launch event per kernel: ~33 bytes per device event instead of ~75, 38 MB for 1M device
    events (issue 32's compact shape: a producer that writes few stats per kernel). Copies,
    steps, frames and allocator events as without it: the same truth."""
    lay = _Layout(ops_per_layer, layers)
    gp = _Plane(0, "/device:GPU:0")
    for k, v in {"device_vendor": "Nvidia", "gpu_device_name": "NVIDIA H100 (synthetic)",
                 "clock_rate": 1_980_000, "core_count": 132,
                 "memory_bandwidth": U64(3_350_000_000_000),
                 "memory_size": U64(85_520_809_984),
                 "compute_cap_major": 9, "compute_cap_minor": 0}.items():
        gp.w.set_stat(gp.proto.stats.add(), k, v)
    hp = _Plane(0, "/host:CPU")
    compute = gp.line(7, "Stream #7(Compute,Memset)")
    copies = gp.line(20, "Stream #20(MemcpyH2D,MemcpyD2H)")
    python = hp.line(-7546550578646800604, "python")
    api = hp.line(4343, "Host Threads/4343")
    xla = hp.line(5555, "tf_XLAGpuExecutor/5555")
    alloc = hp.line(4242, "tf_allocator_thread/4242")

    per_step_device = layers * (ops_per_layer + 1)
    ctx = gp.s("context_id", "str", "$$1")
    module = gp.s("hlo_module", "ref", "jit_train_step")
    program = gp.s("program_id", "int64", 5)
    kdet = gp.s("kernel_details", "ref",
                "regs:32 static_shared:0 dynamic_shared:0 grid:132,1,1 block:256,1,1 occ_pct:50")
    occ = gp.s("theoretical_occupancy_pct", "double", 50.0)
    launch_mid = hp.w.event_id("cuLaunchKernel")
    thunk_mid = hp.w.event_id("ThunkExecutor::Execute")
    frame_mid = hp.w.event_id("$model.py:42 layer")
    inner_mid = hp.w.event_id("$jax/_src/pjit.py:1200 cache_miss")
    step_mid = hp.w.event_id("train")
    transfers = []
    seq = 0  # correlation ids: unique per device event, shared with its host API event

    def corr(owner: _Plane) -> _Dyn:
        return _Dyn(owner.w.stat_id("correlation_id"), "uint64", a=per_step_device, b=seq)

    for j in range(layers):
        for i in range(ops_per_layer):
            name = f"loop_fusion_{(j * ops_per_layer + i) % 50}_kernel"
            hlo = gp.s("hlo_op", "ref", f"fusion.{(j * ops_per_layer + i) % 50}")
            t = lay.op_start(j, i)
            compute.append(_Slot(gp.w.event_id(name), t, OP_PS,
                                 [hlo, kdet] if compact
                                 else [corr(gp), ctx, hlo, module, program, kdet, occ]))
            if not compact:
                api.append(_Slot(launch_mid, t - 3_000_000, 1_000_000, [corr(hp)]))
            seq += 1
        direction, first, m, nbytes = lay.copy(j)
        if m:
            cs, ce = lay.op_start(j, first), lay.op_start(j, first) + m * PERIOD_PS
        else:
            cs = lay.layer0(j) + ops_per_layer * PERIOD_PS + 1_000_000
            ce = cs + 2 * PERIOD_PS
        src, dst = ("device", "pinned") if direction == "D2H" else ("pinned", "device")
        copies.append(_Slot(gp.w.event_id(f"Memcpy{direction}"), cs, ce - cs, [
            corr(gp), ctx, gp.s("hlo_op", "ref", f"copy-start.{j}"), module, program,
            gp.s("memcpy_details", "ref",
                 f"kind_src:{src} kind_dst:{dst} size:{nbytes} dest:0 async:1")]))
        # The driver-API callback of the same copy: same name on the host, must be ignored.
        api.append(_Slot(hp.w.event_id(f"Memcpy{direction}"), cs - 1_500_000, 1_000_000, [
            hp.s("device_id", "int64", 0), corr(hp),
            hp.s("memcpy_details", "ref",
                 f"kind_src:unknown kind_dst:unknown size:{nbytes} async:1")]))
        seq += 1
        transfers.append((cs, ce, nbytes, direction, m * OP_PS))
        # Python frames around the layer's launches, and the thunk executor's TraceMes.
        l0 = lay.layer0(j)
        python.append(_Slot(frame_mid, l0 - 4_000_000, ops_per_layer * PERIOD_PS, []))
        python.append(_Slot(inner_mid, l0 - 3_500_000, 100_000, []))
        for q in range(4):
            xla.append(_Slot(thunk_mid, lay.op_start(j, q * ops_per_layer // 4) - 2_000_000,
                             500_000, []))
    python.append(_Slot(step_mid, 0, lay.step_ps - 1_000_000, [
        hp.s("_r", "int64", 1), hp.dyn("step_num", "int64", a=1)]))
    mem = _allocator_slots(hp, alloc, lay, "GPU_0_bfc")
    steps = _steps_for(device_events, per_step_device)
    return _finish([gp, hp], hp, lay, steps, "gpu", host, Path(path), per_step_device, mem,
                   transfers)


# ---------------------------------------------------------------------------------------------
# TPU

_TPU_PROGRAM = 12190760917235803885
_SD_PS = 500_000  # copy-start / copy-done op durations


def write_tpu(path: str | os.PathLike, device_events: int = 100_000, *,
              ops_per_layer: int = 16, layers: int = 8,
              host: str = "synthetic-host") -> BulkTruth:
    """A SYNTHETIC TPU capture with about `device_events` device events; returns its truth."""
    lay = _Layout(ops_per_layer, layers)
    tp = _Plane(0, "/device:TPU:0")
    tp.w.set_stat(tp.proto.stats.add(), "device_type_string", "TPU v6 lite (synthetic)")
    hp = _Plane(0, "/host:CPU")
    modules = tp.line(2, "XLA Modules")
    ops = tp.line(3, "XLA Ops")
    async_ops = tp.line(4, "Async XLA Ops")
    python = hp.line(-7546550578646800604, "python")
    launch = hp.line(6666, "tpu_launch/6666")
    alloc = hp.line(4242, "tf_allocator_thread/4242")
    per_step_device = layers * (ops_per_layer + 3) + 1
    dur_sid = tp.w.stat_id("device_duration_ps")
    transfers = []

    fusion_mids = []
    for f in range(50):
        text = f"%fusion.{f} = f32[8,128]{{1,0}} fusion(f32[8,128]{{1,0}} %p0), kind=kLoop"
        fusion_mids.append(tp.w.event_id(text, f"fusion.{f}", {
            "hlo_category": "loop fusion", "program_id": U64(_TPU_PROGRAM),
            "flops": U64(2048), "bytes_accessed": 8192}))
    frame_mid = hp.w.event_id("$model.py:42 layer")
    for j in range(layers):
        for i in range(ops_per_layer):
            t = lay.op_start(j, i)
            ops.append(_Slot(fusion_mids[(j * ops_per_layer + i) % 50], t, OP_PS, [
                tp.dyn("device_offset_ps", "uint64", at_start=True),
                _stat_const(dur_sid, "uint64", OP_PS)]))
            python.append(_Slot(frame_mid, t - 4_000_000, 1_000_000, []))
        direction, first, m, nbytes = lay.copy(j)
        n = j + 1
        dims = f"{n},1024,1024"
        dev, hostmem = f"f32[{dims}]{{2,1,0:T(8,128)}}", f"f32[{dims}]{{2,1,0:T(8,128)S(5)}}"
        dst, src = (hostmem, dev) if direction == "D2H" else (dev, hostmem)
        start_text = (f"%copy-start.{n} = ({dst}, {src}, u32[]{{:S(2)}}) "
                      f"copy-start({src} %param.{n})")
        done_text = f"%copy-done.{n} = {dst} copy-done(({dst}, {src}, u32[]) %copy-start.{n})"
        meta = {"hlo_category": "copy-start", "program_id": U64(_TPU_PROGRAM),
                "bytes_accessed": nbytes, "raw_bytes_accessed": nbytes,
                "shape_with_layout": f"({dst}, {src}, u32[])"}
        if m:
            # Start op in the gap before op `first`, done op in the gap after op first+m-1:
            # the span covers exactly m ops.
            cs = lay.op_start(j, first) - GAP_PS + 200_000
            ce = lay.op_start(j, first + m - 1) + OP_PS + 200_000 + _SD_PS
        else:
            cs = lay.layer0(j) + ops_per_layer * PERIOD_PS + 1_000_000
            ce = cs + 2 * PERIOD_PS
        smid = tp.w.event_id(start_text, f"copy-start.{n}", meta)
        dmid = tp.w.event_id(done_text, f"copy-done.{n}", dict(meta, hlo_category="copy-done"))
        amid = tp.w.event_id(start_text, "async-copy", meta)
        ops.append(_Slot(smid, cs, _SD_PS, []))
        ops.append(_Slot(dmid, ce - _SD_PS, _SD_PS, []))
        async_ops.append(_Slot(amid, cs, ce - cs, [
            tp.s("hlo_op", "str", f"copy-done.{n}"), tp.s("_a", "int64", 1),
            tp.dyn("id", "uint64", a=layers, b=j)]))
        transfers.append((cs, ce, nbytes, direction, m * OP_PS))
    modules.append(_Slot(tp.w.event_id(f"jit_train_step({_TPU_PROGRAM})"), LEAD_PS,
                         layers * lay.layer_ps, [tp.dyn("run_id", "int64", a=1, b=1)]))
    python.append(_Slot(hp.w.event_id("train"), 0, lay.step_ps - 1_000_000, [
        hp.s("_r", "int64", 1), hp.dyn("step_num", "int64", a=1)]))
    launch.append(_Slot(hp.w.event_id("DoEnqueueProgram"), LEAD_PS - 2_000_000, 1_000_000, []))
    mem = _allocator_slots(hp, alloc, lay, "TPU_0_hbm")
    steps = _steps_for(device_events, per_step_device)
    return _finish([tp, hp], hp, lay, steps, "tpu", host, Path(path), per_step_device, mem,
                   transfers)


def write(path: str | os.PathLike, backend: str, device_events: int, **kw) -> BulkTruth:
    if backend == "gpu":
        return write_gpu(path, device_events, **kw)
    if backend == "tpu":
        return write_tpu(path, device_events, **kw)
    raise ValueError(f"backend must be gpu or tpu, not {backend!r}")
