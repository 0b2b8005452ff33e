"""Plans as text: what the compiler said for each policy, against the remat baseline.

A plan is compiled for a target and never run, so every number here is either the compiler's
(memory analysis, offload inventory) or the roofline estimate's (`overlap.hlo.schedule`), and
the header says so. Peak device memory is `memory_analysis` temp + arguments + outputs -
aliases (`overlap.analysis.memory.memory_analysis_peak`); "fits" is against the plan's memory
budget, named under the table. Each plan that moves bytes gets one sentence per direction,
built from the same per-direction numbers as the table's `D2H hid*` / `H2D hid*` columns
(hidden fraction, break-even host bandwidth, copies no bandwidth hides), so the two cannot
disagree; the estimate's assumptions follow the table.
"""

from __future__ import annotations

import math

from overlap.analysis.plans import _policy, _target, baseline_for, plan_row
from overlap.report.units import format_bytes, format_ps, format_rate


def format_hidden(fraction: float | None) -> str:
    """A predicted hidden fraction as a percentage that never rounds up to 100%: "100%" means
    every copy hides, so 99.6% prints as 99%; '-' for None (nothing to hide)."""
    if fraction is None:
        return "-"
    if fraction >= 1.0:
        return "100%"
    pct = math.floor(100 * fraction)
    return "<1%" if pct == 0 and fraction > 0 else f"{pct}%"


def direction_sentence(r: dict, d: str) -> str | None:
    """One sentence about direction `d` ("D2H"/"H2D") of plan row `r`, from the same numbers as
    the table's column (`plan_row`'s `{d}_predicted_hidden_fraction`); None when the plan moves
    nothing that way."""
    k = d.lower()
    hf = r.get(f"{k}_predicted_hidden_fraction")
    if hf is None or not r.get(f"{k}_per_step"):
        return None
    link = r.get(f"{k}_link_Bps")
    be = r.get(f"{k}_break_even_Bps")
    never = r.get(f"{k}_never_hides") or []
    head = f"{d} predicted {format_hidden(hf)} hidden at {format_rate(link)}"
    if never:
        n = len(never)
        return (f"{head}; {n} {d} cop{'y' if n == 1 else 'ies'} ({', '.join(never[:3])}"
                f"{', ...' if n > 3 else ''}) hide at no host bandwidth (nothing, or too little, "
                "is scheduled beside them), so no link hides every copy")
    if be is None:
        return head
    if hf >= 1.0:
        return f"{head}; every {d} copy still hides down to {format_rate(be)}"
    tail = (" ((almost) nothing is scheduled beside the copies)"
            if link and be > 100 * link else "")
    return f"{head}; every {d} copy hides only if the link gives >= {format_rate(be)}{tail}"


def _fits_text(r: dict) -> str:
    budget = r.get("memory_budget_bytes") or r.get("device_memory_bytes")
    if r["fits"] is None or budget is None:
        return "fit unknown (no memory analysis or no budget)"
    if r["fits"]:
        return f"fits the {format_bytes(budget)} budget"
    return (f"does NOT fit: device peak {format_bytes(r['device_peak_bytes'])} > the "
            f"{format_bytes(budget)} budget")


def render_plans(plans: list[dict]) -> str:
    if not plans:
        return "no plans"
    targets = sorted({_target(m) for m in plans})
    out = [f"PLAN (compiled for {', '.join(targets)}, not run; * = predicted by the roofline "
           "estimate, not measured)"]
    head = (f"{'plan':<34}{'device peak':>13}{'temp':>12}{'host temp':>12}"
            f"{'D2H/step':>12}{'H2D/step':>12}{'D2H hid*':>10}{'H2D hid*':>10}{'exposed*':>11}"
            f"{'fits':>6}")
    out.append(head)
    for m in plans:
        r = plan_row(m)
        name = str(r["label"] or r["policy"])[:33]
        if r["status"] != "ok":
            what = "DOES NOT FIT" if r["status"] == "does_not_fit" else "COMPILE ERROR"
            out.append(f"{name:<34}{what}: {str(r['error'] or '')[:120]}")
            continue
        hf = r["predicted_hidden_fraction"]
        exposed = ("-" if hf is None else "none" if not r["predicted_exposed_ps"]
                   else format_ps(r["predicted_exposed_ps"]))
        fits = "-" if r["fits"] is None else "yes" if r["fits"] else "NO"
        out.append(
            f"{name:<34}{format_bytes(r['device_peak_bytes']):>13}"
            f"{format_bytes(r['temp_bytes']):>12}{format_bytes(r['host_temp_bytes']):>12}"
            f"{format_bytes(r['d2h_per_step']):>12}{format_bytes(r['h2d_per_step']):>12}"
            f"{format_hidden(r['d2h_predicted_hidden_fraction']):>10}"
            f"{format_hidden(r['h2d_predicted_hidden_fraction']):>10}{exposed:>11}{fits:>6}")
    for t in targets:
        for m in plans:
            base = baseline_for(plans, t, m)
            if _target(m) != t or m.get("status") != "ok":
                continue
            r = plan_row(m)
            is_base = base is not None and _policy(m) == _policy(base)
            parts = []
            if base is not None and not is_base:
                b = plan_row(base)
                if b["temp_bytes"] is not None and r["temp_bytes"] is not None:
                    d = r["temp_bytes"] - b["temp_bytes"]
                    parts.append(f"same device temp as {b['policy']}" if d == 0 else
                                 f"device temp {format_bytes(abs(d))} "
                                 f"{'less' if d < 0 else 'more'} than {b['policy']}")
            moved = (r["d2h_per_step"] or 0) + (r["h2d_per_step"] or 0)
            if moved:
                parts.append(f"moves {format_bytes(r['d2h_per_step'])} D2H + "
                             f"{format_bytes(r['h2d_per_step'])} H2D per step"
                             + ("" if r["trip_counts_known"]
                                else " (at least: a loop count is unknown)"))
            elif not is_base:
                parts.append("plans no host transfers")
            parts.append(_fits_text(r))
            out.append(f"{t} {r['policy']}: " + "; ".join(parts))
            sentences = [s for s in (direction_sentence(r, d) for d in ("D2H", "H2D")) if s]
            for sentence in sentences:
                out.append(f"  {sentence} *")
            if moved and not sentences and r["predicted_hidden_fraction"] is not None:
                # A plan written before per-direction estimates: its overall number only.
                out.append(f"  predicted {format_hidden(r['predicted_hidden_fraction'])} "
                           "hidden overall (an older plan: no per-direction estimate) *")
            for n in m.get("notes") or []:
                out.append(f"  note: {n}")
    seen: set = set()
    for m in plans:
        est = m.get("estimate") or {}
        model = est.get("model")
        r = plan_row(m)
        key = (model or {}).get("target"), r.get("memory_budget_source")
        if not model or key in seen:
            continue
        seen.add(key)
        floor = model.get("kernel_floor_ps") or 0
        out.append(f"* predicted for {model.get('target')}, not measured: HBM "
                   f"{format_rate(model.get('hbm_Bps'))}, bf16 "
                   f"{(model.get('peak_flops_bf16') or 0) / 1e12:.0f} TFLOP/s, f32 "
                   f"{(model.get('peak_flops_f32') or 0) / 1e12:.0f} TFLOP/s (peaks), kernel floor "
                   f"{floor / 1e6:g} us, host link {format_rate(model.get('host_link_Bps'))}"
                   + (f" D2H / {format_rate(model.get('h2d_link_Bps'))} H2D"
                      if model.get("h2d_link_Bps") not in (None, model.get("host_link_Bps"))
                      else "") + f" ({model.get('host_link')})")
        for a in est.get("assumptions") or []:
            out.append(f"  assumes: {a}")
        if r.get("memory_budget_source"):
            out.append(f"  memory budget {format_bytes(r['memory_budget_bytes'])}: "
                       f"{r['memory_budget_source']}")
    return "\n".join(out)
