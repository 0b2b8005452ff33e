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
run's ``step_timing`` says so). A policy that fails to compile or run stops the sweep before
anything is written; a failure while profiling keeps the runs already written.

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
    return _interleaved(workload, resolved, labels, root, steps, warmup) or \
        _one_after_another(workload, resolved, labels, root, steps, warmup)


def _signature(state, batch):
    """What a compiled step needs its inputs to be: the tree and each leaf's shape, dtype and
    sharding. Equal signatures mean one state can go through every policy's step."""
    import jax

    leaves, tree = jax.tree.flatten((state, batch))
    return tree, [(getattr(x, "shape", None), str(getattr(x, "dtype", type(x).__name__)),
                   getattr(x, "sharding", None)) for x in leaves]


def _interleaved(workload, resolved, labels, root: Path, steps: int,
                 warmup: int) -> list[Path] | None:
    """The sweep with interleaved timing (module docstring); None when the policies' states
    differ, before anything is timed or written."""
    from overlap.capture.api import compile_step, run_steps, write_profiled_run

    preps = []
    sig0 = None
    for pol, lab in zip(resolved, labels):
        state = batch = None
        gc.collect()  # drop the last workload's buffers before building the next
        w = load_workload(workload, pol)
        sig = _signature(w.init_state, w.batch)
        if sig0 is None:
            sig0 = sig
        elif sig != sig0:
            return None
        run, compiled, compile_ns = compile_step(w.step_fn, w.init_state, w.batch)
        state, batch, w.init_state, w.batch = w.init_state, w.batch, None, None
        preps.append({"w": w, "pol": pol, "lab": lab, "run": run, "compiled": compiled,
                      "compile_ns": compile_ns, "step_ns": []})
    from overlap.capture import answers

    # Every policy's answer on the one state and batch they all step from, before any step
    # changes it (overlap.capture.answers).
    digest = answers.inputs_digest(state, batch)
    for p in preps:
        p["answer"] = answers.record(p["w"].loss_and_grad, state, batch, inputs=digest)
    n = len(preps)
    group = secrets.token_hex(6)  # which runs were timed together (compare reads it)
    for p in preps:
        state, _ = run_steps(p["run"], state, batch, warmup)
    for r in range(steps):
        for k in range(n):
            p = preps[(r + k) % n]  # rotating: no policy always runs first or after another
            state, ns = run_steps(p["run"], state, batch, 1)
            p["step_ns"].extend(ns)
    done: list[Path] = []
    for p in preps:
        timing = {"mode": "interleaved", "group": group,
                  "with": [q["lab"] for q in preps if q is not p],
                  "order": "one step of each run per round, starting one later each round"}
        path, state = write_profiled_run(
            p["run"], p["compiled"], state, batch, out=root / p["lab"], steps=steps,
            warmup=warmup, step_ns=p["step_ns"], compile_ns=p["compile_ns"], label=p["lab"],
            workload=p["w"], policy=p["pol"],
            extra={"step_timing": timing, "answer": p["answer"]})
        done.append(path)
    return done


def _one_after_another(workload, resolved, labels, root: Path, steps: int,
                       warmup: int) -> list[Path]:
    done: list[Path] = []
    why = "the policies' states differ (shapes, dtypes or shardings), so no one state fits all"
    for pol, lab in zip(resolved, labels):
        gc.collect()
        w = load_workload(workload, pol)
        done.append(profile_steps(w.step_fn, w.init_state, w.batch, out=root / lab, steps=steps,
                                  warmup=warmup, label=lab, workload=w, policy=pol,
                                  extra={"step_timing": {"mode": "sequential", "why": why}}))
        del w
    return done
