"""`overlap compare` as text: the runs table, verdicts, break-even, "did offload happen?", and
the plans (compiled, not run) beside them. Numbers come from `overlap.analysis.compare` and
`overlap.analysis.plans`; this module only lays them out.
"""

from __future__ import annotations

from typing import Any

from overlap.report.plan_text import render_plans
from overlap.report.units import format_bytes as _mib
from overlap.report.units import format_ps


def _ms(ns) -> str:
    return "-" if ns is None else f"{ns / 1e6:.2f} ms"


def _ratio(x) -> str:
    return "-" if x is None else f"{x * 100:.0f}%"


def _delta(x) -> str:
    return "" if x is None else f" ({'+' if x >= 0 else '-'}{abs(x) * 100:.1f}%)"


def _per(r: dict, direction: str, unit: str) -> str:
    """Bytes per step; `+?` where some copies' sizes are unknown; marked per capture where
    this run has no step annotations."""
    unknown = (r.get("unknown_bytes") or {}).get(direction)
    cell = _mib(r[f"{direction.lower()}_bytes_per_step"]) + ("+?" if unknown else "")
    return cell + " cap" if unit == "/step" and not r.get("per_step", True) else cell


def render_text(res: dict[str, Any]) -> str:
    out = []
    plans = res.get("plan_manifests") or []
    if not res.get("runs"):
        parts = [render_plans(plans)] if plans else []
        parts += _failed_lines(res)
        # (what was left out, said here too: a directory of plans alone named no damaged one)
        parts += [f"note: {note}" for note in res.get("left_out") or []]
        return "\n".join(parts).strip("\n") if parts else "no runs"
    if res["synthetic"]:
        out.append("SYNTHETIC data in this comparison (written by overlap.trace.synthetic)")
    if res.get("mixed_platforms"):
        out.append("WARNING: these runs come from different platforms (" + ", ".join(
            res["mixed_platforms"]) + "): only runs of the baseline's platform and program "
            "are judged against it; the others are listed as not compared")
    if res.get("mixed_programs"):
        out.append("WARNING: these runs are different programs (" + ", ".join(
            res["mixed_programs"]) + "): only runs of the baseline's program are judged "
            "against it; the others say what differs")
    if res.get("mixed_made"):
        out.append("WARNING: these runs were made with other XLA flags or another runtime ("
                   + "; ".join(res["mixed_made"]) + "): each is another experiment, judged "
                   "against a baseline made the same way (below)")
    baseline = res["baseline"] or "(none: no run is known to be a remat run; give --baseline)"
    out.append(f"baseline: {baseline}"
               + (f"   no-remat reference: {res['no_remat']}" if res["no_remat"] else ""))
    # "/step" only where every run has step annotations: without them the byte counts are
    # per capture (analysis.compare.executed_copies divides by one), and marked so.
    unit = "/step" if all(r.get("per_step", True) for r in res["runs"]) else (
        "/capture" if not any(r.get("per_step", True) for r in res["runs"]) else "/step")
    head = (f"{'run':<22}{'step (median)':>22}{'spread':>18}{'peak memory':>24}"
            f"{'D2H' + unit:>14}{'H2D' + unit:>14}{'D2H hid':>8}{'H2D hid':>8}"
            f"{'exposed' + unit:>16}")
    out.append(head)
    for r in res["runs"]:
        spread = "-" if r["step_ns_min"] is None else \
            f"{r['step_ns_min'] / 1e6:.2f}-{r['step_ns_max'] / 1e6:.2f}"
        peak = _mib(r["peak_bytes"])
        exp = "-" if r["exposed_ps_per_step"] is None else _ms(r["exposed_ps_per_step"] / 1000)
        name = r["label"] + (" *" if r["is_baseline"] else "")
        sd = _delta(r['step_delta']) if r.get("step_called") or r.get("is_baseline") else (
            " (~noise)" if r.get("step_delta") is not None else "")
        out.append(f"{name:<22}{_ms(r['step_ns_median']) + sd:>22}"
                   f"{spread:>18}{peak + _delta(r['peak_delta']):>24}"
                   f"{_per(r, 'D2H', unit):>14}{_per(r, 'H2D', unit):>14}"
                   f"{_ratio(r['d2h_overlap']):>8}{_ratio(r['h2d_overlap']):>8}{exp:>16}")
    if unit == "/step" and not all(r.get("per_step", True) for r in res["runs"]):
        out.append("(runs marked 'cap' have no step annotations: their bytes are per capture, "
                   "not per step)")
    out.append("(* baseline; deltas in parentheses are against it, '~noise' where the 99% CI "
               "includes 0, the change is < 2% or a run has < 5 steps; step times are "
               + ", ".join(sorted({r['step_source'] for r in res['runs']})) + ")")
    if res.get("step_timing"):
        out.append(f"(step times {res['step_timing']})")
    out.append("(peak memory: " + "; ".join(sorted({str(r.get('peak_source'))
                                                     for r in res['runs']})) + ")")
    out.append("")
    for v in res["verdicts"]:
        out.append(v)
    out.extend(_answer_lines(res))
    out.extend(_group_lines(res))
    be = res["breakeven"]
    if be and be.get("recompute_ns_per_step") is None:
        out.append("")
        out.append(f"break-even: {be.get('note')} ({be['from']})")
    elif be:
        out.append("")
        out.append(f"break-even: recomputing costs {_ms(be['recompute_ns_per_step'])} per step "
                   f"({be['from']})")
        for o in be["offload"]:
            pays = {True: "offload pays", False: "offload does not pay",
                    None: "unknown (no transfers measured)"}[o["pays"]]
            out.append(f"  {o['label']}: transfers wait {_ms(o['exposed_ns_per_step'])} per step "
                       f"of {_ms(o['in_flight_ns_per_step'])} in flight -> {pays}")
    for r in res["runs"]:
        chk = r["offload_happened"]
        if r["offloads"] or chk["status"] in ("yes", "partly"):
            out.append("")
            out.append(f"did offload happen in {r['label']}? {chk['answer']}")
            out.extend("  " + line for line in chk["lines"])
    out.extend(_predicted_lines(res))
    out.extend(_failed_lines(res))
    if plans:
        out.append("")
        out.append(render_plans(plans))
    for note in res.get("left_out") or []:
        out.append(f"note: {note}")
    for r in res.get("runs") or []:
        if r.get("session_note"):
            out.append(f"note: {r['session_note']}")
    return "\n".join(out)


def _predicted_lines(res: dict[str, Any]) -> list[str]:
    """Measured beside predicted for each run a plan of its program predicts
    (`overlap.analysis.plan_join`): every predicted number next to "predicted (plan for T)"."""
    out: list[str] = []
    for r in res.get("runs") or []:
        for p in (r.get("predicted") or {}).get("pairs") or []:
            exp_m = p["measured_exposed_ps_per_step"]
            exp_p = p["predicted_exposed_ps_per_step"]
            out += ["", f"measured vs {p['label']} for {r['label']} (plan {p['plan']}; "
                        f"matched by {p['matched_by']}):",
                    f"  hidden:  measured {_ratio(p['measured_hidden_fraction'])}   "
                    f"{p['label']} {_ratio(p['predicted_hidden_fraction'])}",
                    f"  exposed per step:  measured "
                    f"{'- (no step annotations)' if exp_m is None else format_ps(exp_m)}   "
                    f"{p['label']} {format_ps(exp_p)}"]
            for d, v in p["by_direction"].items():
                if v["predicted_hidden_fraction"] is not None or v["measured_hidden_fraction"] \
                        is not None:
                    out.append(f"  {d} hidden:  measured {_ratio(v['measured_hidden_fraction'])}"
                               f"   {p['label']} {_ratio(v['predicted_hidden_fraction'])}")
            link = p.get("predicted_link_Bps") or {}
            out.append("  (the prediction is the plan's roofline estimate at "
                       + ", ".join(f"{d} {v / 1e9:.1f} GB/s" for d, v in link.items() if v)
                       + " host link; compiled for the target, not run)")
    for n in res.get("prediction_notes") or []:
        out.append(f"note: {n}")
    return out


def _group_lines(res: dict[str, Any]) -> list[str]:
    """The experiments other than the baseline's (`overlap.analysis.compare.experiment_groups`),
    each with its own baseline and verdicts."""
    out: list[str] = []
    for g in (res.get("groups") or [])[1:]:
        out += ["", f"experiment: {g['program']} on {g['platform']}, {g['made_with']} "
                    f"({len(g['runs'])} run{'s' if len(g['runs']) != 1 else ''})",
                f"  baseline: {g['baseline'] or '(no remat run among them)'}"]
        out += [f"  {v}" for v in g["verdicts"]] or ["  (one run: nothing to compare)"]
    return out


def _answer_lines(res: dict[str, Any]) -> list[str]:
    """Same answer? Each run's loss and gradients against its baseline's
    (`overlap.analysis.answers`); only where some run recorded them, so that a comparison of
    older captures reads as before."""
    runs = res.get("runs") or []
    if not any(r.get("answer") for r in runs):
        return []
    out = ["", "same answer? (loss and gradient fingerprint on the same inputs, against the "
               "baseline; overlap.analysis.answers)"]
    for r in runs:
        chk = r.get("answer_check") or {}
        mark = "  !! " if chk.get("status") == "differs" else "     "
        out.append(f"{mark}{r['label']}: {chk.get('text') or 'not recorded'}")
    return out


def _failed_lines(res: dict[str, Any]) -> list[str]:
    """Captures whose step did not complete (`overlap.analysis.failed_runs`): one row each."""
    from overlap.analysis.failed_runs import verdict

    rows = res.get("did_not_run") or []
    if not rows:
        return []
    out = ["", "did not run (no capture: the step did not complete):"]
    for r in rows:
        err = str(r.get("error") or "")
        err = err if len(err) <= 160 else err[:80] + " ... " + err[-80:]
        out.append(f"  {r['label']:<22}{verdict(r)}")
        out.append(f"  {'':<22}{err}")
    return out
