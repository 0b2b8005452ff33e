"""Same answer, not only same speed: a run's loss and gradient fingerprint against its baseline's.

A capture records, per policy, the loss and a fingerprint of the gradients on the inputs every
policy of the sweep shares (run.json ``answer``, defined in `overlap.capture.answers`: per
gradient leaf the float64 ``sum``, ``abs_sum``, ``l2`` and ``nonfinite`` count, the
``global_l2``, the ``loss``, and an ``inputs`` digest). Remat and offload change *when* values
are computed or *where* they are kept, never *what* the step computes, so every policy of one
program should give its baseline's answer up to rounding.

Differences (`check`), each relative, the largest is the run's ``grad_diff``:

* ``loss_diff`` = |loss - loss_base| / max(|loss_base|, tiny);
* per leaf, |l2 - l2_base| / l2_base and |sum - sum_base| / abs_sum_base (a sum can be near 0
  by cancellation, so it is measured against the leaf's total magnitude);
* |global_l2 - global_l2_base| / global_l2_base.

A differing count of NaN/inf elements in any leaf, or a NaN loss on one side only, differs
whatever the tolerance.

Tolerance (`tolerance_for`): relative, ``F32_RTOL`` = 1e-4 when every gradient and floating
input is float32 or wider, ``LOW_PRECISION_RTOL`` = 2e-2 when any is bfloat16/float16. Why:
remat recomputes the same operations and offload copies values bit for bit, so what may differ
is rounding – XLA fusing or tiling a recomputed matmul or reduction otherwise sums in another
order, and atomics on GPU. A reordered float32 sum moves by a few units in the last place
(2^-24 ~ 6e-8 each) per element; through a network's layers and then averaged into a leaf's
norm that stays below ~1e-5, so 1e-4 leaves a 10x margin and still catches a 0.01% error. A
bfloat16 value rounded once more (or once less) moves by up to 2^-8 ~ 0.4%; a few such
roundings compounded over layers stay below ~1%, hence 2e-2 (5 bf16 roundings). A wrong
residual (openxla/xla#46231) changes gradients by far more. Measured: on XLA:CPU every built-in
policy of `scan` and `transformer` (tiny, float32) gives bit-identical fingerprints (difference
0). Not yet measured on a GPU: the H100/H200 corpus predates the fingerprint. `overlap check
--max-grad-diff X` sets the tolerance by hand.

Answers: ``same`` (within tolerance), ``differs`` (flagged), ``not recorded`` (a run made before
overlap recorded answers, or whose workload gives no gradients: never flagged), ``not
comparable`` (the answers are of other inputs or another set of parameters: never flagged).
"""

from __future__ import annotations

import math
from typing import Any

F32_RTOL = 1e-4
LOW_PRECISION_RTOL = 2e-2
SAME, DIFFERS, NOT_RECORDED, NOT_COMPARABLE = "same", "differs", "not recorded", \
    "not comparable"
_TINY = 1e-30


def tolerance_for(a: dict, b: dict, override: float | None = None) -> tuple[float, str]:
    """(relative tolerance, why) for comparing answers `a` and `b` (module docstring)."""
    if override is not None:
        return override, f"{override:g} (given)"
    if a.get("low_precision") or b.get("low_precision"):
        return LOW_PRECISION_RTOL, f"{LOW_PRECISION_RTOL:g} (bf16/fp16 rounding)"
    return F32_RTOL, f"{F32_RTOL:g} (float32 reordering)"


def _rel(x: float | None, ref: float | None, scale: float | None = None) -> float | None:
    if x is None or ref is None:
        return None
    if math.isnan(x) or math.isnan(ref):
        return 0.0 if math.isnan(x) and math.isnan(ref) else math.inf
    den = max(abs(scale if scale is not None else ref), _TINY)
    return abs(x - ref) / den


def check(row: Any, base: Any, rtol: float | None = None) -> dict[str, Any]:
    """One run's answer (run.json ``answer`` as `overlap.runs.rundir.load_manifest` normalizes
    it, or None) against its baseline's. Returns `{status,
    loss_diff, grad_diff, worst (what differs most), tolerance, text}` (module docstring)."""
    out: dict[str, Any] = {"status": NOT_RECORDED, "loss_diff": None, "grad_diff": None,
                           "worst": None, "tolerance": None, "text": ""}
    for who, ans in (("this run", row), ("the baseline", base)):
        if not ans or "not_recorded" in ans:
            why = (ans or {}).get("not_recorded") or "run made before overlap recorded answers"
            out["text"] = f"not recorded for {who} ({why})"
            return out
    if row.get("inputs") and base.get("inputs") and row["inputs"] != base["inputs"]:
        out.update(status=NOT_COMPARABLE, text=f"not comparable: computed on other inputs "
                   f"(digest {row['inputs']} vs {base['inputs']})")
        return out
    ga, gb = row["grads"], base["grads"]
    if [(g["path"], g["size"]) for g in ga] != [(g["path"], g["size"]) for g in gb]:
        out.update(status=NOT_COMPARABLE, text="not comparable: the gradients have other "
                   f"leaves ({len(ga)} vs {len(gb)})")
        return out
    tol, tol_why = tolerance_for(row, base, rtol)
    out["tolerance"] = tol
    loss_diff = _rel(row["loss"], base["loss"])
    diffs: list[tuple[float, str]] = []
    bad = [g["path"] for g, h in zip(ga, gb) if g["nonfinite"] != h["nonfinite"]]
    for g, h in zip(ga, gb):
        for what, d in (("norm", _rel(g["l2"], h["l2"])),
                        ("sum", _rel(g["sum"], h["sum"], h["abs_sum"]))):
            if d is not None:
                diffs.append((d, f"gradient {g['path']} {what}"))
    d = _rel(row["global_l2"], base["global_l2"])
    if d is not None:
        diffs.append((d, "global gradient norm"))
    worst = max(diffs, default=(None, None))
    out.update(loss_diff=loss_diff, grad_diff=worst[0], worst=worst[1])
    over = []
    if loss_diff is not None and loss_diff > tol:
        over.append(f"loss {row['loss']:.7g} vs {base['loss']:.7g} (rel. diff {loss_diff:.2e})")
    if worst[0] is not None and worst[0] > tol:
        over.append(f"{worst[1]} (rel. diff {worst[0]:.2e})")
    if bad:
        over.append(f"NaN/inf counts differ in {', '.join(bad[:3])}")
    if over:
        out.update(status=DIFFERS, text="DIFFERS beyond tolerance " + tol_why + ": "
                   + "; ".join(over))
    else:
        out.update(status=SAME, text=f"same loss and gradients within {tol_why} (loss "
                   f"{_fmt(loss_diff)}, gradients {_fmt(worst[0])})")
    return out


def _fmt(d: float | None) -> str:
    return "n/a" if d is None else ("0" if d == 0 else f"{d:.1e}")


def check_rows(rows: list[dict[str, Any]], base: dict[str, Any] | None,
               rtol: float | None = None) -> dict[str, dict[str, Any]]:
    """`check` of each row (compare summaries with an ``answer``) against `base`, by label;
    the baseline itself is "baseline"."""
    out = {}
    for r in rows:
        if base is not None and r is base:
            ans = r.get("answer")
            out[r["label"]] = {"status": "baseline", "text": "the baseline" + (
                "" if ans and "not_recorded" not in ans else ": answer not recorded")}
        elif base is None:
            out[r["label"]] = {"status": NOT_COMPARABLE, "text": "no baseline to compare with"}
        else:
            out[r["label"]] = check(r.get("answer"), base.get("answer"), rtol)
    return out
