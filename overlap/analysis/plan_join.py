"""Predicted beside measured: a plan run joined to a measured run of the same program.

A plan compiles a program for a target, never runs it, and predicts (`overlap.hlo.schedule`:
roofline + host-link model) how much of its host copies' in-flight time hides behind compute
and how long the step waits for them. A measured run of the same program shows what did
happen. This module decides which plan, if any, predicts a measured run and puts the two side
by side without mixing them: every predicted number travels with `label`
"predicted (plan for TARGET)", and the plan it came from is named.

Same program (:func:`match`), all of:

* the plan compiled (`status` ok) and carries an estimate;
* module name: the plan's fingerprint module (`program.module`, else `module`) equals the run's
  (run.json `program.module`); a run whose manifest names none (a bare jax.profiler capture)
  is matched on the modules its trace's copies ran in (`copy_modules`), and `matched_by` says
  so;
* input fingerprint (hash of the step inputs' shapes and dtypes, `overlap.capture.api`): equal
  when both record one; where either lacks it the match rests on the module name, said;
* policy: the same policy name when both name one (every policy's compile of a step has the
  same module name and inputs); a run of unknown policy joins only a plan that is the one
  plan of that program for its target;
* target: the plan's platform is the run's backend and, when a device kind of the run names a
  target (`target_of`, e.g. `overlap.plan.targets.target_for_device_kind`), that target is the
  plan's.

A plan of the same module that fails one of these is not joined; why is kept in `notes`.

Numbers of a joined pair (per step = one execution of the step program):

* predicted hidden fraction and exposed ps per step: the plan estimate's `per_step` (overall
  and per direction), at the link bandwidth the plan assumed (`predicted_link_Bps`);
* measured hidden fraction: the run's overlap ratio (hidden / in-flight time over the capture);
  measured exposed ps per step: mean exposed wall time per annotated step (None without step
  annotations: a capture's total is not one step's).

Blind spots: the fingerprint does not cover compiler flags or versions (the plan's jax/XLA
versions are named beside the pair), nor a plan made for a different topology of the target.
"""

from __future__ import annotations

import re
from typing import Any, Callable

_PID = re.compile(r"\(\d+\)\s*$")


def module_base(name: str | None) -> str | None:
    """`jit_f(123)` (a capture's module with its program id) -> `jit_f`."""
    return None if not name else _PID.sub("", str(name)).strip() or None


def plan_program(plan: dict) -> dict[str, Any]:
    """The plan's fingerprint: module name and input fingerprint (None where not recorded:
    plans written before plans recorded inputs)."""
    raw = plan.get("program")
    prog: dict[str, Any] = raw if isinstance(raw, dict) else {}
    return {"module": module_base(prog.get("module") or plan.get("module")),
            "inputs": prog.get("inputs")}


def _target(plan: dict) -> dict[str, Any]:
    t = plan.get("target")
    return t if isinstance(t, dict) else {"name": str(t or "?")}


def _policy(m: dict) -> str | None:
    p = m.get("policy")
    name = p.get("name") if isinstance(p, dict) else p
    return None if name in (None, "", "unknown", "as given") else str(name)


def match(run: dict, plan: dict, target_of: Callable[[str], str | None] | None = None
          ) -> tuple[bool, str]:
    """(True, how it matched) when `plan` compiled the program `run` measured, else (False, why
    not). `run` is a compare summary (`overlap.analysis.compare.summarize_run`): `program`,
    `copy_modules`, `device_kinds`, `backend`, `policy`."""
    pp = plan_program(plan)
    tgt = _target(plan)
    tname = str(tgt.get("name") or "?")
    label = plan.get("label") or "plan"
    if plan.get("status") != "ok" or not isinstance(plan.get("estimate"), dict):
        return False, f"plan {label} ({tname}) has no estimate (status {plan.get('status')})"
    rp = run.get("program") or {}
    how = []
    run_mod = module_base(rp.get("module"))
    if run_mod:
        if run_mod != pp["module"]:
            return False, (f"plan {label} compiled {pp['module']}, the run measured {run_mod}")
        how.append("module name")
    else:
        mods = {module_base(m) for m in run.get("copy_modules") or []} - {None}
        if pp["module"] not in mods:
            return False, (f"plan {label} compiled {pp['module']}; the run's copies ran in "
                           f"{', '.join(sorted(m for m in mods if m)) or 'no named module'}")
        how.append("module name of the capture's copies (the run records no fingerprint)")
    ri, pi = rp.get("inputs"), pp["inputs"]
    if ri and pi:
        if ri != pi:
            return False, (f"plan {label}: same module {pp['module']}, other input shapes or "
                           f"dtypes (input fingerprints {pi} vs {ri})")
        how.append("input shapes and dtypes")
    else:
        how.append("inputs not compared (" + ("the plan" if not pi else "the run")
                   + " records no input fingerprint)")
    rpol, ppol = _policy(run), _policy(plan)
    if rpol and ppol:
        if rpol != ppol:
            return False, f"plan {label} is policy {ppol}, the run {rpol}"
        how.append("policy")
    platform = str(tgt.get("platform") or "")
    backend = str(run.get("backend") or "")
    if platform and backend and not _same_platform(platform, backend, run.get("platform")):
        return False, f"plan {label} is for {tname} ({platform}), the run ran on {backend}"
    kinds = [k for k in run.get("device_kinds") or [] if k]
    if target_of is not None:
        named = {t for t in (target_of(k) for k in kinds) if t}
        if named and tname not in named:
            return False, (f"plan {label} is for {tname}, the run ran on "
                           f"{', '.join(kinds)} ({', '.join(sorted(named))})")
        if named:
            how.append(f"target {tname} from the device kind")
    return True, ", ".join(how)


# A plan names its compiler's platform (jax's "cuda", "tpu"); a capture its trace backend
# ("gpu", "tpu") and, in `platform`, the devices' vendors ("gpu (NVIDIA)").
_PLAN_BACKEND = {"cuda": ("gpu", "NVIDIA"), "rocm": ("gpu", "AMD")}


def _same_platform(plan_platform: str, backend: str, run_platform: Any) -> bool:
    """Whether a plan compiled for `plan_platform` can be of a run on trace backend `backend`:
    a CUDA plan joins a GPU capture unless the capture names other vendors' devices only."""
    if plan_platform == backend:
        return True
    want = _PLAN_BACKEND.get(plan_platform)
    if want is None or want[0] != backend:
        return False
    vendors = str(run_platform or "").partition("(")[2]
    return not vendors or want[1] in vendors


def predicted_beside(run: dict, plans: list[dict],
                     target_of: Callable[[str], str | None] | None = None) -> dict[str, Any]:
    """`{"pairs": [...], "notes": [...]}` for one measured run: one pair per plan of its
    program (see the module docstring), each with the predicted and the measured numbers and
    `label` "predicted (plan for TARGET)"; notes say why plans of its module were not joined."""
    ok: list[tuple[dict, str]] = []
    notes: list[str] = []
    run_mod = module_base((run.get("program") or {}).get("module"))
    mods = {run_mod} if run_mod else {module_base(m) for m in run.get("copy_modules") or []}
    for plan in plans:
        good, how = match(run, plan, target_of)
        if good:
            ok.append((plan, how))
        elif plan_program(plan)["module"] in mods:  # another module is no news
            notes.append(how)
    if not _policy(run):
        # A run of unknown policy: a program's several policy plans for one target cannot be
        # told apart by fingerprint, so none of them is its prediction.
        by_target: dict[str, list[dict]] = {}
        for plan, _ in ok:
            by_target.setdefault(str(_target(plan).get("name")), []).append(plan)
        for t, same in by_target.items():
            if len(same) > 1:
                notes.append(f"{len(same)} plans of this program for {t} "
                             f"({', '.join(str(p.get('label')) for p in same)}) and the run "
                             "names no policy: none joined")
                ok = [(p, h) for p, h in ok if str(_target(p).get("name")) != t]
    return {"pairs": [pair(run, plan, how) for plan, how in ok], "notes": notes}


def pair(run: dict, plan: dict, matched_by: str) -> dict[str, Any]:
    """One run beside one plan's prediction (JSON-safe)."""
    est = plan.get("estimate") or {}
    per = est.get("per_step") or {}
    tname = str(_target(plan).get("name") or "?")
    model = est.get("model") or {}
    measured_exposed = run.get("exposed_ps_per_step") if run.get("per_step", True) else None
    return {
        "label": f"predicted (plan for {tname})",
        "plan": plan.get("label"), "target": tname, "policy": _policy(plan),
        "matched_by": matched_by,
        "note": "predicted = the plan's roofline estimate (compiled for the target, not run); "
                "measured = this run",
        "predicted_hidden_fraction": (per.get("all") or {}).get("hidden_fraction"),
        "predicted_exposed_ps_per_step": (per.get("all") or {}).get("exposed_ps"),
        "predicted_link_Bps": {d: (per.get(d) or {}).get("link_Bps") or model.get(
            "host_link_Bps" if d == "D2H" else "h2d_link_Bps") for d in ("D2H", "H2D")},
        "measured_hidden_fraction": run.get("overlap_ratio"),
        "measured_exposed_ps_per_step": measured_exposed,
        "by_direction": {d: {"predicted_hidden_fraction": (per.get(d) or {}).get(
                                 "hidden_fraction"),
                             "predicted_exposed_ps_per_step": (per.get(d) or {}).get(
                                 "exposed_ps"),
                             "measured_hidden_fraction": run.get(f"{d.lower()}_overlap")}
                         for d in ("D2H", "H2D")},
        "plan_versions": plan.get("versions"),
    }


def join_rows(rows: list[dict], plans: list[dict],
              target_of: Callable[[str], str | None] | None = None) -> list[str]:
    """Adds `predicted` ({"pairs", "notes"}) to each measured compare row whose program a plan
    compiled or whose module a plan names; returns one line per unjoined plan of such a module."""
    notes: list[str] = []
    for r in rows:
        got = predicted_beside(r, plans, target_of)
        if got["pairs"] or got["notes"]:
            r["predicted"] = got
            notes += [f"{r['label']}: no prediction joined: {n}" for n in got["notes"]]
    return notes
