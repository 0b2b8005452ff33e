"""The per-step rows built a column at a time (`overlap.analysis.step_rows`, issue 32) give the
values the per-row definitions give: Python's int division for ratios (the exact sums past
2**53: `arrays.bin_sums`, tests/test_arrays.py), `causes.cause_dict` per row, the worst step
as `max(rows, key=...)` picks it."""

from __future__ import annotations

import random

import numpy as np

from overlap.analysis import causes, step_rows
from overlap.analysis.overlap import analyze
from overlap.trace import read_trace
from overlap.trace.synthetic import SyntheticTrace

US = 1_000_000
BIG = 1 << 53


def test_ratios_are_pythons_int_division_beyond_float64s_integers():
    rng = random.Random(5)
    num = [0, 1, 2, 7, BIG - 1, BIG, BIG + 1, 3 * BIG + 1, (1 << 62) + 1, 5, 0]
    den = [1, 3, 3, 10, BIG + 1, BIG + 3, BIG + 2, 4 * BIG - 1, (1 << 62) + 3, 0, -4]
    for _ in range(2000):
        d = rng.randrange(1, 1 << rng.randrange(1, 63))
        num.append(rng.randrange(0, d + 1))
        den.append(d)
    want = [n / d if d > 0 else None for n, d in zip(num, den)]
    got = step_rows.ratios(np.array(num, np.int64), np.array(den, np.int64))
    assert got == want
    assert all(type(g) is type(w) for g, w in zip(got, want))  # Python floats and Nones
    # operands float64 cannot hold: its division differs from Python's, ratios must not
    n, d = 2735221198698850609, 3706778661852469502
    assert float(np.float64(n) / np.float64(d)) != n / d
    assert step_rows.ratios(np.array([n]), np.array([d])) == [n / d]


def test_cause_dicts_equal_cause_dict_per_row():
    rng = np.random.default_rng(3)
    n = 500
    cols = [np.where(rng.random(n) < 0.5, rng.integers(1, 10**15, n), 0)
            for _ in causes.CAUSE_COLUMNS]
    want = [causes.cause_dict({c: int(v[i]) for c, v in zip(causes.CAUSE_COLUMNS, cols)})
            for i in range(n)]
    got = causes.cause_dicts(cols)
    assert got == want and [list(d) for d in got] == [list(d) for d in want]  # key order too
    one = [np.full(4, 7), *[np.zeros(4, np.int64)] * (len(causes.CAUSES) - 1)]  # one pattern
    assert causes.cause_dicts(one) == [{causes.CAUSES[0]: 7}] * 4
    assert causes.cause_dicts([np.zeros(3, np.int64)] * len(causes.CAUSES)) == [{}, {}, {}]
    assert causes.cause_dicts([np.zeros(0, np.int64)] * len(causes.CAUSES)) == []


def test_worst_step_is_the_first_of_the_earliest_among_ties():
    rng = random.Random(7)
    for _ in range(200):
        n = rng.randrange(1, 12)
        rows = [{"host": "h", "step": i, "exposed_wall_ps": rng.choice([0, 5, 9]),
                 "start_ps": rng.choice([10, 20, 30]), "exposed_frac": rng.choice([None, 0.5]),
                 "duration_ps": rng.randrange(100)} for i in range(n)]
        want = max(rows, key=lambda r: (r["exposed_wall_ps"], -r["start_ps"]))
        got = step_rows.step_summary(rows, 0)["worst_step"]
        assert got == {"host": want["host"], "step": want["step"]}
    assert step_rows.step_summary([], 3)["worst_step"] is None


def test_step_rows_of_a_known_trace(tmp_path):
    """Two steps on one GPU: step 0 has a 10 us D2H half under a kernel, step 1 an H2D fully
    exposed; a third copy starts outside every step."""
    t = SyntheticTrace()
    g = t.gpu(0)
    t.step(0, 100 * US, 200 * US)
    t.step(1, 200 * US, 300 * US)
    g.kernel(100 * US, 15 * US)
    g.memcpy("D2H", 110 * US, 10 * US, 1 << 20, hlo_op="copy-start.1")
    g.memcpy("H2D", 250 * US, 20 * US, 2 << 20, hlo_op="copy-start.2")
    g.memcpy("H2D", 400 * US, 5 * US, 8, hlo_op="copy-start.3")
    r = analyze(read_trace(t.write(tmp_path / "t.xplane.pb")))
    s0, s1 = r["steps"]
    assert tuple(s0) == step_rows.STEP_KEYS
    assert (s0["transfers"], s0["d2h_transfers"], s0["h2d_transfers"]) == (1, 1, 0)
    assert (s0["span_ps"], s0["hidden_ps"], s0["exposed_ps"]) == (10 * US, 5 * US, 5 * US)
    assert s0["overlap_ratio"] == 0.5 and s0["exposed_wall_ps"] == 5 * US
    assert s0["exposed_frac"] == 5 / 100 and s0["worst_device"] == "GPU:0"
    assert (s1["h2d_bytes"], s1["overlap_ratio"], s1["exposed_wall_ps"]) == (2 << 20, 0.0, 20 * US)
    assert sum(s1["exposure_causes"].values()) == s1["exposed_ps"] == 20 * US
    assert r["step_summary"]["unassigned_transfers"] == 1
    assert r["step_summary"]["worst_step"] == {"host": s1["host"], "step": 1}
