"""`overlap report CAPTURE --predict`: the estimate of the program a capture ran, beside it.

A capture carries the compiled, scheduled HloProto of every program it ran (`/host:metadata`).
For each program whose copies the capture measured, this prints that proto as HLO text (XLA's
own printer, through jaxlib), runs the plan estimate on it for the capture's target (from the
device kind, or `--target`), and joins the estimate's copy ops to the measured ones by name
(`overlap.analysis.predict`). It runs the estimate twice: at the target's data-sheet link
bandwidth, and at the link bandwidth the capture measured, which separates "the link was
slower than the sheet" from "the model is wrong about the schedule".

`overlap report CAPTURE --plan PLAN_RUN` (:func:`predict_from_plan`) does the same join with a
plan run's own estimate in place of the captured proto's, when the plan compiled the program
the capture measured (`overlap.analysis.plan_join.match`: module, inputs, policy, target);
otherwise the section says why nothing was joined.
"""

from __future__ import annotations

import re
from typing import Any

from overlap.errors import UsageError
from overlap.plan.targets import Target, get_target, target_for_device_kind

_PID_RE = re.compile(r"\((\d+)\)\s*$")


def _target_name(trace, target: str | None) -> tuple[str, str]:
    if target:
        return get_target(target).name, "given with --target"
    kinds = []
    devices = getattr(trace, "devices", None)
    if devices is not None and len(devices) and "name" in devices.columns:
        kinds = [str(k) for k in devices["name"].dropna().unique()]
    for k in kinds:
        name = target_for_device_kind(k)
        if name:
            return name, f"from the capture's device kind {k!r}"
    raise UsageError("cannot tell the target from the capture's device kind "
                     f"({', '.join(kinds) or 'none recorded'}); pass --target")


def predict_capture(trace, result: dict, *, target: str | None = None,
                    host_link_Bps: float | None = None, h2d_link_Bps: float | None = None,
                    kernel_floor_us: float | None = None) -> dict[str, Any]:
    """The `prediction` section of a report (JSON-safe): per program with measured copies, the
    estimate's ops beside the measured ones, the measured link bandwidth per direction, and the
    assumptions. Raises UsageError when the capture carries no program to predict."""
    from overlap.analysis.predict import join, link_throughput
    from overlap.hlo.program import hlo_text_from_proto
    from overlap.plan.estimate import estimate_for

    tname, tsource = _target_name(trace, target)
    tgt = get_target(tname)
    transfers = trace.transfers
    pids = []
    if "program_id" in transfers.columns:
        pids = sorted({int(p) for p in transfers["program_id"].dropna().unique()})
    modules = trace.modules
    by_pid: dict[int, tuple[str, bytes]] = {}
    for name, proto in zip(modules["name"], modules["hlo_proto"]):
        m = _PID_RE.search(str(name))
        if m and proto:
            by_pid[int(m.group(1))] = (str(name), bytes(proto))
    programs = []
    notes = []
    for pid in pids:
        if pid not in by_pid:
            notes.append(f"program {pid}: the capture carries no HloProto for it")
            continue
        name, proto = by_pid[pid]
        text = hlo_text_from_proto(proto)
        est = estimate_for(text, tgt, host_link_Bps=host_link_Bps, h2d_link_Bps=h2d_link_Bps,
                           kernel_floor_us=kernel_floor_us)
        measured = link_throughput(transfers, pid)
        d2h = (measured.get("D2H") or {}).get("link_Bps")
        h2d = (measured.get("H2D") or {}).get("link_Bps")
        again = None
        if d2h or h2d:
            again = estimate_for(text, tgt, host_link_Bps=d2h or h2d, h2d_link_Bps=h2d or d2h,
                                 kernel_floor_us=kernel_floor_us)
        rows = join(result, est, estimate_at_measured=again)
        suggest = None
        one_way = d2h or h2d
        if one_way:
            suggest = (f"overlap plan --target {tname} --host-bandwidth {one_way / 1e9:.1f}"
                       + (f" --host-bandwidth-h2d {h2d / 1e9:.1f}" if h2d and d2h else ""))
        programs.append({
            "module": name, "program_id": pid, "ops": rows,
            "measured_link": measured, "plan_with_measured_bandwidth": suggest,
            "model": est["model"], "assumptions": est["assumptions"],
            "predicted_per_step": est["per_step"],
            "predicted_per_step_at_measured_link": again["per_step"] if again else None,
        })
    if not programs:
        raise UsageError("nothing to predict: the capture has no copies of a program whose "
                         "HloProto it carries" + (f" ({'; '.join(notes)})" if notes else ""))
    return {
        "kind": "prediction",
        "note": "predicted = the plan estimate of the captured program (roofline + host-link "
                "model), not a measurement; measured = this capture",
        "target": tname, "target_source": tsource, "programs": programs, "notes": notes,
    }


def _program_entry(text: str | None, est: dict, tgt: Target, transfers, pid: int | None,
                   result: dict, name: str, *, kernel_floor_us: float | None = None
                   ) -> dict[str, Any]:
    """One program's rows: `est`'s ops beside the measured ones, the measured link, and (when
    the HLO text is at hand) the same estimate at the measured link bandwidth."""
    from overlap.analysis.predict import join, link_throughput
    from overlap.plan.estimate import estimate_for

    measured = link_throughput(transfers, pid)
    d2h = (measured.get("D2H") or {}).get("link_Bps")
    h2d = (measured.get("H2D") or {}).get("link_Bps")
    again = None
    if text and (d2h or h2d):
        again = estimate_for(text, tgt, host_link_Bps=d2h or h2d, h2d_link_Bps=h2d or d2h,
                             kernel_floor_us=kernel_floor_us)
    one_way = d2h or h2d
    suggest = None
    if one_way:
        suggest = (f"overlap plan --target {tgt.name} --host-bandwidth {one_way / 1e9:.1f}"
                   + (f" --host-bandwidth-h2d {h2d / 1e9:.1f}" if h2d and d2h else ""))
    return {"module": name, "program_id": pid,
            "ops": join(result, est, estimate_at_measured=again),
            "measured_link": measured, "plan_with_measured_bandwidth": suggest,
            "model": est.get("model") or {}, "assumptions": est.get("assumptions") or [],
            "predicted_per_step": est.get("per_step"),
            "predicted_per_step_at_measured_link": again["per_step"] if again else None}


def predict_from_plan(trace, result: dict, plan: dict, run: dict,
                      hlo_text: str | None = None) -> dict[str, Any]:
    """The `prediction` section for `overlap report CAPTURE --plan PLAN_RUN` (JSON-safe):
    `joined` False with `reason` when the plan did not compile the capture's program, else the
    plan's estimate per copy op beside the measured copies, as :func:`predict_capture` lays it
    out. `run`: the capture's fingerprint as `overlap.analysis.plan_join.match` reads it."""
    from overlap.analysis.plan_join import match, module_base

    tname = str((plan.get("target") or {}).get("name") if isinstance(plan.get("target"), dict)
                else plan.get("target") or "?")
    label = f"predicted (plan for {tname})"
    ok, how = match(run, plan, target_for_device_kind)
    base = {"kind": "prediction", "label": label, "plan": plan.get("label"), "target": tname,
            "target_source": f"plan {plan.get('label')}, compiled for {tname}, not run",
            "note": "predicted = the plan run's roofline estimate (compiled for the target, "
                    "not run), not a measurement; measured = this capture"}
    if not ok:
        return {**base, "joined": False, "reason": how, "programs": [], "notes": []}
    tgt = get_target(tname)
    transfers = trace.transfers
    want = module_base((plan.get("program") or {}).get("module") or plan.get("module"))
    pids = []
    if "program_id" in transfers.columns:
        pids = sorted({int(p) for p in transfers["program_id"].dropna().unique()})
    names = {}
    for name in trace.modules["name"].astype(str):
        m = _PID_RE.search(name)
        if m and module_base(name) == want and int(m.group(1)) in pids:
            names[int(m.group(1))] = name
    notes = []
    rid = (run.get("program") or {}).get("program_id")
    if rid is not None and int(rid) in names:
        names = {int(rid): names[int(rid)]}  # run.json says which compile ran
    elif len(names) > 1:
        notes.append(f"{len(names)} compiles of {want} moved copies in this capture; each is "
                     "shown against the plan")
    kernel_floor_us = None
    fl = ((plan.get("estimate") or {}).get("model") or {}).get("kernel_floor_ps")
    if fl is not None:
        kernel_floor_us = fl / 1e6
    programs = [_program_entry(hlo_text, plan["estimate"], tgt, transfers, pid, result, name,
                               kernel_floor_us=kernel_floor_us)
                for pid, name in sorted(names.items())]
    if not programs:  # copies without program ids (GPU): the capture's copies as one program
        programs = [_program_entry(hlo_text, plan["estimate"], tgt, transfers, None, result,
                                   want or "?", kernel_floor_us=kernel_floor_us)]
    return {**base, "joined": True, "matched_by": how, "programs": programs, "notes": notes}
