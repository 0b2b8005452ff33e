"""Plan runs (compiled for a target, never run) as rows the views show.

Definitions: device peak = `memory_analysis` temp + arguments + outputs - aliases
(`overlap.analysis.memory`); D2H/H2D per step = the offload inventory's executed bytes (each
host copy times the trip counts of the loops around it); predicted hidden fraction and exposed
time per step = the roofline estimate of `overlap.hlo.schedule` (an estimate, not a
measurement), overall and per direction, with each direction's break-even host bandwidth;
`fits` = device peak <= the plan's memory budget (`overlap.plan.targets.memory_budget`). The
remat baseline of a plan is the `full` (else `nothing_saveable`) plan of the same target.
"""

from __future__ import annotations

import math
from fnmatch import fnmatchcase
from typing import Any

from overlap.analysis.memory import memory_analysis_peak

REMAT_BASELINES = ("full", "nothing_saveable")


def _policy(m: dict) -> str:
    p = m.get("policy")
    return str(p.get("name")) if isinstance(p, dict) else str(p or "?")


def _target(m: dict) -> str:
    t = m.get("target")
    return str(t.get("name")) if isinstance(t, dict) else str(t or "?")


def workload(m: dict) -> str:
    """`name:size` of the plan's workload ('' for a user's own step)."""
    w = m.get("workload")
    if isinstance(w, dict):
        return f"{w.get('name') or ''}:{w.get('size') or ''}".strip(":")
    return str(w or "")


def baseline_for(plans: list[dict], target: str, of: dict | None = None) -> dict | None:
    """The full-remat plan of the same workload on the same target (full first, then
    nothing_saveable); `of` is the plan to find a baseline for."""
    want = workload(of) if of is not None else None
    for name in REMAT_BASELINES:
        for m in plans:
            if (_target(m) == target and _policy(m) == name and m.get("status") == "ok"
                    and (want is None or workload(m) == want)):
                return m
    return None


def plan_row(m: dict) -> dict[str, Any]:
    """The numbers one plan shows (JSON-safe)."""
    mem = m.get("memory_analysis") or {}
    inv = m.get("offload_inventory") or {}
    est = (m.get("estimate") or {}).get("per_step") or {}
    return {
        "label": m.get("label"), "target": _target(m), "policy": _policy(m),
        "status": m.get("status"), "error": m.get("error"),
        "device_peak_bytes": memory_analysis_peak(mem) if mem else None,
        "device_peak_source": "memory_analysis (temp + arguments + outputs - aliases)",
        "temp_bytes": mem.get("temp_size_in_bytes"),
        "argument_bytes": mem.get("argument_size_in_bytes"),
        "host_temp_bytes": mem.get("host_temp_size_in_bytes"),
        "host_argument_bytes": mem.get("host_argument_size_in_bytes"),
        "d2h_per_step": (inv.get("D2H") or {}).get("executed_bytes"),
        "h2d_per_step": (inv.get("H2D") or {}).get("executed_bytes"),
        "d2h_count": (inv.get("D2H") or {}).get("executed_count"),
        "h2d_count": (inv.get("H2D") or {}).get("executed_count"),
        "trip_counts_known": inv.get("trip_counts_known"),
        "predicted_hidden_fraction": (est.get("all") or {}).get("hidden_fraction"),
        # Wall time with a copy in flight and no compute (concurrent copies once; at most the
        # step), where the estimate has it; older plans: the per-copy sum.
        "predicted_exposed_ps": _exposed(est.get("all")),
        "break_even_Bps": (m.get("estimate") or {}).get("break_even_Bps"),
        "fits": m.get("fits"),
        "device_memory_bytes": (m.get("target") or {}).get("device_memory_bytes")
        if isinstance(m.get("target"), dict) else None,
        # The usable budget `fits` was decided against, and where it comes from (plans made
        # before budgets existed were checked against the device's capacity).
        "memory_budget_bytes": (m.get("memory_budget") or {}).get("bytes"),
        "memory_budget_source": (m.get("memory_budget") or {}).get("source"),
        **{f"{d.lower()}_{k}": (est.get(d) or {}).get(v)
           for d in ("D2H", "H2D")
           for k, v in (("predicted_hidden_fraction", "hidden_fraction"),
                        ("break_even_Bps", "break_even_Bps"), ("link_Bps", "link_Bps"),
                        ("never_hides", "never_hides"))},
        **{f"{d.lower()}_predicted_exposed_ps": _exposed(est.get(d)) for d in ("D2H", "H2D")},
    }


def _exposed(per_step: dict | None) -> int | None:
    """A plan's predicted exposed time per step: `exposed_wall_ps` (overlap.hlo.schedule), or
    the summed per-copy `exposed_ps` of a plan written before it existed."""
    if not per_step:
        return None
    wall = per_step.get("exposed_wall_ps")
    return wall if wall is not None else per_step.get("exposed_ps")


def _bad_number(v: Any, *, ratio: bool = False) -> bool:
    if v is None:
        return False
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v:
        return True
    return v < 0 or (ratio and v > 1)


class _Kind:
    """What one JSON value of a plan must be (`PLAN_SHAPE`): `what` names it in the message."""

    __slots__ = ("what", "ok")

    def __init__(self, what: str, ok: Any) -> None:
        self.what, self.ok = what, ok


def _finite(v: Any) -> bool:
    # (JSON's numbers, and the NaN and Infinity Python's json module also reads)
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


# Every number the plan's readers compute with becomes an int64 (bytes, picoseconds) or divides
# one: a value from 2**63 up cannot be one.
_LIMIT = 2 ** 63
TEXT = _Kind("a string", lambda v: isinstance(v, str))
FLAG = _Kind("true or false", lambda v: isinstance(v, bool))
COUNT = _Kind("a number >= 0", lambda v: _finite(v) and 0 <= v < _LIMIT)
# (a bandwidth, a flop rate, a scale: the estimate divides by it; at 0 or below the copies'
# stream model never finishes, issue 32's round 35 found a plan that hung the dashboard)
RATE = _Kind("a number > 0", lambda v: _finite(v) and 0 < v < _LIMIT)
FRACTION = _Kind("a fraction in [0, 1]", lambda v: _finite(v) and 0 <= v <= 1)
SHARE = _Kind("a fraction in (0, 1]", lambda v: _finite(v) and 0 < v <= 1)
ANY = _Kind("any value", lambda v: True)

# One direction's figures in a plan's estimate (`overlap.hlo.schedule`: per step, and per copy)
_TIMES = {"*_ps": COUNT, "break_even_Bps": COUNT, "bytes": COUNT, "layout_bytes": COUNT,
          "transfers": COUNT, "executions": COUNT, "hidden_fraction": FRACTION, "*_Bps": RATE}
_INVENTORY_DIRECTION = {"*": COUNT}
# The JSON `overlap plan` writes in run.json (`overlap.plan.compile`, `overlap.plan.estimate`,
# `overlap.hlo.schedule`), as far as any reader of a plan reads it: a field's kind, an object
# as a dict of its fields (keys may be patterns: `*` any name), a list as [its elements' kind],
# a tuple as the shapes a value may have.
# Null stands for any field (older plans lack some, and readers default them); a field not
# named here is read by nothing. A value of another kind is damage, said by `plan_problem`.
PLAN_SHAPE: dict[str, Any] = {
    "label": TEXT, "status": TEXT, "error": TEXT, "note": TEXT, "notes": [TEXT],
    "module": TEXT, "xla_flags": TEXT, "fits": FLAG, "compile_s": COUNT,
    "device_peak_bytes": COUNT, "pinned_host_arguments_unseen_bytes": COUNT,
    "program_memory_points": COUNT,
    # (a bare name, where a plan was written by hand, is read as that name: `_target`)
    "target": (TEXT, {"name": TEXT, "description": TEXT, "platform": TEXT, "topology": TEXT,
                      "device": TEXT, "device_memory_bytes": COUNT}),
    "program": {"module": TEXT, "inputs": TEXT},
    "versions": {"*": TEXT},
    "workload": (TEXT, {"name": TEXT, "size": TEXT, "description": TEXT, "notes": [TEXT]}),
    "policy": (TEXT, {"name": TEXT, "category": TEXT, "description": TEXT, "remat": FLAG,
                      "offloaded": [TEXT], "saved": [TEXT]}),
    "memory_budget": {"bytes": COUNT, "capacity_bytes": COUNT, "fraction": FRACTION,
                      "source": TEXT},
    "memory_analysis": {"*": COUNT},
    "heap_simulator": {"module": TEXT, "peak_bytes": COUNT, "error": TEXT},
    "host": {"host_compute": {"count": COUNT, "source": TEXT, "ops": [ANY]},
             "pinned_host": {"cap_bytes": COUNT, "cap_source": TEXT, "peak_bytes": COUNT,
                             "fraction_of_cap": COUNT, "over_cap": FLAG, "source": TEXT,
                             "largest": [[ANY]]}},
    "offload_inventory": {
        "D2H": _INVENTORY_DIRECTION, "H2D": _INVENTORY_DIRECTION, "in_loops": FLAG,
        "trip_counts_known": FLAG, "note": TEXT,
        "ops": [{"name": TEXT, "computation": TEXT, "opcode": TEXT, "direction": TEXT,
                 "shape": TEXT, "bytes": COUNT, "layout_bytes": COUNT, "executions": COUNT,
                 "is_async": FLAG, "trip_count_known": FLAG}]},
    "estimate": {
        "kind": TEXT, "note": TEXT, "assumptions": [TEXT], "trip_counts_known": FLAG,
        "*_ps": COUNT, "break_even_Bps": COUNT,
        "streams": {"modelled": FLAG, "source": TEXT, "count": COUNT, "ops": {"*": TEXT}},
        "model": {"*_Bps": RATE, "peak_flops*": RATE, "compute_scale": RATE,
                  "duplex_share": SHARE, "*_ps": COUNT, "device_memory_bytes": COUNT,
                  "command_buffers": FLAG, "copies_on_compute_stream": FLAG,
                  "full_duplex": FLAG, "*source": TEXT, "host_link": TEXT, "target": TEXT,
                  "calibration": TEXT},
        "per_step": {"*": {**_TIMES, "never_hides": [TEXT]}}},
        # (`estimate.ops`: `ops_problem`, which reads each record against `OP_SHAPE`)
}
# One record of `estimate.ops` (a copy op of the program, `overlap.hlo.schedule`).
OP_SHAPE: dict[str, Any] = {
    **_TIMES, "op": TEXT, "direction": TEXT, "why_not": TEXT, "never_hides": FLAG,
    "done_found": FLAG, "is_async": FLAG, "trip_count_known": FLAG, "scheduled_beside": [TEXT],
    "scheduled_beside_count": COUNT}


def shape_problem(value: Any, shape: Any = None, where: str = "") -> str | None:
    """Where `value` (a plan's run.json, by default against `PLAN_SHAPE`) is not of the shape,
    in one phrase (`estimate.model.h2d_link_Bps is -1, not a number > 0`), or None. Null is
    any field's value; fields the shape does not name are not looked at."""
    shape = PLAN_SHAPE if shape is None else shape
    if value is None:
        return None
    if isinstance(shape, _Kind):
        return None if shape.ok(value) else f"{where} is {_shown(value)}, not {shape.what}"
    if isinstance(shape, tuple):  # (one of them: the last one's answer where none fits)
        got = None
        for alt in shape:
            got = shape_problem(value, alt, where)
            if got is None:
                return None
        return got
    if isinstance(shape, list):
        if not isinstance(value, list):
            return f"{where} is {_shown(value)}, not a list"
        for i, v in enumerate(value):
            got = shape_problem(v, shape[0], f"{where}[{i}]")
            if got:
                return got
        return None
    if not isinstance(value, dict):
        return f"{where} is {_shown(value)}, not an object"
    for k, v in value.items():
        # (a field's own name first, else the first pattern that matches it)
        sub = shape.get(k) if k in shape else next(
            (s for p, s in shape.items() if "*" in p and fnmatchcase(str(k), p)), None)
        if sub is not None:
            got = shape_problem(v, sub, f"{where}.{k}" if where else str(k))
            if got:
                return got
    return None


def _shown(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def program_memory_bytes(doc: Any) -> list[int] | None:
    """A plan's `program_memory.json` (as JSON gives it) read as its curve: `live_bytes`, the
    bytes live at each instruction in program order, each an int in [0, 2**63); None (no
    curve) where the document holds anything else. The one reading `report` and the
    dashboard both draw from."""
    live = doc.get("live_bytes") if isinstance(doc, dict) else None
    if not isinstance(live, list):
        return None
    ok = all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < _LIMIT for v in live)
    return live if ok else None


def plan_problem(m: dict) -> str | None:
    """What makes a plan manifest (run.json) impossible, in one phrase, or None: a field of
    another kind than `overlap plan` writes (`shape_problem`: an estimate that is a number, a
    link bandwidth of -1), a byte count or time below zero, a hidden fraction outside [0, 1],
    hidden > transfer time. A plan is written by `overlap plan`; one that says 700% hidden was
    damaged or forged, and no gate may pass on it."""
    # (the checks of numbers first, each in its own words, then the kinds of the rest)
    for k in ("device_peak_bytes", "pinned_host_arguments_unseen_bytes"):
        if _bad_number(m.get(k)):
            return f"{k} is {m.get(k)!r}, not a byte count >= 0"
    mem = m.get("memory_analysis")
    if isinstance(mem, dict):
        for k, v in mem.items():
            if _bad_number(v):
                return f"memory_analysis.{k} is {v!r}, not a byte count >= 0"
    est = m.get("estimate")
    if isinstance(est, dict):
        got = _estimate_problem(est)
        if got:
            return got
    return shape_problem(m)


def refuse_impossible(run_dir: Any, m: dict) -> None:
    """Raise `InputError` naming `run_dir`'s run.json where the plan manifest `m` has a
    `plan_problem` (bad input, exit 3: never read as written, never a gate's verdict)."""
    problem = plan_problem(m)
    if problem:
        from pathlib import Path

        from overlap.errors import InputError

        raise InputError(Path(run_dir) / "run.json", f"impossible plan: {problem}")


def _estimate_problem(est: dict) -> str | None:
    for k in ("step_ps", "busy_ps", "stall_ps"):
        if _bad_number(est.get(k)):
            return f"estimate.{k} is {est.get(k)!r}, not a time >= 0"
    per_step = est.get("per_step")
    for d, per in (per_step.items() if isinstance(per_step, dict) else ()):
        if not isinstance(per, dict):
            return f"estimate.per_step.{d} is not an object"
        if _bad_number(per.get("hidden_fraction"), ratio=True):
            return (f"estimate.per_step.{d}.hidden_fraction is {per.get('hidden_fraction')!r}, "
                    "not a fraction in [0, 1]")
        for k in ("bytes", "layout_bytes", "transfer_ps", "hidden_ps", "exposed_ps",
                  "exposed_wall_ps", "stall_ps", "transfers"):
            if _bad_number(per.get(k)):
                return f"estimate.per_step.{d}.{k} is {per.get(k)!r}, not a number >= 0"
        if (per.get("hidden_ps") or 0) > (per.get("transfer_ps") or 0):
            return f"estimate.per_step.{d}: hidden_ps exceeds transfer_ps"
    return ops_problem(est.get("ops"))


# What the readers of a plan's per-copy records (estimate.ops) index without a default:
# overlap.plan.predict and overlap.analysis.predict (`report RUN --plan`), the dashboard's
# planned copies, the HTML report's plan table. `overlap plan` writes each of them.
OP_FIELDS = ("op", "direction", "executions", "bytes", "layout_bytes", "transfer_ps",
             "duration_ps", "compute_ps", "queued_ps", "stall_ps", "hidden_fraction")


def ops_problem(ops: Any) -> str | None:
    """What is wrong with a plan's ``estimate.ops`` (a list of per-copy records, written by
    `overlap.hlo.schedule`), in one phrase, or None: not a list, a record that is not an object
    or lacks a field in `OP_FIELDS`, an op name that is not a string, a direction other than
    D2H/H2D, a count, byte size or time that is not a number >= 0, a hidden fraction outside
    [0, 1]."""
    if ops is None:
        return None
    if not isinstance(ops, list):
        return f"estimate.ops is a JSON {type(ops).__name__}, not a list of copy records"
    for i, o in enumerate(ops):
        if not isinstance(o, dict):
            return f"estimate.ops[{i}] is {str(o)[:40]!r}, not a copy record (an object)"
        missing = [k for k in OP_FIELDS if o.get(k) is None]  # (null: none either)
        if missing:
            return f"estimate.ops[{i}] has no {', '.join(missing)}"
        if not isinstance(o["op"], str):
            return f"estimate.ops[{i}].op is {o['op']!r}, not an op name"
        if o["direction"] not in ("D2H", "H2D"):
            return f"estimate.ops[{i}].direction is {o['direction']!r}, not D2H or H2D"
        for k in ("executions", "bytes", "layout_bytes", "transfer_ps", "duration_ps",
                  "compute_ps", "hidden_ps", "exposed_ps", "stall_ps", "moving_ps",
                  "queued_ps"):
            if _bad_number(o.get(k)):
                return f"estimate.ops[{i}].{k} is {o.get(k)!r}, not a number >= 0"
        if _bad_number(o.get("hidden_fraction"), ratio=True):
            return (f"estimate.ops[{i}].hidden_fraction is {o.get('hidden_fraction')!r}, not a "
                    "fraction in [0, 1]")
        got = shape_problem(o, OP_SHAPE, f"estimate.ops[{i}]")
        if got:
            return got
    return None
