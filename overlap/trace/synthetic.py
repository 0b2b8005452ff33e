"""SYNTHETIC trace builder: XSpace files shaped like JAX GPU/TPU captures, answers known.

Everything this module writes is a test tool, not a measurement. Each file it writes says so:
`XSpace.warnings` carries "overlap-synthetic: ...", the reader sets `Trace.synthetic`, and every
renderer prints SYNTHETIC next to results from such a file.

The shapes follow docs/xspace.md (the anatomy of real captures):

* GPU: plane `/device:GPU:<n>` (id n) with device stats; one line per CUDA stream, `line.id` =
  stream id, named `Stream #<id>(<kinds>)` with the kinds in scrambled order (real files use a
  hash set); kernels carry `kernel_details`, `correlation_id`, `context_id` (str `$$1`) and
  `hlo_op`/`hlo_module` (interned refs), `program_id` (int64); memcpys are named `MemcpyD2H` /
  `MemcpyH2D` with `memcpy_details` = `kind_src:device kind_dst:pinned size:<n> dest:<d> async:1`.
  Host-side driver-API duplicates of memcpys can be added to `/host:CPU` (they must be ignored).
* TPU: plane `/device:TPU:<n>` with lines `XLA Modules` (2), `XLA Ops` (3), `Async XLA Ops` (4);
  op metadata names are full HLO text with `display_name` = instruction name and stats on the
  metadata; an async copy writes `copy-start.N`/`copy-done.N` ops and, unless disabled, an
  `Async XLA Ops` span from the start's begin to the done's end (`_a`=1, `hlo_op`=copy-done.N).
* AMD ROCm (`SyntheticTrace.rocm`, the shapes of the MI300X/MI355 JAX captures in
  docs/xspace.md): plane stat `device_vendor` = `AMD`; lines `Stream #<id>(Kernel)`; kernels
  carry `kernel_details` (`grid:.. block:.. private_mem:0 group_mem:0 occ_pct:0`); a host copy is
  a `__amd_rocclr_copyBuffer.kd` kernel plus a `hipMemcpyHtoDAsync`/`hipMemcpyDtoHAsync`/
  `hipMemcpyDtoDAsync` event on a `/host:CPU` `Host Threads/<tid>` line with the same
  `correlation_id` and `memcpy_details` = `kind:Unknown size:<n or 0> dest:512 async:1`; a memset
  is a `__amd_rocclr_fillBufferAligned.kd` kernel plus `hipMemsetAsync`; older captures'
  `CopyDeviceToDevice` events on `Stream #<id>(MemcpyOther)` (`kind:Unknown` details).
* Host: `/host:CPU` line `python` with `train` step roots (`_r`=1, `step_num`), optional
  python-tracer noise (`$file.py:1 fn`), BFC allocator events; `/host:metadata` with HLO protos;
  `Task Environment` with `profile_start_time`/`profile_stop_time`.

Times given to the builder are picoseconds from the profile start. Lines get a non-zero
`timestamp_ns` so that readers that forget it are caught.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from overlap.trace.protos import XSpace

SYNTHETIC_WARNING = ("overlap-synthetic: this file was written by overlap.trace.synthetic, "
                     "not captured")
DEFAULT_START_NS = 1_795_000_000_000_000_000  # a plausible Unix-epoch ns start (2026)
LINE_TIMESTAMP_NS = 1_000  # every line's timestamp_ns; offsets are relative to it

_DTYPE_SIZE = {"f32": 4, "bf16": 2, "f16": 2, "s32": 4, "u8": 1, "f64": 8}


@dataclass
class TruthTransfer:
    """What the builder wrote for one host transfer (the reader must find exactly this)."""

    host: str
    device: str
    direction: str
    start_ps: int
    end_ps: int
    bytes: int
    hlo_op: str
    src_kind: str
    dst_kind: str
    bytes_known: bool = True  # False: the capture records no size (ROCm calls with size:0)
    # TPU: the span on the chip's own clock the builder wrote (`TpuDevice.async_copy`'s
    # `device_span`), None where it wrote none
    device_span_ps: int | None = None


@dataclass
class TruthCompute:
    host: str
    device: str
    start_ps: int
    end_ps: int
    name: str


@dataclass
class Truth:
    transfers: list[TruthTransfer] = field(default_factory=list)
    compute: list[TruthCompute] = field(default_factory=list)
    steps: list[tuple[int, int, int]] = field(default_factory=list)  # (step, start, end)


class _PlaneWriter:
    """Interns event and stat metadata for one plane, as XPlaneBuilder does (ids 1, 2, 3...)."""

    def __init__(self, plane):
        self.plane = plane
        self._events: dict[tuple[str, str], int] = {}
        self._stats: dict[str, int] = {}
        self._lines: dict[int, Any] = {}

    def stat_id(self, name: str) -> int:
        sid = self._stats.get(name)
        if sid is None:
            sid = len(self._stats) + 1
            self._stats[name] = sid
            md = self.plane.stat_metadata[sid]
            md.id = sid
            md.name = name
        return sid

    def event_id(self, name: str, display_name: str = "", stats: dict | None = None) -> int:
        key = (name, display_name)
        mid = self._events.get(key)
        if mid is None:
            mid = len(self._events) + 1
            self._events[key] = mid
            md = self.plane.event_metadata[mid]
            md.id = mid
            md.name = name
            if display_name:
                md.display_name = display_name
            for k, v in (stats or {}).items():
                self.set_stat(md.stats.add(), k, v)
        return mid

    def set_stat(self, stat, key: str, value: Any) -> None:
        stat.metadata_id = self.stat_id(key)
        if isinstance(value, Ref):
            stat.ref_value = self.stat_id(value.text)
        elif isinstance(value, bool):
            stat.int64_value = int(value)
        elif isinstance(value, U64):
            stat.uint64_value = int(value)
        elif isinstance(value, int):
            stat.int64_value = value
        elif isinstance(value, float):
            stat.double_value = value
        elif isinstance(value, bytes):
            stat.bytes_value = value
        else:
            stat.str_value = str(value)

    def line(self, line_id: int, name: str = ""):
        ln = self._lines.get(line_id)
        if ln is None:
            ln = self.plane.lines.add()
            ln.id = line_id
            ln.name = name
            ln.timestamp_ns = LINE_TIMESTAMP_NS
            self._lines[line_id] = ln
        return ln

    def event(self, line, metadata_id: int, start_ps: int, duration_ps: int,
              stats: dict | None = None) -> None:
        offset = start_ps - line.timestamp_ns * 1000
        if offset < 0:
            raise ValueError(f"synthetic event at {start_ps} ps starts before its line")
        ev = line.events.add(metadata_id=metadata_id, offset_ps=offset, duration_ps=duration_ps)
        for k, v in (stats or {}).items():
            self.set_stat(ev.stats.add(), k, v)


class Ref(str):
    """A string stat written as an interned `ref_value`, as real captures do."""

    @property
    def text(self) -> str:
        return str(self)


class U64(int):
    """An integer stat written as `uint64_value`."""


class GpuDevice:
    def __init__(self, trace: "SyntheticTrace", ordinal: int, name: str,
                 vendor: str | None = "Nvidia"):
        self.trace = trace
        self.ordinal = ordinal
        self.device = f"GPU:{ordinal}"
        plane = trace.xspace.planes.add()
        plane.id = ordinal
        plane.name = f"/device:GPU:{ordinal}"
        self.w = _PlaneWriter(plane)
        if vendor is not None:  # old CUPTI captures have no device_vendor stat
            self.w.set_stat(plane.stats.add(), "device_vendor", vendor)
        for k, v in {"gpu_device_name": name,
                     "clock_rate": 1_980_000, "core_count": 132,
                     "memory_bandwidth": U64(3_350_000_000_000),
                     "memory_size": U64(85_520_809_984),
                     "compute_cap_major": 9, "compute_cap_minor": 0}.items():
            self.w.set_stat(plane.stats.add(), k, v)
        self._kinds: dict[int, set[str]] = {}
        self._correlation = 1000 * (ordinal + 1)

    def _stream(self, stream: int, kind: str):
        self._kinds.setdefault(stream, set()).add(kind)
        return self.w.line(stream)

    def _common(self, hlo_op: str | None, module: str, program_id: int) -> dict:
        self._correlation += 1
        stats: dict[str, Any] = {"correlation_id": U64(self._correlation), "context_id": "$$1"}
        if hlo_op:
            stats.update(hlo_op=Ref(hlo_op), hlo_module=Ref(module), program_id=program_id)
        return stats

    def kernel(self, start_ps: int, duration_ps: int, *, stream: int = 7,
               name: str = "loop_fusion_kernel", hlo_op: str | None = "fusion.1",
               module: str = "jit_train_step", program_id: int = 5) -> None:
        line = self._stream(stream, "Compute")
        stats = self._common(hlo_op, module, program_id)
        stats["kernel_details"] = Ref(
            "regs:32 static_shared:0 dynamic_shared:0 grid:132,1,1 block:256,1,1 occ_pct:50")
        stats["theoretical_occupancy_pct"] = 50.0
        self.w.event(line, self.w.event_id(name), start_ps, duration_ps, stats)
        self.trace.truth.compute.append(
            TruthCompute(self.trace.host, self.device, start_ps, start_ps + duration_ps, name))

    def memcpy(self, direction: str, start_ps: int, duration_ps: int, nbytes: int, *,
               stream: int = 20, hlo_op: str | None = "copy-start.1",
               module: str = "jit_train_step", program_id: int = 5,
               host_kind: str = "pinned", is_async: bool = True) -> None:
        """A device<->host copy (`direction` D2H or H2D), or D2D/P2P (not a host transfer)."""
        name = f"Memcpy{direction}"
        line = self._stream(stream, name)
        if direction == "D2H":
            src, dst = "device", host_kind
        elif direction == "H2D":
            src, dst = host_kind, "device"
        else:
            src = dst = "device"
        stats = self._common(hlo_op, module, program_id)
        stats["memcpy_details"] = Ref(
            f"kind_src:{src} kind_dst:{dst} size:{nbytes} dest:{self.ordinal} "
            f"async:{int(is_async)}")
        self.w.event(line, self.w.event_id(name), start_ps, duration_ps, stats)
        if direction in ("D2H", "H2D"):
            self.trace.truth.transfers.append(TruthTransfer(
                self.trace.host, self.device, direction, start_ps, start_ps + duration_ps,
                nbytes, hlo_op or "", src, dst))
            self.trace._host_memcpy_duplicate(direction, start_ps, nbytes, self._correlation)

    def memset(self, start_ps: int, duration_ps: int, *, stream: int = 7) -> None:
        line = self._stream(stream, "Memset")
        self.w.event(line, self.w.event_id("Memset 1"), start_ps, duration_ps,
                     {"Memset_details": Ref("kind:device num_bytes:64 async:1")})

    def event(self, name: str, start_ps: int, duration_ps: int, *, stream: int, kind: str,
              stats: dict | None = None) -> None:
        """Any device event (a shape the reader may not know: the "cannot tell" tests)."""
        line = self._stream(stream, kind)
        self.w.event(line, self.w.event_id(name), start_ps, duration_ps, stats)

    def finish(self) -> None:
        rng = random.Random(self.ordinal)
        for stream, kinds in self._kinds.items():
            ordered = sorted(kinds)
            rng.shuffle(ordered)  # real names list kinds in hash-set order
            self.w.line(stream).name = f"Stream #{stream}({','.join(ordered)})"


_HIP_APIS = {"H2D": "hipMemcpyHtoDAsync", "D2H": "hipMemcpyDtoHAsync", "D2D": "hipMemcpyDtoDAsync"}


class RocmDevice(GpuDevice):
    """An AMD GPU as XLA's ROCm collector writes it (see the module docstring)."""

    def __init__(self, trace: "SyntheticTrace", ordinal: int, name: str):
        super().__init__(trace, ordinal, name, vendor="AMD")

    def _stream(self, stream: int, kind: str):
        # ROCm names kernel streams `Stream #N(Kernel)` (CUPTI: `Compute`)
        return super()._stream(stream, "Kernel" if kind == "Compute" else kind)

    def _rocm_kernel(self, name: str, start_ps: int, duration_ps: int, stream: int,
                     stats: dict | None = None) -> int:
        line = self._stream(stream, "Kernel")
        self._correlation += 1
        st = {"correlation_id": U64(self._correlation),
              "kernel_details": Ref(" grid:1,1,1 block:512,1,1 private_mem:0 group_mem:0 "
                                    "occ_pct:0"), **(stats or {})}
        self.w.event(line, self.w.event_id(name), start_ps, duration_ps, st)
        return self._correlation

    def _hip_call(self, api: str, start_ps: int, correlation: int, stats: dict) -> None:
        t = max(start_ps - 2_000_000, LINE_TIMESTAMP_NS * 1000)
        self.trace._host.event(self.trace._api_line, self.trace._host.event_id(api), t,
                               1_000_000, {"device_id": 768, "correlation_id": U64(correlation),
                                           **stats})

    def hip_copy(self, direction: str, start_ps: int, duration_ps: int,
                 nbytes: int | None = None, *, api: str | None = None, stream: int = 17,
                 call: bool = True) -> None:
        """A copy: a `__amd_rocclr_copyBuffer.kd` kernel and (`call`) the HIP call that issued
        it (`api`, default by `direction`: H2D, D2H or D2D). `nbytes` None writes `size:0`, as
        the MI300X capture does (size unknown)."""
        corr = self._rocm_kernel("__amd_rocclr_copyBuffer.kd", start_ps, duration_ps, stream)
        api = api or _HIP_APIS[direction]
        if call:
            self._hip_call(api, start_ps, corr, {"memcpy_details": Ref(
                f"kind:Unknown size:{nbytes or 0} dest:512 async:1")})
        if call and direction in ("D2H", "H2D") and api == _HIP_APIS[direction]:
            known = bool(nbytes)
            self.trace.truth.transfers.append(TruthTransfer(
                self.trace.host, self.device, direction, start_ps, start_ps + duration_ps,
                nbytes if known and nbytes else 0, "",
                "host" if direction == "H2D" else "device",
                "device" if direction == "H2D" else "host", bytes_known=known))

    def hip_fill(self, start_ps: int, duration_ps: int, *, stream: int = 17,
                 hlo_op: str | None = "te_fused_attn_backward_ffi.12") -> None:
        """A memset: `__amd_rocclr_fillBufferAligned.kd` and its `hipMemsetAsync` call."""
        ann = {"hlo_op": Ref(hlo_op), "hlo_module": Ref("jit_loss_fn"),
               "program_id": 17} if hlo_op else {}
        corr = self._rocm_kernel("__amd_rocclr_fillBufferAligned.kd", start_ps, duration_ps,
                                 stream, ann)
        self._hip_call("hipMemsetAsync", start_ps, corr, ann)

    def copy_other(self, start_ps: int, duration_ps: int, nbytes: int, *,
                   stream: int = 5) -> None:
        """Older ROCm: a device-to-device `CopyDeviceToDevice` on a MemcpyOther stream."""
        line = self._stream(stream, "MemcpyOther")
        self._correlation += 1
        self.w.event(line, self.w.event_id("CopyDeviceToDevice"), start_ps, duration_ps, {
            "correlation_id": U64(self._correlation),
            "memcpy_details": Ref(f"kind:Unknown size:{nbytes} dest:0 async:1")})


class TpuDevice:
    def __init__(self, trace: "SyntheticTrace", ordinal: int, async_line: bool):
        self.trace = trace
        self.ordinal = ordinal
        self.device = f"TPU:{ordinal}"
        plane = trace.xspace.planes.add()
        plane.id = ordinal
        plane.name = f"/device:TPU:{ordinal}"
        self.w = _PlaneWriter(plane)
        self.w.set_stat(plane.stats.add(), "device_type_string", "TPU v6 lite (synthetic)")
        self.modules_line = self.w.line(2, "XLA Modules")
        self.ops_line = self.w.line(3, "XLA Ops")
        self.async_line = self.w.line(4, "Async XLA Ops") if async_line else None
        self._copy_n = 0
        self._async_id = 0

    def op(self, start_ps: int, duration_ps: int, name: str = "fusion.1",
           category: str = "loop fusion", shape: str = "f32[8,128]{1,0}",
           program_id: int = 12190760917235803885) -> None:
        text = f"%{name} = {shape} fusion(f32[8,128]{{1,0}} %p0), kind=kLoop"
        mid = self.w.event_id(text, name, {
            "hlo_category": category, "program_id": U64(program_id), "flops": U64(2048),
            "bytes_accessed": 8192})
        self.w.event(self.ops_line, mid, start_ps, duration_ps, {
            "device_offset_ps": U64(start_ps), "device_duration_ps": U64(duration_ps)})
        self.trace.truth.compute.append(
            TruthCompute(self.trace.host, self.device, start_ps, start_ps + duration_ps, name))

    def async_copy(self, direction: str, start_ps: int, done_end_ps: int, *,
                   dims: tuple[int, ...] = (4, 1024, 1024), dtype: str = "f32",
                   start_dur_ps: int = 10_000, done_dur_ps: int = 10_000,
                   program_id: int = 12190760917235803885,
                   device_span: tuple[int, int] | None = None) -> str:
        """copy-start/copy-done ops plus the Async XLA Ops span; returns the copy-start name.

        `device_span`: (the start's begin, the done's end) on the chip's own clock, written as
        the two ops' `device_offset_ps`/`device_duration_ps` stats (as real XLA:TPU captures
        carry them beside the host-aligned offsets); None writes no such stats."""
        self._copy_n += 1
        n = self._copy_n
        d = ",".join(str(x) for x in dims)
        layout = ",".join(str(i) for i in reversed(range(len(dims))))
        dev = f"{dtype}[{d}]{{{layout}:T(8,128)}}"
        host = f"{dtype}[{d}]{{{layout}:T(8,128)S(5)}}"
        dst, src = (host, dev) if direction == "D2H" else (dev, host)
        start_name, done_name = f"copy-start.{n}", f"copy-done.{n}"
        start_text = (f"%{start_name} = ({dst}, {src}, u32[]{{:S(2)}}) "
                      f"copy-start({src} %param.{n})")
        done_text = f"%{done_name} = {dst} copy-done(({dst}, {src}, u32[]) %{start_name})"
        nbytes = _DTYPE_SIZE[dtype]
        for x in dims:
            nbytes *= x
        meta = {"hlo_category": "copy-start", "program_id": U64(program_id),
                "bytes_accessed": nbytes, "raw_bytes_accessed": nbytes,
                "shape_with_layout": f"({dst}, {src}, u32[])"}
        return self._async_op(direction, start_ps, done_end_ps, start_dur_ps, done_dur_ps,
                              nbytes, (start_name, start_text, meta),
                              (done_name, done_text, dict(meta, hlo_category="copy-done")),
                              "async-copy", device_span)

    def _async_op(self, direction, start_ps, done_end_ps, start_dur_ps, done_dur_ps, nbytes,
                  start, done, async_display, device_span=None) -> str:
        """Start and done ops on XLA Ops, the start..done span on Async XLA Ops (when the
        device has that line), and the ground truth transfer; returns the start op's name."""
        (start_name, start_text, smeta), (done_name, done_text, dmeta) = start, done
        smid = self.w.event_id(start_text, start_name, smeta)
        dmid = self.w.event_id(done_text, done_name, dmeta)
        s_stats: dict = {}
        d_stats: dict = {}
        if device_span is not None:
            d0, d1 = device_span
            s_stats = {"device_offset_ps": U64(d0), "device_duration_ps": U64(start_dur_ps)}
            d_stats = {"device_offset_ps": U64(d1 - done_dur_ps),
                       "device_duration_ps": U64(done_dur_ps)}
        self.w.event(self.ops_line, smid, start_ps, start_dur_ps, s_stats)
        self.w.event(self.ops_line, dmid, done_end_ps - done_dur_ps, done_dur_ps, d_stats)
        if self.async_line is not None:
            amid = self.w.event_id(start_text, async_display, smeta)
            self.w.event(self.async_line, amid, start_ps, done_end_ps - start_ps, {
                "hlo_op": done_name, "_a": 1, "id": U64(self._async_id)})
            self._async_id += 1
        self.trace.truth.transfers.append(TruthTransfer(
            self.trace.host, self.device, direction, start_ps, done_end_ps, nbytes,
            start_name, "device" if direction == "D2H" else "host",
            "host" if direction == "D2H" else "device",
            device_span_ps=None if device_span is None else device_span[1] - device_span[0]))
        return start_name

    def async_slice(self, direction: str, start_ps: int, done_end_ps: int, *,
                    layers: int = 10, dims: tuple[int, ...] = (256, 256), dtype: str = "f32",
                    start_dur_ps: int = 10_000, done_dur_ps: int = 10_000,
                    program_id: int = 12190760917235803885) -> str:
        """How XLA:TPU offloads a scan's residuals (the real v5e module in
        tests/hlo/fixtures): D2H is a `dynamic-update-slice-start` writing one layer's slice
        into a stacked `S(5)` buffer, H2D a `dynamic-slice-start` reading one out. Writes the
        start/done ops plus the Async XLA Ops span; returns the start op's name."""
        self._copy_n += 1
        n = self._copy_n
        d = ",".join(str(x) for x in dims)
        lay = ",".join(str(i) for i in reversed(range(len(dims) + 1)))
        host = f"{dtype}[{layers},{d}]{{{lay}:T(8,128)S(5)}}"
        one = f"{dtype}[1,{d}]{{{lay}:T(8,128)}}"
        idx = "s32[]{:T(128)}"
        if direction == "D2H":
            op = "dynamic-update-slice"
            start_shape = f"(({host}, {one}, {idx}, {idx}, {idx}), {host}, u32[]{{:S(2)}})"
            args, done_shape = f"%buf.{n}, %upd.{n}, %i.{n}, %z, %z", host
        else:
            op = "dynamic-slice"
            start_shape = f"(({host}, {idx}, {idx}, {idx}), {one}, u32[]{{:S(2)}})"
            args, done_shape = f"%buf.{n}, %i.{n}, %z, %z", one
        start_name, done_name = f"{op}-start.{n}", f"{op}-done.{n}"
        start_text = f"%{start_name} = {start_shape} {op}-start({args})"
        done_text = f"%{done_name} = {done_shape} {op}-done(%{start_name})"
        nbytes = _DTYPE_SIZE[dtype]
        for x in dims:
            nbytes *= x
        meta = {"hlo_category": "data formatting", "program_id": U64(program_id),
                "bytes_accessed": 2 * nbytes, "raw_bytes_accessed": 2 * nbytes}
        return self._async_op(direction, start_ps, done_end_ps, start_dur_ps, done_dur_ps,
                              nbytes, (start_name, start_text, meta),
                              (done_name, done_text, meta), f"async-{op}")

    def module(self, start_ps: int, duration_ps: int, name: str = "jit_train_step",
               program_id: int = 12190760917235803885, run_id: int = 1) -> None:
        mid = self.w.event_id(f"{name}({program_id})")
        self.w.event(self.modules_line, mid, start_ps, duration_ps, {"run_id": run_id})

    def finish(self) -> None:
        # Real files keep XLA Ops sorted by (begin, duration); so do we.
        for line in (self.ops_line, self.async_line):
            if line is None:
                continue
            evs = sorted(line.events, key=lambda e: (e.offset_ps, e.duration_ps))
            copies = [type(e)() for e in evs]
            for c, e in zip(copies, evs):
                c.CopyFrom(e)
            del line.events[:]
            line.events.extend(copies)


class SyntheticTrace:
    """Builds one host's SYNTHETIC XSpace. See the module docstring."""

    def __init__(self, host: str = "synthetic-host", *, start_ns: int = DEFAULT_START_NS,
                 duration_ns: int | None = None, host_memcpy_duplicates: bool = True):
        self.host = host
        self.xspace = XSpace()
        self.xspace.hostnames.append(host)
        self.xspace.warnings.append(SYNTHETIC_WARNING)
        self.truth = Truth()
        self.start_ns = start_ns
        self.duration_ns = duration_ns
        self._dup = host_memcpy_duplicates
        meta_plane = self.xspace.planes.add()
        meta_plane.name = "/host:metadata"
        self._meta = _PlaneWriter(meta_plane)
        for k, v in {"jax_version": "0.10.2", "jaxlib_version": "0.10.2",
                     "overlap_synthetic": 1}.items():
            self._meta.set_stat(meta_plane.stats.add(), k, v)
        host_plane = self.xspace.planes.add()
        host_plane.name = "/host:CPU"
        self._host = _PlaneWriter(host_plane)
        self._python = self._host.line(-7546550578646800604, "python")
        self._alloc_line = self._host.line(4242, "tf_allocator_thread/4242")
        self._api_line = self._host.line(4343, "Host Threads/4343")
        self.devices: list[GpuDevice | TpuDevice] = []
        self._last_ps = 0

    # -- devices -------------------------------------------------------------------------------
    def gpu(self, ordinal: int = 0, name: str = "NVIDIA H100 80GB HBM3 (synthetic)", *,
            vendor: str | None = "Nvidia") -> GpuDevice:
        d = GpuDevice(self, ordinal, name, vendor)
        self.devices.append(d)
        return d

    def rocm(self, ordinal: int = 0, name: str = "AMD Instinct MI300X (synthetic)") -> RocmDevice:
        """An AMD GPU plane with the ROCm collector's shapes (see the module docstring)."""
        d = RocmDevice(self, ordinal, name)
        self.devices.append(d)
        return d

    def tpu(self, ordinal: int = 0, *, async_line: bool = True) -> TpuDevice:
        d = TpuDevice(self, ordinal, async_line)
        self.devices.append(d)
        return d

    # -- host ----------------------------------------------------------------------------------
    def step(self, num: int, start_ps: int, end_ps: int, name: str = "train") -> None:
        self._host.event(self._python, self._host.event_id(name), start_ps, end_ps - start_ps,
                         {"_r": 1, "step_num": num})
        self.truth.steps.append((num, start_ps, end_ps))

    def python_noise(self, start_ps: int, duration_ps: int, fn: str = "train.py:10 loop") -> None:
        """A Python-tracer frame: must never become a step or compute."""
        self._host.event(self._python, self._host.event_id(f"${fn}"), start_ps, duration_ps)

    def allocation(self, time_ps: int, *, kind: str = "alloc", allocator: str = "GPU_0_bfc",
                   bytes_allocated: int, requested_bytes: int = 0,
                   peak_bytes_in_use: int | None = None) -> None:
        name = "MemoryAllocation" if kind == "alloc" else "MemoryDeallocation"
        self._host.event(self._alloc_line, self._host.event_id(name), time_ps, 0, {
            "allocator_name": Ref(allocator), "bytes_allocated": bytes_allocated,
            "bytes_reserved": 0, "bytes_available": 1 << 30,
            "peak_bytes_in_use": bytes_allocated if peak_bytes_in_use is None
            else peak_bytes_in_use,
            "requested_bytes": requested_bytes, "allocation_bytes": requested_bytes,
            "fragmentation": 0.0})

    def module(self, name: str, program_id: int, hlo_proto: bytes = b"") -> None:
        self._meta.event_id(f"{name}({program_id})", "", {
            "Hlo Proto": hlo_proto, "program_id": U64(program_id)})

    def _host_memcpy_duplicate(self, direction: str, start_ps: int, nbytes: int,
                               correlation: int) -> None:
        # The driver-API callback for the same copy: a host event with the same name.
        if not self._dup:
            return
        t = max(start_ps - 2_000_000, LINE_TIMESTAMP_NS * 1000)
        self._host.event(self._api_line, self._host.event_id(f"Memcpy{direction}"), t, 1_000_000, {
            "device_id": 0, "correlation_id": U64(correlation),
            "memcpy_details": Ref(f"kind_src:unknown kind_dst:unknown size:{nbytes} async:1")})

    # -- output --------------------------------------------------------------------------------
    def to_xspace(self):
        for d in self.devices:
            d.finish()
        task = next((p for p in self.xspace.planes if p.name == "Task Environment"), None)
        if task is None:
            task = self.xspace.planes.add()
            task.name = "Task Environment"
            w = _PlaneWriter(task)
            end_ns = self.duration_ns
            if end_ns is None:
                end_ns = LINE_TIMESTAMP_NS + _max_end_ps(self.xspace) // 1000 + 1
            w.set_stat(task.stats.add(), "profile_start_time", U64(self.start_ns))
            w.set_stat(task.stats.add(), "profile_stop_time", U64(self.start_ns + end_ns))
        return self.xspace

    def to_bytes(self) -> bytes:
        return self.to_xspace().SerializeToString()

    def write(self, path: str | os.PathLike) -> Path:
        """Write a bare `.xplane.pb` file."""
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(self.to_bytes())
        return p

    def write_session(self, logdir: str | os.PathLike,
                      session: str = "2026_11_22_00_00_00") -> Path:
        """Write `logdir/plugins/profile/<session>/<host>.xplane.pb`, as jax.profiler does."""
        return self.write(Path(logdir) / "plugins" / "profile" / session / f"{self.host}.xplane.pb")


def _max_end_ps(xs) -> int:
    end = 0
    for plane in xs.planes:
        for line in plane.lines:
            for e in line.events:
                end = max(end, e.offset_ps + e.duration_ps)
    return end


# ---------------------------------------------------------------------------------------------
# Ready-made scenarios (used by tests, benchmarks and `overlap demo --synthetic`)


def one_event_lines(n: int) -> bytes:
    """SYNTHETIC: a GPU plane of `n` lines (`Stream #<i>`, timestamp_ns 1000) of one event
    each that no rule reads (`kernel_x`, no kernel stats), then an empty host plane; no
    Task Environment plane, so line timestamps are read as absolute. The fuzz campaign's
    shape of many lines (issue 32; the up-front check of `files.check_lines_fit`)."""
    sp = XSpace()
    sp.warnings.append(SYNTHETIC_WARNING)
    pl = sp.planes.add(id=1, name="/device:GPU:0")
    md = pl.event_metadata[1]
    md.id, md.name = 1, "kernel_x"
    for i in range(n):
        ln = pl.lines.add(id=i, name=f"Stream #{i}", timestamp_ns=1000)
        ln.events.add(metadata_id=1, offset_ps=i * 10, duration_ps=5)
    sp.planes.add(id=2, name="/host:CPU")
    return sp.SerializeToString()


def tiny_planes(n: int, odd_every: int = 0) -> bytes:
    """SYNTHETIC: `n` GPU planes of one line (`Stream #1`, timestamp_ns 1000) of one event
    that no rule reads (`kernel_x`), then an empty host plane; with `odd_every`, every
    `odd_every`-th plane's line is of a stream kind overlap does not read (`Stream #1(Odd)`:
    another reason). The fuzz campaign's shape of many small planes (issue 32)."""
    sp = XSpace()
    sp.warnings.append(SYNTHETIC_WARNING)
    for d in range(n):
        pl = sp.planes.add(id=d, name=f"/device:GPU:{d}")
        md = pl.event_metadata[1]
        md.id, md.name = 1, "kernel_x"
        odd = odd_every and d % odd_every == 0
        ln = pl.lines.add(id=1, name="Stream #1(Odd)" if odd else "Stream #1", timestamp_ns=1000)
        ln.events.add(metadata_id=1, offset_ps=10, duration_ps=5)
    sp.planes.add(id=n, name="/host:CPU")
    return sp.SerializeToString()


def many_ops_scenario(steps: int = 30, distinct_compute: bool = False,
                      clocked: bool = False) -> SyntheticTrace:
    """A TPU step loop where every copy is its own `copy-start` op (the many-distinct-copy-ops
    shape of benchmarks/bench_shapes.py, 24k metadata entries per 1000 steps): per step 12
    compute ops of 6 us, each with an async copy of 5 us (D2H and H2D in turn) beside it.
    `distinct_compute`: every compute op its own name too. `clocked`: every copy carries the
    chip's clock (`device_offset_ps`/`device_duration_ps`, as real XLA:TPU captures write
    them), the host-aligned one plus 1 us. No HLO protos."""
    t = SyntheticTrace()
    tpu = t.tpu(0)
    us = 1_000_000
    for s in range(steps):
        t0 = (10 + 100 * s) * us
        t.step(s, t0, t0 + 95 * us)
        for k in range(12):
            name = f"fusion.{s * 12 + k}" if distinct_compute else f"fusion.{k}"
            tpu.op(t0 + k * 7 * us, 6 * us, name=name)
            a = t0 + k * 7 * us
            tpu.async_copy("D2H" if k % 2 else "H2D", a, a + 5 * us, dims=(8, 128),
                           device_span=(a + us, a + 6 * us) if clocked else None)
    return t


def gpu_offload_scenario(steps: int = 3, layers: int = 4, *, hidden_fraction: float = 1.0,
                         host: str = "synthetic-host", kernel_ps: int = 400_000_000,
                         copy_ps: int = 200_000_000, nbytes: int = 8 << 20) -> SyntheticTrace:
    """A GPU step loop with one D2H per layer forward and one H2D per layer backward.

    Each layer is one kernel of `kernel_ps` on stream 7; its copy of `copy_ps` on stream 20
    starts so that `copy_ps * hidden_fraction` of it lies inside that kernel (which must fit:
    `copy_ps * hidden_fraction <= kernel_ps`) and the rest in the idle gap after it. So every
    copy's hidden time is exactly `int(copy_ps * hidden_fraction)`.
    """
    t = SyntheticTrace(host)
    gpu = t.gpu(0)
    now = 2_000_000  # 1 us after the lines start (they start at 1 us)
    # Wider than any copy, so a copy never reaches into the next layer's kernel.
    gap = copy_ps + 50_000_000
    for s in range(steps):
        step_start = now
        for direction in ("D2H", "H2D"):
            for layer in range(layers):
                gpu.kernel(now, kernel_ps, hlo_op=f"fusion.{layer}", name=f"fusion_{layer}_kernel")
                copy_start = now + kernel_ps - int(copy_ps * hidden_fraction)
                n = layer if direction == "D2H" else layers + layer
                gpu.memcpy(direction, copy_start, copy_ps, nbytes, hlo_op=f"copy-start.{n}")
                now += kernel_ps + gap
            now = max(now, copy_start + copy_ps + gap)
        t.step(s, step_start - 500_000, now)
        now += gap
    return t
