"""The answer a policy's step computes: its loss and a fingerprint of its gradients (issue 33).

Offload policies have silently produced wrong gradients with correct-looking memory figures
(openxla/xla#46231: wrong scan residuals). So a capture records, beside how fast a policy ran,
what it computed, and `overlap compare` / `overlap check` hold it against the baseline policy's
(`overlap.analysis.answers` owns the comparison and its tolerance).

How it is computed (`record`): once per policy, before the warm-up steps and outside the
profiled steps (so it costs the trace nothing), the workload's ``loss_and_grad(state, batch) ->
(loss, grads)`` – ``jax.value_and_grad`` of the step's own loss under the policy (remat and
offload included), jitted, without the optimizer update – runs on the state and batch that
every policy of the sweep shares. Nothing is donated: the state is left as it was.

The fingerprint, manifest key ``answer`` (``definition`` ``"overlap.answers/1"``):

* ``loss``: the scalar loss as a float64.
* ``grads``: one entry per gradient leaf, in tree order: ``path`` (``jax.tree_util.keystr``),
  ``dtype``, ``size``, ``sum`` (sum of the elements), ``abs_sum`` (sum of their magnitudes),
  ``l2`` (Euclidean norm) and ``nonfinite`` (count of NaN/inf elements, left out of the three
  sums). Each leaf is copied to the host and reduced in float64 with numpy's pairwise summation,
  in chunks, so the fingerprint adds no rounding of its own that matters against the tolerance.
* ``global_l2``: the norm of all gradient elements together (sqrt of the sum of ``l2**2``).
* ``low_precision``: whether a gradient or a floating input is narrower than 32 bits (bf16,
  fp16): the comparison then allows bf16 rounding (``overlap.analysis.answers``).
* ``inputs``: SHA-256 (first 16 hex digits) of the bytes, shapes and dtypes of every leaf of
  (state, batch): which inputs the answer is of. Two runs' answers are compared only when it is
  the same.
* ``how``: one sentence saying the above.

Blind spot: the gradient comes from a separate compile of the same loss under the same policy,
not from the profiled step's executable (which also applies the optimizer and donates its
state, so its gradients are never returned); a miscompile that only the fused optimizer update
triggers is not seen.

A workload without ``loss_and_grad`` (a user's maker that returns only a step) records
``{"not_recorded": why}``; so does a failure of the computation (the capture still goes on).
"""

from __future__ import annotations

import hashlib
from typing import Any, Callable

import numpy as np

DEFINITION = "overlap.answers/1"
_CHUNK = 1 << 24  # elements reduced at once: bounds the float64 copy to 128 MiB per leaf chunk


def _reduce(x) -> dict[str, Any]:
    """float64 sum, |sum|, L2 and non-finite count of one array, in chunks (module docstring)."""
    a = np.asarray(x).reshape(-1)
    total = abs_total = sq = 0.0
    bad = 0
    for lo in range(0, a.size, _CHUNK):
        c = a[lo:lo + _CHUNK].astype(np.float64)
        ok = np.isfinite(c)
        if not ok.all():
            bad += int((~ok).sum())
            c = c[ok]
        total += float(c.sum())
        abs_total += float(np.abs(c).sum())
        sq += float(np.dot(c, c))
    return {"sum": total, "abs_sum": abs_total, "l2": float(np.sqrt(sq)), "nonfinite": bad}


def _narrow(dtype) -> bool:
    """A floating type narrower than float32 (bfloat16 is numpy kind "V", ml_dtypes')."""
    dt = np.dtype(dtype)
    return dt.kind in "fV" and dt.itemsize < 4


def inputs_digest(state: Any, batch: Any) -> str:
    """SHA-256 (16 hex digits) of every leaf's shape, dtype and bytes, in tree order."""
    import jax

    h = hashlib.sha256()
    for leaf in jax.tree.leaves((state, batch)):
        a = np.asarray(leaf)
        h.update(f"{a.shape}|{a.dtype}|".encode())
        h.update(np.ascontiguousarray(a).reshape(-1).view(np.uint8).data)
    return h.hexdigest()[:16]


def record(loss_and_grad: Callable | None, state: Any, batch: Any, *,
           inputs: str | None = None) -> dict[str, Any]:
    """The ``answer`` manifest entry of one policy (module docstring). `inputs`: the digest of
    (state, batch) when the caller computed it already (a sweep shares one state)."""
    if loss_and_grad is None:
        return {"definition": DEFINITION,
                "not_recorded": "the workload gives no loss_and_grad(state, batch) -> (loss, "
                                "grads) (see overlap.capture.workloads)"}
    import jax

    try:
        fn = loss_and_grad if hasattr(loss_and_grad, "lower") else jax.jit(loss_and_grad)
        loss, grads = fn(state, batch)
        jax.block_until_ready((loss, grads))
        flat, _ = jax.tree_util.tree_flatten_with_path(grads)
        leaves = []
        for path, g in flat:
            leaves.append({"path": jax.tree_util.keystr(path), "dtype": str(g.dtype),
                           "size": int(np.size(g)), **_reduce(g)})
        del grads, flat
        narrow = any(_narrow(leaf["dtype"]) for leaf in leaves) or any(
            _narrow(getattr(x, "dtype", np.float32)) for x in jax.tree.leaves((state, batch)))
        return {
            "definition": DEFINITION,
            "loss": float(np.asarray(loss, dtype=np.float64).reshape(-1)[0]),
            "grads": leaves,
            "global_l2": float(np.sqrt(sum(leaf["l2"] ** 2 for leaf in leaves))),
            "low_precision": bool(narrow),
            "inputs": inputs or inputs_digest(state, batch),
            "how": "jax.value_and_grad of the workload's loss under this policy, once on the "
                   "state and batch every policy of the sweep shares, before warm-up and "
                   "outside the profiled steps; per-leaf float64 reductions",
        }
    except Exception as e:  # noqa: BLE001 - the capture matters more than its answer
        return {"definition": DEFINITION,
                "not_recorded": f"computing the loss and gradients failed ({type(e).__name__}: "
                                f"{' '.join(str(e).split())[:300]})"}
