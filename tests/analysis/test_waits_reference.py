"""The vectorized device-waits split and interval coverage give the answers of plain per-piece
and per-query rules written out here (random groups, gaps, overlapping copies, copies of
groups without compute, windows before, inside and after their group's intervals).

Pins what round 8 of issue 32 changed for speed: `MergedGroups.covered` from the intervals
`around` a window (a prefix sum less the two ends), the kept answer of `around` for equal
queries, `causes._waits` on the shared merged compute with one search for "a copy ended just
before the resume", float64 sums where exact, and one device without per-piece group tests."""

from __future__ import annotations

import numpy as np
import pytest

from overlap import arrays
from overlap.analysis import causes as C
from overlap.analysis.intervals import MergedGroups, merge_grouped, merged_groups

US = C.US
GAP = C.RESUME_GAP_PS


def _merged_by_group(g, s, e) -> dict[int, list[tuple[int, int]]]:
    """Each group's union of intervals, sorted (touching intervals joined, empty ones out)."""
    out: dict[int, list[tuple[int, int]]] = {}
    for gg, ss, ee in sorted(zip(g.tolist(), s.tolist(), e.tolist())):
        if ee <= ss:
            continue
        lst = out.setdefault(gg, [])
        if lst and ss <= lst[-1][1]:
            lst[-1] = (lst[-1][0], max(lst[-1][1], ee))
        else:
            lst.append((ss, ee))
    return out


def _cover(ivs, lo, hi) -> int:
    return sum(max(0, min(hi, b) - max(lo, a)) for a, b in ivs)


def _random_compute(rng, ng, n, scale=US):
    cg = np.sort(rng.integers(0, ng, n))
    cs = rng.integers(0, 1000, n) * scale
    ce = cs + rng.integers(0, 80, n) * scale  # some empty: dropped by the merge
    order = np.lexsort((cs, cg))
    return cg[order], cs[order], ce[order]


@pytest.mark.parametrize("seed", range(30))
def test_covered_equals_the_sum_per_window(seed):
    rng = np.random.default_rng(seed)
    ng = int(rng.integers(1, 4))
    cg, cs, ce = _random_compute(rng, ng, int(rng.integers(1, 60)), scale=1)
    if seed % 3 == 0:  # one device, as the reader hands it: a broadcast of one code
        cg = np.broadcast_to(np.zeros(1, np.int64), (len(cg),))
        order = np.argsort(cs, kind="stable")
        cs, ce = cs[order], ce[order]
    comp = merged_groups(cg, cs, ce)
    by = _merged_by_group(np.asarray(cg), cs, ce)
    m = int(rng.integers(1, 50))
    qg = rng.integers(0, ng + 1, m)  # group ng: never any compute
    lo = rng.integers(-100, 1200, m)
    hi = lo + rng.integers(-5, 300, m)  # some windows empty or reversed
    want = [_cover(by.get(g, []), a, max(a, b)) for g, a, b in zip(qg.tolist(), lo.tolist(),
                                                                  hi.tolist())]
    assert comp.covered(qg, lo, hi).tolist() == want
    # asked again with equal queries (the kept answer), and with other ones
    assert comp.covered(qg.copy(), lo.copy(), hi.copy()).tolist() == want
    lo2 = lo + 7
    want2 = [_cover(by.get(g, []), a, max(a, b)) for g, a, b in zip(qg.tolist(), lo2.tolist(),
                                                                   hi.tolist())]
    assert comp.covered(qg, lo2, hi).tolist() == want2


def test_around_is_not_fooled_by_queries_changed_in_place():
    comp = merged_groups(np.zeros(3, np.int64), np.array([0, 10, 20]), np.array([5, 15, 25]))
    qg, lo, hi = np.zeros(2, np.int64), np.array([0, 12]), np.array([4, 30])
    assert comp.covered(qg, lo, hi).tolist() == [4, 3 + 5]
    lo[1] = 21  # the caller reuses its array: the answer kept for it must not be reused
    assert comp.covered(qg, lo, hi).tolist() == [4, 4]
    i0, i1 = comp.around(qg, lo, hi)
    assert not i0.flags.writeable and not i1.flags.writeable


@pytest.mark.parametrize("seed", range(20))
def test_subtract_from_after_covered_equals_a_fresh_one(seed):
    """`transfer_columns` asks `covered` then `subtract_from` of the same copies: the second
    reuses the first's searches and cuts the same pieces as a table asked only that."""
    rng = np.random.default_rng(seed)
    ng = int(rng.integers(1, 4))
    cg, cs, ce = _random_compute(rng, ng, int(rng.integers(1, 60)), scale=1)
    m = int(rng.integers(1, 30))
    tg = np.sort(rng.integers(0, ng + 1, m))
    s = np.sort(rng.integers(0, 1200, m))
    e = s + rng.integers(1, 40, m)
    order = np.lexsort((s, tg))
    tg, s, e = tg[order], s[order], e[order]
    a = merged_groups(cg, cs, ce)
    a.covered(tg, s, e)
    got = a.subtract_from(*merge_grouped(tg, s, e))
    want = MergedGroups(*merge_grouped(cg, cs, ce)).subtract_from(*merge_grouped(tg, s, e))
    for x, y in zip(got, want):
        assert x.tolist() == y.tolist()


def _waits_by_pieces(tg, s, e, cg, cs, ce, rest):
    """The device-waits split, one exposed piece at a time (the module docstring's rule)."""
    n = len(s)
    cols = ("cause_device_waits_ps", "cause_unknown_ps", "unknown_no_resume_ps",
            "unknown_late_resume_ps", "unknown_not_copy_bound_ps", "stall_ps")
    out = {c: [0] * n for c in cols}
    out["ready_ps"] = [-1] * n
    comp = _merged_by_group(cg, cs, ce)
    copies = _merged_by_group(tg, s, e)
    ends: dict[int, list[int]] = {}
    for g, x in zip(tg.tolist(), e.tolist()):
        ends.setdefault(g, []).append(x)
    for i in range(n):
        if not rest[i] or e[i] <= s[i]:
            continue
        g, a, b = int(tg[i]), int(s[i]), int(e[i])
        ivs = comp.get(g, [])
        # the parts of [a, b) no compute interval of the group covers
        pieces, at = [], a
        for x, y in ivs:
            if y <= at or x >= b:
                continue
            if x > at:
                pieces.append((at, x))
            at = max(at, y)
        if at < b:
            pieces.append((at, b))
        for lo, hi in pieces:
            nxt = [x for x, _ in ivs if x >= hi]
            length = hi - lo
            if not nxt:
                out["cause_unknown_ps"][i] += length
                out["unknown_no_resume_ps"][i] += length
                continue
            resume = min(nxt)
            bare = max(resume - hi, 0) - _cover(copies.get(g, []), hi, max(resume, hi))
            ended = any(resume - GAP <= x <= resume for x in ends.get(g, []))
            if bare <= GAP and ended:
                out["cause_device_waits_ps"][i] += length
                if hi == b:
                    out["stall_ps"][i] = length
                    out["ready_ps"][i] = lo - a
            else:
                out["cause_unknown_ps"][i] += length
                key = "unknown_late_resume_ps" if bare > GAP else "unknown_not_copy_bound_ps"
                out[key][i] += length
    return out


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("how", ["plain", "add_at", "wide_keys"])
def test_waits_equal_the_rule_per_piece(seed, how, monkeypatch):
    rng = np.random.default_rng(seed)
    ng = int(rng.integers(1, 4)) if seed % 4 else 1
    cg, cs, ce = _random_compute(rng, ng, int(rng.integers(0, 60)))
    m = int(rng.integers(1, 40))
    # group ng: never any compute (only where there are several groups)
    tg = rng.integers(0, ng + 1 if ng > 1 else 1, m)
    s = rng.integers(0, 1100, m) * US
    e = s + rng.integers(0, 400, m) * US
    ngroups = ng + 1 if ng > 1 else 1
    if ngroups == 1:  # one device: the reader's broadcast codes
        tg = np.broadcast_to(np.zeros(1, np.int64), (m,))
        cg = np.broadcast_to(np.zeros(1, np.int64), (len(cs),))
    comp = merged_groups(cg, cs, ce)
    keys = C._Keys(s, e, cs, ce, groups=ngroups)
    if how == "add_at":
        monkeypatch.setattr(arrays, "EXACT_FLOAT", 0)  # (`bin_sums`: np.add.at)
    elif how == "wide_keys":
        keys.ok = False  # the lexsort searches of keys too wide for one int64
    rest = rng.random(m) < 0.8
    cols = ("cause_device_waits_ps", "cause_unknown_ps", "unknown_no_resume_ps",
            "unknown_late_resume_ps", "unknown_not_copy_bound_ps", "stall_ps", "ready_ps")
    out = {c: np.zeros(m, np.int64) for c in cols}
    out["ready_ps"][:] = -1
    C._waits(out, keys, np.asarray(tg, np.int64), s, e, comp, rest, ngroups)
    want = _waits_by_pieces(np.asarray(tg), s, e, np.asarray(cg), cs, ce, rest)
    for c in cols:
        assert out[c].tolist() == want[c], c
