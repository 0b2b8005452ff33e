"""The host plane: step windows, allocator events and XLA:CPU compute (see
`overlap.trace.reader`).

Rules, per event (never per line or per metadata id alone):

* an allocator event (`MemoryAllocation`/`MemoryDeallocation` metadata) that carries one of
  the stats the rules read, or whose metadata carries any stat, is a `memory` row;
* another event whose `_r` stat (its own first one, else its metadata's) is truthy is a step;
* another event with an `hlo_op` stat (its own or its metadata's, even empty) is XLA:CPU
  compute.

Speed: a host plane holds millions of events (CUPTI API calls, thunk annotations, Python-tracer
frames) of which few give rows. Work per distinct metadata id (names, kinds, whether its own
stats make a step or compute) is done once per plane; per event only the compiled decoder runs,
keeping the stats the rules read, and numpy picks the few events that can give a row before
any stat value becomes a Python object.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from overlap.arrays import at_rows
from overlap.trace import vendors
from overlap.trace.gpu import _clean_column
from overlap.trace.hlotext import LazyPattern  # compiled on first use: start-up
from overlap.trace.names import MEMORY_EVENT_KINDS
from overlap.trace.values import isin_ids, per_mid, unique_inverse_at
from overlap.trace.wire import (
    Coded,
    Cols,
    LineEvents,
    Plane,
    as_id,
    as_int,
    map_stat,
    map_unique,
    merge_lines,
    object_array,
    stat_codes,
    stat_column,
    stat_keys,
)

# The stats the host rules read (the decoder keeps only these, see `_wanted_stats`).
_HOST_WANTED = ("_r", "step_num", "hlo_op", "hlo_module", "device_ordinal", "allocator_name",
                "bytes_allocated", "bytes_reserved", "peak_bytes_in_use", "requested_bytes",
                "allocation_bytes", "index_on_host")
# Read only where rows that need them can exist: compute rows' program_id, and what
# `vendors.collect_hip_calls` reads of ROCm HIP calls. Keeping `correlation_id` for every
# CUDA API call would cost a record per call (a million per million kernels).
_COMPUTE_ALSO = ("program_id",)
_HIP_ALSO = ("program_id", "correlation_id", "memcpy_details")
# Codes cost 4 bytes per event and stat name: lines longer than this (a million CUDA API
# calls, nearly none of which give a row) keep the rules' stats as records instead. Either
# way the answers are the same (`LineEvents`).
_GROUP_MAX_EVENTS = 1 << 18
# Lines of up to this many events are read together (`_read_segment`), up to
# _GROUP_MAX_EVENTS events a segment; 0: every line on its own (tests compare the two).
_SEGMENT_LINE_MAX = 1 << 16
_MEM_INTS = ("bytes_allocated", "bytes_reserved", "peak_bytes_in_use", "requested_bytes",
             "allocation_bytes")
# Python-tracer frames ("$file.py:12 fn") and their ends are most of a host plane and never
# give a row (they carry no stats the rules read).
_NEVER_PREFIXES = ("$", "end: ", "ThreadpoolListener::")


def _read_host_plane(P: Plane, host, line_base_ps, co: Cols, st, mem: Cols,
                     hip_calls: Cols | None = None) -> bool:
    """Steps, allocator events and XLA:CPU compute from the host plane; True when it holds
    XLA:CPU compute."""
    names = _meta_names(P)  # once per distinct metadata
    wanted = P.ids(*_HOST_WANTED)
    row_sids = [*(P.stat_ids.get("_r") or ()), *(P.stat_ids.get("hlo_op") or ())]
    mem_mids = {k: MEMORY_EVENT_KINDS[n] for k, n in names.items() if n in MEMORY_EVENT_KINDS}
    # ROCm: HIP copy/memset calls say the direction and size of the copy kernels they issue
    # (vendors.rocm_transfers); their stats must be decoded, whatever else the plane holds.
    hip_mids = vendors.hip_api_mids(names) if hip_calls is not None else {}
    if row_sids:
        skip = {k for k, n in names.items() if n.startswith(_NEVER_PREFIXES)}
    else:
        # No event can carry `_r` or `hlo_op` (nor can metadata: same stat ids), so only
        # memory events can give a row.
        skip = {k for k in names if k not in mem_mids}
    skip -= set(hip_mids)
    meta_any, meta_row = _meta_sets(P, [k for k in names if k not in skip], row_sids)
    # Events of any other metadata give a row only where they carry `_r` or `hlo_op`
    # themselves (`read`): the decoder keeps no row for the rest (a GPU host line of millions
    # of CUDA API calls, of which a few thousand mark steps).
    keep_if = ([k for k in names if k not in skip and k not in mem_mids and k not in hip_mids
                and k not in meta_row], row_sids) if row_sids else None
    want = stat_keys(P, _HOST_WANTED + (_COMPUTE_ALSO if row_sids else ())
                     + (_HIP_ALSO if hip_mids else ()))
    # On lines of up to _GROUP_MAX_EVENTS events the rules' stats come as groups: per stat
    # name, each event's first value as a code into the distinct values, from the decoding
    # pass itself (no pass over the records per name); the records keep only the others.
    groups = [P.stat_ids.get(n) or () for n in _HOST_WANTED]
    # HIP calls' details, each its own text (a byte count each): interned until most are
    # new, for `vendors.hip_sizes` to read where their bytes lie (no `str` per call)
    listed = [P.stat_ids.get("memcpy_details") or ()] if hip_mids else None
    sets = (groups, listed)  # (`LineEvents`' groups and listed sets, for every read below)
    grouped = set(stat_keys(P, _HOST_WANTED + (("memcpy_details",) if hip_mids else ())))
    want_grouped = [k for k in want if k not in grouped]
    mem_list, row_list = list(mem_mids), list(meta_row)
    step_rows: list[tuple[int, int, int | None, str]] = []

    def read(ev: LineEvents, stream, line_name) -> bool:
        """The rows of one line's (or one segment's) events; `stream`/`line_name` the line's
        id and name, or one per event of a segment."""
        if hip_mids and hip_calls is not None:
            vendors.collect_hip_calls(P, ev, hip_mids, hip_calls)
        mids = ev.mids
        is_mem = isin_ids(mids, mem_list) if mem_list else None
        if is_mem is not None and is_mem.any():
            idx = np.flatnonzero(is_mem)
            # an allocator event counts when it or its metadata carries a stat the merged
            # (event + metadata) dict would hold
            ok = isin_ids(mids[idx], meta_any) | ev.has_stat(wanted)[idx]
            _memory_rows(P, ev, idx[ok], mem_mids, host, mem)
        # Steps and compute: only events carrying `_r`/`hlo_op` or whose metadata does.
        cand = ev.has_stat(row_sids) if row_sids else np.zeros(ev.n, bool)
        if row_list:
            cand |= isin_ids(mids, row_list)
        if is_mem is not None:
            cand &= ~is_mem
        rest = np.flatnonzero(cand)
        del is_mem, cand
        if not rest.size:
            return False
        return _step_and_compute_rows(P, ev, rest, names, host, stream, line_name, co,
                                      step_rows)

    saw_compute = False
    pending: list = []  # small lines read as one segment (`_read_segment`)
    n_pending = 0
    for line in P.plane.lines:
        if not line.n_events:
            continue
        if line.n_events <= min(_SEGMENT_LINE_MAX, _GROUP_MAX_EVENTS):
            if n_pending + line.n_events > _GROUP_MAX_EVENTS:
                saw_compute |= _read_segment(pending, P, line_base_ps, skip, want_grouped,
                                             sets, want, read, keep_if)
                pending, n_pending = [], 0
            pending.append(line)
            n_pending += line.n_events
            continue
        # a long line on its own, after the lines before it (rows keep the lines' order)
        saw_compute |= _read_segment(pending, P, line_base_ps, skip, want_grouped,
                                     sets, want, read, keep_if)
        pending, n_pending = [], 0
        saw_compute |= _read_line(line, line_base_ps, skip, want_grouped, sets, want, read,
                                  keep_if)
    saw_compute |= _read_segment(pending, P, line_base_ps, skip, want_grouped,
                                 sets, want, read, keep_if)
    if not step_rows:
        return saw_compute
    starts, ends, nums, step_names = zip(*step_rows)
    t0 = np.array(starts, np.int64)
    if not (t0[1:] > t0[:-1]).all():  # (rows of one line, in start order: sorted already)
        step_rows.sort(key=lambda r: (r[0], r[1], r[2] if r[2] is not None else -1, r[3]))
        starts, ends, nums, step_names = zip(*step_rows)
    # the columns a list each (thousands of steps: no five appends per step)
    st["host"].extend([host] * len(step_rows))
    st["step"].extend([num if num is not None else k for k, num in enumerate(nums)])
    st["name"].extend(step_names)
    st["start_ps"].extend(starts)
    st["end_ps"].extend(ends)
    return saw_compute


def _read_line(line, line_base_ps, skip, want_grouped, sets, want, read,
               keep_if=None) -> bool:
    """One line's events read by `read`, its stats as groups where it is short enough
    (`sets`: the `groups` and `listed` sets of `LineEvents`)."""
    small = line.n_events <= _GROUP_MAX_EVENTS
    groups, listed = sets if small else (None, None)
    ev = LineEvents(line, line_base_ps(line), skip_mids=skip,
                    wanted=want_grouped if small else want, groups=groups, listed=listed,
                    keep_if=keep_if)
    return bool(ev.n) and read(ev, line.id, line.name)


def _read_segment(lines: list, P: Plane, line_base_ps, skip, want_grouped, sets, want,
                  read, keep_if=None) -> bool:
    """Several short lines' events decoded as one `merge_lines` segment, in the lines' order:
    the same rows as line by line (each row keeps its line's id and name), without numpy's
    and the decoder's fixed costs per line (a TPU host plane has ~120 threads' lines: ~15 ms).
    Where a line's origin or events are damaged, the lines are read one by one instead, so
    the error raised is the one line-by-line reading raises (the segment's decode fails before
    any row or count is taken)."""
    if len(lines) < 2:
        return any([_read_line(ln, line_base_ps, skip, want_grouped, sets, want, read,
                               keep_if) for ln in lines])
    ns = np.array([ln.n_events for ln in lines], np.int64)
    try:
        base = np.repeat(np.array([line_base_ps(ln) for ln in lines], np.int64), ns)
        ev = LineEvents(merge_lines(lines), base, skip_mids=skip, wanted=want_grouped,
                        groups=sets[0], listed=sets[1], keep_if=keep_if)
    except Exception:  # noqa: BLE001 - damage: line by line raises what it always raised
        return any([_read_line(ln, line_base_ps, skip, want_grouped, sets, want, read,
                               keep_if) for ln in lines])
    if not ev.n:
        return False
    stream = ev.kept(np.repeat(np.array([ln.id for ln in lines], np.int64), ns))
    line_name = ev.kept(np.repeat(np.array([ln.name for ln in lines] + [None], object)[:-1],
                                  ns))
    return read(ev, stream, line_name)


def _meta_names(P: Plane) -> dict[int, str]:
    """Metadata id -> name, every entry of the plane: from the plane's `MetaTable` where it
    has one (no upb wrapper per entry: ~0.6 us per entry against ~0.1), else through upb.
    Only looked up (never iterated for its order)."""
    t = P.table()
    if t is not None:
        got = t.strings(t.keys, False)
        if got is not None:
            return dict(zip(t.keys.tolist(), got))
    return {k: md.name for k, md in P.meta.items()}


def _meta_sets(P: Plane, mids: list[int], row_sids: list[int]) -> tuple[set[int], set[int]]:
    """Of metadata ids `mids`: those whose own stats dict (`Plane.meta_stats`: stats of a
    known stat id) holds anything (an allocator event then counts even without stats of its
    own), and those holding `_r` or `hlo_op` (their events are candidates)."""
    t = P.table()
    if t is not None and mids:
        ids = np.array(mids, np.int64)
        known = t.has_stat(ids, list(P.stat_names))
        row = t.has_stat(ids, row_sids) if row_sids else np.zeros(len(ids), bool)
        return set(ids[known].tolist()), set(ids[row].tolist())
    meta_any: set[int] = set()
    meta_row: set[int] = set()
    for k in mids:
        ms = P.meta_stats(k)
        if ms:
            meta_any.add(k)
            if "_r" in ms or "hlo_op" in ms:
                meta_row.add(k)
    return meta_any, meta_row


def _memory_rows(P: Plane, ev: LineEvents, idx: np.ndarray, mem_mids: dict[int, str],
                 host, mem: Cols) -> None:
    """One `memory` row per allocator event `idx` of the line."""
    if not idx.size:
        return
    codes, vals = stat_codes(P, ev, idx, "allocator_name")
    # The name, device and kind columns as codes (`Coded`): made objects by `Cols.rows`,
    # a `repeated` view where one value fills a column (one allocator: no gather per event).
    alloc: np.ndarray | Coded = Coded(codes, vals)
    # once per distinct name (the staging allocator's `index_on_host:N` below is no device)
    device = Coded(codes, object_array([_allocator_device(v) for v in vals.tolist()]))
    # No allocator name: the host staging allocator's events name their index instead.
    # (tested once per distinct value: an object comparison per event cost ~2 ms per 100k)
    unnamed = np.flatnonzero(np.equal(vals, None)[codes])  # type: ignore[call-overload]
    if unnamed.size:
        named_alloc = vals[codes]
        ioh = stat_column(P, ev, idx[unnamed], "index_on_host")
        named = np.flatnonzero(~np.equal(ioh, None))  # type: ignore[call-overload]
        named_alloc[unnamed[named]] = np.array(
            [f"index_on_host:{v}" for v in ioh[named].tolist()] + [None], object)[:-1]
        alloc = named_alloc
    uniq, inv = unique_inverse_at(ev.mids, idx)  # (no copy of the ids; narrow codes)
    kinds = object_array([mem_mids[u] for u in uniq.tolist()])
    mem.add(len(idx), host=host, time_ps=ev.starts[idx], allocator=alloc,
            device=device, kind=Coded(inv, kinds),
            **{c: _int_stat(P, ev, idx, c) for c in _MEM_INTS})


def _int_stat(P: Plane, ev: LineEvents, idx: np.ndarray, name: str) -> np.ndarray:
    """`as_int(v) or 0` of stat `name` of events `idx`, as int64, once per distinct value
    where the line's values came interned."""
    codes, vals = stat_codes(P, ev, idx, name)
    return _int_column(vals)[codes] if len(codes) else np.zeros(0, np.int64)


def _int_column(values: np.ndarray) -> np.ndarray:
    """`as_int(v) or 0` per value, as int64: at once where every value is a Python int within
    int64 (what allocators write), else value by value (`values` are distinct where the line's
    stats came interned; a factorization would merge True with 1 and 1.0)."""
    lst = values.tolist()
    if set(map(type, lst)) <= {int}:  # one C pass; bool, float, str, None go below
        try:
            return np.array(lst, np.int64)
        except OverflowError:  # beyond int64: as_int says None, so 0
            pass
    return np.array([as_int(v) or 0 for v in lst], np.int64)


def _int_or_none(values: np.ndarray) -> np.ndarray:
    """`as_int(v)` per value, as an object column of Python ints and None: at once where
    every value is a Python int within int64 (what step numbers are), else value by value."""
    lst = values.tolist()
    if set(map(type, lst)) <= {int}:
        try:
            np.array(lst, np.int64)  # (only the range check: beyond int64 is None below)
            return object_array(lst)
        except OverflowError:
            pass
    return object_array([as_int(v) for v in lst])


def _step_and_compute_rows(P: Plane, ev: LineEvents, rest: np.ndarray, names: dict[int, str],
                           host, stream, line_name, co: Cols, step_rows: list) -> bool:
    """Steps (truthy `_r`) into `step_rows`, XLA:CPU compute (an `hlo_op` stat) into `co`, of
    the line's events `rest`; True when there was compute. `stream`, `line_name`: the line's
    id and name, or per event of a segment of lines (`_read_segment`)."""
    mids = ev.mids

    def name_of(mid: int) -> str:
        return names.get(mid, "")

    # truthiness, step numbers and names once per distinct value or metadata id (the step
    # numbers all at once: `_int_or_none`, not `map_stat`'s call per value, as a capture has
    # thousands of distinct ones)
    r_codes, r_vals = stat_codes(P, ev, rest, "_r")
    is_step = np.array([bool(v) for v in r_vals.tolist()], bool)[r_codes]
    sidx = rest[is_step]
    if sidx.size:
        n_codes, n_vals = stat_codes(P, ev, sidx, "step_num")
        starts = ev.starts[sidx]
        step_rows.extend(zip(starts.tolist(), (starts + ev.durs[sidx]).tolist(),
                             _int_or_none(n_vals)[n_codes].tolist(),
                             per_mid(mids[sidx], name_of).tolist()))
    cidx = rest[~is_step]
    if not cidx.size:
        return False
    hlo = stat_column(P, ev, cidx, "hlo_op")
    # `"hlo_op" in s`: present, even with an empty value
    present = np.zeros(len(cidx), bool)
    hsids = P.stat_ids.get("hlo_op")
    if hsids:
        present |= ev.has_stat(hsids)[cidx]
    cm = mids[cidx]
    uniq, inv = np.unique(cm, return_inverse=True)
    present |= np.array(["hlo_op" in P.meta_stats(int(u)) for u in uniq], bool)[inv]
    cidx, hlo = cidx[present], hlo[present]
    if not cidx.size:
        return False
    co.add(len(cidx), _cpu=True, host=host,
           device=map_stat(P, ev, cidx, "device_ordinal", _cpu_device),
           start_ps=ev.starts[cidx], end_ps=ev.starts[cidx] + ev.durs[cidx],
           name=per_mid(mids[cidx], name_of), hlo_op=_clean_column(hlo),
           hlo_module=stat_column(P, ev, cidx, "hlo_module"),
           program_id=map_unique(stat_column(P, ev, cidx, "program_id"), as_id),
           stream=at_rows(stream, cidx), line=at_rows(line_name, cidx))
    return True


def _cpu_device(ordinal: Any) -> str:
    """An XLA:CPU op's device, from its `device_ordinal` stat (none: 0)."""
    return f"CPU:{as_int(ordinal) or 0}"


_ALLOCATOR_RE = LazyPattern(r"^GPU_(\d+)_bfc$")


def _allocator_device(name: Any) -> str | None:
    """PjRt GPU names device allocators `GPU_<ordinal>_bfc`; the host staging one is not a
    device."""
    if not name or not isinstance(name, str):
        return None
    m = _ALLOCATOR_RE.match(name)
    return f"GPU:{m.group(1)}" if m else None
