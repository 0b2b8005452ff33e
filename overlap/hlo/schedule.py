"""Predicted overlap of host transfers from a compiled program's schedule (an estimate).

For every planned transfer to or from host memory (the offload inventory's ops), take the work
the compiler scheduled between the transfer's start and its done in the optimized module
(printed in schedule order: `is_scheduled=true`), cost each of those instructions with a
roofline model, and set that against the transfer's time on the host link:

* `transfer_ps` = bytes / host link bandwidth (one direction).
* `compute_ps` = sum over the instructions between start and done of
  max(FLOPs / peak FLOP/s, bytes touched / HBM bandwidth). FLOPs are counted for matrix
  products only (`dot`, `convolution`, cuBLAS/cuDNN custom calls, and those inside fusions):
  2 x output elements x contracted size. Bytes touched are the instruction's operands plus its
  result. A `while` between start and done counts its body times its trip count.
* `hidden_ps` = min(transfer, compute) for an async transfer, 0 for a synchronous one;
  `exposed_ps` = transfer - hidden. `hidden_fraction` = hidden / transfer (1 for an empty
  transfer). Per step: each op times its executions per program run.
* `break_even_Bps` = bytes / compute time: below this host bandwidth the transfer can no longer
  hide behind the work scheduled beside it (None when nothing is scheduled beside it).

All times are integer picoseconds. This is an ESTIMATE, never a measurement, and every view
says so. Blind spots: the roofline ignores launch overheads, cache effects and achieved (not
peak) throughput, so compute is optimistic and hidden fractions lean high; transfers that are
in flight at the same time share the link but are costed as if each had it alone (so exposure
leans low when several overlap); work on other streams/queues that the runtime runs
concurrently is not counted; collectives and other async ops between start and done cost 0.
A later real capture of the same program joins on the op names (`dynamic-update-slice-start.1`,
`copy-start.3`, ...), so predicted vs measured can be shown side by side.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

from overlap.hlo.program import (
    _BODY_RE,
    _COMMENT_RE,
    _TRIP_RE,
    _bytes,
    _flatten,
    _Instr,
    _parse_module,
    derived_trip_count,
    offload_inventory,
)

PS_PER_S = 10**12

# Opcodes that take no device time of their own in the model.
_FREE = {"parameter", "constant", "get-tuple-element", "tuple", "bitcast", "after-all",
         "partition-id", "replica-id", "opt-barrier", "add-dependency"}
_LHS_CONTRACT_RE = re.compile(r"lhs_contracting_dims=\{([\d,\s]*)\}")
_JSON_CONTRACT_RE = re.compile(r'"lhs_contracting_dimensions"\s*:\s*\[([^\]]*)\]')
_DIM_LABELS_RE = re.compile(r"dim_labels=([\w]+)_([\w]+)->([\w]+)")
_CALLS_ONE_RE = re.compile(r"\b(?:calls|to_apply)=%?([\w.\-]+)")
_GEMM_TARGETS = ("__cublas$gemm", "__cublas$lt$matmul", "__cudnn$convForward")


@dataclasses.dataclass(frozen=True)
class Roofline:
    """The machine model: peaks the estimate divides by (printed next to every estimate)."""

    hbm_Bps: float
    peak_flops_bf16: float
    peak_flops_f32: float
    host_link_Bps: float


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


def _operand_shape(ins: _Instr, i: int, m: _Module):
    if i < len(ins.operand_shapes) and ins.operand_shapes[i] is not None:
        return ins.operand_shapes[i]
    src = m.by_name.get(ins.operands[i]) if i < len(ins.operands) else None
    return src.shape if src is not None else None


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
        mm = _DIM_LABELS_RE.search(ins.attrs)
        rhs = _operand_shape(ins, 1, m)
        rhs = _first(rhs) if rhs is not None else None
        if mm and "f" in mm.group(1):
            fi = mm.group(1).index("f")
            k = lhs.dims[fi] if fi < len(lhs.dims) else 1
            if rhs is not None:  # spatial window dims of the kernel (digits in its labels)
                for j, ch in enumerate(mm.group(2)):
                    if ch.isdigit() and j < len(rhs.dims):
                        k *= rhs.dims[j]
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


def _instr_ps(ins: _Instr, m: _Module, model: Roofline, depth: int = 0) -> int:
    """Roofline time of one scheduled instruction, integer picoseconds."""
    op = ins.opcode
    if op in _FREE or op.endswith(("-start", "-done")) or op in ("send", "recv"):
        return 0
    if op == "while":
        bm = _BODY_RE.search(ins.attrs)
        if not bm or depth > 8:
            return 0
        trip = _TRIP_RE.search(ins.attrs)
        n = int(trip.group(1)) if trip else derived_trip_count(ins, m.comps, m.by_name)
        body = m.comps.get(bm.group(1), [])
        return (n or 1) * sum(_instr_ps(i, m, model, depth + 1) for i in body)
    if op in ("call", "conditional"):
        total = 0
        for callee in _CALLS_ONE_RE.findall(ins.attrs):
            total += sum(_instr_ps(i, m, model, depth + 1) for i in m.comps.get(callee, []))
        return total
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
    nbytes = _bytes(ins.shape)
    for i in range(len(ins.operands)):
        s = _operand_shape(ins, i, m)
        if s is not None:
            nbytes += _bytes(s)
    t_flops = lo / model.peak_flops_bf16 + hi / model.peak_flops_f32
    t_mem = nbytes / model.hbm_Bps
    return int(round(max(t_flops, t_mem) * PS_PER_S))


def _done_of(start: _Instr, comp: list[_Instr]) -> int | None:
    for j, ins in enumerate(comp):
        if ins.opcode.endswith("-done") and start.name in ins.operands:
            return j
    return None


def estimate_overlap(hlo_text: str, model: Roofline) -> dict[str, Any]:
    """The predicted overlap of every planned host transfer in `hlo_text` (see the module
    docstring). Returns a JSON-safe dict: `ops` (one row per transfer), `per_step` totals per
    direction and overall, and `model` (the numbers used)."""
    comps, _ = _parse_module(_COMMENT_RE.sub("", hlo_text))
    m = _Module(comps, {i.name: i for instrs in comps.values() for i in instrs})
    inv = offload_inventory(hlo_text)
    rows = []
    for o in inv.ops:
        comp = comps.get(o.computation, [])
        idx = next((j for j, ins in enumerate(comp) if ins.name == o.name), None)
        compute_ps = 0
        beside: list[str] = []
        if o.is_async and idx is not None:
            done = _done_of(comp[idx], comp)
            if done is not None:
                for ins in comp[idx + 1:done]:
                    t = _instr_ps(ins, m, model)
                    if t:
                        beside.append(ins.name)
                    compute_ps += t
        transfer_ps = int(round(o.bytes / model.host_link_Bps * PS_PER_S))
        hidden_ps = min(transfer_ps, compute_ps) if o.is_async else 0
        rows.append({
            "op": o.name, "direction": o.direction, "bytes": o.bytes,
            "executions": o.executions, "trip_count_known": o.trip_count_known,
            "is_async": o.is_async, "transfer_ps": transfer_ps, "compute_ps": compute_ps,
            "hidden_ps": hidden_ps, "exposed_ps": transfer_ps - hidden_ps,
            "hidden_fraction": 1.0 if transfer_ps == 0 else hidden_ps / transfer_ps,
            "break_even_Bps": ((o.bytes * PS_PER_S / compute_ps) if compute_ps and o.is_async
                               else None),
            "scheduled_beside": beside[:8], "scheduled_beside_count": len(beside),
        })
    per_step: dict[str, dict[str, Any]] = {}
    for d in ("D2H", "H2D", "all"):
        sel = [r for r in rows if d == "all" or r["direction"] == d]
        tr = sum(r["transfer_ps"] * r["executions"] for r in sel)
        hid = sum(r["hidden_ps"] * r["executions"] for r in sel)
        per_step[d] = {"transfers": sum(r["executions"] for r in sel),
                       "bytes": sum(r["bytes"] * r["executions"] for r in sel),
                       "transfer_ps": tr, "hidden_ps": hid, "exposed_ps": tr - hid,
                       "hidden_fraction": None if tr == 0 else hid / tr}
    be = [r["break_even_Bps"] for r in rows if r["break_even_Bps"] is not None]
    return {
        "kind": "estimate",
        "note": "roofline estimate from the compiled schedule, not a measurement",
        "model": dataclasses.asdict(model), "ops": rows, "per_step": per_step,
        "trip_counts_known": inv.trip_counts_known,
        # The slowest host link at which every async transfer still hides.
        "break_even_Bps": max(be) if be else None,
    }


def dumps(est: dict[str, Any]) -> str:
    return json.dumps(est, indent=2, sort_keys=True)
