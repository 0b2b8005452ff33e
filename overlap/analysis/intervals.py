"""Interval primitives of the overlap analysis: vectorized, all arrays int64 picoseconds.

Intervals are merged with a sort and a running maximum; coverage of any `[lo, hi)` is answered
with prefix sums plus `np.searchsorted`, so the cost is O(n log n) with no Python loop per
interval. The `*_grouped` forms do the same for many (host, device) groups at once: every
group's intervals stay apart (a transfer is only ever hidden by compute of its own device).
`overlap.analysis.overlap` (which re-exports them) defines what is measured with them.
"""

from __future__ import annotations

import numpy as np


def merge_intervals(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of `[starts[i], ends[i])` as sorted, disjoint, non-empty intervals.

    Touching intervals are merged; empty ones dropped. Cost: one sort.
    """
    s = np.asarray(starts, dtype=np.int64)
    e = np.asarray(ends, dtype=np.int64)
    keep = e > s
    if not keep.all():
        s, e = s[keep], e[keep]
    if s.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    reach = np.maximum.accumulate(e)  # furthest end seen so far
    # A new merged interval begins where an interval starts after everything before it ended.
    new = np.empty(s.size, dtype=bool)
    new[0] = True
    np.greater(s[1:], reach[:-1], out=new[1:])
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, s.size - 1)
    return s[first], reach[last]


class Coverage:
    """Answers "how much of [lo, hi) is covered" for many windows at once.

    Built over sorted disjoint intervals (e.g. from `merge_intervals`); each query is two
    `searchsorted` lookups into the starts plus prefix sums of the lengths.
    """

    def __init__(self, starts: np.ndarray, ends: np.ndarray):
        self.starts = np.asarray(starts, dtype=np.int64)
        self.ends = np.asarray(ends, dtype=np.int64)
        self.prefix = np.zeros(self.starts.size + 1, dtype=np.int64)
        np.cumsum(self.ends - self.starts, out=self.prefix[1:])

    @property
    def total(self) -> int:
        return int(self.prefix[-1])

    def before(self, x: np.ndarray) -> np.ndarray:
        """Covered length in (-inf, x) for each x."""
        x = np.asarray(x, dtype=np.int64)
        if self.starts.size == 0:
            return np.zeros(x.shape, np.int64)
        i = np.searchsorted(self.starts, x, side="right") - 1  # last interval starting <= x
        ic = np.maximum(i, 0)
        inside = np.clip(np.minimum(x, self.ends[ic]) - self.starts[ic], 0, None)
        return np.where(i >= 0, self.prefix[ic] + inside, 0)

    def covered(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        lo = np.asarray(lo, dtype=np.int64)
        hi = np.maximum(np.asarray(hi, dtype=np.int64), lo)
        return self.before(hi) - self.before(lo)


def subtract_intervals(a_starts, a_ends, b_starts, b_ends) -> tuple[np.ndarray, np.ndarray]:
    """Parts of merged intervals `a` not covered by merged intervals `b` (sorted, disjoint).

    Sweep line: +1/-1 at a's edges, +2/-2 at b's; where the running level is exactly 1 only
    `a` is active. Ties at one instant only create zero-length pieces, which are dropped.
    """
    times = np.concatenate([a_starts, a_ends, b_starts, b_ends]).astype(np.int64, copy=False)
    if times.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    na, nb = len(a_starts), len(b_starts)
    delta = np.concatenate([np.full(na, 1, np.int8), np.full(na, -1, np.int8),
                            np.full(nb, 2, np.int8), np.full(nb, -2, np.int8)])
    order = np.argsort(times, kind="stable")
    t = times[order]
    level = np.cumsum(delta[order], dtype=np.int32)
    only_a = level[:-1] == 1
    lo, hi = t[:-1][only_a], t[1:][only_a]
    keep = hi > lo
    return lo[keep], hi[keep]


def _ranked(*arrays):
    """Dense ranks of the values of all `arrays` together (same value, same rank), per array,
    and the distinct values (`values[rank]` is the value)."""
    allv = np.concatenate(arrays)
    u, inv = np.unique(allv, return_inverse=True)
    out, pos = [], 0
    for a in arrays:
        out.append(inv[pos:pos + len(a)].astype(np.int64))
        pos += len(a)
    return u, out


def merge_grouped(g, s, e) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`merge_intervals` of every group at once: (group, start, end) of each group's sorted,
    disjoint, non-empty intervals, ordered by (group, start).

    Why grouped: one call per device costs numpy's fixed overhead per device, and a capture
    may have thousands of devices (issue 11: 10,000 GPU planes). Same answers as the per-group
    primitives (tests/analysis check this on random intervals).
    """
    g = np.asarray(g, np.int64)
    s = np.asarray(s, np.int64)
    e = np.asarray(e, np.int64)
    keep = e > s
    if not keep.all():
        g, s, e = g[keep], s[keep], e[keep]
    if not s.size:
        z = np.zeros(0, np.int64)
        return z, z, z
    order = np.lexsort((s, g))
    g, s, e = g[order], s[order], e[order]
    u, (r,) = _ranked(e)
    n = len(u)
    # running max of the end within each group: group-major keys make the running max of
    # the keys restart at every group (a group's keys all exceed the previous group's)
    cm = np.maximum.accumulate(g * n + r)
    reach = u[cm - g * n]
    new = np.empty(s.size, bool)
    new[0] = True
    np.greater(s[1:], reach[:-1], out=new[1:])
    new[1:] |= g[1:] != g[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, s.size - 1)
    return g[first], s[first], reach[last]


def covered_grouped(mg, ms, me, qg, lo, hi) -> np.ndarray:
    """`Coverage.covered` for every group at once: per query (group `qg`, window [lo, hi)),
    how much of the window the group's merged intervals (`merge_grouped`) cover."""
    hi = np.maximum(hi, lo)
    return _before(mg, ms, me, qg, hi) - _before(mg, ms, me, qg, lo)


def _before(mg, ms, me, qg, x) -> np.ndarray:
    """Per query, the group's covered length in (-inf, x): a search on (group, rank of time)
    keys, so one `searchsorted` serves every group."""
    out = np.zeros(len(x), np.int64)
    if not len(ms) or not len(x):
        return out
    u, (rs, rx) = _ranked(ms, x)
    n = len(u)
    km = mg * n + rs
    kq = qg * n + rx
    i = np.searchsorted(km, kq, side="right") - 1
    ic = np.maximum(i, 0)
    ok = (i >= 0) & (mg[ic] == qg)
    prefix = np.zeros(len(ms) + 1, np.int64)
    np.cumsum(me - ms, out=prefix[1:])
    # the group's own prefix: subtract the sum of the groups before it
    gfirst = np.searchsorted(mg, qg, side="left")
    inside = np.clip(np.minimum(x, me[ic]) - ms[ic], 0, None)
    val = prefix[ic] - prefix[gfirst] + inside
    out[ok] = val[ok]
    return out


def subtract_grouped(ag, a_s, a_e, bg, b_s, b_e):
    """`subtract_intervals` of every group at once: per group, the parts of its merged
    intervals `a` that its merged intervals `b` do not cover, as (group, start, end)."""
    t = np.concatenate([a_s, a_e, b_s, b_e]).astype(np.int64, copy=False)
    if not t.size:
        z = np.zeros(0, np.int64)
        return z, z, z
    g = np.concatenate([ag, ag, bg, bg]).astype(np.int64, copy=False)
    na, nb = len(a_s), len(b_s)
    delta = np.concatenate([np.full(na, 1, np.int8), np.full(na, -1, np.int8),
                            np.full(nb, 2, np.int8), np.full(nb, -2, np.int8)])
    order = np.lexsort((t, g))  # stable: ties keep the concatenation order, as one group's sweep
    t, g = t[order], g[order]
    level = np.cumsum(delta[order], dtype=np.int32)
    only_a = (level[:-1] == 1) & (g[:-1] == g[1:])
    lo, hi, gg = t[:-1][only_a], t[1:][only_a], g[:-1][only_a]
    keep = hi > lo
    return gg[keep], lo[keep], hi[keep]
