"""Step-time differences are called only outside the noise (issue 12)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from overlap.analysis import steps
from overlap.analysis.compare import compare
from tests.conftest import run_cli


def test_separated_runs_are_called_with_the_right_sign():
    fast = list(range(100_000, 110_000, 1_000))
    slow = list(range(200_000, 210_000, 1_000))
    d = steps.difference(fast, slow)
    assert d["called"] and d["delta"] == pytest.approx(-0.5, abs=0.02)
    assert d["ci"][0] < d["delta"] < d["ci"][1] < 0


def test_same_distribution_is_within_noise_and_deterministic():
    rng = np.random.default_rng(1)
    a = rng.normal(1e6, 2e5, 10).astype(int).tolist()
    b = rng.normal(1e6, 2e5, 10).astype(int).tolist()
    d = steps.difference(a, b)
    assert not d["called"] and "within noise" in d["reason"]
    assert steps.difference(a, b) == d  # seeded bootstrap: the same answer every time


def test_too_few_steps_are_never_called():
    d = steps.difference([100, 101, 102], [300, 301, 302])
    assert not d["called"] and "too few steps" in d["reason"]


def test_noise_never_gives_opposite_verdicts():
    """Pairs of runs drawn from one distribution (a demo run twice) may be 'within noise' or,
    rarely, called; never faster in one pair and slower in its twin beyond the CI."""
    rng = np.random.default_rng(7)
    false_calls = sum(steps.difference(
        (rng.lognormal(0, 0.4, 10) * 1e6).astype(int).tolist(),
        (rng.lognormal(0, 0.4, 10) * 1e6).astype(int).tolist())["called"] for _ in range(60))
    assert false_calls <= 3  # about 1% by construction of a 99% interval


def _row(label, module, samples):
    return {"run": label, "label": label, "policy": label, "category": "remat" if label ==
            "full" else "offload", "offloads": label != "full", "peak_bytes": 10,
            "peak_source": "s", "peak_module": module, "step_ns_median": int(np.median(samples)),
            "step_ns_samples": samples, "synthetic": False, "transfers": 0,
            "overlap_ratio": None, "exposed_ps_per_step": None, "in_flight_ps_per_step": 0}


def test_compare_refuses_to_judge_different_programs():
    res = compare([_row("full", "jit_step", [100] * 6), _row("x", "jit_matmul", [50] * 6)])
    assert res["mixed_programs"] == ["jit_matmul", "jit_step"]
    assert "different program" in res["runs"][1]["verdict"]
    same = compare([_row("full", "jit_step", list(range(100, 106))),
                    _row("x", "jit_step", list(range(50, 56)))])
    assert same["mixed_programs"] is None and "faster than full" in same["runs"][1]["verdict"]


@pytest.mark.slow
def test_two_demo_runs_never_contradict(tmp_path):
    verdicts = []
    for i in range(2):
        r = run_cli("demo", "--no-serve", "--no-plan", "--out", str(tmp_path / str(i)),
                    "--steps", "8", "--warmup", "2", timeout=400)
        assert r.returncode == 0, r.stderr
        verdicts.append({m.group(1): m.group(2) for m in re.finditer(
            r"^(\w+): [\d.]+% (faster|slower) than full", r.stdout, re.M)})
    for pol in set(verdicts[0]) & set(verdicts[1]):
        assert verdicts[0][pol] == verdicts[1][pol], verdicts
