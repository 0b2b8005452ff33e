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
  sums). Each leaf is reduced on the device in float32 (one jitted program; four scalars per
  leaf reach the host), whose rounding is far below the comparison's tolerance.
* ``global_l2``: the norm of all gradient elements together (sqrt of the sum of ``l2**2``).
* ``low_precision``: whether a gradient or a floating input is narrower than 32 bits (bf16,
  fp16): the comparison then allows bf16 rounding (``overlap.analysis.answers``).
* ``inputs``: SHA-256 (first 16 hex digits) of the shapes, dtypes and two device-computed
  integer digests of the bits of every leaf of (state, batch) (`inputs_digest`): which inputs
  the answer is of. Two runs' answers are compared only when it is
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


def _reductions(leaves: list) -> list[dict[str, Any]]:
    """Per array: sum, |sum|, L2 and non-finite count (module docstring), reduced on the device
    where the arrays live, one jitted program for all of them: only four scalars per leaf cross
    to the host (copying a large model's gradients, gigabytes, to reduce them on the host took
    seconds and host memory per policy)."""
    import jax
    import jax.numpy as jnp

    def one(x):
        # float32 accumulation of the upcast elements: its rounding (~1e-7 x log2 n relative)
        # is far below the comparison's tolerance (overlap.analysis.answers)
        c = jnp.ravel(x).astype(jnp.float32)
        ok = jnp.isfinite(c)
        c = jnp.where(ok, c, 0.0)
        return (jnp.sum(c), jnp.sum(jnp.abs(c)), jnp.sum(c * c),
                jnp.sum(~ok, dtype=jnp.int32))

    out = jax.device_get(jax.jit(lambda xs: [one(x) for x in xs])(leaves))
    return [{"sum": float(t), "abs_sum": float(a), "l2": float(np.sqrt(max(float(q), 0.0))),
             "nonfinite": int(n)} for t, a, q, n in out]


def _narrow(dtype) -> bool:
    """A floating type narrower than float32 (bfloat16 is numpy kind "V", ml_dtypes')."""
    dt = np.dtype(dtype)
    return dt.kind in "fV" and dt.itemsize < 4


def inputs_digest(state: Any, batch: Any) -> str:
    """16 hex digits identifying (state, batch): SHA-256 of every leaf's shape and dtype, in tree
    order, and of two integer digests of its bits computed on the device (the wrapping sums of
    the bits and of the bits times their odd-numbered index: integer sums, so the same bits give
    the same digest whatever the reduction order). Hashing the bytes on the host meant copying
    the whole state off the device (23 GB for transformer:h100)."""
    import jax
    import jax.numpy as jnp

    def bits(x):
        x = jnp.ravel(x)
        width = x.dtype.itemsize * 8
        if width in (8, 16, 32) and x.dtype != jnp.bool_:
            u = jax.lax.bitcast_convert_type(x, {8: jnp.uint8, 16: jnp.uint16,
                                                 32: jnp.uint32}[width]).astype(jnp.uint32)
        elif width == 64:
            pair = jax.lax.bitcast_convert_type(x, jnp.uint32)  # (..., 2)
            u = pair[..., 0] ^ (pair[..., 1] * jnp.uint32(0x9E3779B1))
        else:
            u = x.astype(jnp.uint32)
        odd = jnp.arange(u.size, dtype=jnp.uint32) * jnp.uint32(2) + jnp.uint32(1)
        return jnp.sum(u, dtype=jnp.uint32), jnp.sum(u * odd, dtype=jnp.uint32)

    leaves = jax.tree.leaves((state, batch))
    arrays = [x for x in leaves if hasattr(x, "dtype")]
    sums = jax.device_get(jax.jit(lambda xs: [bits(x) for x in xs])(arrays))
    h = hashlib.sha256()
    for leaf, (a, b) in zip(arrays, sums):
        h.update(f"{tuple(leaf.shape)}|{leaf.dtype}|{int(a)}|{int(b)}|".encode())
    h.update(f"{len(leaves) - len(arrays)} non-array leaves".encode())
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
        leaves = [{"path": jax.tree_util.keystr(path), "dtype": str(g.dtype),
                   "size": int(np.size(g)), **r}
                  for (path, g), r in zip(flat, _reductions([g for _, g in flat]))]
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
                   "outside the profiled steps; per-leaf float32 reductions on the device",
        }
    except Exception as e:  # noqa: BLE001 - the capture matters more than its answer
        return {"definition": DEFINITION,
                "not_recorded": f"computing the loss and gradients failed ({type(e).__name__}: "
                                f"{' '.join(str(e).split())[:300]})"}
