"""Per-host view of a multi-host capture: which host exposes the most transfer time.

In synchronous data-parallel training the slowest host sets every host's step time, so one host
with pageable buffers, a slower link or a noisy neighbour costs the whole pod. Per host:

* `exposed_per_step_ps`: mean over the host's annotated steps of the exposed transfer wall time
  (the step's `exposed_wall_ps`: transfer time no device of that host hid behind compute);
  without step annotations, the host's total exposed time (and `per_step` is False).
* `step_ps`: the host's mean step duration (step annotations; profiler included).
* `overlap_d2h` / `overlap_h2d`: the duration-weighted overlap ratio per direction.
* `gap_to_median`: exposed per step divided by the median host's (None when the median is 0),
  and `excess_ps`: exposed per step minus the median host's.

Hosts run on different clocks and are never compared in time, only in these per-host totals.
Blind spot: a host that exposes nothing but computes slowly is a straggler this view does not
name by exposure; its `step_ps` shows it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from overlap.analysis.units import format_ps


def straggler_view(result: dict[str, Any]) -> dict[str, Any] | None:
    """The per-host table and one verdict line; None for a single-host capture."""
    hosts = list(result.get("hosts") or [])
    if len(hosts) < 2:
        return None
    by_host = {h: {"host": h} for h in hosts}
    steps = result.get("steps") or []
    for h in hosts:
        mine = [s for s in steps if s["host"] == h]
        row = by_host[h]
        if mine:
            row["exposed_per_step_ps"] = int(round(np.mean([s["exposed_wall_ps"] for s in mine])))
            row["step_ps"] = int(round(np.mean([s["duration_ps"] for s in mine])))
            row["steps"] = len(mine)
            row["per_step"] = True
        else:
            row["exposed_per_step_ps"] = None
            row["step_ps"] = None
            row["steps"] = 0
            row["per_step"] = False
    for r in result.get("by_host_direction") or []:
        hrow = by_host.get(r["host"])
        if hrow is not None:
            hrow[f"overlap_{r['direction'].lower()}"] = r["overlap_ratio"]
            if not hrow["per_step"]:
                hrow["exposed_per_step_ps"] = ((hrow.get("exposed_per_step_ps") or 0)
                                               + r["exposed_ps"])
    rows = [by_host[h] for h in hosts]
    vals = [r["exposed_per_step_ps"] for r in rows if r["exposed_per_step_ps"] is not None]
    median = float(np.median(vals)) if vals else None
    for r in rows:
        r.setdefault("overlap_d2h", None)
        r.setdefault("overlap_h2d", None)
        v = r["exposed_per_step_ps"]
        r["excess_ps"] = None if v is None or median is None else int(round(v - median))
        r["gap_to_median"] = None if v is None or not median else v / median
    worst = max((r for r in rows if r["exposed_per_step_ps"] is not None),
                key=lambda r: (r["exposed_per_step_ps"], r["host"]), default=None)
    if worst is None:
        verdict = "no host has transfers to compare"
    else:
        unit = "per step" if worst["per_step"] else "in the capture"
        if worst["gap_to_median"] is None:
            rel = "the median host exposes nothing" if worst["exposed_per_step_ps"] else \
                "no host exposes transfer time"
        else:
            rel = f"{worst['gap_to_median']:.1f}x the median"
        verdict = (f"host {worst['host']} exposes {format_ps(worst['exposed_per_step_ps'])} "
                   f"{unit}, {rel}")
    return {"hosts": rows, "median_exposed_per_step_ps": None if median is None else
            int(round(median)), "worst_host": None if worst is None else worst["host"],
            "max_skew": None if worst is None else worst["gap_to_median"],
            "verdict": verdict}
