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


def plan_problem(m: dict) -> str | None:
    """What makes a plan manifest (run.json) impossible, in one phrase, or None: a byte count
    or time below zero, a hidden fraction outside [0, 1], hidden > transfer time. A plan is
    written by `overlap plan`; one that says 700% hidden was damaged or forged, and no gate
    may pass on it."""
    for k in ("device_peak_bytes", "pinned_host_arguments_unseen_bytes"):
        if _bad_number(m.get(k)):
            return f"{k} is {m.get(k)!r}, not a byte count >= 0"
    mem = m.get("memory_analysis")
    if isinstance(mem, dict):
        for k, v in mem.items():
            if _bad_number(v):
                return f"memory_analysis.{k} is {v!r}, not a byte count >= 0"
    est = m.get("estimate")
    if not isinstance(est, dict):
        return None
    for k in ("step_ps", "busy_ps", "stall_ps"):
        if _bad_number(est.get(k)):
            return f"estimate.{k} is {est.get(k)!r}, not a time >= 0"
    for d, per in (est.get("per_step") or {}).items():
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


# What every reader of a plan's per-copy records (estimate.ops) indexes without a default:
# overlap.plan.predict, the dashboard's planned copies, the HTML report's plan table.
OP_FIELDS = ("op", "direction", "executions", "bytes", "transfer_ps")


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
        missing = [k for k in OP_FIELDS if k not in o]
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
    return None
