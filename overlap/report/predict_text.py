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
    if section.get("predicted") is False:  # the captured program(s) cannot be read: said
        return "\n".join([f"PREDICTED vs MEASURED ({section['target']}): {section['note']}",
                          *_join_lines(section),
                          *(f"note: {n}" for n in section.get("notes") or [])])
    label = section.get("label")
    out = [f"PREDICTED vs MEASURED ({section['target']}, {section['target_source']}; "
           + (f"{label} = the plan run's estimate, not a measurement; matched by "
              f"{section.get('matched_by')})" if label else
              "predicted = the plan estimate of the captured program, not a measurement)")]
    for prog in section["programs"]:
        out.append(f"program {prog['module']}:")
        # the op column as wide as the longest name (up to 32): `dynamic-update-slice-start.N`
        # rows differ only at the end
        w = min(32, max([15] + [len(r["op"]) for r in prog["ops"]])) + 1
        out.append(f"{'op':<{w}}{'dir':<5}{'n':>5}{'bytes':>11}{'measured':>11}{'predicted':>11}"
                   f"{'ratio':>7}{'at meas. link':>15}{'hidden':>9}{'hidden':>11}")
        out.append(f"{'':<{w + 21}}{'span':>11}{'span':>11}{'':>7}{'(predicted)':>15}"
                   f"{'measured':>9}{'predicted':>11}")
        for r in prog["ops"]:
            m, p = r["measured"] or {}, r["predicted"]
            again = p.get("at_measured_link") or {}
            ratio = r["duration_ratio"]
            out.append(
                f"{r['op'][:w - 1]:<{w}}{r['direction']:<5}{m.get('count', 0):>5}"
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
        out += _per_step_lines(prog)
        model = prog.get("model") or {}
        out.append(f"predicted at {format_rate(model.get('host_link_Bps'))} D2H / "
                   f"{format_rate(model.get('h2d_link_Bps'))} H2D ({model.get('host_link')}); "
                   "'at meas. link': the same estimate at the measured link bandwidth")
        if prog.get("plan_with_measured_bandwidth"):
            out.append(f"plan with the measured link: {prog['plan_with_measured_bandwidth']}")
        for a in prog.get("assumptions") or []:
            out.append(f"  assumes: {a}")
    out += _join_lines(section)
    for n in section.get("notes") or []:
        out.append(f"note: {n}")
    return "\n".join(out)


def _per_step_lines(prog: dict) -> list[str]:
    """Exposed time and hidden share per step and direction, measured beside predicted, on one
    span definition (`overlap.analysis.predict.SPAN_DEFINITION`, printed under them)."""
    meas = prog.get("measured_per_step_as_captured")
    pred = prog.get("predicted_per_step_as_captured")
    if not meas or not pred:
        return []
    again = prog.get("predicted_per_step_as_captured_at_measured_link") or {}
    out = [f"per step ({prog.get('runs'):.3g} runs of the program in the capture, counted from "
           "its copies): exposed measured / predicted / predicted at meas. link, hidden "
           "measured / predicted"]
    for d in ("D2H", "H2D"):
        m, p, a = meas.get(d) or {}, pred.get(d) or {}, again.get(d) or {}
        if not m.get("transfers") and not p.get("transfers"):
            continue
        out.append(f"  {d}: exposed {format_ps(m.get('exposed_ps'))} / "
                   f"{format_ps(p.get('exposed_ps'))} / {format_ps(a.get('exposed_ps'))}, "
                   f"hidden {_pct(m.get('hidden_fraction'))} / {_pct(p.get('hidden_fraction'))}")
    if prog.get("span_definition"):
        out.append(f"  one definition on both sides: {prog['span_definition']}")
    return out


def _join_lines(section: dict) -> list[str]:
    """How many measured copies were joined to an op of the program, and why the rest were not
    (`overlap.analysis.copy_join`)."""
    n = section.get("transfers")
    if n is None:
        return []
    out = [f"joined {section.get('copies_joined')} of {n} measured copies to an HLO op"]
    for g in section.get("unjoined_groups") or []:
        out.append(f"  not joined: {g['count']} {g['direction']} {g['hlo_op']} "
                   f"({format_bytes(g['bytes'])}): {g['reason']}")
    return out
