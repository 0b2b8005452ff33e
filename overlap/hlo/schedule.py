"""Predicted overlap of host transfers from a compiled program's schedule (an estimate).

The optimized module is printed in schedule order (`is_scheduled=true`). The estimate walks it
as the device would: one compute stream running the scheduled instructions one after another,
and the host link moving the planned transfers (the offload inventory's ops) beside it.

Compute, per instruction (integer picoseconds):

* `max(FLOPs / peak FLOP/s, bytes / HBM bandwidth)` (a roofline at the data sheet's peaks).
  FLOPs are counted for matrix products only (`dot`, `convolution`, cuBLAS/cuDNN custom calls,
  and those inside fusions): 2 x output elements x contracted size, at the bf16 or f32 peak;
  a convolution as XLA's cost analysis counts it (`_conv_fmas`: window positions that read real
  input, so XLA:TPU's batched matmuls, batch and heads as lhs-dilated spatial dimensions, count
  each batch/head once).
* Bytes are what the instruction really reads and writes in device memory: a `dynamic-slice`
  reads and writes the slice (not the array it slices); an in-place `dynamic-update-slice`
  reads and writes its update (not its buffer); a fusion reads what its fused computation uses
  of each parameter (a parameter used only by slices inside it counts the slices; one used only
  as the buffer of an in-place update counts nothing) and writes its result (only the update,
  when its root updates a parameter in place). Arrays in the layout the compiler chose: a
  tiled TPU layout (`{1,0:T(8,128)}`) counts its padding. On-chip memories (TPU VMEM `S(1)`,
  semaphores `S(2)`) are not HBM traffic and count nothing.
* Each kernel takes at least `kernel_floor_ps` (launch + tail; 0 unless the target or the user
  sets it). A `while` counts its body (simulated, stalls included) times its trip count; `call`
  and `conditional` their callees; `parameter`, tuples, bitcasts and other async ops count 0.

Transfers: a copy issued at compute time t joins its direction's queue on the host link; it
starts moving `kernel_floor_ps` later (a copy is a stream operation too) or when the copy
before it in that direction is done, whichever is later, and moves its bytes (in the compiler's
layout) at the direction's link bandwidth. Copies of one direction are served one at a time in
issue order (FIFO); D2H and H2D run at once on a full-duplex link (PCIe), one after the other on
a half-duplex one. At the copy's `-done` the compute stream waits until the copy is complete.

Streams (XLA:GPU, when the caller gives them: `overlap.hlo.streams`, from the program's
HloProto): every async op sits on one of a few execution streams, each a FIFO, so an op starts
only when the one issued before it on its stream is complete. Device-side async ops (a
`fusion-start` of a dynamic slice of the weights: a device-to-device copy) are costed by the
roofline of what they run and waited for at their done: one that queues behind a host copy
holds the compute stream there. Without streams each host copy is on a stream of its own and
device-side async ops are free (said in the assumptions).

Per transfer (one execution): `duration_ps` = issue to completion (what a capture measures as
"in flight"); `hidden_ps` = compute-stream busy time inside that interval; `exposed_ps` =
duration - hidden; `hidden_fraction` = hidden / duration (1 for an empty transfer); `stall_ps` =
the wait at its done; `break_even_Bps` = the slowest link bandwidth of its direction at which it
is fully hidden (found by bisection over the same simulation, each step a walk of its own
computation where loops do not nest past the walk's cut, `callgraph`; None when no bandwidth
hides it, e.g. nothing is scheduled between its start and done). Per step: sums over
executions (each op times the trip counts of the loops around it); a direction's break-even is
the largest of its transfers' (None if any never hides), so "every D2H copy hides only at >=
N" and the hidden fraction of the table are the same numbers. `step_ps` = the simulated entry
computation, stalls included; `busy_ps` = its compute alone.

This is an ESTIMATE, never a measurement, and every view says so; `assumptions` lists what it
assumes, for printing next to the number. Blind spots: peaks, not achieved rates (compute leans
fast, so hiding leans low for big kernels and the floor dominates tiny ones); caches; work on
other streams and the host; collectives cost 0; a copy whose done is in another computation
(pipelined across loop iterations) is taken to complete by the end of its computation; the
link's real sharing (measured TPU v6e copies: first of three back-to-back H2D copies at ~28
GB/s, later ones queued) and bidirectional slowdown (measured PCIe throughput with both
directions busy is below one direction's) are approximated by FIFO and full duplex.
A real capture of the same program joins on op names (`copy-start.3`, ...): `overlap report
CAPTURE --predict` puts predicted and measured side by side.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from typing import Any

from overlap.hlo.callgraph import CALLS_ONE_RE as _CALLS_ONE_RE
from overlap.hlo.callgraph import nesting
from overlap.hlo.program import (
    _BODY_RE,
    _TRIP_RE,
    OffloadOp,
    _flatten,
    _Instr,
    derived_trip_count,
    offload_inventory,
    parsed,
)
from overlap.hlo.streams import Streams, is_async_start

PS_PER_S = 10**12

# Opcodes that take no device time of their own in the model.
_FREE = {"parameter", "constant", "get-tuple-element", "tuple", "bitcast", "after-all",
         "partition-id", "replica-id", "opt-barrier", "add-dependency", "domain"}
_LHS_CONTRACT_RE = re.compile(r"lhs_contracting_dims=\{([\d,\s]*)\}")
_JSON_CONTRACT_RE = re.compile(r'"lhs_contracting_dimensions"\s*:\s*\[([^\]]*)\]')
_DIM_LABELS_RE = re.compile(r"dim_labels=([\w]+)_([\w]+)->([\w]+)")
_WINDOW_RE = re.compile(r"window=\{([^}]*)\}")
_FGC_RE = re.compile(r"feature_group_count=(\d+)")
_BGC_RE = re.compile(r"batch_group_count=(\d+)")
_GEMM_TARGETS = ("__cublas$gemm", "__cublas$lt$matmul", "__cudnn$convForward")
# Memory spaces whose bytes are device-memory (HBM) traffic: the default one. TPU's S(1)
# (VMEM) and S(2) (sync flags) are on chip; S(5) is host memory (transfers are costed apart).
_HBM_SPACES = (0,)
_SLICES = ("dynamic-slice", "slice")
_PASS = ("bitcast", "reshape")
# Bisection over link bandwidth for break-even: bounds (bytes/s) and steps (relative precision
# of about 1e-8 over that range).
_BW_LO, _BW_HI, _BISECT_STEPS = 1e6, 1e16, 36


def _positive(v: Any) -> bool:
    """A finite number above 0 (not a bool)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < float("inf")


@dataclasses.dataclass(frozen=True)
class Roofline:
    """The machine model: peaks the estimate divides by (printed next to every estimate).

    `host_link_Bps` is the D2H bandwidth and, unless `h2d_link_Bps` is given, the H2D one.
    `kernel_floor_ps`: the least time of one kernel (and the setup of one copy)."""

    hbm_Bps: float
    peak_flops_bf16: float
    peak_flops_f32: float
    host_link_Bps: float
    kernel_floor_ps: int = 0
    h2d_link_Bps: float | None = None
    full_duplex: bool = True
    # Each direction's rate while the other direction also moves, as a share of its rate
    # alone (1: full duplex; H100 PCIe measured 44 of 54.7 GB/s, 0.80). Ignored when not
    # full_duplex (then the directions take turns).
    duplex_share: float = 1.0
    # XLA:GPU command buffers (CUDA graphs) run the copies on the compute stream: each copy
    # occupies the stream for its whole transfer and nothing hides it.
    copies_on_compute_stream: bool = False
    # Roofline times are multiplied by this (a calibration's measured/roofline ratio; 1 = the
    # data sheet's peaks as they are).
    compute_scale: float = 1.0
    # Idle time of the compute stream after each kernel (launch gaps between kernels, measured
    # by a calibration; 0 = back to back). Counts in step time, never as hiding compute.
    kernel_gap_ps: int = 0

    def __post_init__(self) -> None:
        # A rate of 0 or below never moves a copy: the stream model waited for it forever (a
        # plan's run.json edited to a link of -1 hung the dashboard's timeline, round 35).
        for k in ("hbm_Bps", "peak_flops_bf16", "peak_flops_f32", "host_link_Bps",
                  "compute_scale"):
            if not _positive(getattr(self, k)):
                raise ValueError(f"{k} is {getattr(self, k)!r}: a machine model needs a number "
                                 "> 0")
        if self.h2d_link_Bps is not None and not (
                self.h2d_link_Bps == 0 or _positive(self.h2d_link_Bps)):  # (0: not given)
            raise ValueError(f"h2d_link_Bps is {self.h2d_link_Bps!r}: a number > 0, or none")
        if not (_positive(self.duplex_share) and self.duplex_share <= 1):
            raise ValueError(f"duplex_share is {self.duplex_share!r}: a fraction in (0, 1]")
        for k in ("kernel_floor_ps", "kernel_gap_ps"):
            v = getattr(self, k)
            if not (_positive(v) or v == 0) or isinstance(v, bool):
                raise ValueError(f"{k} is {v!r}: a time >= 0")

    def link_Bps(self, direction: str) -> float:
        if direction == "H2D" and self.h2d_link_Bps:
            return self.h2d_link_Bps
        return self.host_link_Bps


@dataclasses.dataclass
class _Module:
    comps: dict[str, list[_Instr]]
    by_name: dict[str, _Instr]


def _elems(shape) -> int:
    n = 0
    for a in _flatten(shape):
        k = 1
        for d in a.dims:
            k *= d
        n += k
    return n


def _first(shape):
    flat = _flatten(shape)
    return flat[0] if flat else None


def _hbm(shape) -> int:
    """Device-memory bytes of `shape` in its layout (tile padding included)."""
    if shape is None:
        return 0
    return sum(a.layout_nbytes for a in _flatten(shape) if a.memory_space in _HBM_SPACES)


def _operand_shape(ins: _Instr, i: int, m: _Module):
    if i < len(ins.operand_shapes) and ins.operand_shapes[i] is not None:
        return ins.operand_shapes[i]
    src = m.by_name.get(ins.operands[i]) if i < len(ins.operands) else None
    return src.shape if src is not None else None


def _window_dims(attrs: str) -> list[dict[str, tuple[int, ...]]]:
    """The `window={...}` of a convolution, one dict per spatial dimension (in spatial-index
    order): size, stride, pad (low, high), lhs_dilate, rhs_dilate; defaults where absent."""
    mm = _WINDOW_RE.search(attrs)
    fields: dict[str, list[str]] = {}
    if mm:
        for item in mm.group(1).split():
            key, _, val = item.partition("=")
            fields[key] = val.split("x")
    n = len(fields.get("size", []))
    dims = []
    for d in range(n):
        def get(key: str, default: tuple[int, ...], d: int = d) -> tuple[int, ...]:
            vals = fields.get(key)
            if not vals or d >= len(vals):
                return default
            return tuple(int(v) for v in vals[d].split("_"))
        dims.append({"size": get("size", (1,)), "stride": get("stride", (1,)),
                     "pad": get("pad", (0, 0)), "lhs_dilate": get("lhs_dilate", (1,)),
                     "rhs_dilate": get("rhs_dilate", (1,))})
    return dims


def _valid_positions(n_in: int, n_kernel: int, n_out: int, stride: int, pad_lo: int,
                     lhs_dilate: int, rhs_dilate: int) -> int:
    """How many (kernel position, output position) pairs of one spatial dimension read a real
    input element (not padding, not a hole of the lhs dilation): the multiply-adds that dimension
    contributes per (batch, input feature, output feature). Counted per kernel position in
    closed form: output o reads input position (o*stride - pad_lo + k*rhs_dilate) / lhs_dilate,
    which must be whole and inside [0, n_in)."""
    if n_in <= 0 or n_kernel <= 0 or n_out <= 0 or stride <= 0 or lhs_dilate <= 0:
        return 0
    top = (n_in - 1) * lhs_dilate  # the last real element, in the dilated index space
    g = math.gcd(stride, lhs_dilate)
    period = lhs_dilate // g
    inv = pow(stride // g, -1, period) if period > 1 else 0
    total = 0
    for k in range(n_kernel):
        c = k * rhs_dilate - pad_lo  # dilated index read by output 0
        # o*stride + c in [0, top]  ->  o in [lo, hi], intersected with the outputs
        lo = (-c + stride - 1) // stride if c < 0 else 0
        hi = min(n_out - 1, (top - c) // stride) if top >= c else -1
        if hi < lo:
            continue
        # o*stride + c = 0 (mod lhs_dilate): solvable only when g divides c
        if c % g:
            continue
        if period == 1:  # then every o in range solves it
            total += hi - lo + 1
            continue
        o0 = ((-c // g) * inv) % period  # the first solution; the rest repeat every `period`
        first = lo + ((o0 - lo) % period)
        if first <= hi:
            total += (hi - first) // period + 1
    return total


def _conv_fmas(attrs: str, lhs: tuple[int, ...], rhs: tuple[int, ...],
               out: tuple[int, ...]) -> int:
    """Multiply-adds of one HLO `convolution`, as XLA's own cost analysis counts them:
    (input features / feature_group_count) x output features x (batch / batch_group_count) x
    the product over spatial dimensions of the valid (kernel, output) position pairs.

    The window is not simply "contracted size": XLA:TPU writes a batched matmul as a
    convolution whose batch/head dimensions are spatial dimensions with `lhs_dilate=N`,
    `size=N` and `stride=N-1` (or an input of 1 padded by N-1 on both sides), where each
    output position meets exactly one kernel position, so that dimension contributes N, not N
    x N. 0 when the labels or shapes do not fit together."""
    mm = _DIM_LABELS_RE.search(attrs)
    if not mm:
        return 0
    lhs_l, rhs_l, out_l = mm.groups()
    if len(lhs_l) != len(lhs) or len(rhs_l) != len(rhs) or len(out_l) != len(out):
        return 0
    if "f" not in lhs_l or "b" not in lhs_l or "f" not in out_l:
        return 0
    fgc = int(m.group(1)) if (m := _FGC_RE.search(attrs)) else 1
    bgc = int(m.group(1)) if (m := _BGC_RE.search(attrs)) else 1
    fmas = (lhs[lhs_l.index("f")] // max(fgc, 1)) * out[out_l.index("f")]
    fmas *= lhs[lhs_l.index("b")] // max(bgc, 1)
    window = _window_dims(attrs)
    for sp, w in enumerate(window):
        ch = str(sp)
        if ch not in lhs_l or ch not in rhs_l or ch not in out_l:
            return 0
        fmas *= _valid_positions(lhs[lhs_l.index(ch)], rhs[rhs_l.index(ch)],
                                 out[out_l.index(ch)], w["stride"][0], w["pad"][0],
                                 w["lhs_dilate"][0], w["rhs_dilate"][0])
    return fmas


def _matmul_flops(ins: _Instr, m: _Module) -> tuple[int, bool]:
    """(FLOPs, is_f32) of one dot/convolution/GEMM custom call; (0, False) for anything else."""
    out = _first(ins.shape)
    lhs = _operand_shape(ins, 0, m)
    lhs = _first(lhs) if lhs is not None else None
    if out is None or lhs is None:
        return 0, False
    k = None
    if ins.opcode == "dot":
        mm = _LHS_CONTRACT_RE.search(ins.attrs)
        if mm:
            k = 1
            for d in (int(x) for x in mm.group(1).split(",") if x.strip()):
                k *= lhs.dims[d] if d < len(lhs.dims) else 1
    elif ins.opcode == "convolution":
        rhs = _operand_shape(ins, 1, m)
        rhs = _first(rhs) if rhs is not None else None
        if rhs is None:
            return 0, False
        fmas = _conv_fmas(ins.attrs, lhs.dims, rhs.dims, out.dims)
        return 2 * fmas, lhs.dtype == "f32" and out.dtype == "f32"
    elif ins.opcode == "custom-call" and any(t in ins.attrs for t in _GEMM_TARGETS):
        mm = _JSON_CONTRACT_RE.search(ins.attrs)
        if mm:
            k = 1
            for d in (int(x.strip().strip('"')) for x in mm.group(1).split(",") if x.strip()):
                k *= lhs.dims[d] if d < len(lhs.dims) else 1
    if not k:
        return 0, False
    n_out = 1
    for d in out.dims:
        n_out *= d
    return 2 * n_out * k, lhs.dtype == "f32" and out.dtype == "f32"


def _fusion_flops(comp: str, m: _Module, depth: int = 0) -> tuple[int, int]:
    """(bf16-class FLOPs, f32 FLOPs) of the matrix products inside a called computation."""
    lo = hi = 0
    if depth > 16:
        return 0, 0
    for ins in m.comps.get(comp, []):
        f, is32 = _matmul_flops(ins, m)
        if is32:
            hi += f
        else:
            lo += f
        for callee in _CALLS_ONE_RE.findall(ins.attrs):
            a, b = _fusion_flops(callee, m, depth + 1)
            lo, hi = lo + a, hi + b
    return lo, hi


def _users(comp: list[_Instr]) -> dict[str, list[tuple[_Instr, int]]]:
    out: dict[str, list[tuple[_Instr, int]]] = {}
    for ins in comp:
        for k, o in enumerate(ins.operands):
            out.setdefault(o, []).append((ins, k))
    return out


def _param_read_bytes(p: _Instr, users: dict, full: int, depth: int = 0) -> int:
    """Bytes a fused computation reads of parameter `p` (whose full size is `full`): the slices
    taken of it where slices are all it feeds, nothing where it is only the buffer an in-place
    update writes into, else all of it."""
    total = 0
    for u, k in users.get(p.name, []):
        if u.opcode in _PASS and depth < 8:
            total += _param_read_bytes(u, users, full, depth + 1)
        elif u.opcode in _SLICES and k == 0:
            total += _hbm(u.shape) if full else 0
        elif u.opcode == "dynamic-update-slice" and k == 0:
            continue  # the buffer updated in place: not read
        else:
            return full
    return min(total, full)


def _through(ins: _Instr | None, by_name: dict[str, _Instr]) -> _Instr | None:
    depth = 0
    while ins is not None and ins.opcode in _PASS and ins.operands and depth < 8:
        ins, depth = by_name.get(ins.operands[0]), depth + 1
    return ins


def _fusion_bytes(ins: _Instr, m: _Module) -> int:
    """Bytes a fusion reads and writes in device memory (see the module docstring)."""
    cm = _CALLS_ONE_RE.search(ins.attrs)
    comp = m.comps.get(cm.group(1), []) if cm else []
    if not comp:
        return _hbm(ins.shape) + sum(_hbm(_operand_shape(ins, i, m))
                                     for i in range(len(ins.operands)))
    users = _users(comp)
    local = {i.name: i for i in comp}
    nbytes = 0
    for p in comp:
        if p.opcode != "parameter" or not p.operands or not p.operands[0].isdigit():
            continue
        k = int(p.operands[0])
        outer = _operand_shape(ins, k, m) if k < len(ins.operands) else None
        nbytes += _param_read_bytes(p, users, _hbm(outer if outer is not None else p.shape))
    root = next((i for i in comp if i.root), comp[-1])
    outs = ([local.get(o) for o in root.operands] if root.opcode == "tuple" else [root])
    shapes = ins.shape if root.opcode == "tuple" and isinstance(ins.shape, list) else [ins.shape]
    for j, r in enumerate(outs):
        out_shape = shapes[j] if j < len(shapes) else None
        r = _through(r, local)
        if (r is not None and r.opcode == "dynamic-update-slice" and len(r.operands) > 1
                and (b := _through(local.get(r.operands[0]), local)) is not None
                and b.opcode == "parameter"):
            # Writes the update into the buffer in place (reading it is a parameter's read).
            upd = local.get(r.operands[1])
            nbytes += _hbm(upd.shape if upd is not None else None) if _hbm(out_shape) else 0
        else:
            nbytes += _hbm(out_shape)
    return nbytes


def _instr_bytes(ins: _Instr, m: _Module) -> int:
    op = ins.opcode
    if op in _SLICES:  # reads the slice of its operand, writes it
        src = _operand_shape(ins, 0, m)
        return (_hbm(ins.shape) if _hbm(src) else 0) + _hbm(ins.shape)
    if op == "dynamic-update-slice":  # in place: reads the update, writes it into the buffer
        upd = _operand_shape(ins, 1, m)
        return 2 * _hbm(upd) if _hbm(ins.shape) else _hbm(upd)
    if op == "fusion":
        return _fusion_bytes(ins, m)
    return _hbm(ins.shape) + sum(_hbm(_operand_shape(ins, i, m)) for i in range(len(ins.operands)))


# The deepest a while is walked into (`_Simulator.cost`): one deeper costs nothing.
_WHILE_DEPTH = 8
# Whether an op's bisection may walk its computation alone (`estimate_overlap`; tests turn it
# off to compare with the whole program's walk)
_BISECT_ALONE = True


# What of a `Roofline` `_kernel_ps` reads: estimates of one parse whose models agree on these
# share their instructions' times (`ParsedHlo.roofline`)
_COMPUTE_FIELDS = ("peak_flops_bf16", "peak_flops_f32", "hbm_Bps", "compute_scale",
                   "kernel_floor_ps")


def _roofline_of(got: Any, model: Roofline) -> dict[str, int]:
    """The instruction times of the parse `got` on `model`'s compute, found so far."""
    return got.roofline.setdefault(tuple(getattr(model, f) for f in _COMPUTE_FIELDS), {})


def _kernel_ps(ins: _Instr, m: _Module, model: Roofline) -> int:
    """Time of one instruction that is not a loop or call: roofline, at least the floor.
    Reads of `model` only its `_COMPUTE_FIELDS`."""
    op = ins.opcode
    if op in _FREE or op.endswith(("-start", "-done", "-update")) or op in ("send", "recv"):
        return 0
    lo, hi = 0, 0
    f, is32 = _matmul_flops(ins, m)
    if is32:
        hi += f
    else:
        lo += f
    if op in ("fusion", "custom-call"):
        for callee in _CALLS_ONE_RE.findall(ins.attrs):
            a, b = _fusion_flops(callee, m)
            lo, hi = lo + a, hi + b
    t_flops = lo / model.peak_flops_bf16 + hi / model.peak_flops_f32
    t_mem = _instr_bytes(ins, m) / model.hbm_Bps
    t = max(t_flops, t_mem) * PS_PER_S * model.compute_scale
    return max(int(round(t)), int(model.kernel_floor_ps))


@dataclasses.dataclass
class _Rec:
    """One transfer's simulated execution (picoseconds from its computation's start)."""

    issue: int
    begin: int
    end: int
    done_at: int
    stall: int
    hidden: int
    done_found: bool
    direction: str = ""


@dataclasses.dataclass
class _Sim:
    total: int
    busy: float
    recs: dict[str, _Rec]
    segs: list[tuple[int, int, float]] = dataclasses.field(default_factory=list)
    gaps: int = 0  # launch gaps (Roofline.kernel_gap_ps) in `total`
    # Waits of the compute stream (at dones of copies and of device-side async ops, and at
    # synchronous copies): (start, end), neither compute nor launch gap.
    waits: list[tuple[int, int]] = dataclasses.field(default_factory=list)


class _Simulator:
    """The schedule walk of the module docstring, for one setting of link bandwidths."""

    def __init__(self, m: _Module, ops: dict[str, OffloadOp], model: Roofline,
                 bw: dict[str, float], static: dict[str, int],
                 streams: dict[str, Any] | None = None, roof: dict[str, int] | None = None):
        self.m, self.ops, self.model, self.bw, self.static = m, ops, model, bw, static
        # instruction name -> `_kernel_ps` of that instruction (`m.by_name`'s) on this
        # model's compute, shared by the estimates of one parse (`ParsedHlo.roofline`)
        self.roof = {} if roof is None else roof
        # async op -> its stream (`overlap.hlo.streams`); None: every host copy on a stream of
        # its own and device-side async ops free (the model before streams were known)
        self.streams = streams
        self.cache: dict[str, _Sim] = {}
        self.gaps = 0  # launch gaps added by cost() since the current run() began

    def cost(self, ins: _Instr, depth: int) -> tuple[int, float]:
        """(elapsed, busy) of one instruction on the compute stream."""
        op = ins.opcode
        if op == "while":
            bm = _BODY_RE.search(ins.attrs)
            if not bm or depth > _WHILE_DEPTH:
                return 0, 0.0
            trip = _TRIP_RE.search(ins.attrs)
            n = int(trip.group(1)) if trip else derived_trip_count(ins, self.m.comps,
                                                                   self.m.by_name)
            s = self.run(bm.group(1), depth + 1)
            self.gaps += (n or 1) * s.gaps
            return (n or 1) * s.total, (n or 1) * s.busy
        if op in ("call", "conditional"):
            el, busy = 0, 0.0
            for callee in _CALLS_ONE_RE.findall(ins.attrs):
                s = self.run(callee, depth + 1)
                el, busy = el + s.total, busy + s.busy
                self.gaps += s.gaps
            return el, busy
        t = self.static.get(ins.name)
        if t is None:
            # (the roofline an earlier estimate of this parse found, on the same compute:
            # a time depends on the instruction, the module and these alone, not the link)
            canonical = self.m.by_name.get(ins.name) is ins
            t = self.roof.get(ins.name) if canonical else None
            if t is None:
                t = _kernel_ps(ins, self.m, self.model)
                if canonical:
                    self.roof[ins.name] = t
            self.static[ins.name] = t
        gap = int(self.model.kernel_gap_ps) if t > 0 else 0
        self.gaps += gap
        return t + gap, float(t)

    def device_op_ps(self, ins: _Instr) -> int:
        """Time of a device-side async op (an XLA:GPU `fusion-start` of a dynamic slice, a
        device `copy-start`) on its stream: the roofline of what it runs."""
        t = self.static.get(ins.name)
        if t is not None:
            return t
        out = ins.shape[1] if isinstance(ins.shape, list) and len(ins.shape) > 1 else ins.shape
        cm = _CALLS_ONE_RE.search(ins.attrs)
        comp = self.m.comps.get(cm.group(1), []) if cm else []
        root = next((i for i in comp if i.root), None)
        if ins.opcode == "copy-start":
            t = _kernel_ps(ins.replaced(opcode="copy", shape=out), self.m,
                           self.model)
        elif ins.opcode == "fusion-start" and comp:  # calls= names the fused computation
            t = _kernel_ps(ins.replaced(opcode="fusion", shape=out), self.m,
                           self.model)
        elif root is not None and not is_async_start(root.opcode):  # async-start's wrapped op
            t = _kernel_ps(root, self.m, self.model)
        else:  # nothing to cost it by: free, as ops off the streams are
            t = 0
        self.static[ins.name] = t
        return t

    def run(self, comp_name: str, depth: int = 0) -> _Sim:
        if comp_name in self.cache:
            return self.cache[comp_name]
        floor = int(self.model.kernel_floor_ps)
        on_stream = self.model.copies_on_compute_stream
        streams = None if on_stream else self.streams
        link = Streams(self.bw, self.model.duplex_share, self.model.full_duplex)
        outer_gaps, self.gaps = self.gaps, 0
        t = 0
        busy = 0.0
        segs: list[tuple[int, int, float]] = []  # (start, end, busy density) of compute
        waits: list[tuple[int, int]] = []
        inflight: dict[str, int] = {}
        device: set[str] = set()  # device-side async ops in flight (on streams)
        recs: dict[str, _Rec] = {}
        for ins in self.m.comps.get(comp_name, []):
            o = self.ops.get(ins.name)
            if o is not None:
                link.add(ins.name, t + floor, stream=(streams or {}).get(ins.name),
                         direction=o.direction, nbytes=o.layout_bytes or o.bytes)
                if o.is_async and not on_stream:
                    inflight[ins.name] = t
                else:  # synchronous, or on the compute stream: the stream waits for it
                    begin, end = link.finish(ins.name)
                    recs[ins.name] = _Rec(t, begin, end, t, end - t, 0, True, o.direction)
                    if end > t:
                        waits.append((t, end))
                    t = end
                continue
            if streams is not None and is_async_start(ins.opcode):
                link.add(ins.name, t + floor, stream=streams.get(ins.name),
                         device_ps=self.device_op_ps(ins))
                device.add(ins.name)
                continue
            if ins.opcode.endswith("-done") and ins.operands and ins.operands[0] in device:
                device.discard(ins.operands[0])
                _, end = link.finish(ins.operands[0])
                if end > t:  # the compute stream waits for the op on its stream
                    waits.append((t, end))
                    t = end
                continue
            if ins.opcode.endswith("-done") and ins.operands and ins.operands[0] in inflight:
                name = ins.operands[0]
                issue = inflight.pop(name)
                begin, end = link.finish(name)
                recs[name] = _Rec(issue, begin, end, t, max(0, end - t), 0, True,
                                  self.ops[name].direction)
                if end > t:
                    waits.append((t, end))
                t = max(t, end)
                continue
            el, b = self.cost(ins, depth)
            if el > 0:
                segs.append((t, t + el, b / el))
                busy += b
                t += el
        for name, issue in inflight.items():  # done not in this computation
            begin, end = link.finish(name)
            recs[name] = _Rec(issue, begin, end, t, 0, 0, False, self.ops[name].direction)
        for r in recs.values():
            h = 0.0
            for s, e, dens in segs:
                if e <= r.issue:
                    continue
                if s >= r.end:
                    break
                h += (min(e, r.end) - max(s, r.issue)) * dens
            r.hidden = min(r.end - r.issue, int(round(h)))
            # Sub-picosecond rounding is not exposure.
            if r.end - r.issue - r.hidden <= max(1, (r.end - r.issue) // 10**9):
                r.hidden = r.end - r.issue
        sim = _Sim(t, busy, recs, segs, self.gaps, waits)
        self.gaps = outer_gaps
        self.cache[comp_name] = sim
        return sim


def _exposed_wall(sim: _Sim, direction: str | None) -> int:
    """Wall time of one run of a computation during which at least one of its transfers (of
    `direction`, or any) is in flight and its compute stream is not busy: |union \\ compute|,
    as `overlap.analysis.overlap` measures a step's `exposed_wall_ps`. Concurrent copies count
    once, so the sum never exceeds the computation's time."""
    iv = sorted((r.issue, r.end) for r in sim.recs.values()
                if direction is None or r.direction == direction)
    merged: list[list[int]] = []
    for a, b in iv:
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        elif b > a:
            merged.append([a, b])
    total = 0.0
    for a, b in merged:
        cov = 0.0
        for s, e, dens in sim.segs:
            if e <= a:
                continue
            if s >= b:
                break
            cov += (min(e, b) - max(s, a)) * dens
        total += max(0.0, (b - a) - cov)
    return int(round(total))


def _why_not(sim_hi: _Sim | None, name: str, comp: list[_Instr], beside: list[str],
             floor_ps: int) -> str:
    """Why copy `name` hides at no bandwidth, read from the walk with its link at the
    bisection's highest bandwidth (where the copy takes its setup and nothing else)."""
    if not beside:
        return "nothing scheduled beside it"
    r = sim_hi.recs.get(name) if sim_hi is not None else None
    if sim_hi is not None and r is not None and floor_ps:
        # Waits at other copies' dones inside its setup window: the compute stream is idle
        # there, waiting for a copy issued before this one (queued ahead of it or not).
        waits = [rr for nn, rr in sim_hi.recs.items()
                 if nn != name and rr.stall > 0 and rr.done_at < r.end
                 and rr.done_at + rr.stall > r.issue]
        if waits:
            other = next(nn for nn, rr in sim_hi.recs.items() if rr is waits[0])
            done = next((i.name for i in comp if i.opcode.endswith("-done")
                         and other in i.operands), other)
            return (f"during its {floor_ps / 1e6:g} us setup the compute stream waits at "
                    f"{done} for an earlier copy, so that part is exposed at any bandwidth")
    return "the work beside it is shorter than the copy's setup at any bandwidth"


def _done_of(start: _Instr, comp: list[_Instr]) -> int | None:
    for j, ins in enumerate(comp):
        if ins.opcode.endswith("-done") and start.name in ins.operands:
            return j
    return None


def _find_entry(comps: dict[str, list[_Instr]], entry: str | None) -> str | None:
    if entry in comps:
        return entry
    return next(reversed(comps), None) if comps else None


def _fmt_rate(bps: float) -> str:
    return f"{bps / 1e9:.1f} GB/s"


def _streams_info(streams: dict[str, Any] | None, source: str,
                  model: Roofline) -> dict[str, Any]:
    """The estimate's `streams` entry: how async ops were put on streams (JSON-safe)."""
    if model.copies_on_compute_stream:
        return {"modelled": False, "source": "command buffers: copies on the compute stream"}
    if streams is None:
        return {"modelled": False, "source": source or "not known: each async op on a stream "
                "of its own"}
    return {"modelled": True, "source": source, "count": len(set(streams.values())),
            "ops": {k: str(v) for k, v in sorted(streams.items())}}


def assumptions(model: Roofline, link_name: str = "", tiled: bool = False,
                calibration: str = "", streams: dict[str, Any] | None = None,
                streams_source: str = "") -> list[str]:
    """What an estimate with `model` assumes, one sentence each (printed next to it)."""
    if calibration:
        out = [f"compute: {calibration}"]
    else:
        out = ["compute: per instruction max(FLOPs / peak FLOP/s, bytes it really reads and "
               "writes / HBM bandwidth), at the data sheet's peaks (achieved rates are lower)"
               + (f", times {model.compute_scale:.3g}" if model.compute_scale != 1.0 else "")]
    if model.kernel_gap_ps:
        out.append(f"the compute stream idles {model.kernel_gap_ps / 1e6:.3g} us after each "
                   "kernel (launch gaps, measured by the calibration)")
    if model.kernel_floor_ps:
        out.append(f"each kernel takes at least {model.kernel_floor_ps / 1e6:g} us (launch + "
                   "tail), and each copy starts that long after it is issued")
    d2h, h2d = model.link_Bps("D2H"), model.link_Bps("H2D")
    link = (f"host link {_fmt_rate(d2h)} each way alone" if d2h == h2d
            else f"host link {_fmt_rate(d2h)} D2H, {_fmt_rate(h2d)} H2D alone")
    if not model.full_duplex:
        both = "D2H and H2D take turns (half duplex)"
    elif model.duplex_share < 1.0:
        both = (f"while both directions move, each runs at {100 * model.duplex_share:.0f}% of "
                "its rate alone (partial duplex)")
    else:
        both = "D2H and H2D move at once at full rate (full duplex)"
    out.append(link + (f" ({link_name})" if link_name else "") + "; one direction's copies "
               "are served one at a time in issue order; " + both)
    if model.copies_on_compute_stream:
        out.append("command buffers on (XLA:GPU's default): every copy runs on the compute "
                   "stream, so no copy hides behind compute")
    if tiled:
        out.append("bytes in the tiled layout the compiler chose (padding included)")
    if model.copies_on_compute_stream:
        pass
    elif streams is not None:
        out.append(f"async ops on {len(set(streams.values()))} streams ({streams_source}); "
                   "each stream runs its ops one at a time in issue order, so an op (a "
                   "device-side slice too) waits for a host copy issued before it on its stream")
    else:
        out.append("each host copy on a stream of its own and device-side async ops free "
                   + (f"({streams_source})" if streams_source else
                      "(which XLA:GPU stream each async op runs on is not known without the "
                      "program's HloProto)"))
    out.append("not modelled: collectives, host work, caches")
    return out


def estimate_overlap(hlo_text: str, model: Roofline, *, link_name: str = "",
                     kernel_ps: dict[str, int] | None = None,
                     calibration: str = "", streams: dict[str, Any] | None = None,
                     streams_source: str = "") -> dict[str, Any]:
    """The predicted overlap of every planned host transfer in `hlo_text` (see the module
    docstring). Returns a JSON-safe dict: `ops` (one row per transfer), `per_step` totals per
    direction and overall, `model` (the numbers used) and `assumptions`.

    `kernel_ps`: times of instructions by name (picoseconds per execution, e.g. measured by a
    calibration, `overlap.plan.calibrate`), used in place of their roofline time;
    `calibration` says where they come from (the compute assumption).

    `streams`: the stream of each async op (`overlap.hlo.streams.execution_streams`: XLA:GPU's
    execution streams, read from the program's HloProto); ops on one stream run one at a time
    in issue order, device-side async ops included, and `streams_source` says where the
    streams come from. None: each host copy on a stream of its own, device-side async ops
    free (said in the assumptions)."""
    got = parsed(hlo_text, uncommented=True)  # (once per text within `parses_kept`)
    comps, entry = got.comps, got.entry
    m = _Module(comps, {i.name: i for instrs in comps.values() for i in instrs})
    inv = offload_inventory(hlo_text)
    ops = {o.name: o for o in inv.ops}
    entry_name = _find_entry(comps, entry)
    roof = _roofline_of(got, model)
    static: dict[str, int] = {k: max(0, int(v)) for k, v in (kernel_ps or {}).items()
                              if k in m.by_name}
    base_bw = {"D2H": model.link_Bps("D2H"), "H2D": model.link_Bps("H2D")}

    def simulate(bw: dict[str, float]) -> tuple[_Simulator, _Sim | None]:
        s = _Simulator(m, ops, model, bw, static, streams, roof)
        top = s.run(entry_name) if entry_name else None
        for o in inv.ops:  # computations the entry does not reach (should not happen)
            if o.computation not in s.cache:
                s.run(o.computation)
        return s, top

    sim, top = simulate(base_bw)

    def rec_of(s: _Simulator, o: OffloadOp) -> _Rec | None:
        c = s.cache.get(o.computation)
        return c.recs.get(o.name) if c else None

    # One op's hidden time at a bandwidth is its computation's walk (`_Simulator.run`), which
    # is the same whatever depth it starts at where no walk can reach a while past the cut
    # (`cost`; the instructions' times, `static`, are the ones the walk above found): the
    # bisection then walks that computation alone, not the whole program each time (a
    # program of two scanned loops: ~100 walks of all its ~400 instructions, 3x fewer).
    deep = nesting(comps) if _BISECT_ALONE else None
    alone = deep is not None and deep <= _WHILE_DEPTH

    def hidden_at(o: OffloadOp, bw: float) -> bool:
        if alone:
            s = _Simulator(m, ops, model, {**base_bw, o.direction: bw}, static, streams, roof)
            s.run(o.computation)
        else:
            s, _ = simulate({**base_bw, o.direction: bw})
        r = rec_of(s, o)
        return r is not None and r.hidden >= r.end - r.issue

    def break_even(o: OffloadOp) -> float | None:
        if not o.is_async or model.copies_on_compute_stream or not hidden_at(o, _BW_HI):
            return None
        lo, hi = math.log(_BW_LO), math.log(_BW_HI)
        if hidden_at(o, _BW_LO):
            return _BW_LO
        for _ in range(_BISECT_STEPS):
            mid = (lo + hi) / 2
            if hidden_at(o, math.exp(mid)):
                hi = mid
            else:
                lo = mid
        return math.exp(hi)

    rows: list[dict[str, Any]] = []
    for o in inv.ops:
        comp = comps.get(o.computation, [])
        idx = next((j for j, ins in enumerate(comp) if ins.name == o.name), None)
        compute_ps = 0
        beside: list[str] = []
        if o.is_async and idx is not None:
            done = _done_of(comp[idx], comp)
            for ins in comp[idx + 1:done if done is not None else len(comp)]:
                el, _ = sim.cost(ins, 0)
                if el:
                    beside.append(ins.name)
                compute_ps += el
        r = rec_of(sim, o)
        moved = o.layout_bytes or o.bytes
        transfer_ps = int(model.kernel_floor_ps) + int(round(
            moved / base_bw[o.direction] * PS_PER_S))
        duration = (r.end - r.issue) if r else transfer_ps
        hidden = r.hidden if r else 0
        be = break_even(o)
        why = None
        if be is None:
            if not o.is_async:
                why = "synchronous copy"
            elif model.copies_on_compute_stream:
                why = ("command buffers: the copy runs on the compute stream, so nothing runs "
                       "beside it")
            else:
                s_hi, _ = simulate({**base_bw, o.direction: _BW_HI})
                why = _why_not(s_hi.cache.get(o.computation), o.name, comp, beside,
                               int(model.kernel_floor_ps))
        rows.append({
            "op": o.name, "direction": o.direction, "bytes": o.bytes, "layout_bytes": moved,
            "executions": o.executions, "trip_count_known": o.trip_count_known,
            "is_async": o.is_async, "transfer_ps": transfer_ps, "duration_ps": duration,
            "queued_ps": max(0, r.begin - r.issue - int(model.kernel_floor_ps)) if r else 0,
            # Moving alone (begin to end): what a GPU capture's copy activity spans.
            "moving_ps": (r.end - r.begin) if r else transfer_ps - int(model.kernel_floor_ps),
            "compute_ps": compute_ps, "hidden_ps": hidden, "exposed_ps": duration - hidden,
            "stall_ps": r.stall if r else 0,
            "hidden_fraction": 1.0 if duration == 0 else hidden / duration,
            "break_even_Bps": be,
            "never_hides": be is None,
            "why_not": why,
            "done_found": r.done_found if r else False,
            "scheduled_beside": beside[:8], "scheduled_beside_count": len(beside),
        })
    per_step: dict[str, dict[str, Any]] = {}
    for d in ("D2H", "H2D", "all"):
        sel = [r for r in rows if d == "all" or r["direction"] == d]
        tr = sum(r["duration_ps"] * r["executions"] for r in sel)
        hid = sum(r["hidden_ps"] * r["executions"] for r in sel)
        never = [r["op"] for r in sel if r["never_hides"]]
        bes = [r["break_even_Bps"] for r in sel if r["break_even_Bps"] is not None]
        per_step[d] = {"transfers": sum(r["executions"] for r in sel),
                       "bytes": sum(r["bytes"] * r["executions"] for r in sel),
                       "layout_bytes": sum(r["layout_bytes"] * r["executions"] for r in sel),
                       "transfer_ps": tr, "hidden_ps": hid, "exposed_ps": tr - hid,
                       "stall_ps": sum(r["stall_ps"] * r["executions"] for r in sel),
                       "hidden_fraction": None if not sel else (1.0 if tr == 0 else hid / tr),
                       "never_hides": never,
                       "break_even_Bps": (max(bes) if bes else None) if sel and not never
                       else None}
        # Wall time with a copy in flight and no compute (concurrent copies once): at most
        # the step, unlike the summed per-copy exposed_ps.
        wall = 0
        for cname in {o.computation for o in inv.ops
                      if d == "all" or o.direction == d}:
            c = sim.cache.get(cname)
            if c is not None:
                n = max((o.executions for o in inv.ops if o.computation == cname), default=1)
                wall += _exposed_wall(c, None if d == "all" else d) * max(n, 1)
        per_step[d]["exposed_wall_ps"] = wall
        if d != "all":
            per_step[d]["link_Bps"] = base_bw[d]
    tiled = any(a.tile for instrs in comps.values() for i in instrs for a in _flatten(i.shape))
    return {
        "kind": "estimate",
        "note": "predicted from the compiled schedule (roofline + host-link model), "
                "not a measurement",
        "model": {**dataclasses.asdict(model), "h2d_link_Bps": base_bw["H2D"]},
        "assumptions": assumptions(model, link_name, tiled, calibration,
                                   streams=streams, streams_source=streams_source),
        "streams": _streams_info(streams, streams_source, model),
        "ops": rows, "per_step": per_step,
        "trip_counts_known": inv.trip_counts_known,
        # The slowest host link (both directions) at which every async transfer still hides.
        "break_even_Bps": per_step["all"]["break_even_Bps"],
        "step_ps": top.total if top else None,
        "busy_ps": int(round(top.busy)) if top else None,
        # Waits at copies' dones only (not the calibrated launch gaps, which are neither
        # compute nor copy).
        "stall_ps": (top.total - int(round(top.busy)) - top.gaps) if top else None,
        "gap_ps": top.gaps if top else None,
    }


def dumps(est: dict[str, Any]) -> str:
    return json.dumps(est, indent=2, sort_keys=True)



def predicted_timeline(hlo_text: str, model: Roofline,
                       streams: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The estimate's own walk of the computations that hold planned transfers, laid out for
    drawing (same costing and link model as `estimate_overlap`; nothing is costed apart).

    One entry per computation holding planned transfers, most transfer executions first: the
    entry computation when a step's copies sit at top level, else a loop body (a scan's
    offload: one iteration, run `executions` times per step). Empty when nothing is planned.

    `compute`: the compute stream's busy intervals `[(start_ps, end_ps)]` from the
    computation's start: the whole computation minus the waits at transfer dones (and the
    time of synchronous copies, and the waits at device-side async ops' dones when `streams`
    are given, as `estimate_overlap` takes them). `copies`: per transfer `op`, `direction`,
    `bytes`, `issue_ps` (its start op), `begin_ps` (when it starts moving), `end_ps`
    (complete), `done_ps` (its done op), `hidden_ps`, `exposed_ps` (as `estimate_overlap`
    computes them)."""
    got = parsed(hlo_text, uncommented=True)  # (once per text within `parses_kept`)
    comps, entry = got.comps, got.entry
    m = _Module(comps, {i.name: i for instrs in comps.values() for i in instrs})
    inv = offload_inventory(hlo_text)
    if not inv.ops:
        return []
    ops = {o.name: o for o in inv.ops}
    bw = {"D2H": model.link_Bps("D2H"), "H2D": model.link_Bps("H2D")}
    sim = _Simulator(m, ops, model, bw, {}, streams, _roofline_of(got, model))
    entry_name = _find_entry(comps, entry)
    if entry_name:
        sim.run(entry_name)
    per_comp: dict[str, int] = {}
    for o in inv.ops:
        per_comp[o.computation] = per_comp.get(o.computation, 0) + max(o.executions, 1)
    out = []
    for comp in sorted(per_comp, key=lambda c: (-per_comp[c], c)):
        s = sim.run(comp)
        mine = [o for o in inv.ops if o.computation == comp]
        waits = sorted(s.waits)
        compute: list[tuple[int, int]] = []
        t = 0
        for a, b in waits:
            if a > t:
                compute.append((t, a))
            t = max(t, b)
        if s.total > t:
            compute.append((t, s.total))
        copies = []
        for o in mine:
            r = s.recs.get(o.name)
            if r is not None:
                copies.append({"op": o.name, "direction": o.direction, "bytes": o.bytes,
                               "is_async": o.is_async, "issue_ps": r.issue,
                               "begin_ps": r.begin, "end_ps": r.end, "done_ps": r.done_at,
                               "hidden_ps": r.hidden, "exposed_ps": r.end - r.issue - r.hidden})
        out.append({"computation": comp, "is_entry": comp == entry_name,
                    "executions": max((o.executions for o in mine), default=1),
                    "total_ps": s.total, "compute": compute, "copies": copies})
    return out
