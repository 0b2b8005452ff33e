"""Step time: the one definition every view uses, and when a difference between runs counts.

Step time of a run = the median of its per-step wall-clock samples (`run_step_time`):
`run.json`'s `step_ns` (measured without the profiler: dispatch + device time of one step,
blocked) where the capture recorded them, else the step annotations' durations in the trace
(which include profiler overhead; `source` says which). Every view (compare text and JSON, the
dashboard, the HTML report) shows this one number.

A difference between two runs is *called* only when it lies outside the noise: both runs have
at least `MIN_SAMPLES` steps, the 99% bootstrap confidence interval of the relative difference
of medians, (median(a) - median(b)) / median(b), excludes zero, and the difference is at least
`MIN_EFFECT` (2%: below that, wall-clock jitter between runs of the same program is larger
than any effect worth a verdict). A 99% interval keeps false calls near 1 in 100 per pair, so
two runs of the same comparison practically never give opposite verdicts. Otherwise it is
"within noise" and no faster/slower verdict is printed. The bootstrap is seeded, so the same
samples always give the same answer. Blind spots: steps are assumed exchangeable (no warm-up
drift left after the warm-up steps). The bootstrap sees only the spread within each run: a
machine that is slower for the whole of one run (other load, clocks) shifts that run's median
and no interval can tell. `overlap capture`/`demo` sweeps therefore time their runs interleaved
(`overlap.capture.sweep`), so such drift hits every run alike; runs measured apart (separate
captures, other machines) are compared as given and `overlap compare` says so.
"""

from __future__ import annotations

from typing import Any

import numpy as np

MIN_SAMPLES = 5
MIN_EFFECT = 0.02
RESAMPLES = 2000
CONFIDENCE = 0.99


def valid_samples(values) -> np.ndarray:
    """Integer nanoseconds >= 0 only (anything else a manifest holds is not a step time)."""
    if isinstance(values, np.ndarray) and values.dtype == np.int64:
        return values[(values >= 0) & (values < (1 << 53))]
    vals = [v for v in (values if values is not None else []) if isinstance(v, (int, np.integer))
            and not isinstance(v, bool) and 0 <= int(v) < (1 << 53)]
    return np.asarray(vals, dtype=np.int64)


SOURCE_MANIFEST = "unprofiled wall clock (run.json)"
SOURCE_TRACE = "step annotations in the trace (includes profiler overhead)"


def run_step_time(manifest: dict | None, step_rows) -> dict[str, Any]:
    """A run's step samples (ns), their median (ns) and where they come from. `step_rows` are
    the analysis result's per-step rows (`duration_ps`), used when the manifest has no valid
    `step_ns`."""
    samples = valid_samples((manifest or {}).get("step_ns"))
    source: str | None = SOURCE_MANIFEST
    if not samples.size:
        samples = valid_samples([int(r["duration_ps"]) // 1000 for r in step_rows or ()
                                 if isinstance(r.get("duration_ps"), int)])
        source = SOURCE_TRACE if samples.size else None
    return {"samples_ns": samples, "median_ns": int(np.median(samples)) if samples.size else None,
            "source": source}


def run_step_time_ps(manifest: dict | None, step_rows) -> tuple[int | None, str | None]:
    """`run_step_time`'s median in picoseconds (the figures' unit) and its source."""
    st = run_step_time(manifest, step_rows)
    return (None if st["median_ns"] is None else st["median_ns"] * 1000), st["source"]


def summary(values) -> dict[str, Any]:
    """Median, min, max and count of one run's step samples (ns)."""
    a = valid_samples(values)
    if not a.size:
        return {"median": None, "min": None, "max": None, "n": 0}
    return {"median": int(np.median(a)), "min": int(a.min()), "max": int(a.max()),
            "n": int(a.size)}


def _boot_medians(a: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    idx = rng.integers(0, a.size, size=(RESAMPLES, a.size))
    return np.median(a[idx], axis=1)


def difference(a_values, b_values) -> dict[str, Any]:
    """Relative difference of run a's median step against run b's, with its bootstrap CI
    (`CONFIDENCE`) and whether it is called (outside the noise). `reason` says why not when it
    is not."""
    a, b = valid_samples(a_values), valid_samples(b_values)
    if not a.size or not b.size or np.median(b) == 0:
        return {"delta": None, "ci": None, "called": False, "n": (int(a.size), int(b.size)),
                "reason": "no step times"}
    delta = float((np.median(a) - np.median(b)) / np.median(b))
    out: dict[str, Any] = {"delta": delta, "ci": None, "called": False,
                           "n": (int(a.size), int(b.size))}
    if a.size < MIN_SAMPLES or b.size < MIN_SAMPLES:
        out["reason"] = f"too few steps to tell from noise (need {MIN_SAMPLES} per run)"
        return out
    rng = np.random.default_rng(0)
    ma, mb = _boot_medians(a, rng), _boot_medians(b, rng)
    rel = (ma - mb) / np.where(mb == 0, 1, mb)
    lo, hi = np.quantile(rel, [(1 - CONFIDENCE) / 2, (1 + CONFIDENCE) / 2])
    out["ci"] = (float(lo), float(hi))
    out["called"] = bool((lo > 0 or hi < 0) and abs(delta) >= MIN_EFFECT)
    if not out["called"]:
        out["reason"] = (f"within noise ({CONFIDENCE:.0%} CI {lo * 100:+.1f}% .. "
                         f"{hi * 100:+.1f}%)" if lo <= 0 <= hi else
                         f"within noise ({delta * 100:+.1f}%, below the {MIN_EFFECT:.0%} "
                         "that run-to-run jitter allows)")
    return out
