"""Host compute and pinned host memory of a step's compiled program (issue 33, items 3 and 4).

**Host compute** (`host_compute_ops`): instructions of the compiled HLO that run on the host.
XLA converts device ops on host-memory buffers into host compute ("Found an instruction ...
which does device compute in host memory space. Converting into host compute"), which is slow
and found late. An instruction is listed when

* it carries the frontend attribute `_xla_compute_type="host"` (what `compute_on("device_host")`
  and XLA's conversion put on host computations), or
* its result or an inline operand shape lies in host memory space S(5) and its opcode is not one
  that only moves or plumbs data (parameters, tuples, copies, (async) dynamic-(update-)slices,
  fusion-start/done, custom-calls that allocate or annotate, loops, calls): device compute in
  host memory space, which XLA then converts.

Blind spot: host ops a runtime runs outside the compiled program are not in its HLO.

**Pinned host memory** (`pinned_host_peak`): the peak of the heap simulation of the buffers in
host memory space (buffer-assignment color 5, `overlap.hlo.program.memory_timeline`): the
pinned host bytes one step holds at once, program order. Against **the cap in force**
(`cap_in_force`): XLA's GPU runtime caps its pinned host pool at
`XLA_PJRT_GPU_HOST_MEMORY_LIMIT_GB` (64 GB when unset); the value comes from run.json's
recorded environment when it has one, else it is the default, and `cap_source` says which. Other
backends have no such cap (cap None). `fraction` = peak / cap, in [0, inf): above 1 the step
cannot get its pinned buffers.
"""

from __future__ import annotations

import re
from typing import Any

HOST_COLOR = 5  # XLA's host memory space, S(5), is buffer-assignment color 5
CAP_ENV = "XLA_PJRT_GPU_HOST_MEMORY_LIMIT_GB"
DEFAULT_CAP_GB = 64
_GB = 1 << 30  # XLA reads the limit in GiB (value * 1024^3 bytes)
_HOST_ATTR = re.compile(r'_xla_compute_type\s*=\s*"host"')
# Opcodes that move data to or from host memory, or only plumb it: never host compute.
_MOVES = frozenset({
    "parameter", "tuple", "get-tuple-element", "copy", "copy-start", "copy-done", "bitcast",
    "dynamic-slice", "dynamic-update-slice", "fusion-start", "fusion-done", "async-start",
    "async-update", "async-done", "custom-call", "while", "conditional", "call", "opt-barrier",
    "constant", "send", "send-done", "recv", "recv-done", "dynamic-slice-start",
    "dynamic-slice-done", "dynamic-update-slice-start", "dynamic-update-slice-done"})


def host_compute_ops(hlo_text: str, top: int = 50) -> dict[str, Any]:
    """`{count, ops: [{name, opcode, computation, shape, why}], source}` (module docstring)."""
    from overlap.hlo.program import _on_host, _parse_module, offload_inventory

    comps, _entry = _parse_module(hlo_text)
    try:
        moves = {o.name for o in offload_inventory(hlo_text).ops}
    except Exception:  # noqa: BLE001 - without the inventory a fusion is judged on its own
        moves = set()
    ops = []
    for comp, instrs in comps.items():
        for i in instrs:
            why = None
            if _HOST_ATTR.search(i.attrs):
                why = 'frontend attribute _xla_compute_type="host"'
            elif i.opcode not in _MOVES and i.name not in moves and (
                    _on_host(i.shape) or any(s is not None and _on_host(s)
                                             for s in i.operand_shapes)):
                why = "device compute in host memory space S(5) (XLA converts it to host compute)"
            if why:
                ops.append({"name": i.name, "opcode": i.opcode, "computation": comp,
                            "shape": str(i.shape) if not isinstance(i.shape, list)
                            else "(tuple)", "why": why})
    return {"count": len(ops), "ops": ops[:top], "source": "compiled HLO"}


def pinned_host_peak(hlo_proto: bytes | None) -> dict[str, Any]:
    """`{bytes, largest: [[buffer, bytes]...], source}`; bytes None (source says why) without
    a buffer assignment, 0 when the program holds no host-memory buffers."""
    if not hlo_proto:
        return {"bytes": None, "largest": [], "source": "no HLO proto with a buffer assignment"}
    from overlap.hlo.program import HloProto, memory_timeline

    try:
        proto = HloProto.FromString(bytes(hlo_proto))
    except Exception:  # noqa: BLE001 - DecodeError: the proto is damaged
        return {"bytes": None, "largest": [], "source": "HLO proto unreadable"}
    if not any(b.color == HOST_COLOR for b in proto.buffer_assignment.logical_buffers):
        return {"bytes": 0, "largest": [], "source": "heap simulation: no host-memory buffers"}
    try:
        tl = memory_timeline(proto, color=HOST_COLOR, top=5)
    except ValueError as e:
        return {"bytes": None, "largest": [], "source": f"no host-memory heap trace ({e})"}
    return {"bytes": int(tl.peak_bytes), "largest": [list(b) for b in tl.peak_buffers],
            "source": "heap simulation of host memory space S(5) (program order)"}


def cap_in_force(platform: str | None, env: dict | None) -> dict[str, Any]:
    """`{bytes, source}`: the pinned host pool's cap (module docstring); bytes None off GPU."""
    if platform not in ("gpu", "cuda", "rocm"):
        return {"bytes": None, "source": f"no pinned-host cap on {platform or 'this backend'}"}
    raw = (env or {}).get(CAP_ENV)
    if raw not in (None, ""):
        try:
            return {"bytes": int(float(raw) * _GB), "source": f"{CAP_ENV}={raw} (run.json)"}
        except (TypeError, ValueError):
            pass
    return {"bytes": DEFAULT_CAP_GB * _GB,
            "source": f"XLA's default {DEFAULT_CAP_GB} GB ({CAP_ENV} "
                      + ("unset in run.json)" if env is not None and CAP_ENV in env
                         else "not recorded: assumed unset)")}


def host_facts(hlo_text: str | None, hlo_proto: bytes | None, platform: str | None,
               env: dict | None) -> dict[str, Any]:
    """`{host_compute, pinned_host}` for one compiled program (the report and plan JSON key
    `host`)."""
    hc = host_compute_ops(hlo_text) if hlo_text else {
        "count": None, "ops": [], "source": "no HLO text for the program"}
    peak = pinned_host_peak(hlo_proto)
    cap = cap_in_force(platform, env)
    frac = (peak["bytes"] / cap["bytes"] if peak["bytes"] is not None and cap["bytes"]
            else None)
    return {"host_compute": hc,
            "pinned_host": {"peak_bytes": peak["bytes"], "largest": peak["largest"],
                            "source": peak["source"], "cap_bytes": cap["bytes"],
                            "cap_source": cap["source"], "fraction_of_cap": frac,
                            "over_cap": None if frac is None else frac > 1.0}}


def capture_host_facts(trace, result: dict, manifest: dict | None) -> dict[str, Any] | None:
    """`host_facts` of the program a capture ran (`overlap.analysis.memory.executed_program`),
    None when the capture carries no HLO proto for it."""
    from overlap.analysis.memory import executed_program
    from overlap.hlo.program import hlo_text_from_proto

    prog = executed_program(trace, manifest)
    if not prog.get("proto"):
        # run.json's heap_simulator.module is not used: in the H100 sweeps every run's names
        # the same compile, so it cannot tell the program that ran.
        return None
    try:
        text = hlo_text_from_proto(prog["proto"])
    except Exception:  # noqa: BLE001 - the peak still stands without the text
        text = None
    env = ((manifest or {}).get("env") if isinstance((manifest or {}).get("env"), dict)
           else None)
    out = host_facts(text, prog["proto"], result.get("backend"), env)
    out["program"] = prog.get("name")
    return out
