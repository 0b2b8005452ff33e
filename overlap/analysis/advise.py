"""Which remat/offload policy to use for this step on that target: plans ranked (pure).

In: plan manifests of one step compiled for one target under many policies (`overlap.plan.
advise` makes them), and the device-memory budget they must fit in. Out: one row per policy and
a recommendation. Every number is the compiler's or the estimate's; nothing here was run.

Per row (one policy):

* `fits`: device peak <= budget. Device peak = `memory_analysis` temp + arguments + outputs -
  aliases (`overlap.analysis.memory.memory_analysis_peak`). A compile the compiler refused for
  memory does not fit (its message is the reason); a compile error is a row with the error.
* `headroom_bytes` = budget - device peak (negative when it does not fit).
* `step_ps`: PREDICTED step time, the estimate's simulation of the compiled schedule
  (`overlap.hlo.schedule`: `estimate.step_ps`) = `compute_ps` (every scheduled instruction at
  the roofline, recomputation included, `estimate.busy_ps`) + `stall_ps` (time the compute
  waits for host copies to finish: the predicted exposed transfer time, `estimate.stall_ps`).
* `vs_full_ps` = step - the full-remat plan's step (`full`, else `nothing_saveable`; None
  without one); `vs_full_fraction` = that / the full-remat step.
* `moved_bytes`: D2H + H2D bytes per step (the offload inventory's executed bytes).
* `break_even_Bps`: the slowest host link at which every copy still hides (None: no copies,
  or some copy never hides).

Offload verdict (`offload`): the fastest fitting offloading policy that moves data, against full
remat: it pays when it is more than `TIE_FRACTION` faster, or when full remat does not fit and
it does; and against saving the same tensors on device (`on_device_twin`) when that was planned.

Ranking: plans that compiled and fit, fastest predicted step first (ties: fewer bytes moved,
then lower peak); then plans that compiled but do not fit (smallest peak first); then plans
that failed to compile. Recommendation: among fitting plans within `TIE_FRACTION` (2%) of the
fastest predicted step, the one that moves the fewest bytes over the host link, then the one
with the lowest peak: a prediction 2% apart is inside what the roofline can tell, and a copy
that does not move cannot be slower than predicted on a busy host link. Plans whose program
is identical to another's (same lowered module) are rows that say so and carry its numbers.

Blind spots: the step time is a roofline simulation at data-sheet peaks (see the schedule
module's docstring), so absolute times lean fast and small kernels lean on the kernel floor;
only the ranking and the differences are meant to be read. The budget is one device's.
"""

from __future__ import annotations

from typing import Any

from overlap.analysis.memory import memory_analysis_peak
from overlap.analysis.plans import REMAT_BASELINES

TIE_FRACTION = 0.02

FIT, NO_FIT, FAILED = "fits", "does not fit", "failed"


def _policy(m: dict) -> dict:
    p = m.get("policy")
    return p if isinstance(p, dict) else {"name": str(p or "?")}


def plan_advice_row(m: dict, budget_bytes: int | None) -> dict[str, Any]:
    """One policy's row (JSON-safe) from its plan manifest."""
    pol = _policy(m)
    status = m.get("status")
    mem = m.get("memory_analysis") or {}
    peak = memory_analysis_peak(mem) if mem else None
    est = m.get("estimate") or {}
    inv = m.get("offload_inventory") or {}
    d2h = (inv.get("D2H") or {}).get("executed_bytes")
    h2d = (inv.get("H2D") or {}).get("executed_bytes")
    row: dict[str, Any] = {
        "policy": pol.get("name"), "category": pol.get("category"),
        "saved": list(pol.get("saved") or []), "offloaded": list(pol.get("offloaded") or []),
        "description": pol.get("description", ""),
        "label": m.get("label"), "status": status,
        "same_program_as": m.get("same_program_as"),
        "device_peak_bytes": peak, "budget_bytes": budget_bytes,
        "headroom_bytes": None, "fits": None,
        "step_ps": est.get("step_ps"), "compute_ps": est.get("busy_ps"),
        "stall_ps": est.get("stall_ps"),
        "moved_bytes": None if d2h is None and h2d is None else int(d2h or 0) + int(h2d or 0),
        "break_even_Bps": est.get("break_even_Bps"),
        # where this plan's async-op streams come from (the estimate's `streams.source`)
        "streams": (est.get("streams") or {}).get("source"),
        "trip_counts_known": inv.get("trip_counts_known"),
        "vs_full_ps": None, "vs_full_fraction": None,
        "reason": "",
    }
    if status == "does_not_fit":
        row.update(fits=False, reason=f"the compiler ran out of device memory: "
                                      f"{_short(m.get('error'))}")
    elif status != "ok":
        row["reason"] = f"compile failed: {_short(m.get('error'))}"
    elif peak is not None and budget_bytes is not None:
        row["fits"] = peak <= budget_bytes
        row["headroom_bytes"] = budget_bytes - peak
    return row


def _short(s: Any, n: int = 200) -> str:
    text = " ".join(str(s or "").split())
    return text if len(text) <= n else text[: n - 3] + "..."


def _group(r: dict) -> str:
    if r["status"] not in ("ok", "does_not_fit"):
        return FAILED
    return FIT if r["fits"] else NO_FIT


def rank(rows: list[dict]) -> list[dict]:
    """Rows in the order the module docstring defines (a new list)."""
    inf = float("inf")

    def key(r: dict) -> tuple:
        g = _group(r)
        peak = r["device_peak_bytes"] if r["device_peak_bytes"] is not None else inf
        dup = r.get("same_program_as") is not None  # the policy compiled first goes first
        if g == FIT:
            step = r["step_ps"] if r["step_ps"] is not None else inf
            return (0, step, r["moved_bytes"] or 0, peak, dup, str(r["policy"]))
        if g == NO_FIT:
            return (1, peak, 0, 0, dup, str(r["policy"]))
        return (2, 0, 0, 0, dup, str(r["policy"]))

    return sorted(rows, key=key)


def full_remat(rows: list[dict]) -> dict | None:
    """The full-remat row (`full`, else `nothing_saveable`) that compiled, or None."""
    for name in REMAT_BASELINES:
        for r in rows:
            if r["policy"] == name and r["status"] == "ok" and r["step_ps"] is not None:
                return r
    return None


def recommend(ranked: list[dict]) -> tuple[dict | None, list[str]]:
    """The recommended row and the reasons, in words (see the module docstring)."""
    fitting = [r for r in ranked if _group(r) == FIT and r["step_ps"] is not None]
    if not fitting:
        compiled = [r for r in ranked if r["device_peak_bytes"] is not None]
        if compiled:
            best = min(compiled, key=lambda r: r["device_peak_bytes"])
            return None, [f"no policy fits the budget; the smallest device peak is "
                          f"{best['policy']}'s"]
        return None, ["no policy compiled"]
    fastest = fitting[0]
    near = [r for r in fitting if r["step_ps"] <= fastest["step_ps"] * (1 + TIE_FRACTION)]
    pick = min(near, key=lambda r: (r["moved_bytes"] or 0, r["device_peak_bytes"] or 0,
                                    r.get("same_program_as") is not None))
    why = ["fits the budget"]
    if pick is fastest:
        why.append("fastest predicted step of the policies that fit")
    else:
        why.append(f"within {100 * TIE_FRACTION:.0f}% of the fastest predicted step "
                   f"({fastest['policy']}) and moves less over the host link")
    return pick, why


def on_device_twin(rows: list[dict], off: dict, names: list[str] | None = None) -> dict | None:
    """The plan that saves on device what `off` offloads (and what it saves): the speed
    offload approaches when every copy hides. Names the step never tags are ignored."""
    keep = set(names) if names else None

    def tagged(xs: list[str]) -> set[str]:
        return set(xs) & keep if keep is not None else set(xs)

    want = tagged(off["saved"] + off["offloaded"])
    for r in rows:
        if (r is not off and not r["offloaded"] and r["category"] != "offload"
                and want and tagged(r["saved"]) == want and r["step_ps"] is not None):
            return r
    return None


def offload_verdict(rows: list[dict], names: list[str] | None = None) -> dict[str, Any]:
    """Does offload pay here? The fastest fitting offloading policy against full remat (and,
    when it was planned, against saving the same tensors on device)."""
    base = full_remat(rows)
    off = [r for r in rows if r["category"] == "offload" and _group(r) == FIT
           and r["step_ps"] is not None and (r["moved_bytes"] or 0) > 0]
    if base is None or not off:
        return {"pays": None, "policy": off[0]["policy"] if off else None,
                "why": "no full-remat plan to compare with" if base is None
                else "no offloading policy that moves data and fits"}
    best = min(off, key=lambda r: r["step_ps"])
    d = best["step_ps"] - base["step_ps"]
    frac = d / base["step_ps"] if base["step_ps"] else 0.0
    pays = frac < -TIE_FRACTION
    why = (f"{best['policy']} is predicted {abs(100 * frac):.1f}% "
           f"{'faster' if d < 0 else 'slower'} than {base['policy']} remat")
    if base["fits"] is False:
        # Full remat does not fit: offload is what makes the step fit at all.
        pays = True
        why = f"{base['policy']} remat does not fit the budget and {best['policy']} does; " + why
    elif not pays:
        why += f" (offload pays only when more than {100 * TIE_FRACTION:.0f}% faster)"
    twin = on_device_twin(rows, best, names)
    out = {"pays": pays, "policy": best["policy"], "vs_full_ps": d, "vs_full_fraction": frac,
           "on_device": twin["policy"] if twin else None}
    if twin is not None and twin["step_ps"]:
        dt = best["step_ps"] - twin["step_ps"]
        dpeak = (twin["device_peak_bytes"] or 0) - (best["device_peak_bytes"] or 0)
        out["vs_on_device_ps"] = dt
        # Said of the offload, relative to its twin, as vs-full is said relative to full:
        # "X% slower" = the offload's step takes X% more time than the twin's.
        why += (f"; against saving the same on device ({twin['policy']}), {best['policy']} is "
                "predicted "
                + ("as fast" if abs(dt) <= TIE_FRACTION * twin["step_ps"] else
                   f"{abs(100 * dt / twin['step_ps']):.1f}% {'slower' if dt > 0 else 'faster'}")
                + f" and {'saves' if dpeak >= 0 else 'adds'} {abs(dpeak) / (1 << 20):.2f} MiB "
                "of device peak")
    out["why"] = why
    return out


def advise(plans: list[dict], budget: dict[str, Any],
           names: list[str] | None = None) -> dict[str, Any]:
    """Rank `plans` (manifests of one step, one target) against `budget` (`bytes`, `source`);
    `names`: the checkpoint names the step tags (to match an offload with its on-device twin)."""
    rows = [plan_advice_row(m, budget.get("bytes")) for m in plans]
    base = full_remat(rows)
    for r in rows:
        if base is not None and r["step_ps"] is not None:
            r["vs_full_ps"] = r["step_ps"] - base["step_ps"]
            r["vs_full_fraction"] = (r["vs_full_ps"] / base["step_ps"]) if base["step_ps"] \
                else None
        if not r["reason"] and r["fits"] is False:
            r["reason"] = "device peak over the budget"
    ranked = rank(rows)
    pick, why = recommend(ranked)
    for i, r in enumerate(ranked, 1):
        r["rank"] = i
    return {
        "kind": "advice",
        "note": "compiled, not run: peaks are the compiler's; step times are predicted by the "
                "roofline schedule estimate",
        "budget": budget,
        "baseline": base["policy"] if base else None,
        "recommended": pick["policy"] if pick else None,
        "recommended_label": pick["label"] if pick else None,
        "why": why,
        "offload": offload_verdict(rows, names),
        "rows": ranked,
        "tie_fraction": TIE_FRACTION,
    }
