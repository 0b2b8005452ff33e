"""Policy sweep: one capture per remat/offload policy of one workload.

``overlap capture --workload NAME[:SIZE] --policy P [--policy P ...] --out runs/`` calls
:func:`sweep`: for each policy it builds the workload under that policy
(:func:`overlap.capture.workloads.load_workload`), then :func:`overlap.capture.api.profile_steps` writes
``<out>/<label>`` where the label is the policy name made filesystem-safe (``offload:x`` ->
``offload_x``) unless labels are given. Runs happen in the order given, in this process, one at
a time: each workload's state is freed before the next is built, so the sweep's peak memory is
one workload's. A failing policy (e.g. out of memory) stops the sweep; runs already finished
stay complete on disk.
"""

from __future__ import annotations

import gc
import os
import re
from pathlib import Path
from typing import Sequence

from overlap.capture.api import prepare_xla_flags, profile_steps
from overlap.capture.policies import get_policy
from overlap.runs.rundir import RunExistsError
from overlap.capture.workloads import load_workload, parse_spec


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
    done: list[Path] = []
    for pol, lab in zip(resolved, labels):
        w = load_workload(workload, pol)
        done.append(profile_steps(w.step_fn, w.init_state, w.batch, out=root / lab, steps=steps,
                                  warmup=warmup, label=lab, workload=w, policy=pol))
        del w
        gc.collect()  # drop the last workload's device buffers before building the next
    return done
