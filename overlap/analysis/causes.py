"""Why each exposed copy is exposed: every exposed picosecond of a transfer gets one cause.

A transfer's exposed time is `exposed_ps = span_ps - hidden_ps` (`overlap.analysis.overlap`):
the part of its flight during which its device ran no compute. `transfer_causes` splits that
time, per transfer, into the causes below; the split of each transfer sums exactly to its
`exposed_ps` (integer picoseconds, none negative), so the sums per direction, per HLO op, per
device and per step (`exposure_causes` in the result) cover each group's exposed time exactly.

Causes, in precedence order (a picosecond goes to the first that applies):

1. `pageable_memory`: the copy's host side is pageable memory (`src_kind`/`dst_kind`
   `pageable`, the same test as `summary.pageable_share`). The driver stages such a copy
   through a pinned bounce buffer synchronously, so it cannot overlap compute whatever the
   schedule. Evidence: copies, bytes, their rate. Fix: `memory_kind='pinned_host'`.
2. `shares_stream_with_compute`: the copy runs on a GPU stream (trace line) that also runs
   compute kernels of its device. A stream executes in order, so no kernel of that stream can
   run beside the copy. XLA:GPU's command buffers (`--xla_gpu_enable_command_buffer`, on by
   default) put copies into CUDA graphs launched on the compute stream; `overlap capture`
   turns them off (`COMMAND_BUFFER_FLAG`, the same string as `overlap.capture.api`'s).
   Evidence: the streams (line names), their kernels, the flag, and what the flag measured on
   an H100 (`COMMAND_BUFFER_MEASURED`). GPU devices only: a TPU's copies are ops on its op
   lines, which say nothing about streams.
3. `queued_behind_same_direction`: the copy started within `QUEUE_GAP_PS` after the previous
   copy of its direction on its device ended (back-to-back copies: the link, not the schedule,
   decided when it started). Evidence: the longest queue, the bytes ahead of a copy, their rate.
4. `device_waits`: the device ran no compute while the copy flew, and compute resumed as soon
   as the copies in flight ended: the device stalled on copies (this one or one beside it).
   Per exposed piece of a copy (a stretch with no compute on its device): the device waited
   when the next compute start after the piece (`resume`) comes no more than `RESUME_GAP_PS`
   after some copy of the device ended, and between the piece and `resume` the device never
   spent more than `RESUME_GAP_PS` with neither compute nor a copy. Evidence per copy:
   `stall_ps` (its exposed tail: the device idle from `idle_from` until the copy ended and
   then resumed), `ready_ps = idle_from - start` (compute the device had after the copy
   started, before it ran out), and the bandwidth that would have hidden it,
   `bytes / ready_ps` (the copy would have ended when the device ran out of work; none when
   the device had no compute after the copy started: only an earlier issue hides that one).
   `slack` is the compute time beside the copies (`hidden_ps`).
5. `unknown`: exposed time none of these explains: compute did not resume after the piece (the
   capture ends), or resumed later than `RESUME_GAP_PS` after the copies ended (the device was
   idle for another reason: host-bound launches, a synchronisation), or resumed while the copy
   still flew and no copy had just ended. Evidence: the picoseconds of each of those three.

Causes 1-3 are properties of the copy and take its whole exposed time; 4 and 5 split the rest
of it per exposed piece. A transfer's `cause` is the one holding most of its exposed time.

Blind spots:

* The trace has no dependency edges. "The device waited" means compute resumed when copies
  ended; the kernel that resumed is assumed to be one that needed a copy (it may not be).
  The HLO is not read here (the analysis needs no program); `overlap report` joins each
  copy to its `-done` and first user in the program and puts what that says (how long before
  the use the copy started, the stall, the bandwidth that would have hidden it) into the
  `device_waits` evidence as `hlo` (`overlap.analysis.first_use`), which can contradict this
  guess ("none of their first users waited for them").
* CUPTI records when a copy ran, not when it was issued: a copy issued long before the link
  was free shows as queued only if it started right after another copy of its direction;
  `ready_ps` counts from the copy's start, not its issue.
* Copies of one direction overlapping each other in time (several DMA engines) are not
  "queued"; they share the link, which the trace cannot see either.
* `QUEUE_GAP_PS` (10 us) and `RESUME_GAP_PS` (200 us) are thresholds, set from the H100/H200
  corpus (docs/causes.md): back-to-back copies there start 1.2-8 us after the previous one
  ends; the first kernel after an uncovered copy end starts 0.1-200 us after it (most under
  60 us), then almost none until 500 us and beyond (host-side gaps). An unrelated copy
  starting by chance within 10 us of another counts as queued.
* A pageable copy is staged by the host; its trace span is only the DMA part.

Vectorised: copies and compute are searched per (host, device) on one int64 key (group
number times the capture's time range plus the time), or by a lexicographic sort of (group,
time) pairs where that key would not fit in int64; no Python loop per copy.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Literal

import numpy as np

from overlap.analysis import memo
from overlap.analysis.grouping import Columns, codes_equal, ends_after, group_codes, key_codes
from overlap.analysis.intervals import (
    MergedGroups,
    merge_grouped,
    merged_groups,
)
from overlap.analysis.units import format_ps
from overlap.arrays import bin_sums, dict_rows, is_repeated, labels_at, repeated, sorted_unique

PAGEABLE = "pageable_memory"
SHARES_STREAM = "shares_stream_with_compute"
QUEUED = "queued_behind_same_direction"
DEVICE_WAITS = "device_waits"
UNKNOWN = "unknown"
CAUSES = (PAGEABLE, SHARES_STREAM, QUEUED, DEVICE_WAITS, UNKNOWN)  # precedence order
DIRECTIONS = ("D2H", "H2D")
CAUSE_COLUMNS = tuple(f"cause_{c}_ps" for c in CAUSES)

# The per-transfer columns the analysis keeps in its table (and so in `top_exposed` rows).
TABLE_COLUMNS = (*CAUSE_COLUMNS, "cause", "stall_ps", "ready_ps", "queue_ahead", "bytes_ahead")

US = 1_000_000  # picoseconds
QUEUE_GAP_PS = 10 * US
RESUME_GAP_PS = 200 * US
# The XLA flag that puts copies on the compute stream when on (its default); `overlap capture`
# appends it empty (off). The same string as overlap.capture.api.COMMAND_BUFFER_FLAG (a test
# checks: analysis may not import capture).
COMMAND_BUFFER_FLAG = "--xla_gpu_enable_command_buffer="
COMMAND_BUFFER_MEASURED = (
    "measured on an H100 (transformer:h100, qkv_proj_offloaded, shared/captures/SOURCES.md): "
    "command buffers on, every copy on the compute stream, 0% hidden, step +16.3% vs full "
    "remat; off (overlap capture's default) D2H 38.9% / H2D 6.8% hidden, step +12.4%")
_MAX_STREAMS = 8  # streams named in one direction's evidence


# ---------------------------------------------------------------------------------------------
# Searching (group, time) pairs


_KEY_BLOCK = 1 << 16


class _Keys:
    """(group, time) pairs as one sortable int64 (`g * width + t - lo`) where that fits, so
    one `searchsorted` serves every group."""

    def __init__(self, *times: np.ndarray, groups: int):
        vals = [t for t in times if len(t)]
        self.lo = int(min(int(t.min()) for t in vals)) if vals else 0
        hi = int(max(int(t.max()) for t in vals)) if vals else 0
        self.width = hi - self.lo + 2 * RESUME_GAP_PS + 2
        self.ok = float(self.width) * (groups + 1) < 2.0 ** 62

    def key(self, g: np.ndarray, t: np.ndarray) -> np.ndarray:
        # clipped into the group's own range: a time before every time of the capture is the
        # start of its group's stretch, never the end of the previous group's. Built in one
        # array, in place: the table side is a million compute intervals, and three
        # temporaries of it were the analysis' peak (issue 32).
        t = np.asarray(t, np.int64)
        out = np.subtract(t, self.lo)
        np.clip(out, 0, self.width - 1, out=out)
        g = np.asarray(g)
        for b in range(0, len(out), _KEY_BLOCK):  # the group term a block at a time
            out[b:b + _KEY_BLOCK] += g[b:b + _KEY_BLOCK].astype(np.int64) * self.width
        return out


def _search(keys: _Keys, tg, tt, qg, qt, side: Literal["left", "right"]) -> np.ndarray:
    """`np.searchsorted` of query pairs (qg, qt) in table pairs (tg, tt) sorted by (g, t)."""
    if keys.ok:
        return np.searchsorted(keys.key(tg, tt), keys.key(qg, qt), side=side)
    # Too wide for one int64 key: sort table and queries together (ties: table first for
    # 'right', query first for 'left') and count table rows before each query.
    n, m = len(tt), len(qt)
    g = np.concatenate([tg, qg]).astype(np.int64)
    t = np.concatenate([tt, qt]).astype(np.int64)
    is_q = np.concatenate([np.zeros(n, np.int8), np.ones(m, np.int8)])
    tie = is_q if side == "right" else 1 - is_q
    order = np.lexsort((tie, t, g))
    before = np.cumsum(is_q[order] == 0)
    out = np.empty(m, np.int64)
    qpos = is_q[order] == 1
    out[order[qpos] - n] = before[qpos]
    return out


# ---------------------------------------------------------------------------------------------
# Per transfer


@memo.per_trace("transfer_causes", lambda v: {**v},
                lambda table: (table["start_ps"], table["end_ps"], table["exposed_ps"]))
def transfer_causes(trace, table: Columns) -> Columns:
    """Per transfer of `table` (`overlap.analysis.overlap.transfer_columns`, same rows): the
    split of its `exposed_ps` over `CAUSES` (`cause_<c>_ps`), its `cause`, and the evidence
    columns `on_compute_stream`, `queue_ahead`, `bytes_ahead`, `stall_ps`, `ready_ps` (-1 where
    the copy ended under compute) and `unknown_<why>_ps` (see the module docstring)."""
    start = np.asarray(table["start_ps"], np.int64)
    end = np.asarray(table["end_ps"], np.int64)
    n = len(start)
    exposed = np.asarray(table["exposed_ps"], np.int64)
    if not n:
        z = np.zeros(0, np.int64)
        out: dict[str, Any] = {c: z.copy() for c in CAUSE_COLUMNS}
        out.update(on_compute_stream=np.zeros(0, bool), queue_ahead=z.copy(),
                   bytes_ahead=z.copy(), stream_kernels=z.copy(), group=z.copy(),
                   stall_ps=z.copy(), ready_ps=z.copy(), unknown_no_resume_ps=z.copy(),
                   unknown_late_resume_ps=z.copy(), unknown_not_copy_bound_ps=z.copy(),
                   cause=np.zeros(0, object), stream=z.copy(), line=np.zeros(0, object))
        return out
    tr = trace.columns("transfers")
    co = trace.columns("compute")
    (tg, cg), keys_hd, comp = compute_groups(trace)
    tg = np.asarray(tg, np.int64)
    cg = np.asarray(cg, np.int64)
    ngroups = len(keys_hd)

    pageable = np.asarray(table["pageable"], bool)
    on_stream, kernels = _on_compute_stream(tr, co, tg, cg, keys_hd)
    queued, ahead, bytes_ahead = _queues(tg, np.asarray(table["direction"], object), start, end,
                                         np.asarray(table["bytes"], np.int64))
    pg = pageable
    ss = ~pg & on_stream
    qu = ~pg & ~ss & queued
    rest = ~(pg | ss | qu)
    # Columns that hold one value (every copy hidden, as on most captures: no cause time,
    # stall or ready time) are read-only `arrays.repeated` views until `_waits` writes to
    # them: ten 36k-row columns of fresh pages were a third of this on the many-ops capture.
    some = bool(exposed.any())
    out = {c: np.where(m, exposed, 0) if some and m.any() else repeated(n, 0, np.int64)
           for c, m in zip(CAUSE_COLUMNS, (pg, ss, qu))}
    out.update({c: repeated(n, 0, np.int64) for c in CAUSE_COLUMNS[3:]})
    st = _streams(tr)[0]
    out.update(on_compute_stream=on_stream, queue_ahead=ahead, bytes_ahead=bytes_ahead,
               stream_kernels=kernels, group=tg, stall_ps=repeated(n, 0, np.int64),
               ready_ps=repeated(n, -1, np.int64), **{c: repeated(n, 0, np.int64)
                                                      for c in _UNKNOWN_COLUMNS},
               # (the table's own column where it is one, never the trace's: a copy, but
               # of a read-only one-value column, nothing writes to)
               stream=st if is_repeated(st) else st.copy(),
               line=np.asarray(tr["line"], object) if "line" in tr
               else np.full(n, None, object))
    waits = rest & (exposed > 0)
    if some and waits.any():
        cs = np.asarray(co["start_ps"], np.int64)
        ce = ends_after(cs, co["end_ps"])
        keys = _Keys(start, end, cs, ce, groups=ngroups)
        _waits(out, keys, tg, start, end, comp, waits, ngroups)
    # what is left of a transfer's exposed time (none, by construction) is unknown: the split
    # always sums to exposed_ps. A copy without exposed time has no cause time (each column
    # is its exposed time or pieces of it), so only copies with some are summed and labelled.
    label = np.array(["", *CAUSES], dtype=object)
    pos = exposed > 0
    k = int(np.count_nonzero(pos))
    if not k:
        out["cause"] = repeated(n, label[0])  # ('' : no cause, as below)
        return out
    every = k == n
    # (the rows' index only where some copy has none: 8 MB of a million, on the peak)
    has = None if every else np.flatnonzero(pos)
    del pos
    rows = slice(None) if has is None else has
    left = exposed[rows] - out[CAUSE_COLUMNS[0]][rows]
    for c in CAUSE_COLUMNS[1:]:
        left -= out[c][rows]
    if left.any():
        unknown = out["cause_unknown_ps"] = np.array(out["cause_unknown_ps"])
        unknown[rows] += left
    del left  # (before `_first_max`'s own column: one row's worth less on the peak)
    top = _first_max([out[c] for c in CAUSE_COLUMNS], has) + 1
    if has is not None:
        code = np.zeros(n, top.dtype)
        code[has] = top
        top = code
    out["cause"] = labels_at(label, top)  # (one cause: a `repeated` column)
    return out


def _first_max(cols: list[np.ndarray], rows: np.ndarray | None = None) -> np.ndarray:
    """Per row of `rows` (an index; None: every row), the index of the column holding its
    largest value, the first of equal ones: `np.argmax(np.stack([c[rows] for c in cols]),
    axis=0)`, a column at a time and `_SUM_BLOCK` rows at a time (the stack was 38 MB of a
    million copies' five cause columns on the analysis' peak; then the running maxima and
    the rows taken from each column were 8 MB each)."""
    n = len(cols[0]) if rows is None else len(rows)
    # (int8: a few columns; 1 byte a row, not 8, on the analysis' peak)
    top = np.zeros(n, np.int8 if len(cols) <= 127 else np.intp)
    for a in range(0, n, _SUM_BLOCK):
        r = slice(a, a + _SUM_BLOCK) if rows is None else rows[a:a + _SUM_BLOCK]
        best = np.array(cols[0][r], copy=True)
        t = top[a:a + _SUM_BLOCK]  # (a view: written in place)
        for j, c in enumerate(cols[1:], 1):
            c = c[r]
            more = c > best
            t[more] = j
            np.maximum(best, c, out=best)
    return top


_UNKNOWN_COLUMNS = ("unknown_no_resume_ps", "unknown_late_resume_ps",
                    "unknown_not_copy_bound_ps")


@memo.per_trace("compute_groups", lambda v: v)
def compute_groups(trace) -> tuple[list[np.ndarray], list[tuple[str, str]], MergedGroups]:
    """`group_codes` of the trace's transfers and compute, and each device's merged compute
    (`merged_groups`), made once per trace: `transfer_columns` and `transfer_causes` both
    search the same million compute intervals (and `MergedGroups.around` keeps its answer
    for the copies both ask about). Shared: not to be modified. The compute ends are taken
    as the reader gives them: an end before its start makes an empty interval, dropped by
    the merge as `ends_after`'s equal start and end would be."""
    tr = trace.columns("transfers")
    co = trace.columns("compute")
    codes, keys = group_codes(tr, co)
    comp = merged_groups(codes[1], np.asarray(co["start_ps"], np.int64),
                         np.asarray(co["end_ps"], np.int64))
    return codes, keys, comp


def _on_compute_stream(tr: Columns, co: Columns, tg, cg, keys_hd
                       ) -> tuple[np.ndarray, np.ndarray]:
    """Per transfer: does a compute event of its device run on its stream (GPU devices), and
    how many compute events that stream has."""
    ts, tok = _streams(tr)
    gpu = np.array([d.startswith("GPU") for _, d in keys_hd], bool)
    if not gpu.any():  # streams are GPU's: no TPU copy shares one with compute
        return _off_stream(len(ts))
    cs, cok = _streams(co)
    if not cok.all():  # (else no copies of a million compute rows' groups and streams)
        cg, cs = cg[cok], cs[cok]
    if not len(cs):
        return _off_stream(len(ts))
    # the reader writes compute line by line: runs of one (device, stream), so only the runs'
    # heads are sorted (a million kernels are a few hundred runs)
    head = np.flatnonzero(np.r_[True, (cg[1:] != cg[:-1]) | (cs[1:] != cs[:-1])])
    run = np.diff(np.r_[head, len(cs)])
    u, inv = _run_unique(np.concatenate([ts, cs[head]]))
    w = len(u)
    tkey = tg * w + inv[:len(ts)]
    ckey, at = np.unique(cg[head] * w + inv[len(ts):], return_inverse=True)
    kernels = np.bincount(at, weights=run, minlength=len(ckey)).astype(np.int64)
    i = np.minimum(np.searchsorted(ckey, tkey), len(ckey) - 1)
    on = (ckey[i] == tkey) & gpu[tg] & tok
    if not on.any():
        return _off_stream(len(ts))
    return on, np.where(on, kernels[i], 0)


def _off_stream(n: int) -> tuple[np.ndarray, np.ndarray]:
    """`_on_compute_stream` where no copy shares a stream with compute (copies on their own
    streams, as on most GPU captures, and every TPU's): read-only one-value columns, not 9 MB
    of fresh zeros a million copies."""
    return repeated(n, False, bool), repeated(n, 0, np.int64)


def _run_unique(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`np.unique(x, return_inverse=True)` of int64 values that come in runs (a line's
    copies, then the compute runs' streams): the runs' heads made unique, each value found
    among them (no sort of 60k copies' streams: ~4 ms)."""
    if len(x) < 2:
        return np.unique(x, return_inverse=True)
    new = np.empty(len(x), bool)
    new[0] = True
    np.not_equal(x[1:], x[:-1], out=new[1:])
    u = sorted_unique(x[new])
    return u, np.searchsorted(u, x)


def _streams(t: Columns) -> tuple[np.ndarray, np.ndarray]:
    """A table's stream ids (0 where missing: a table built without them) and which are known."""
    n = len(t["start_ps"])
    v = t.get("stream")
    if v is None:
        return np.zeros(n, np.int64), np.zeros(n, bool)
    v = np.asarray(v)
    if v.dtype == object:
        ok = np.array([x is not None and x == x for x in v.tolist()], bool) if n else \
            np.zeros(0, bool)
        return np.where(ok, v, 0).astype(np.int64), ok
    # the table's own int64 column, not a copy (a million compute rows: 8 MB)
    return v.astype(np.int64, copy=False), np.ones(n, bool)


def _queues(tg, direction, start, end, nbytes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per transfer: queued (started within QUEUE_GAP_PS after the previous copy of its
    (device, direction) ended), copies ahead of it in its back-to-back queue and their bytes.

    Each step writes into arrays it made (the sorted copies of the columns hold the gaps,
    running ends and the answers in turn): on 36k copies every fresh 36k-row array costs
    ~70 page faults, and the plain form made ~25 of them (3.7 ms, ~1,100 faults)."""
    n = len(start)
    # the directions' sorted codes, as np.unique gave them, from the few distinct objects
    # (`key_codes`), not a sort of every row's string (23 ms of 58k copies); a missing
    # direction, which np.unique refuses, still goes there
    dcode = key_codes(np.asarray(direction, object), sort=True)[0]
    if len(dcode) and dcode.min() < 0:
        dcode = np.unique(direction, return_inverse=True)[1]
    if not n:
        return np.zeros(0, bool), np.zeros(0, np.int64), np.zeros(0, np.int64)
    grp = np.multiply(tg, 4, dtype=np.int64)
    grp += dcode
    # rows by (device, direction, start), ties in table order (`np.lexsort((start, grp))`),
    # and where each group begins among them
    order, s, begin = _group_order(grp, start)
    del grp, dcode  # (their pages serve the arrays below)
    same = np.ones(n, bool)  # the row is in the previous row's (device, direction)
    same[0] = False
    same[begin] = False
    # (fancy indexing: fresh arrays, ours to write to)
    e, b = end[order], nbytes[order]
    reach = _group_reach(e, same, begin)  # (in `e`'s own array)
    gap = s  # the gap before each copy: its start less the furthest end before it
    np.subtract(s[1:], reach[:-1], out=gap[1:])
    q = np.zeros(n, bool)
    np.greater_equal(gap[1:], 0, out=q[1:])
    q[1:] &= gap[1:] <= QUEUE_GAP_PS
    q &= same
    # the head of each copy's queue (the last copy not queued, at or before it): its index
    # where it is a head, else 0, and a running maximum (in the gaps' array)
    idx = np.arange(n)
    head = np.multiply(idx, ~q, out=gap)
    np.maximum.accumulate(head, out=head)
    # bytes ahead: the bytes before the copy less those before its head (exclusive sums)
    before = np.cumsum(b)
    before -= b
    bytes_ahead = np.take(before, head)
    np.subtract(before, bytes_ahead, out=bytes_ahead)
    ahead = np.subtract(idx, head, out=idx)
    # back in the table's order, into the sorted columns' arrays (no longer needed)
    out_q = np.empty(n, bool)
    out_q[order] = q
    out_a, out_b = reach, b
    out_a[order] = ahead
    out_b[order] = bytes_ahead
    return out_q, out_a, out_b


def _group_order(grp: np.ndarray, start: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`np.lexsort((start, grp))` (rows by (group, start), ties in table order), the starts
    in that order, and where each group but the first begins in it (from the groups' sizes
    where they are numbered from 0: no gather of the sorted groups)."""
    lo = int(grp.min()) if len(grp) else 0
    count = np.bincount(grp) if lo >= 0 else None
    if count is not None and len(grp) > 1 and len(count) <= 1 << 15 and \
            bool((start[1:] >= start[:-1]).all()):
        # starts ascending in table order (a line's copies as read): within a group the
        # table order is the start order, ties in table order, so the lexsort is a stable
        # sort of the groups alone: each group's rows in turn where they are a few (one
        # device's two directions: ~0.12 ms of the many-ops capture's 36k copies, where the
        # int64 lexsort's two timsorts took ~0.45), else by int16 keys (a radix sort, ~0.3)
        present = np.flatnonzero(count)
        if len(present) <= _FEW_ORDERED:
            order = np.concatenate([np.flatnonzero(grp == g) for g in present.tolist()])
        else:
            order = np.argsort(grp.astype(np.int16), kind="stable")
    else:
        order = np.lexsort((start, grp))
    if count is not None:
        begin = np.cumsum(count[:-1])[count[:-1] > 0]
    else:
        g = grp[order]
        begin = np.flatnonzero(g[1:] != g[:-1]) + 1
    return order, start[order], begin


_FEW_ORDERED = 4  # groups `_group_order` takes one by one (a pass over the rows each)
_LIFT_LIMIT = 1 << 62  # `_group_reach` lifts by time below this (tests force ranks with 0)


def _group_reach(e: np.ndarray, same: np.ndarray, begin: np.ndarray | None = None
                 ) -> np.ndarray:
    """Per row of a table sorted by group (`same`: the row is in the previous row's group),
    the furthest end `e` so far within its group: one running maximum, each group's ends
    lifted above the previous groups' by the ends' range where the lifted values stay below
    `_LIFT_LIMIT`, else by their ranks (a sort of every end: 1.5 ms of 36k copies). Given
    `begin` (the rows where groups begin after the first) and few groups: a running maximum
    per group, in `e`'s own array (the caller's to give)."""
    if not len(e):
        return e
    if begin is not None and len(begin) < _FEW_GROUPS:
        for lo, hi in zip([0, *begin.tolist()], [*begin.tolist(), len(e)]):  # per group
            np.maximum.accumulate(e[lo:hi], out=e[lo:hi])
        return e
    groups = np.cumsum(~same) - 1
    e0 = int(e.min())
    width = int(e.max()) - e0 + 1
    if width * (int(groups[-1]) + 1) < _LIFT_LIMIT:
        lift = groups * width
        return np.maximum.accumulate((e - e0) + lift) - lift + e0
    u, r = np.unique(e, return_inverse=True)
    lift = groups * len(u)
    return u[np.maximum.accumulate(r + lift) - lift]


_FEW_GROUPS = 64  # groups `_group_reach` runs one by one (a numpy call each)


_WAIT_BLOCK = 1 << 16  # exposed copies whose pieces `_waits` holds at once


def _waits(out: dict[str, Any], keys: _Keys, tg, start, end, comp: MergedGroups, rest,
           ngroups: int) -> None:
    """Split the exposed time of the transfers in `rest` into device_waits and unknown, per
    exposed piece (see the module docstring), and fill stall_ps / ready_ps. (A copy without
    exposed time has no piece: the caller leaves those out of `rest`, which saves their
    searches, most copies of a capture that hides them.) `comp`: the devices' merged compute
    (`compute_groups`), `ngroups` the number of (host, device) groups.

    The copies' pieces are made and judged `_WAIT_BLOCK` copies at a time (`_wait_block`):
    each copy's answer is its own pieces', so blocks give the same sums. Why: a dozen
    pieces-sized arrays held at once were this analysis' peak on long captures (160k exposed
    copies, 320k pieces: ~25 MiB)."""
    sel = np.flatnonzero(rest & (end > start))
    if not len(sel):
        return
    if len(sel) == len(start):  # every copy (the usual where copies are exposed): no gathers
        g, s, e = tg, start, end
    else:
        g, s, e = tg[sel], start[sel], end[sel]
    # compute intervals of the group ending at or before s / starting before e (asked of
    # every copy at once: `transfer_columns` asked the same of these copies, kept)
    i0, i1 = _pieces_around(comp, keys, g, s, e)
    # the copies' merged spans (what `bare` subtracts), their ends in order (`_EndIndex`),
    # and a bound on each copy's pieces' partial sums (`bin_sums`): once
    tm = merged_groups(*merge_grouped(tg, start, end))
    ends = _EndIndex(keys, tg, end)
    most = int((end - start).max())
    for b in range(0, len(sel), _WAIT_BLOCK):
        blk = slice(b, b + _WAIT_BLOCK)
        _wait_block(out, tg, comp, tm, ends, ngroups, most, sel[blk], g[blk], s[blk], e[blk],
                    i0[blk], i1[blk])


def _wait_block(out: dict[str, Any], tg, comp: MergedGroups, tm: MergedGroups,
                ends: "_EndIndex", ngroups: int, most: int, sel, g, s, e, i0, i1) -> None:
    """`_waits` of the copies `sel` (rows of the table, ascending; `g`, `s`, `e` their
    groups, starts and ends, `i0`, `i1` their `around`), into `out`'s columns."""
    mg, ms = comp.g, comp.s
    # Pieces (`MergedGroups.pieces`): before the first overlapping interval, between each
    # two, after the last; the compute after a piece (`resume`) is the interval that ends it,
    # after a copy's last piece interval i1 (the group's next, where it has one)
    cnt, last_at, lo, hi = comp.pieces(i0, i1, s, e)
    # each piece's copy, as its index into `sel` (int32: a block's), each array dropped
    # where it is last used, below
    a = np.repeat(np.arange(len(sel), dtype=np.int32), cnt)
    del cnt
    nm = len(ms)
    is_last = np.zeros(len(a), bool)
    is_last[last_at] = True
    if ngroups > 1:
        pg = g[a]
    else:  # one device: every copy and interval is its group's (no per-piece test)
        pg = np.broadcast_to(tg[:1], (len(a),))
    if nm:
        after = np.minimum(i1, nm - 1)
        resume = hi.copy()
        resume[last_at] = ms[after]
        # compute resumes after every piece but a copy's last: there, where the group has an
        # interval after the copy
        next_ok = np.ones(len(a), bool)
        ok_last = i1 < nm
        if ngroups > 1:
            ok_last &= mg[after] == g
        next_ok[last_at] = ok_last
        del after, ok_last
    else:
        next_ok = np.zeros(len(a), bool)
        resume = np.zeros(len(a), np.int64)
    del last_at
    keep = hi > lo
    if not keep.all():
        # one at a time, each array's old rows freed as its kept ones are made (all six
        # made before any was freed held twice the pieces' arrays at this step's peak)
        a = a[keep]
        lo = lo[keep]
        hi = hi[keep]
        next_ok = next_ok[keep]
        resume = resume[keep]
        is_last = is_last[keep]
        pg = pg[keep] if ngroups > 1 else pg[:len(a)]
    del keep
    # copy-free idle time between the piece and the resume: (resume - hi) minus in-flight time
    bare = np.maximum(resume - hi, 0)
    # (a piece cut short by the next compute start has an empty window: none covered)
    w = np.flatnonzero(bare)
    if len(w):
        bare[w] -= tm.covered(pg[w], hi[w], resume[w])
    # did some copy of the device end within RESUME_GAP_PS before the resume? (asked of the
    # pieces the answer decides)
    waited = next_ok & (bare <= RESUME_GAP_PS)
    w = np.flatnonzero(waited)
    if len(w):
        waited[w] = ends.ended_within(pg[w], resume[w])
    length = hi - lo
    # the block's rows lie in [r0, r1): its sums are block-sized, added there
    r0, r1 = int(sel[0]), int(sel[-1]) + 1
    rows = sel[a] - r0
    for col, m in (("cause_device_waits_ps", waited),
                   ("cause_unknown_ps", ~waited),
                   ("unknown_no_resume_ps", ~next_ok),
                   ("unknown_late_resume_ps", next_ok & ~waited & (bare > RESUME_GAP_PS)),
                   ("unknown_not_copy_bound_ps",
                    next_ok & ~waited & (bare <= RESUME_GAP_PS))):
        if not m.any():
            continue
        v = _own(out, col)
        v[r0:r1] += bin_sums(rows[m], length[m], r1 - r0, most)
    # the tail: a piece ending at the copy's end (its last), after which the device resumed
    tail = np.flatnonzero(waited & is_last)
    if len(tail):
        _own(out, "stall_ps")[rows[tail] + r0] = length[tail]
        _own(out, "ready_ps")[rows[tail] + r0] = lo[tail] - s[a[tail]]


def _own(out: dict[str, Any], col: str) -> np.ndarray:
    """`out[col]`, made a writable array of its own where it is a read-only one-value view
    (`transfer_causes`: a column nothing was written to yet)."""
    v = out[col]
    if not v.flags.writeable:
        v = out[col] = np.array(v)
    return v


class _EndIndex:
    """The copies' ends in (group, time) order, for `ended_within` asked of many pieces."""

    def __init__(self, keys: _Keys, tg, end) -> None:
        self.keys, self._tg, self._end = keys, tg, end
        self._made: tuple | None = None

    def _order(self) -> tuple:
        """(the ends' groups and times in order, and with one key per (group, time),
        `keys.ok`, their keys, else None): made at the first piece asked about, once."""
        if self._made is None:
            tg, end = self._tg, self._end
            if is_repeated(tg):  # one device (a broadcast code): the ends sorted
                eg, ee = tg, np.sort(end, kind="stable")  # (timsort: nearly in order)
            else:
                ends = np.lexsort((end, tg))
                eg, ee = tg[ends], end[ends]
            if self.keys.ok and len(ee):  # (the keys alone are asked: the ends go)
                self._made = (None, None, self.keys.key(eg, ee))
            else:
                self._made = (eg, ee, None)
        return self._made

    def ended_within(self, pg, resume) -> np.ndarray:
        """Per piece (group `pg`, compute resuming at `resume`): did a copy of its group end
        in [resume - RESUME_GAP_PS, resume]? With the ends' keys: the last copy end at or
        before the resume, by one search, ends in that stretch (the keys ascend: the count
        of ends in it is positive exactly when that end's key is at least the stretch's
        first); else two searches, the counts before each side."""
        keys = self.keys
        eg, ee, ke = self._order()
        if ke is not None:
            n_before = np.searchsorted(ke, keys.key(pg, resume), side="right")
            last = ke[np.maximum(n_before - 1, 0)]
            return (n_before > 0) & (last >= keys.key(pg, resume - RESUME_GAP_PS))
        n_before = _search(keys, eg, ee, pg, resume, "right")
        n_gap = _search(keys, eg, ee, pg, resume - RESUME_GAP_PS, "left")
        return n_before > n_gap


def _pieces_around(comp: MergedGroups, keys: _Keys, g, s, e) -> tuple[np.ndarray, np.ndarray]:
    """Per copy (group `g`, [s, e)): how many of the merged compute intervals (in (group,
    start) order) lie before it by their end (<= s), and by their start (< e):
    `MergedGroups.around` on the intervals' own group layout where it has one (the same
    answer `transfer_columns` asked of these copies, kept). Why: the layout's keys of one
    group are the times themselves, where `_Keys` builds a key per interval (a million-row
    array each, twice). Equal answers: a query time clipped into its group's [first start,
    last end] counts the same intervals (every end lies above the first start, every start
    below the last end); a group without compute has its place in the order (both counts:
    the intervals of the groups before it)."""
    lay = comp.layout
    if lay is None or lay.off is None:
        return (_search(keys, comp.g, comp.e, g, s, "right"),
                _search(keys, comp.g, comp.s, g, e, "left"))
    return comp.around(g, s, e)


# ---------------------------------------------------------------------------------------------
# Evidence: mergeable per part, rendered once per result

_STAT_SUMS = ("transfers", "bytes", "span_ps", "hidden_ps", "max_queue", "max_bytes_ahead",
              "stall_ps", "ready_ps", "ready_bytes", "no_work", "no_resume_ps",
              "late_resume_ps", "not_copy_bound_ps")


_UNKNOWN_KINDS = ("no_resume", "late_resume", "not_copy_bound")
_SUM_BLOCK = 1 << 16  # rows taken at a time (`_sums_at`'s 0/1 masks, `_max_at`, `_first_max`)


def _sums_at(m: np.ndarray, cols: list[np.ndarray]) -> list[int]:
    """Per int64 column, the sum of its rows `m`, wrapping as int64 does: dot products of
    the 0/1 mask, `_SUM_BLOCK` rows at a time (the same integers as one dot of the whole
    mask; that mask was 8 MB on a million copies' peak, and a sum read in place with
    `where=` costs 4x the dot's instructions: +58M on the GPU 1M file)."""
    out = [0] * len(cols)
    for a in range(0, len(m), _SUM_BLOCK):
        mi = m[a:a + _SUM_BLOCK].astype(np.int64)
        for j, c in enumerate(cols):
            out[j] += int(np.dot(mi, c[a:a + _SUM_BLOCK]))
    return [(v + (1 << 63)) % (1 << 64) - (1 << 63) for v in out]


def _max_at(v: Any, m: np.ndarray) -> int:
    """The largest of `v` at the rows `m` (some row), `_SUM_BLOCK` rows taken at a time."""
    v = np.asarray(v)
    return max(int(v[a:a + _SUM_BLOCK][m[a:a + _SUM_BLOCK]].max())
               for a in range(0, len(m), _SUM_BLOCK) if m[a:a + _SUM_BLOCK].any())


def part_stats(table: Columns, extra: Columns) -> dict[str, dict[str, dict[str, Any]]]:
    """Per direction and cause, the evidence numbers of one part (sums and maxima, so parts
    of several hosts merge exactly: `merge_stats`). Each sum is int64 dot products of the
    (direction, cause) rows' 0/1 mask with a column (`_sums_at`): the same integers as a sum
    of the rows taken (~25 masked copies of 60k copies' columns cost ~6 ms, the dots ~1)."""
    direction = np.asarray(table["direction"], object)
    nbytes = np.asarray(table["bytes"], np.int64)
    span = np.asarray(table["span_ps"], np.int64)
    hidden = np.asarray(table["hidden_ps"], np.int64)
    out: dict[str, dict[str, dict[str, Any]]] = {}
    # the causes some copy has time of (none where every copy hides: then no direction is
    # compared row by row)
    has = {c: h for c, h in ((c, np.asarray(extra[col]) > 0)
                             for c, col in zip(CAUSES, CAUSE_COLUMNS)) if h.any()}
    if not has:
        return out
    ready = np.asarray(extra["ready_ps"], np.int64)
    pos = ready > 0
    if DEVICE_WAITS in has:
        # (the ready time and bytes of the rows with a ready time are sums over `m & pos`,
        # and the needed bandwidth is taken of the worst's candidates alone: the copies'
        # `where` columns and a float bandwidth per copy, ~5 arrays of every copy at once,
        # were this step's peak on long captures)
        stall = np.asarray(extra["stall_ps"], np.int64)
        no_work = ready == 0
    # the directions numbered once (a few shared objects), each row's compared by its code
    codes, uniq = key_codes(direction, sort=False)
    for d in DIRECTIONS:
        dm = codes_equal(codes, uniq, d)
        per: dict[str, dict[str, Any]] = {}
        for c in CAUSES:
            if c not in has:
                continue
            m = dm & has[c]
            if not m.any():
                continue
            sums = _sums_at(m, [nbytes, span, hidden] + (
                [stall] if c == DEVICE_WAITS else
                [np.asarray(extra[f"unknown_{k}_ps"], np.int64) for k in _UNKNOWN_KINDS]
                if c == UNKNOWN else []))
            if c == DEVICE_WAITS:
                sums += _sums_at(m & pos, [ready, nbytes])
            st: dict[str, Any] = {"transfers": int(np.count_nonzero(m)), "bytes": sums[0],
                                  "span_ps": sums[1], "hidden_ps": sums[2]}
            if c == QUEUED:
                st["max_queue"] = _max_at(extra["queue_ahead"], m) + 1
                st["max_bytes_ahead"] = _max_at(extra["bytes_ahead"], m)
            elif c == SHARES_STREAM:
                st["streams"] = _stream_rows(table, extra, m)
            elif c == DEVICE_WAITS:
                st["stall_ps"], st["ready_ps"], st["ready_bytes"] = sums[3:6]
                st["no_work"] = int(np.count_nonzero(m & no_work))
                if (m & pos).any():
                    i, need = _worst(m, pos, nbytes, ready)
                    st["worst"] = {"hlo_op": str(np.asarray(table["hlo_op"], object)[i]),
                                   "needed_Bps": need, "bytes": int(nbytes[i]),
                                   "ready_ps": int(ready[i]), "span_ps": int(span[i])}
            elif c == UNKNOWN:
                for k, v in zip(_UNKNOWN_KINDS, sums[3:]):
                    st[f"{k}_ps"] = v
            per[c] = st
        if per:
            out[d] = per
    return out


def _worst(m: np.ndarray, pos: np.ndarray, nbytes: np.ndarray, ready: np.ndarray
           ) -> tuple[int, float]:
    """The first row of the most needed bandwidth (bytes * 1e12 / ready; 0.0 where there is
    no ready time) among the rows `m` (some of them with one, `pos`), and that bandwidth: what
    an argmax over every copy's column gives, computed for the rows `m & pos` alone. A row of
    `m` without a ready time needs 0.0: the first of them is the answer where no row with one
    needs more (or, at a tie of 0.0, where it comes first)."""
    at = np.flatnonzero(m & pos)
    with np.errstate(divide="ignore", invalid="ignore"):
        need = nbytes[at] * 1e12 / ready[at]
    k = int(np.argmax(need))
    best = float(need[k])
    rest = np.flatnonzero(m & ~pos)
    if not len(rest) or best > 0 or (best == 0 and at[k] < rest[0]):
        return int(at[k]), best
    return int(rest[0]), 0.0


def _stream_rows(table: Columns, extra: Columns, m: np.ndarray) -> list[dict]:
    """The distinct (host, device, stream) of the copies `m`: line name, kernels, copies."""
    idx = np.flatnonzero(m)
    pairs = np.stack([np.asarray(extra["group"], np.int64)[idx],
                      np.asarray(extra["stream"], np.int64)[idx]])
    _, first, counts = np.unique(pairs, axis=1, return_index=True, return_counts=True)
    rows = [{"host": table["host"][i], "device": table["device"][i],
             "stream": int(extra["stream"][i]), "line": extra["line"][i],
             "kernels": int(extra["stream_kernels"][i]), "copies": int(c)}
            for i, c in zip(idx[first].tolist(), counts.tolist())]  # one per stream (few)
    return sorted(rows, key=lambda r: (-r["copies"], str(r["host"]), str(r["device"]),
                                       r["stream"]))


def merge_stats(parts: list[dict]) -> dict[str, dict[str, dict[str, Any]]]:
    """`part_stats` of several parts (disjoint hosts) as one: sums, maxima, the worst copy,
    the streams with the most copies."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for p in parts:
        for d, per in (p or {}).items():
            od = out.setdefault(d, {})
            for c, st in per.items():
                o = od.setdefault(c, {})
                for k, v in st.items():
                    if k in ("max_queue", "max_bytes_ahead"):
                        o[k] = max(o.get(k, 0), v)
                    elif k == "worst":
                        if "worst" not in o or v["needed_Bps"] > o["worst"]["needed_Bps"]:
                            o["worst"] = v
                    elif k == "streams":
                        o["streams"] = sorted(o.get("streams", []) + v, key=lambda r: (
                            -r["copies"], r["host"], r["device"], r["stream"]))
                    else:
                        o[k] = o.get(k, 0) + v
    return out


def exposure_causes(exposed_by_cause: dict[str, int], exposed_ps: int,
                    stats: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """One direction's `exposure_causes`: `{cause, exposed_ps, evidence}` per cause with
    exposed time, largest first, plus `unknown` for whatever the causes leave of
    `exposed_ps`; the `exposed_ps` of the list sum exactly to `exposed_ps`."""
    known = {c: int(exposed_by_cause.get(c, 0)) for c in CAUSES if c != UNKNOWN}
    unknown = int(exposed_ps) - sum(known.values())
    rows = [(c, v) for c, v in known.items() if v > 0]
    if unknown:
        rows.append((UNKNOWN, unknown))
    rows.sort(key=lambda cv: (-cv[1], CAUSES.index(cv[0])))
    return [{"cause": c, "exposed_ps": v,
             "share": v / exposed_ps if exposed_ps > 0 else None,
             "evidence": _evidence(c, stats.get(c, {}), v)} for c, v in rows]


def _gbs(bps: float | None) -> str:
    return "-" if bps is None else f"{bps / 1e9:.1f} GB/s"


def _ms(ps: int) -> str:
    return format_ps(int(ps))


def _evidence(cause: str, st: dict[str, Any], exposed: int) -> dict[str, Any]:
    """The evidence of one cause: its numbers and one sentence saying what they show."""
    n = int(st.get("transfers", 0))
    nbytes, span = int(st.get("bytes", 0)), int(st.get("span_ps", 0))
    rate = nbytes * 1e12 / span if span > 0 else None
    ev: dict[str, Any] = {"transfers": n, "bytes": nbytes, "bandwidth_Bps": rate}
    if cause == PAGEABLE:
        ev["text"] = (f"{n} copies to/from pageable host memory at {_gbs(rate)}: the driver "
                      "stages them synchronously, they cannot overlap compute; use "
                      "memory_kind='pinned_host'")
        ev["short"] = f"{n} copies via pageable host memory; use memory_kind='pinned_host'"
    elif cause == SHARES_STREAM:
        streams = st.get("streams", [])[:_MAX_STREAMS]
        ev.update(streams=streams, flag=COMMAND_BUFFER_FLAG, measured=COMMAND_BUFFER_MEASURED)
        where = ", ".join(f"{r['device']} stream {r['stream']} ({r['kernels']} kernels, "
                          f"{r['copies']} copies)" for r in streams[:3])
        ev["text"] = (f"{n} copies ran on a stream that also runs compute ({where}): no "
                      "kernel of that stream can run beside them. XLA:GPU command buffers "
                      "(default on) put copies into CUDA graphs on the compute stream; "
                      f"XLA_FLAGS={COMMAND_BUFFER_FLAG} (overlap capture's default) turns "
                      f"them off ({COMMAND_BUFFER_MEASURED})")
        ev["short"] = (f"{n} copies on a stream that runs compute ({where}); "
                       f"XLA_FLAGS={COMMAND_BUFFER_FLAG} takes them off it")
    elif cause == QUEUED:
        ev.update(max_queue=int(st.get("max_queue", 0)),
                  max_bytes_ahead=int(st.get("max_bytes_ahead", 0)),
                  queue_gap_ps=QUEUE_GAP_PS)
        ev["text"] = (f"{n} copies started within {QUEUE_GAP_PS // US} us after the previous "
                      f"copy of their direction ended (queues up to {ev['max_queue']} long, "
                      f"up to {ev['max_bytes_ahead'] / 2**20:.0f} MiB ahead), moving at "
                      f"{_gbs(rate)}: the link was busy; fewer or smaller copies, or copies "
                      "issued earlier, hide more")
        ev["short"] = (f"{n} copies queued back to back on the link (queues up to "
                       f"{ev['max_queue']}) at {_gbs(rate)}")
    elif cause == DEVICE_WAITS:
        ready, rbytes = int(st.get("ready_ps", 0)), int(st.get("ready_bytes", 0))
        need = rbytes * 1e12 / ready if ready > 0 else None
        ev.update(stall_ps=int(st.get("stall_ps", 0)), slack_ps=int(st.get("hidden_ps", 0)),
                  ready_ps=ready, needed_bandwidth_Bps=need,
                  no_work_transfers=int(st.get("no_work", 0)), worst=st.get("worst"),
                  assumes=("the compute that resumed when the copies ended needed them (the "
                           "trace has no dependencies); a copy was issued when it started"))
        text = (f"{n} copies with no compute beside them, and compute resumed as the copies "
                f"ended: {_ms(ev['stall_ps'])} of stalls at copy ends, "
                f"{_ms(ev['slack_ps'])} of compute beside them; they moved at {_gbs(rate)}")
        if need is not None:
            text += (f"; {_gbs(need)} would have ended them before the device ran out of "
                     "work")
        if ev["no_work_transfers"]:
            text += (f"; {ev['no_work_transfers']} had no compute after they started (only an "
                     "earlier issue hides them)")
        ev["text"] = text
        ev["short"] = (f"{n} copies with no compute beside them; the device stalled "
                       f"{_ms(ev['stall_ps'])} at their ends"
                       + (f"; {_gbs(need)} would have hidden them" if need is not None else
                          "; issue them earlier"))
    else:
        ev.update({k: int(st.get(k, 0)) for k in ("no_resume_ps", "late_resume_ps",
                                                  "not_copy_bound_ps")})
        why = [f"{_ms(ev[k])} {what}" for k, what in (
            ("no_resume_ps", "with no compute after it in the capture"),
            ("late_resume_ps", f"where compute resumed over {RESUME_GAP_PS // US} us after the "
                               "copies ended (the device idle for another reason)"),
            ("not_copy_bound_ps", "where compute resumed while the copy still flew, no copy "
                                  "having just ended (the device waited for something else)"))
            if ev[k]]
        ev["text"] = (f"{_ms(exposed)} exposed that no cause explains"
                      + (": " + "; ".join(why) if why else ""))
        ev["short"] = f"{_ms(exposed)} that no cause explains"
    return ev


def cause_dict(sums: dict[str, int]) -> dict[str, int]:
    """`{cause: exposed_ps}` of a group's `cause_<c>_ps` sums, causes with time only."""
    return {c: int(sums[col]) for c, col in zip(CAUSES, CAUSE_COLUMNS) if sums.get(col)}


def cause_dicts(sums: list[np.ndarray]) -> list[dict[str, int]]:
    """`cause_dict` of every row of the `cause_<c>_ps` sum columns `sums` (in `CAUSE_COLUMNS`
    order): the rows grouped by which causes have time (at most 2**5 groups), each group's
    dicts copies of one template with its keys in order, their values set a column at a time
    in C (`arrays.dict_rows`; a `dict(zip(...))` per row took 1.9 ms of the TPU 1M file's
    6.5k steps, these 0.9), not one dict comprehension per row (a step table)."""
    n = len(sums[0]) if sums else 0
    if not n:
        return []
    has = np.stack([np.asarray(v) != 0 for v in sums])
    pattern = (has * (1 << np.arange(len(CAUSES)))[:, None]).sum(axis=0)
    patterns = sorted_unique(pattern).tolist()  # np.unique alone imports numpy.ma
    out: list[Any] = [None] * n
    for p in patterns:
        at = np.flatnonzero(pattern == p) if len(patterns) > 1 else np.arange(n)
        which = [i for i in range(len(CAUSES)) if p >> i & 1]
        dicts = dict_rows(dict.fromkeys((CAUSES[i] for i in which), 0), len(at),
                          ((CAUSES[i], np.asarray(sums[i])[at].tolist()) for i in which))
        if len(patterns) == 1:
            return dicts
        deque(map(out.__setitem__, at.tolist(), dicts), maxlen=0)
    return out


def top_fields(rows: Columns, i: int) -> dict[str, Any]:
    """A `top_exposed` record's cause and evidence (row `i` of the analysis' top rows)."""
    if "cause" not in rows:
        return {}
    ready = int(rows["ready_ps"][i])
    nbytes = int(rows["bytes"][i])
    return {"cause": rows["cause"][i] or None,
            "exposure_causes": cause_dict({k: rows[k][i] for k in CAUSE_COLUMNS}),
            "stall_ps": int(rows["stall_ps"][i]), "ready_ps": ready if ready >= 0 else None,
            "needed_bandwidth_Bps": nbytes * 1e12 / ready if ready > 0 else None,
            "queue_ahead": int(rows["queue_ahead"][i]),
            "bytes_ahead": int(rows["bytes_ahead"][i])}


def dominant(result: dict[str, Any], directions) -> str | None:
    """`mostly <cause> (<share> of <N> exposed): <evidence>`, over `directions` of a result,
    or None where it has no exposure causes (a result of an older version)."""
    total: dict[str, int] = {}
    text: dict[str, str] = {}
    exposed = 0
    for d in directions:
        b = (result.get("by_direction") or {}).get(d) or {}
        rows = b.get("exposure_causes")
        if rows is None:
            continue
        exposed += int(b.get("exposed_ps") or 0)
        for r in rows:
            total[r["cause"]] = total.get(r["cause"], 0) + r["exposed_ps"]
            if r["exposed_ps"] > 0 and r["cause"] not in text:
                text[r["cause"]] = r["evidence"].get("short", "")
    if exposed <= 0 or not total:
        return None
    c = max(total, key=lambda k: (total[k], -CAUSES.index(k)))
    share = total[c] / exposed
    return f"exposed mostly {c} ({share:.0%} of {_ms(exposed)}): {text.get(c, '')}"
