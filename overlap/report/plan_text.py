"""Plans as text: what the compiler said for each policy, against the remat baseline.

A plan is compiled for a target and never run, so every number here is either the compiler's
(memory analysis, offload inventory) or the roofline estimate's (`overlap.hlo.schedule`), and
the header says so. Peak device memory is `memory_analysis` temp + arguments + outputs -
aliases (`overlap.analysis.memory.memory_analysis_peak`).
"""

from __future__ import annotations

from overlap.analysis.plans import _policy, _target, baseline_for, plan_row
from overlap.report.units import format_bytes, format_ps, format_rate


def render_plans(plans: list[dict]) -> str:
    if not plans:
        return "no plans"
    targets = sorted({_target(m) for m in plans})
    out = [f"PLAN (compiled for {', '.join(targets)}, not run; transfer hiding is a roofline "
           "estimate)"]
    head = (f"{'plan':<34}{'device peak':>13}{'temp':>12}{'host temp':>12}"
            f"{'D2H/step':>12}{'H2D/step':>12}{'hidden*':>9}{'exposed*':>11}")
    out.append(head)
    for m in plans:
        r = plan_row(m)
        name = str(r["label"] or r["policy"])[:33]
        if r["status"] != "ok":
            what = "DOES NOT FIT" if r["status"] == "does_not_fit" else "COMPILE ERROR"
            out.append(f"{name:<34}{what}: {str(r['error'] or '')[:120]}")
            continue
        hf = r["predicted_hidden_fraction"]
        exposed = ("none" if hf is not None and not r["predicted_exposed_ps"]
                   else format_ps(r["predicted_exposed_ps"] if hf is not None else None))
        out.append(
            f"{name:<34}{format_bytes(r['device_peak_bytes']):>13}"
            f"{format_bytes(r['temp_bytes']):>12}"
            f"{format_bytes(r['host_temp_bytes']):>12}{format_bytes(r['d2h_per_step']):>12}"
            f"{format_bytes(r['h2d_per_step']):>12}"
            f"{('-' if hf is None else f'{100 * hf:.0f}%'):>9}"
            f"{exposed:>11}")
    for t in targets:
        for m in plans:
            base = baseline_for(plans, t, m)
            if _target(m) != t or m.get("status") != "ok" or (
                    base is not None and _policy(m) == _policy(base)):
                continue
            r = plan_row(m)
            line = f"{t} {r['policy']}: "
            parts = []
            if base is not None:
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
                be = r["break_even_Bps"]
                hf = r["predicted_hidden_fraction"]
                link = format_rate(
                    ((m.get("estimate") or {}).get("model") or {}).get("host_link_Bps"))
                if be is None or be > 1e13:  # beyond any host link: nothing real beside it
                    parts.append("estimated NOT to hide: the compiler scheduled (almost) no work "
                                 "between the copies' start and done")
                else:
                    parts.append(f"estimated {100 * (hf or 0):.0f}% hidden at {link}; every copy "
                                 f"hides only if the host link gives at least {format_rate(be)}")
            else:
                parts.append("plans no host transfers")
            if r["fits"] is False:
                parts.append(f"device peak {format_bytes(r['device_peak_bytes'])} exceeds the "
                             f"target's {format_bytes(r['device_memory_bytes'])}")
            out.append(line + "; ".join(parts))
            for n in m.get("notes") or []:
                out.append(f"  note: {n}")
    seen = set()
    for m in plans:
        model = (m.get("estimate") or {}).get("model")
        if not model or model.get("target") in seen:
            continue
        seen.add(model.get("target"))
        out.append(f"* estimate model ({model.get('target')}): "
                   f"HBM {format_rate(model.get('hbm_Bps'))}, "
                   f"bf16 {model.get('peak_flops_bf16', 0) / 1e12:.0f} TFLOP/s, "
                   f"f32 {model.get('peak_flops_f32', 0) / 1e12:.0f} TFLOP/s, host link "
                   f"{format_rate(model.get('host_link_Bps'))} ({model.get('host_link')}); "
                   "peaks, not achieved rates")
    return "\n".join(out)
