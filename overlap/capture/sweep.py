"""Policy sweep: one capture per remat/offload policy of one workload.

``overlap capture --workload NAME[:SIZE] --policy P [--policy P ...] --out runs/`` calls
:func:`sweep`: for each policy it builds the workload under that policy
(:func:`overlap.capture.workloads.load_workload`) and writes ``<out>/<label>`` where the label is
the policy name made filesystem-safe (``offload:x`` -> ``offload_x``) unless labels are given.

Step times are measured **interleaved**: every policy's step is compiled first, then each timed
round runs one step of every policy, in an order that rotates each round, all on one training
state (the policies share the state's shapes, dtypes and shardings; only the step differs). A
machine that slows down for a while (another job, clocks, a noisy neighbour) then slows every
policy alike instead of whichever one happened to be running, which is what made two sweeps of
the same policies disagree about which was faster. Profiling follows, one policy after another;
those traces are what `overlap report` reads, and their step times are recorded apart
(``step_ns_profiled``). Each run's manifest says how its steps were timed (``step_timing``).

Memory: only the most recently built workload's state is alive while the next is built, so the
sweep's peak is one workload's state plus the compiled steps. A user workload whose state
differs between policies cannot share one: it is swept one policy after another instead (each
run's ``step_timing`` says so).

A policy whose step runs out of memory (building its state, compiling, stepping or profiling)
or raises is a finding, not the end of the sweep: its run is written with ``status``
``does_not_fit`` or ``failed`` and no capture (:mod:`overlap.capture.failures`), and the other
policies go on (timing restarts without it, on a fresh state if the failed step consumed it).

Answers: before the first timed step, each policy's loss and gradient fingerprint is computed
on the one state and batch all policies share (:mod:`overlap.capture.answers`, run.json
``answer``), so that `overlap compare` can tell a policy that computes another answer.
"""

from __future__ import annotations

import gc
import os
import re
import secrets
from pathlib import Path
from typing import Sequence

from overlap.capture.api import prepare_xla_flags, profile_steps
from overlap.capture.policies import get_policy
from overlap.capture.workloads import load_workload, parse_spec
from overlap.runs.rundir import RunExistsError


def label_for(policy: str) -> str:
    """A directory name for a policy: characters outside [A-Za-z0-9._-] become '_'."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", policy).strip("_") or "policy"


def sweep(workload: str, policies: Sequence[str], out: str | os.PathLike, steps: int = 10,
          warmup: int = 3, labels: Sequence[str] | None = None,
          command_buffers: bool = False) -> list[Path]:
    """Capture `workload` (``NAME[:SIZE]`` or ``module:function[:SIZE]``) once per policy into
    ``out/<label>``; returns the run directories in policy order.

    Everything is validated before the first capture: the workload spec, every policy name
    (ValueError listing valid names), `labels` (same length as `policies`, unique) and that no
    target directory exists yet (:class:`overlap.runs.rundir.RunExistsError`).

    `command_buffers=False` disables XLA:GPU command buffers for the captures
    (:func:`overlap.capture.api.prepare_xla_flags`); it only works if jax's backends are not up yet,
    so the CLI should call this before anything touches devices."""
    prepare_xla_flags(command_buffers)
    if steps < 1 or warmup < 0:
        raise ValueError(f"need steps >= 1 and warmup >= 0 (got steps={steps}, warmup={warmup})")
    if not policies:
        raise ValueError("sweep needs at least one policy")
    parse_spec(workload)
    resolved = [get_policy(p) for p in policies]
    if labels is None:
        labels = [label_for(p.name) for p in resolved]
    labels = list(labels)
    if len(labels) != len(resolved):
        raise ValueError(f"{len(labels)} labels for {len(resolved)} policies")
    if len(set(labels)) != len(labels):
        raise ValueError(f"duplicate run labels: {labels}")
    from overlap.runs.rundir import check_label

    for lab in labels:
        check_label(lab)  # a name, never a path: nothing is written outside `out`
    root = Path(out)
    for lab in labels:
        if (root / lab).exists():
            raise RunExistsError(root / lab)
    failed: dict[str, Path] = {}
    done = _interleaved(workload, resolved, labels, root, steps, warmup, failed)
    if done is None:
        done = _one_after_another(workload, resolved, labels, root, steps, warmup, failed)
    # Policy order, failed runs included (their run.json says status and why).
    runs = {p.name: p for p in done}
    runs.update({lab: p for lab, p in failed.items()})
    return [runs[lab] for lab in labels if lab in runs]


def _signature(state, batch):
    """What a compiled step needs its inputs to be: the tree and each leaf's shape, dtype and
    sharding. Equal signatures mean one state can go through every policy's step."""
    import jax

    leaves, tree = jax.tree.flatten((state, batch))
    return tree, [(getattr(x, "shape", None), str(getattr(x, "dtype", type(x).__name__)),
                   getattr(x, "sharding", None)) for x in leaves]


class _StepFailed(Exception):
    """A policy's step raised while the sweep ran it (`prep`: which one, `phase`: when)."""

    def __init__(self, prep: dict, phase: str, error: BaseException):
        super().__init__(phase)
        self.prep, self.phase, self.error = prep, phase, error


def _fails(e: BaseException) -> bool:
    """Whether `e`, raised by a policy's step, is that policy's failure (written as its run,
    :mod:`overlap.capture.failures`) rather than the sweep's: an existing run directory and
    overlap's own refusals still stop the sweep."""
    from overlap.errors import OverlapError

    return isinstance(e, Exception) and not isinstance(e, (FileExistsError, OverlapError))


def _record(root: Path, lab: str, e: BaseException, phase: str, pol, w=None, compiled=None,
            *, steps: int, warmup: int) -> Path:
    from overlap.capture.failures import write_failed_run

    return write_failed_run(root / lab, e, phase, label=lab, workload=w, policy=pol,
                            steps=steps, warmup=warmup, compiled=compiled)


def _alive(state, batch) -> bool:
    """Whether every buffer of the shared state is still usable (a failed step may have been
    given, and have deleted, a donated state)."""
    import jax

    return not any(getattr(x, "is_deleted", lambda: False)()
                   for x in jax.tree.leaves((state, batch)))


def _interleaved(workload, resolved, labels, root: Path, steps: int,
                 warmup: int, failed: dict[str, Path]) -> list[Path] | None:
    """The sweep with interleaved timing (module docstring); None when the policies' states
    differ, before anything is timed or written. A policy whose step runs out of memory or
    raises is written as a failed run (`failed`, by label) and the sweep goes on without it."""
    from overlap.capture.api import compile_step, run_steps, write_profiled_run

    preps = []
    sig0 = None
    state = batch = None
    for pol, lab in zip(resolved, labels):
        state = batch = None
        gc.collect()  # drop the last workload's buffers before building the next
        try:
            w = load_workload(workload, pol)
        except Exception as e:
            # Only running out of memory is this policy's own finding here; a workload that
            # cannot be built at all is the sweep's error (a usage error for a bad spec).
            from overlap.capture.failures import out_of_memory

            if not out_of_memory(e):
                raise
            failed[lab] = _record(root, lab, e, "building the workload's state", pol,
                                  steps=steps, warmup=warmup)
            continue
        sig = _signature(w.init_state, w.batch)
        if sig0 is None:
            sig0 = sig
        elif sig != sig0:
            return None
        try:
            run, compiled, compile_ns = compile_step(w.step_fn, w.init_state, w.batch)
        except Exception as e:
            if not _fails(e):
                raise
            failed[lab] = _record(root, lab, e, "compiling the step", pol, w,
                                  steps=steps, warmup=warmup)
            state, batch = w.init_state, w.batch  # unused by a failed compile
            continue
        state, batch, w.init_state, w.batch = w.init_state, w.batch, None, None
        preps.append({"w": w, "pol": pol, "lab": lab, "run": run, "compiled": compiled,
                      "compile_ns": compile_ns, "step_ns": []})
    if not preps:
        return []
    if state is None or not _alive(state, batch):
        state, batch = _fresh_state(workload, preps[-1]["pol"])
    from overlap.capture import answers

    # Every policy's answer on the one state and batch they all step from, before any step
    # changes it (overlap.capture.answers).
    digest = answers.inputs_digest(state, batch)
    for p in preps:
        p["answer"] = answers.record(p["w"].loss_and_grad, state, batch, inputs=digest)
    group = secrets.token_hex(6)  # which runs were timed together (compare reads it)

    def step(p, st, n, phase):
        try:
            return run_steps(p["run"], st, batch, n)
        except Exception as e:
            if not _fails(e):
                raise
            raise _StepFailed(p, phase, e) from e

    while preps:
        # Timing restarts without a policy that failed: its rounds would not be comparable.
        try:
            n = len(preps)
            for p in preps:
                p["step_ns"] = []
            for p in preps:
                state, _ = step(p, state, warmup, "running the warm-up steps")
            for r in range(steps):
                for k in range(n):
                    p = preps[(r + k) % n]  # rotating: no policy always runs first or after
                    state, ns = step(p, state, 1, "running the timed steps")
                    p["step_ns"].extend(ns)
            break
        except _StepFailed as f:
            p = f.prep
            failed[p["lab"]] = _record(root, p["lab"], f.error, f.phase, p["pol"], p["w"],
                                       p["compiled"], steps=steps, warmup=warmup)
            preps.remove(p)
            if preps and not _alive(state, batch):
                state, batch = _fresh_state(workload, preps[0]["pol"])
    done: list[Path] = []
    for p in preps:
        timing = {"mode": "interleaved", "group": group,
                  "with": [q["lab"] for q in preps if q is not p],
                  "order": "one step of each run per round, starting one later each round"}
        try:
            path, state = write_profiled_run(
                p["run"], p["compiled"], state, batch, out=root / p["lab"], steps=steps,
                warmup=warmup, step_ns=p["step_ns"], compile_ns=p["compile_ns"],
                label=p["lab"], workload=p["w"], policy=p["pol"],
                extra={"step_timing": timing, "answer": p["answer"]})
        except Exception as e:
            if not _fails(e):
                raise
            failed[p["lab"]] = _record(root, p["lab"], e, "profiling the steps", p["pol"],
                                       p["w"], p["compiled"], steps=steps, warmup=warmup)
            if not _alive(state, batch):
                state, batch = _fresh_state(workload, p["pol"])
            continue
        done.append(path)
    return done


def _fresh_state(workload, pol):
    """A new shared state and batch (the last one went into a step that failed)."""
    gc.collect()
    w = load_workload(workload, pol)
    return w.init_state, w.batch


def _one_after_another(workload, resolved, labels, root: Path, steps: int,
                       warmup: int, failed: dict[str, Path]) -> list[Path]:
    done: list[Path] = []
    why = "the policies' states differ (shapes, dtypes or shardings), so no one state fits all"
    for pol, lab in zip(resolved, labels):
        if lab in failed:  # written while trying the interleaved sweep
            continue
        gc.collect()
        w = None
        try:
            w = load_workload(workload, pol)
            done.append(profile_steps(w.step_fn, w.init_state, w.batch, out=root / lab,
                                      steps=steps, warmup=warmup, label=lab, workload=w,
                                      policy=pol,
                                      extra={"step_timing": {"mode": "sequential", "why": why}}))
        except Exception as e:
            from overlap.capture.failures import out_of_memory

            # Building the workload: only running out of memory is the policy's finding.
            if not _fails(e) or (w is None and not out_of_memory(e)):
                raise
            failed[lab] = _record(root, lab, e, "building the workload's state" if w is None
                                  else "running the step", pol, w, steps=steps, warmup=warmup)
        del w
    return done
