"""Interval primitives of the overlap analysis: vectorized, all arrays int64 picoseconds.

Intervals are merged with a sort and a running maximum; coverage of any `[lo, hi)` is answered
with prefix sums plus `np.searchsorted`, so the cost is O(n log n) with no Python loop per
interval. The `*_grouped` forms do the same for many (host, device) groups at once: every
group's intervals stay apart (a transfer is only ever hidden by compute of its own device).
They search one sorted int64 array in which each group has its own stretch (see "Group
keys" below), skip the sort where the input is already in (group, start) order (the
reader's tables are), and subtract by the gaps between the overlapping intervals, so a
million compute ops and 60k transfers cost tens of milliseconds.
`overlap.analysis.overlap` (which re-exports them) defines what is measured with them.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping

import numpy as np

from overlap.arrays import is_repeated


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


class GroupCoverages(Mapping):
    """Per group key, (compute `Coverage`, exposed `Coverage`): the groups `present` (in
    that order), each a stretch of two sets of grouped intervals (`cb`, `xb`: where each
    group's stretch begins in `ms`/`me` and `xs`/`xe`). A group's pair is made when first
    asked and kept. Why not a dict made at once: two `Coverage`s and four slices a device,
    ~1.5 us, 10k devices ~15 ms, where only a capture with steps reads them
    (`step_rows`)."""

    def __init__(self, keys: list, present: list[int], ms: np.ndarray, me: np.ndarray,
                 cb: np.ndarray, xs: np.ndarray, xe: np.ndarray, xb: np.ndarray) -> None:
        self._at = {keys[g]: g for g in present}  # key -> group, in `present` order
        self._iv = (ms, me, cb, xs, xe, xb)
        self._made: dict = {}

    def __getitem__(self, key) -> tuple["Coverage", "Coverage"]:
        got = self._made.get(key)
        if got is None:
            g = self._at[key]  # (KeyError for a group with no copy, as the dict had)
            ms, me, cb, xs, xe, xb = self._iv
            c0, c1, x0, x1 = int(cb[g]), int(cb[g + 1]), int(xb[g]), int(xb[g + 1])
            got = self._made[key] = (Coverage(ms[c0:c1], me[c0:c1]),
                                     Coverage(xs[x0:x1], xe[x0:x1]))
        return got

    def __iter__(self) -> Iterator:
        return iter(self._at)

    def __len__(self) -> int:
        return len(self._at)


class Coverage:
    """Answers "how much of [lo, hi) is covered" for many windows at once.

    Built over sorted disjoint intervals (e.g. from `merge_intervals`); each query is two
    `searchsorted` lookups into the starts plus prefix sums of the lengths.
    """

    def __init__(self, starts: np.ndarray, ends: np.ndarray):
        self.starts = np.asarray(starts, dtype=np.int64)
        self.ends = np.asarray(ends, dtype=np.int64)

    @functools.cached_property
    def prefix(self) -> np.ndarray:
        """Covered length before each interval (built on first query: the analysis keeps a
        coverage per device and queries only some)."""
        prefix = np.zeros(self.starts.size + 1, dtype=np.int64)
        np.cumsum(self.ends - self.starts, out=prefix[1:])
        return prefix

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


# Group keys: the grouped primitives search many groups' times in one sorted array by giving
# each group its own stretch of one int64 line: group g's times [lo_g, hi_g] are shifted by
# `off_g` onto [base_g, base_g + hi_g - lo_g], the stretches laid end to end in group order.
# A query time is first clipped into its group's [lo_g, hi_g], which changes no answer (no
# interval of the group starts before lo_g or ends after hi_g). Exact while every shifted
# value stays well inside int64: `_KEY_LIMIT` bounds the widths' sum plus the largest |lo_g|
# (times a capture can hold, under 26 days of picoseconds, always fit); beyond it the
# primitives rank the times instead (`np.unique`, a sort of every value: 5-10x slower).
_KEY_LIMIT = float(2**60)


class _Layout:
    """Per group of a table sorted by (group, start): its rows, time range and key offset."""

    def __init__(self, g: np.ndarray, first: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                 n: int):
        self.groups = g[first]  # sorted, distinct
        self.first = first
        self.end = np.append(first[1:], n)
        self.lo, self.hi = lo, hi
        self.off: np.ndarray | None = None
        width = hi.astype(float) - lo.astype(float) + 1
        if len(lo) == 1:  # one group: its times are its keys
            self.off = np.zeros(1, np.int64)
        elif len(lo) and float(width.sum()) + float(np.abs(lo.astype(float)).max()) < _KEY_LIMIT:
            base = np.zeros(len(lo), np.int64)
            np.cumsum((hi - lo + 1)[:-1], out=base[1:])
            self.off = base - lo

    def per_row(self, v: np.ndarray) -> np.ndarray:
        """A per-group array spread over the table's rows (one group: its value, broadcast)."""
        return v[:1] if len(v) == 1 else np.repeat(v, self.end - self.first)

    def find(self, qg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per query group: its position in `groups` (clipped) and whether the table has it."""
        if len(self.groups) == 1:  # one device: every position is 0 (no search)
            return np.zeros(len(qg), np.intp), qg == self.groups[0]
        p = np.minimum(np.searchsorted(self.groups, qg), len(self.groups) - 1)
        return p, self.groups[p] == qg

    def key(self, p: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Query times `x` of groups at positions `p`, clipped into the group and shifted."""
        assert self.off is not None
        if len(self.lo) == 1:  # one group: its own bounds, no offset (no per-query gathers)
            return np.clip(x, self.lo[0], self.hi[0])
        return np.clip(x, self.lo[p], self.hi[p]) + self.off[p]


def _first_rows(g: np.ndarray) -> np.ndarray:
    if is_repeated(g):  # a host file's one device (`grouping.group_codes`): one group
        return np.zeros(1, np.intp)
    new = np.empty(len(g), bool)
    new[0] = True
    np.not_equal(g[1:], g[:-1], out=new[1:])
    return np.flatnonzero(new)


def sorted_by_group(g: np.ndarray, s: np.ndarray) -> bool:
    """Whether rows are in (group, start) order (neighbour tests, no sort)."""
    if len(g) < 2:
        return True
    if is_repeated(g) or not np.any(g != g[0]):  # one group: the common case
        return bool(np.all(s[1:] >= s[:-1]))
    a, b = g[:-1], g[1:]
    return bool(np.all((b > a) | ((b == a) & (s[1:] >= s[:-1]))))


def merge_grouped(g, s, e) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`merge_intervals` of every group at once: (group, start, end) of each group's sorted,
    disjoint, non-empty intervals, ordered by (group, start).

    Why grouped: one call per device costs numpy's fixed overhead per device, and a capture
    may have thousands of devices (issue 11: 10,000 GPU planes). Same answers as the per-group
    primitives (tests/analysis check this on random intervals). Input already in (group,
    start) order (the reader sorts compute and transfers so) is not sorted again.
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
    if not sorted_by_group(g, s):
        order = np.lexsort((s, g))
        g, s, e = g[order], s[order], e[order]
    if s.size < 2 or np.all(s[1:] > e[:-1]):
        # every interval ends before the next starts (one stream, one line): each stands
        # alone and the input is the answer (no running maximum, no copy of a million ends)
        return g, s, e
    reach = _running_max_end(g, s, e)
    new = np.empty(s.size, bool)
    new[0] = True
    np.greater(s[1:], reach[:-1], out=new[1:])
    new[1:] |= g[1:] != g[:-1]
    if new.all():  # nothing overlaps (one stream, one line): every interval stands alone
        return g, s, reach
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, s.size - 1)
    return g[first], s[first], reach[last]


def _running_max_end(g: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Per row of a (group, start)-sorted table, the furthest end so far within its group."""
    first = _first_rows(g)
    if len(first) == 1:
        return np.maximum.accumulate(e)
    lay = _Layout(g, first, s[first], np.maximum.reduceat(e, first), len(g))
    if lay.off is not None:
        # Each group's keys lie above the previous groups', so one running maximum over the
        # keys restarts at every group.
        off = lay.per_row(lay.off)
        key = e + off
        np.maximum.accumulate(key, out=key)
        key -= off
        return key
    # group-major ranks of the ends: the running max of the keys restarts at every group
    u, (r,) = _ranked(e)
    n = len(u)
    cm = np.maximum.accumulate(g * n + r)
    return u[cm - g * n]


def search_ascending(table: np.ndarray, q: np.ndarray, side: str) -> np.ndarray:
    """`np.searchsorted(table, q, side)` of an ascending int64 `table`. Where the queries
    ascend too (a reader's copies, in start order; their ends, where they end in turn) and
    the table is at most twice as long, by one stable sort of both: timsort finds the two
    ascending runs and merges them (linear), and a query's place in the merge less the
    queries before it counts the table's values before it (the table's equal values go
    first for "right", after for "left"); a binary search per query took ~180 instructions
    (many-ops: 36k copies in 36k merged compute intervals, 0.53 + 0.73 -> 0.25 + 0.25 ms).
    Elsewhere `np.searchsorted` itself."""
    n, m = len(table), len(q)
    if m < 64 or n > 2 * m or not bool((q[1:] >= q[:-1]).all()):
        return np.searchsorted(table, q, side=side)  # type: ignore[call-overload]
    if side == "right":
        at = np.flatnonzero(np.argsort(np.concatenate([table, q]), kind="stable") >= n)
    else:
        at = np.flatnonzero(np.argsort(np.concatenate([q, table]), kind="stable") < m)
    at -= np.arange(m)
    return at


class MergedGroups:
    """Many groups' merged intervals (`merge_grouped` output: group, start, end in (group,
    start) order), laid out once on group keys for any number of `covered` and
    `subtract_from` queries (the analysis asks both of every device's compute)."""

    def __init__(self, mg, ms, me, *, in_order: bool = False):
        self.g, self.s, self.e = (np.asarray(a, np.int64) for a in (mg, ms, me))
        self.layout: _Layout | None = None
        self._last: tuple | None = None  # `around`'s last queries and answer
        if len(self.s) and (in_order or sorted_by_group(self.g, self.s)):
            first = _first_rows(self.g)
            last = np.append(first[1:], len(self.g)) - 1
            lay = _Layout(self.g, first, self.s[first], self.e[last], len(self.g))
            self.layout = lay if lay.off is not None else None

    @functools.cached_property
    def _off(self) -> np.ndarray:
        assert self.layout is not None and self.layout.off is not None
        return self.layout.per_row(self.layout.off)

    def _keys(self, t: np.ndarray) -> np.ndarray:
        """Per-row times `t` (starts or ends) as group keys (one group: the times)."""
        return t if len(self.layout.groups) == 1 else t + self._off  # type: ignore[union-attr]

    def _prefix(self) -> np.ndarray:
        """The lengths' running sums, made per `covered` (never kept: the merged compute is
        kept per trace, `causes.compute_groups`, and a million sums are 8 MB on the peak)."""
        prefix = np.zeros(len(self.s) + 1, np.int64)
        lengths = prefix[1:]  # the lengths, summed in place (no second array of a million)
        np.subtract(self.e, self.s, out=lengths)
        np.cumsum(lengths, out=lengths)
        return prefix

    def around(self, qg, lo, hi) -> tuple[np.ndarray, np.ndarray]:
        """Per query (group `qg`, window [lo, hi)): `i0`, the number of intervals (in
        (group, start) order) before the group's first one ending after lo, and `i1`, before
        its first one starting at or after hi; the intervals overlapping the window are
        `i0:i1`. A group the table lacks has both at its place in the order. Only where
        `layout` exists. Not to be modified: the answer is kept for the next call with equal
        queries (compared by value), as the analysis asks it of the same copies three times
        (`covered`, `subtract_from`, and the causes' pieces): two searches of a million
        intervals per ask (~4 ms of 60k copies)."""
        lay = self.layout
        assert lay is not None
        qg, lo, hi = (np.asarray(v, np.int64) for v in (qg, lo, hi))
        last = self._last
        if last is not None and all(len(a) == len(b) and np.array_equal(a, b)
                                    for a, b in zip(last[0], (qg, lo, hi))):
            return last[1]
        if len(lay.groups) == 1:
            # one group: its keys are the times themselves, unclipped (a time before its
            # first start has no end at or below it and no start below it, as that start;
            # one after its last end has every end and start below it, as that end), and
            # no group positions (two fewer query-sized arrays: on 36k copies their fresh
            # pages cost as much as the searches)
            i0 = search_ascending(self.e, lo, "right")
            i1 = search_ascending(self.s, hi, "left")
            g0 = lay.groups[0]
            if not (qg[0] == g0 if is_repeated(qg) else bool(np.all(qg == g0))):
                lack = qg != g0
                i0[lack] = i1[lack] = np.searchsorted(self.g, qg[lack])
        else:
            p, has = lay.find(qg)
            # merged: starts and ends both ascend within a group; a time clipped into its
            # group counts the same intervals of it (none starts before its first start or
            # ends after its last end), and the group's keys lie above the groups' before it
            i0 = np.searchsorted(self._keys(self.e), lay.key(p, lo), side="right")
            i1 = np.searchsorted(self._keys(self.s), lay.key(p, hi), side="left")
            if not has.all():
                i0[~has] = i1[~has] = np.searchsorted(self.g, qg[~has])
        # the answer's arrays are read-only, as callers share them
        i0.flags.writeable = i1.flags.writeable = False
        # kept with copies of the queries (a caller's arrays may change after) where the
        # searches cost more than the copies: a table longer than the queries (a million
        # compute intervals); where it is not (36k copies in as many intervals), the three
        # copies' fresh pages cost more than searching again
        self._last = ((qg.copy(), lo.copy(), hi.copy()), (i0, i1)) \
            if len(self.s) > len(qg) else None
        return i0, i1

    def covered(self, qg, lo, hi) -> np.ndarray:
        """Per query (group `qg`, window [lo, hi)), how much of it the group's intervals
        cover (`covered_grouped`): the lengths of the intervals `around` the window (a
        prefix sum), less what the first starts before lo and the last ends after hi (the
        intervals are disjoint: only those two can reach outside it)."""
        qg, lo, hi = (np.asarray(v, np.int64) for v in (qg, lo, hi))
        if not np.all(hi >= lo):  # (a window ending before it starts is empty: widened)
            hi = np.maximum(hi, lo)
        lay = self.layout
        if lay is None or not len(qg):
            return _before(self.g, self.s, self.e, qg, hi) - \
                _before(self.g, self.s, self.e, qg, lo)
        ms, me, prefix = self.s, self.e, self._prefix()
        i0, i1 = self.around(qg, lo, hi)
        # in place through one scratch index and one scratch value array (three query-sized
        # arrays in all, where a temporary per step made a dozen: their fresh pages were
        # half of this on 36k copies); every index is in range, and `take` into an array
        # buffers the answer unless told what to do with one that is not ("clip")
        at = np.minimum(i0, len(ms) - 1)  # the first interval around the window
        cut = np.take(ms, at)  # ... and what of it lies before lo
        np.subtract(lo, cut, out=cut)
        np.maximum(cut, 0, out=cut)
        out = np.take(prefix, i1)
        out -= cut
        out -= np.take(prefix, i0, out=cut, mode="clip")
        np.subtract(i1, 1, out=at)  # the last interval around the window
        np.maximum(at, 0, out=at)
        np.take(me, at, out=cut, mode="clip")  # ... and what of it lies after hi
        np.subtract(cut, hi, out=cut)
        np.maximum(cut, 0, out=cut)
        out -= cut
        out[i1 <= i0] = 0  # (the group's place where it has no interval there, or none)
        return out

    def subtract_from(self, ag, a_s, a_e) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per group, the parts of its merged intervals `a` that these do not cover, as
        (group, start, end) (`subtract_grouped`): read-only views of `a` itself where
        there is nothing to subtract and every interval is kept.

        Each `a` interval is cut by the intervals of its group that overlap it (found with
        two searches): its pieces are the gaps between them, so the cost is the number of
        `a` intervals and of overlapping ones, not a sort of both sets."""
        ag, a_s, a_e = (np.asarray(v, np.int64) for v in (ag, a_s, a_e))
        bg, b_s, b_e = self.g, self.s, self.e
        if not len(a_s):
            z = np.zeros(0, np.int64)
            return z, z, z
        lay = self.layout
        if lay is None or not sorted_by_group(ag, a_s):
            if len(b_s) or not sorted_by_group(ag, a_s):
                return _subtract_sweep(ag, a_s, a_e, bg, b_s, b_e)
            keep = a_e > a_s  # nothing to subtract
            if keep.all():  # (the input itself, read-only: a million copies' 23 MB kept)
                return _read_only(ag), _read_only(a_s), _read_only(a_e)
            return ag[keep], a_s[keep], a_e[keep]
        # intervals overlapping [lo, hi): from the first ending after lo to the last
        # starting before hi (a group without any: one piece, the `a` interval itself)
        i0, i1 = self.around(ag, a_s, a_e)
        cnt, _, lo, hi = self.pieces(i0, i1, a_s, a_e)
        keep = hi > lo
        return np.repeat(ag, cnt)[keep], lo[keep], hi[keep]

    def pieces(self, i0, i1, lo, hi) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The stretches of windows [lo, hi) between these intervals, given the windows'
        `around` (i0, i1: the intervals overlapping a window are i0:i1): per window `cnt`
        pieces (i1 - i0 + 1: before the first interval, between each two, after the last),
        the index of each window's last piece, and the pieces' starts and ends, a window's
        pieces in order. Piece p of a window lies before interval k = i0 + p: from the end of
        interval k - 1 (the first piece: from the window's start) to the start of k (the
        last: to the window's end); between the first and the last, k - 1 and k both overlap
        the window. A piece may be empty (an interval reaching past the window's edge): the
        caller drops those. With no intervals, each window is its one piece."""
        cnt = i1 - i0 + 1
        last_at = np.cumsum(cnt) - 1
        if not len(self.s):
            return cnt, last_at, np.array(lo, np.int64), np.array(hi, np.int64)
        first_at = last_at - (cnt - 1)
        k = np.arange(int(last_at[-1]) + 1 if len(last_at) else 0) - np.repeat(first_at - i0,
                                                                                cnt)
        p_lo = self.e[np.maximum(k - 1, 0)]
        p_lo[first_at] = lo
        p_hi = self.s[np.minimum(k, len(self.s) - 1)]
        p_hi[last_at] = hi
        return cnt, last_at, p_lo, p_hi


def _read_only(a: np.ndarray) -> np.ndarray:
    """A read-only view of `a` (an answer that is its input: nothing may write through it)."""
    v = a.view()
    v.flags.writeable = False
    return v


def merged_groups(g, s, e) -> MergedGroups:
    """`merge_grouped(g, s, e)`, ready for queries (`MergedGroups`)."""
    return MergedGroups(*merge_grouped(g, s, e), in_order=True)


def covered_grouped(mg, ms, me, qg, lo, hi) -> np.ndarray:
    """`Coverage.covered` for every group at once: per query (group `qg`, window [lo, hi)),
    how much of the window the group's merged intervals (`merge_grouped`) cover."""
    return MergedGroups(mg, ms, me).covered(qg, lo, hi)


def _before(mg, ms, me, qg, x) -> np.ndarray:
    """Per query, the group's covered length in (-inf, x): a search on (group, rank of time)
    keys, so one `searchsorted` serves every group (`covered_grouped` where group keys are
    not exact, or the intervals are not in `merge_grouped` order)."""
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
    intervals `a` that its merged intervals `b` do not cover, as (group, start, end)
    (`MergedGroups.subtract_from`)."""
    return MergedGroups(bg, b_s, b_e).subtract_from(ag, a_s, a_e)


def _subtract_sweep(ag, a_s, a_e, bg, b_s, b_e):
    """`subtract_grouped` by one sweep over every edge (where group keys are not exact or the
    input is not in `merge_grouped` order)."""
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
