"""Predicted against measured, as text (`overlap report CAPTURE --predict`).

Every predicted number is in a column or line that says "predicted" (the plan estimate of the
captured program, `overlap.plan.predict`, or with `--plan` the plan run's own estimate, whose
header names "predicted (plan for TARGET)"), beside the measured one from the same capture;
the estimate's assumptions are printed under the table.
"""

from __future__ import annotations

from overlap.report.units import format_bytes, format_ps, format_rate


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def render_prediction(section: dict) -> str:
    if section.get("joined") is False:  # `--plan` of another program: said, nothing joined
        return (f"no prediction joined: plan {section.get('plan')} ({section['target']}) is not "
                f"of this capture's program: {section.get('reason')}")
    label = section.get("label")
    out = [f"PREDICTED vs MEASURED ({section['target']}, {section['target_source']}; "
           + (f"{label} = the plan run's estimate, not a measurement; matched by "
              f"{section.get('matched_by')})" if label else
              "predicted = the plan estimate of the captured program, not a measurement)")]
    for prog in section["programs"]:
        out.append(f"program {prog['module']}:")
        out.append(f"{'op':<16}{'dir':<5}{'n':>5}{'bytes':>11}{'measured':>11}{'predicted':>11}"
                   f"{'ratio':>7}{'at meas. link':>15}{'hidden':>9}{'hidden':>11}")
        out.append(f"{'':<37}{'in flight':>11}{'in flight':>11}{'':>7}{'(predicted)':>15}"
                   f"{'measured':>9}{'predicted':>11}")
        for r in prog["ops"]:
            m, p = r["measured"] or {}, r["predicted"]
            again = p.get("at_measured_link") or {}
            ratio = r["duration_ratio"]
            out.append(
                f"{r['op'][:15]:<16}{r['direction']:<5}{m.get('count', 0):>5}"
                f"{format_bytes(r['bytes']):>11}{format_ps(m.get('duration_ps')):>11}"
                f"{format_ps(p['duration_ps']):>11}"
                f"{('-' if ratio is None else f'{ratio:.2f}x'):>7}"
                f"{format_ps(again.get('duration_ps')):>15}"
                f"{_pct(m.get('hidden_fraction')):>9}{_pct(p['hidden_fraction']):>11}")
        ml = prog.get("measured_link") or {}
        if ml:
            parts = [f"{d} {format_rate(v.get('link_Bps'))} (per copy "
                     f"{format_rate(v.get('per_copy_Bps'))})" for d, v in ml.items()]
            out.append("measured host link (bytes / time a copy of that direction was in flight, "
                       "per device): " + ", ".join(parts))
        model = prog.get("model") or {}
        out.append(f"predicted at {format_rate(model.get('host_link_Bps'))} D2H / "
                   f"{format_rate(model.get('h2d_link_Bps'))} H2D ({model.get('host_link')}); "
                   "'at meas. link': the same estimate at the measured link bandwidth")
        if prog.get("plan_with_measured_bandwidth"):
            out.append(f"plan with the measured link: {prog['plan_with_measured_bandwidth']}")
        for a in prog.get("assumptions") or []:
            out.append(f"  assumes: {a}")
    for n in section.get("notes") or []:
        out.append(f"note: {n}")
    return "\n".join(out)
