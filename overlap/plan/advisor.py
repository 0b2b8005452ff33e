"""Which remat/offload policy should this step use on that target? Compile them all, rank them.

`advise(step_factory, state, batch, target=...)` (a user's step, as `plan_step` takes it) and
`advise_workload(spec, target)` (a built-in or `module:function` workload) compile the step
under every policy that applies to it, with the target's real compiler and no hardware, write
each distinct program as a plan run (`overlap compare`, `check` and the dashboard read them),
and rank them with `overlap.analysis.advise` (fit, device peak and headroom, predicted step
time, difference from full remat, bytes moved, break-even host bandwidth).

The policy space (`policy_space`):

* `none` (no remat), and JAX's policies: `nothing_saveable`, `everything_saveable`,
  `dots_saveable`, `dots_with_no_batch_dims_saveable`, `offload_dot_with_no_batch_dims`;
* MaxText's `full` (the full-remat baseline), and MaxText's other presets when the step tags
  any of MaxText's tensor names (they act only on those names);
* `offload:NAME` and `save:NAME` for every checkpoint name the step carries, found in its
  jaxpr (the `name` primitive that `jax.ad_checkpoint.checkpoint_name` binds, in the step and
  every sub-jaxpr: scans, remat, nested jits).

Policies whose lowered program is identical to one compiled already (e.g. a MaxText preset
naming tensors the step does not have) are not compiled again: their row says "same program
as" and carries that plan's numbers. A policy that fails to lower or compile is a row with
the reason, never a traceback. Nothing is run; every view says so.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any, Callable, Iterable

from overlap.plan.compile import Plan, _policy_info, _safe_label, compile_one, lower_for, write_plan
from overlap.plan.targets import Target, get_target

JAX_POLICIES = ("nothing_saveable", "everything_saveable", "dots_saveable",
                "dots_with_no_batch_dims_saveable", "offload_dot_with_no_batch_dims")
MAXTEXT_PRESETS = ("minimal", "minimal_with_context", "save_dot_with_context_except_mlp",
                   "save_dot_except_mlpwi", "save_dot_except_mlp", "save_qkv_proj",
                   "save_out_proj", "qkv_proj_offloaded", "minimal_offloaded")
ADVICE_FILE = "advice.json"


def checkpoint_names(fn: Callable, *args: Any) -> list[str]:
    """Checkpoint names `fn(*args)` tags (`checkpoint_name`), in order of first appearance.

    Traced with `jax.make_jaxpr` on the (abstract) arguments: nothing is compiled or run."""
    import jax

    closed = jax.make_jaxpr(fn)(*args)
    found: dict[str, None] = {}

    def walk(jaxpr: Any, depth: int = 0) -> None:
        if depth > 64:
            return
        for eqn in jaxpr.eqns:
            if eqn.primitive.name == "name" and isinstance(eqn.params.get("name"), str):
                found.setdefault(eqn.params["name"], None)
            for v in eqn.params.values():
                for x in (v if isinstance(v, (list, tuple)) else (v,)):
                    inner = getattr(x, "jaxpr", None)
                    if inner is not None and hasattr(inner, "eqns"):
                        walk(inner, depth + 1)       # ClosedJaxpr
                    elif hasattr(x, "eqns"):
                        walk(x, depth + 1)           # Jaxpr

    walk(closed.jaxpr)
    return list(found)


def policy_space(names: Iterable[str]) -> list[tuple[str, str]]:
    """(policy spec, where it comes from) for a step tagging `names` (see the docstring)."""
    from overlap.capture.policies import MAXTEXT_NAMES

    names = list(names)
    out = [("none", "no remat"), ("full", "MaxText full remat (the baseline)")]
    out += [(p, "JAX policy") for p in JAX_POLICIES]
    if set(names) & set(MAXTEXT_NAMES):
        out += [(p, "MaxText preset") for p in MAXTEXT_PRESETS]
    for n in names:
        out += [(f"offload:{n}", f"checkpoint name {n!r} in the jaxpr"),
                (f"save:{n}", f"checkpoint name {n!r} in the jaxpr")]
    return out


@dataclasses.dataclass
class Advice:
    """The ranked policies (`result`, JSON-safe) and the plans compiled for them."""

    result: dict[str, Any]
    plans: list[Plan]
    path: Path | None = None

    def text(self) -> str:
        from overlap.report.advise_text import render_advice

        return render_advice(self.result)


def _failed_manifest(tgt: Target, info: dict, workload: dict | None, msg: str) -> dict:
    return {"kind": "plan", "label": None, "status": "compile_error", "error": msg,
            "target": {"name": tgt.name, "description": tgt.description,
                       "platform": tgt.platform, "topology": tgt.topology,
                       "device_memory_bytes": tgt.device_memory_bytes},
            "policy": info, "workload": workload, "note": f"compiled for {tgt.name}, not run",
            "notes": []}


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split())[:2000] or type(e).__name__


@dataclasses.dataclass
class _Job:
    slot: int        # index of its row in policy order
    policy: Any
    info: dict
    label: str
    args: tuple      # (jitted, state, batch, workload, lowered)
    key: str         # hash of the lowered module


def default_jobs() -> int:
    """Compiles at once: two where there are two cores (XLA's compile of one program leaves
    the second mostly idle; under a loaded machine two threads also get two shares of it)."""
    return max(1, min(2, os.cpu_count() or 1))


def _advise(make: Callable[[Any], tuple[Any, Any, Any, dict | None]], names: list[str],
            tgt: Target, *, policies: Iterable[str] | None, budget: Any,
            out: str | os.PathLike | None, topology: str | None,
            host_link_Bps: float | None, label_prefix: str, subject: str,
            progress: Callable[[str], None] | None, jobs: int | None = None,
            calibration: Any = None, command_buffers: bool | None = None) -> Advice:
    from concurrent.futures import ThreadPoolExecutor, as_completed

    from overlap.analysis.advise import advise as rank
    from overlap.capture.policies import get_policy

    space = ([(p, "given") for p in policies] if policies is not None
             else policy_space(names))
    t_all = time.perf_counter()
    plans: list[Plan] = []
    slots: list[dict | None] = []   # one manifest per policy, in policy order
    todo: list[_Job] = []
    first: dict[str, _Job] = {}     # lowered-module hash -> the job that compiles it
    dups: list[tuple[int, dict, str, str]] = []
    # Lower every policy here, one after another (tracing is Python and quick); compile the
    # distinct programs below, `jobs` at a time.
    for spec, source in space:
        try:
            pol = get_policy(spec)
        except ValueError as e:
            slots.append(_failed_manifest(tgt, {"name": spec}, None, str(e)))
            continue
        info = {**_policy_info(pol), "source": source}
        label = _safe_label(f"{label_prefix}{tgt.name}-{subject}-{pol.name}")
        try:
            jitted, state, batch, workload = make(pol)
            lowered = lower_for(jitted, state, batch, tgt, topology=topology)
            key = hashlib.sha256(lowered.as_text().encode()).hexdigest()
        except Exception as e:  # noqa: BLE001 - a policy the step cannot take is a row
            plan = Plan(pol.name, tgt.name, "compile_error",
                        _failed_manifest(tgt, info, None, f"lowering failed: {_one_line(e)}"),
                        error=_one_line(e))
            if out is not None:
                write_plan(plan, out, label)
            plans.append(plan)
            slots.append({**plan.manifest, "label": label})
            continue
        slots.append(None)
        if key in first:
            # The same program as a policy lowered already: its numbers, not a new compile.
            dups.append((len(slots) - 1, info, key, pol.name))
            continue
        job = _Job(len(slots) - 1, pol, info, label,
                   (jitted, state, batch, workload, lowered), key)
        first[key] = job
        todo.append(job)

    def compile_job(job: _Job) -> tuple[Plan, float]:
        t0 = time.perf_counter()
        jitted, state, batch, workload, lowered = job.args
        plan = compile_one(jitted, state, batch, tgt, topology=topology,
                           host_link_Bps=host_link_Bps, policy=job.policy.name,
                           policy_info=job.info, workload=workload, budget=budget,
                           lowered=lowered, calibration=calibration,
                           command_buffers=command_buffers)
        return plan, time.perf_counter() - t0

    done: dict[str, dict] = {}
    workers = max(1, jobs if jobs is not None else default_jobs())
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(compile_job, job): job for job in todo}
        for fut in as_completed(futures):
            job = futures[fut]
            plan, seconds = fut.result()
            if out is not None:
                write_plan(plan, out, job.label)
            plans.append(plan)
            m = {**{k: v for k, v in plan.manifest.items() if not k.startswith("_")},
                 "label": job.label}
            done[job.key] = slots[job.slot] = m
            if progress:
                progress(f"{job.policy.name}: {plan.status} in {seconds:.1f} s")
    for slot, info, key, name in dups:
        m = done[key]
        slots[slot] = {**m, "policy": info, "same_program_as": m["label"]}
        if progress:
            progress(f"{name}: same program as {m['label']}")
    manifests = [m for m in slots if m is not None]
    result = rank(manifests, budget.to_dict(), names)
    # The assumptions printed under the table: those of a plan that moves copies where one
    # does (its streams line is the one the offload rows depend on), else the first plan's.
    said = [m for m in manifests if (m.get("estimate") or {}).get("ops")] + \
        [m for m in manifests if m.get("estimate")]
    result.update(
        target=tgt.name, subject=subject, checkpoint_names=names,
        policies_considered=len(space), programs_compiled=len(todo), compile_jobs=workers,
        seconds=round(time.perf_counter() - t_all, 1),
        estimate_model=(said[0]["estimate"].get("model") if said else None),
        assumptions=(said[0]["estimate"].get("assumptions") if said else None),
        calibration=calibration.to_dict() if calibration is not None else None)
    advice = Advice(result, plans)
    if out is not None:
        path = Path(out) / ADVICE_FILE
        path.write_text(json.dumps(result, indent=2, default=str) + "\n")
        advice.path = path
    return advice


def _budget(tgt: Target, memory_budget_gib: float | None) -> Any:
    from overlap.plan.targets import memory_budget

    return memory_budget(tgt, budget_gib=memory_budget_gib)


def advise(step_factory: Callable, state: Any, batch: Any, *, target: str | Target,
           policies: Iterable[str] | None = None, memory_budget_gib: float | None = None,
           out: str | os.PathLike | None = None, topology: str | None = None,
           host_link_Bps: float | None = None, label_prefix: str = "",
           name: str = "step", progress: Callable[[str], None] | None = None,
           jobs: int | None = None, calibration: Any = None,
           command_buffers: bool | None = None) -> Advice:
    """Rank policies for a user's step on `target` (see the module docstring).

    `step_factory(policy)` returns the step for that `overlap.capture.policies.Policy` (apply it
    with `policy.wrap(layer_fn)`), as `plan_step` takes it; `state`/`batch` are pytrees of
    arrays or `jax.ShapeDtypeStruct`s. `policies` replaces the automatic policy space.
    `memory_budget_gib` replaces the target's usable memory (`targets.memory_budget`).
    `jobs`: programs compiled at once (default `default_jobs()`). `calibration`
    (`overlap.plan.calibrate.load_calibration` of a run measured on the target) and
    `command_buffers` go to every policy's estimate (`overlap.plan.estimate.estimate_for`)."""
    import jax

    from overlap.capture.policies import get_policy
    from overlap.plan.compile import _abstract

    tgt = target if isinstance(target, Target) else get_target(target)
    state, batch = _abstract(state), _abstract(batch)
    budget = _budget(tgt, memory_budget_gib)
    try:
        names = checkpoint_names(step_factory(get_policy("none")), state, batch)
    except Exception as e:  # noqa: BLE001 - the policies still get their rows and reasons
        if progress:
            progress(f"no checkpoint names: tracing the step without remat failed "
                     f"({_one_line(e)[:200]})")
        names = []

    def make(pol):
        fn = step_factory(pol)
        return (fn if hasattr(fn, "lower") else jax.jit(fn)), state, batch, None

    return _advise(make, names, tgt, policies=policies, budget=budget, out=out,
                   topology=topology, host_link_Bps=host_link_Bps, label_prefix=label_prefix,
                   subject=name, progress=progress, jobs=jobs, calibration=calibration,
                   command_buffers=command_buffers)


def advise_workload(spec: str, target: str | Target, *, policies: Iterable[str] | None = None,
                    memory_budget_gib: float | None = None,
                    out: str | os.PathLike | None = None, topology: str | None = None,
                    host_link_Bps: float | None = None,
                    progress: Callable[[str], None] | None = None,
                    jobs: int | None = None, calibration: Any = None,
                    command_buffers: bool | None = None) -> Advice:
    """Rank policies for a built-in (or `module:function`) workload on `target`."""
    from overlap.capture.policies import get_policy
    from overlap.capture.workloads import parse_spec
    from overlap.plan.compile import workload_abstract

    tgt = target if isinstance(target, Target) else get_target(target)
    _, wname, size = parse_spec(spec)
    budget = _budget(tgt, memory_budget_gib)
    w, state, batch, _ = workload_abstract(spec, get_policy("none"))
    names = checkpoint_names(w.step_fn, state, batch)

    def make(pol):
        w, state, batch, info = workload_abstract(spec, pol)
        return w.step_fn, state, batch, info

    advice = _advise(make, names, tgt, policies=policies, budget=budget, out=out,
                     topology=topology, host_link_Bps=host_link_Bps, label_prefix="",
                     subject=wname, progress=progress, jobs=jobs, calibration=calibration,
                     command_buffers=command_buffers)
    advice.result["workload"] = f"{wname}:{size}"
    if advice.path is not None:
        advice.path.write_text(json.dumps(advice.result, indent=2, default=str) + "\n")
    return advice
