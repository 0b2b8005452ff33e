"""The step rows' per-step sums over both directions at once and the step of each transfer
found from the steps' side (`step_rows.direction_sums`, `step_rows.latest_start`, issue 32)
give what the plain rules give: a mask, count and sum per direction, and
`searchsorted(starts, t, side="right") - 1` per transfer."""

from __future__ import annotations

import numpy as np

from overlap.analysis import step_rows
from overlap.analysis.grouping import codes_equal, key_codes
from overlap.arrays import bin_sums

BIG = 1 << 53


def _plain_sums(idx, t_dir, dirs, t_bytes, n):
    """Per step: all transfers and bytes, and each direction's, a mask per direction."""
    counts = np.bincount(idx, minlength=n)
    nbytes = bin_sums(idx, t_bytes, n)
    dc, db = {}, {}
    for d in step_rows.DIRECTIONS:
        m = codes_equal(t_dir, dirs, d)
        dc[d] = np.bincount(idx[m], minlength=n)
        db[d] = bin_sums(idx[m], t_bytes[m], n)
    return counts, nbytes, dc, db


def _check_sums(idx, directions, t_bytes, n):
    codes, dirs = key_codes(np.asarray(directions, dtype=object), sort=False)
    got = step_rows.direction_sums(np.asarray(idx, np.int64), codes, dirs,
                                   np.asarray(t_bytes, np.int64), n)
    want = _plain_sums(np.asarray(idx, np.int64), codes, dirs,
                       np.asarray(t_bytes, np.int64), n)
    assert got[0].tolist() == want[0].tolist()
    assert got[1].tolist() == want[1].tolist()
    for d in step_rows.DIRECTIONS:
        assert got[2][d].tolist() == want[2][d].tolist(), d
        assert got[3][d].tolist() == want[3][d].tolist(), d
    return got


def test_direction_sums_equal_a_mask_per_direction():
    rng = np.random.default_rng(7)
    for n, m, kinds in [(1, 1, ["D2H"]), (5, 40, ["D2H", "H2D"]), (30, 500, ["H2D"]),
                        (12, 300, ["H2D", "D2H", "other", None]),
                        (7, 90, [None]), (4, 50, ["other", "D2H"])]:
        idx = rng.integers(0, n, m)
        directions = [kinds[i] for i in rng.integers(0, len(kinds), m)]
        t_bytes = rng.integers(0, 1 << 20, m)
        counts, nbytes, dc, db = _check_sums(idx, directions, t_bytes, n)
        # known by construction: a transfer of another direction (or none) counts in the
        # step's totals, in neither direction's
        known = np.isin(np.array(directions, dtype=object), list(step_rows.DIRECTIONS))
        assert sum(dc[d].sum() for d in step_rows.DIRECTIONS) == known.sum()
        assert counts.sum() == m and nbytes.sum() == t_bytes.sum()


def test_direction_sums_exact_past_float64s_integers():
    # bytes whose sums float64 cannot hold: the sums stay Python's int sums
    idx = np.array([0, 0, 1, 1, 1, 2])
    t_bytes = [BIG + 1, 1, BIG - 1, 2, BIG + 3, 5]
    directions = ["D2H", "D2H", "H2D", "D2H", "H2D", "H2D"]
    counts, nbytes, dc, db = _check_sums(idx, directions, t_bytes, 3)
    assert nbytes.tolist() == [BIG + 2, 2 * BIG + 4, 5]
    assert db["D2H"].tolist() == [BIG + 2, 2, 0] and db["H2D"].tolist() == [0, 2 * BIG + 2, 5]
    assert dc["D2H"].tolist() == [2, 1, 0] and counts.tolist() == [2, 3, 1]


def test_direction_sums_of_no_steps_or_transfers():
    got = _check_sums(np.array([], np.int64), [], [], 0)
    assert got[0].tolist() == [] and got[2]["H2D"].tolist() == []
    got = _check_sums(np.array([], np.int64), [], [], 3)
    assert got[1].tolist() == [0, 0, 0]


def test_latest_start_equals_searchsorted():
    rng = np.random.default_rng(11)
    for n, m in [(1, 0), (1, 5), (3, 1), (5, 40), (40, 5), (200, 3000), (3, 3000)]:
        s0 = np.sort(rng.integers(0, 1000, n))
        if n > 2:
            s0[1] = s0[2]  # steps starting at once: the last of them
        for t in (np.sort(rng.integers(-50, 1100, m)),  # ascending: the steps' side
                  rng.integers(-50, 1100, m),             # any order: per transfer
                  np.sort(np.concatenate([s0, s0 - 1, s0 + 1, rng.integers(0, 9, m)]))):
            want = np.searchsorted(s0, t, side="right") - 1
            got = step_rows.latest_start(s0, t)
            assert got.tolist() == want.tolist(), (n, m)
    # times equal to a start, before every start, after every start, all alike
    s0 = np.array([10, 10, 20, 30])
    t = np.array([0, 9, 10, 10, 10, 15, 20, 20, 29, 30, 31, 99, 99, 99])
    assert step_rows.latest_start(s0, t).tolist() == [-1, -1, 1, 1, 1, 1, 2, 2, 2, 3, 3, 3,
                                                       3, 3]


def test_worst_step_when_every_step_ties():
    # nothing exposed in any step (every wall 0): the first row of the earliest start, as
    # max(rows, key=(wall, -start)) picks it
    for starts in ([30, 10, 20, 10], [5], [7, 7, 7], [9, 8, 7, 8, 7]):
        rows = [{"host": "h", "step": i, "exposed_wall_ps": 0, "start_ps": s,
                 "exposed_frac": 0.0, "duration_ps": 1} for i, s in enumerate(starts)]
        want = max(rows, key=lambda r: (r["exposed_wall_ps"], -r["start_ps"]))
        assert step_rows.step_summary(rows, 0)["worst_step"]["step"] == want["step"]


def test_step_summary_from_the_columns_equals_from_the_dicts(tmp_path):
    # the summary of an intact StepRows (from its blocks' columns) is the summary of its
    # dicts as a plain list; a trace with some steps exposed, one with none (all tied)
    from overlap.analysis.overlap import host_part
    from overlap.trace import read_trace

    for exposed in (True, False):
        trace = read_trace(_trace(exposed).write(tmp_path / f"t{exposed}.xplane.pb"))
        rows = step_rows.joined([host_part(trace)["steps"]])
        assert isinstance(rows, step_rows.StepRows) and rows.intact_blocks() is not None
        plain = [dict(r) for r in rows]
        want = step_rows.step_summary(plain, 2)
        assert step_rows.step_summary(rows, 2) == want
        assert (want["max_exposed_wall_ps"] > 0) == exposed and want["count"] == 8
        # a row given a key: the dicts are read (the columns no longer are the rows)
        rows[-1]["exposed_wall_ps"] = 10 ** 9
        rows[-1]["note"] = "x"
        got = step_rows.step_summary(rows, 0)
        assert got["worst_step"] == {"host": rows[-1]["host"], "step": rows[-1]["step"]}
        assert got["max_exposed_wall_ps"] == 10 ** 9


def _trace(exposed: bool):
    """Eight steps on one GPU (SYNTHETIC), a D2H and an H2D in each; where `exposed`, the
    later steps' D2H outlast their kernel by more each step, else every copy lies under one."""
    from overlap.trace.synthetic import SyntheticTrace

    us = 1_000_000
    t = SyntheticTrace()
    g = t.gpu(0)
    for k in range(8):
        t0 = (k + 1) * 100 * us
        t.step(k, t0, t0 + 90 * us)
        g.kernel(t0, 80 * us)
        g.memcpy("D2H", t0 + 10 * us, (10 + (10 * k if exposed else 0)) * us, 4096 * (k + 1),
                 hlo_op=f"copy-start.{k}")
        g.memcpy("H2D", t0 + 50 * us, 10 * us, 1024, hlo_op=f"copy-start.h{k}")
    return t


class _Steps:
    """A trace's steps table alone (what `step_rows.step_rows` reads of a trace)."""

    def __init__(self, steps):
        self.steps = steps

    def columns(self, name):
        assert name == "steps"
        return self.steps


def test_each_transfer_counts_in_the_latest_step_starting_at_or_before_it():
    # the plain rule per transfer: its host's latest step starting at or before it, where
    # it starts before that step's end (an end before its start: the start); else none.
    # Transfers before the first step, in gaps, at a start, at an end, steps of no length,
    # two hosts, in start order and not
    rng = np.random.default_rng(5)
    for trial in range(40):
        hosts = ["h1", "h0"][: 1 + trial % 2]
        sh, s0, s1, num = [], [], [], []
        for h in hosts:
            for k in range(int(rng.integers(1, 7))):
                a = int(rng.integers(0, 100)) * 10
                sh.append(h)
                s0.append(a)
                s1.append(a + int(rng.integers(-5, 60)))
                num.append(k)
        m = int(rng.integers(0, 60))
        th = [hosts[i] for i in rng.integers(0, len(hosts), m)]
        tst = rng.integers(-20, 1100, m)
        tst[: m // 3] = np.array(s0 + s1)[rng.integers(0, len(s0) * 2, m // 3)]
        if trial % 3 == 0:
            order = np.argsort(tst, kind="stable")
            th, tst = [th[i] for i in order], tst[order]
        table = {"host": np.array(th, dtype=object), "start_ps": tst,
                 "direction": np.array(["D2H", "H2D"] * m, dtype=object)[:m],
                 "bytes": rng.integers(1, 100, m), "span_ps": np.full(m, 3),
                 "hidden_ps": np.ones(m, np.int64),
                 **{c: np.zeros(m, np.int64) for c in step_rows.exposure.CAUSE_COLUMNS}}
        steps = {"host": np.array(sh, dtype=object), "start_ps": np.array(s0),
                 "end_ps": np.array(s1), "step": np.array(num),
                 "name": np.array(["train"] * len(sh), dtype=object)}
        rows, unassigned = step_rows.step_rows(_Steps(steps), table, {})
        want = {}
        for h, t, b in zip(th, tst.tolist(), table["bytes"].tolist()):
            mine = sorted((a, i) for i, (hh, a) in enumerate(zip(sh, s0)) if hh == h and a <= t)
            if mine:
                i = max(mine, key=lambda x: (x[0], x[1]))[1]  # the latest start (ties: read last)
                if t < max(s1[i], s0[i]):
                    c, bb = want.get(i, (0, 0))
                    want[i] = (c + 1, bb + b)
        got_unassigned = m - sum(c for c, _ in want.values())
        assert unassigned == got_unassigned, trial
        by_step = {(r["host"], r["step"], r["start_ps"]): (r["transfers"], r["bytes"])
                   for r in rows}
        for i, (h, k, a) in enumerate(zip(sh, num, s0)):
            assert by_step[(h, k, a)] == want.get(i, (0, 0)), (trial, i)
