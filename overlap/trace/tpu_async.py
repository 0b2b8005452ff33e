"""The TPU Async XLA Ops events' device spans (`overlap.trace.tpu`: the module docstring's
"Two clocks"): each Async event's start and done events on the XLA Ops line, found by name and
time, and the span between them on the chip's own clock. Why a module of its own: tpu.py holds
the plane's read (kept under the 1,000-line limit); these are its joins, functions of arrays
and names only (the scanner's where built, numpy's otherwise), re-exported there.
"""

from __future__ import annotations

from itertools import repeat

import numpy as np

from overlap.trace.metatable import _scan
from overlap.trace.wire import MetaTable


def _pair_spans(clock: tuple[np.ndarray, ...], si: np.ndarray, di: np.ndarray) -> np.ndarray:
    """Per pair (start event `si`, done event `di`, indices into the boundary events): the
    start's begin to the done's end on the device clock; -1 where either lacks the clock or
    the done would end before the start began (no such span on one clock)."""
    t0, t1, ok = clock
    span = t1[di] - t0[si]
    return np.where(ok[si] & ok[di] & (span >= 0), span, -1)


def _async_device_spans(starts: np.ndarray, ends: np.ndarray, inv: np.ndarray,
                        names: np.ndarray, boundaries: tuple[np.ndarray, ...],
                        clock: tuple[np.ndarray, ...],
                        join_ops: tuple[np.ndarray, list | tuple[np.ndarray, ...]] | None
                        = None, chips: tuple[np.ndarray, np.ndarray, int] | None = None
                        ) -> np.ndarray:
    """Per Async XLA Ops event (its begin and end, its op `inv` into `names`, the start ops'
    instruction names): the device span from the XLA Ops start event of that name that
    begins at its begin to the done event (the name's `-start` made `-done`) that ends at its
    end; -1 where either is missing or lacks the clock. The Async span is drawn from those
    two events, so on the host-aligned timeline its ends are theirs to the picosecond
    (sample_traces/tpu-v6e-offload TPU:0: all 600). Joined on (name code, time) (`_join`).
    `join_ops`: (indices into the XLA Ops line's ops, their names: a list, or (buffer,
    starts, ends) of their UTF-8 bytes, `_join_names`), every op a boundary event has among
    them, where `boundaries`' names do not hold theirs: the other ops take no code (no
    boundary event is theirs). `chips`: where the events are several chips' (`tpu.
    _read_tpu_chips`), each boundary event's chip, each Async event's and how many: an event
    joins its own chip's only (the chip is part of the code joined on; the join by time
    alone, `_pairs_by_time`, is not taken: another chip's event may hold the time)."""
    if not clock[2].any():  # no boundary event has the clock: no span to find
        return np.full(len(starts), -1, np.int64)
    b0, b1, _, bop, u_names = boundaries
    pairs = None
    if join_ops is None:
        s_code, d_code, op_code = _async_codes(names.tolist(), u_names.tolist())
    else:
        at, ops = join_ops
        if not isinstance(ops, list) and chips is None:
            pairs = _pairs_by_time(names.tolist(), inv, at, ops, boundaries, starts, ends)
        if pairs is None:
            s_code, d_code, at_code = _async_codes(names.tolist(), ops) \
                if isinstance(ops, list) else _async_codes_at(names.tolist(), *ops)
            op_code = np.full(len(u_names), -1, np.int64)
            op_code[at] = at_code
    if pairs is None:
        bcode, s_q, d_q = op_code[bop], s_code[inv], d_code[inv]
        if chips is not None:
            b_chip, q_chip, k = chips
            bcode, s_q, d_q = (_with_chip(bcode, b_chip, k), _with_chip(s_q, q_chip, k),
                               _with_chip(d_q, q_chip, k))
        si = _join(bcode, b0, s_q, starts)
        di = _join(bcode, b1, d_q, ends)
    else:
        si, di = pairs
    out = np.full(len(starts), -1, np.int64)
    hit = np.flatnonzero((si >= 0) & (di >= 0))
    out[hit] = _pair_spans(clock, si[hit], di[hit])
    return out


def _with_chip(code: np.ndarray, chip: np.ndarray, k: int) -> np.ndarray:
    """Codes that also tell the chip (`code * k + chip`; -1 stays -1: no match)."""
    return np.where(code >= 0, code * k + chip, -1)


def _pairs_by_time(names: list, inv: np.ndarray, at: np.ndarray, ops: tuple[np.ndarray, ...],
                   boundaries: tuple[np.ndarray, ...], starts: np.ndarray,
                   ends: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """`_async_device_spans`' (start, done) boundary events per Async event where both
    boundary times rise strictly (one event per time, as in a capture's own order: the
    many-ops shapes): the event at the Async event's begin (end) when its op is named as its
    start (done) name, else -1. With one event per time, `_join`'s first entry of that code
    and time is that event or none, so one name comparison per Async event answers it (the
    scanner's `async_pairs_at`), where `_async_codes_at` hashed every op's name (72k on the
    clocked many-ops shape) and `_join` built two hash tables. `ops`: the UTF-8 spans
    (buffer, starts, ends) of the ops `at` (`_join_names`). None (take the hash join) where
    the times do not rise strictly or the scanner is absent or cannot say. The scanner's
    `async_pairs_by_time` does all of it in one call (the numpy glue below is a build's
    without it; tests/trace/test_async_pairs_fused.py holds the two to the plain rule)."""
    b0, b1, _, bop, u_names = boundaries
    fused = getattr(_scan, "async_pairs_by_time", None)
    if fused is not None:
        # the same rule in one scanner call, no numpy pass over the events (~2.5 ms less on
        # the clocked many-ops shape); a build without it takes the glue below
        buf, fs, fe = ops

        def c(a: np.ndarray) -> np.ndarray:
            return np.ascontiguousarray(a, np.int64)

        return fused(names, c(inv), buf, c(fs), c(fe), c(at), c(b0), c(b1), c(bop),
                     c(starts), c(ends))
    fn = getattr(_scan, "async_pairs_at", None)
    if fn is None or not len(b0) or not (_rising(b0) and _rising(b1)):
        return None
    pos = np.full(len(u_names), -1, np.int64)
    pos[at] = np.arange(len(at))  # (the op each boundary event's code comes from, as op_code[at])
    e_s, e_d = _at_time(b0, starts), _at_time(b1, ends)
    got = fn(names, np.ascontiguousarray(inv, np.int64), *ops,
             np.where(e_s >= 0, pos[bop[e_s]], -1), np.where(e_d >= 0, pos[bop[e_d]], -1))
    if got is None:
        return None
    return np.where(got[0], e_s, -1), np.where(got[1], e_d, -1)


def _rising(t: np.ndarray) -> bool:
    """Whether `t` rises strictly (each value once, in order)."""
    return bool(np.all(t[1:] > t[:-1]))


def _at_time(t: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Per query time `q`: the index of the entry of `t` (rising strictly) equal to it, -1
    where none."""
    i = np.minimum(np.searchsorted(t, q), len(t) - 1)
    return np.where(t[i] == q, i, -1)


def _async_codes(names: list, op_names: list) -> tuple[np.ndarray, ...]:
    """Codes of the names the Async ops ask for (`names`: the start ops' instruction names):
    per name its own code and its done op's (the last `-start` made `-done`), -1 for both
    where it has no `-start`; per op of the XLA Ops line (`op_names`) the code of an equal
    name, else -1 (the ops of other names get none). The scanner's `async_name_codes` (a
    Python step per distinct op cost 0.017 s on 36k clocked copy ops; its codes are other
    numbers, equal exactly where these are), else `_async_codes_py`
    (tests/trace/test_text_facts.py holds the two to the same matches)."""
    fn = getattr(_scan, "async_name_codes", None)
    got = None if fn is None else fn(names, op_names)  # (None: a value not a str)
    return _async_codes_py(names, op_names) if got is None else got


def _async_codes_at(names: list, buf: np.ndarray, fs: np.ndarray,
                    fe: np.ndarray) -> tuple[np.ndarray, ...]:
    """`_async_codes(names, op_names)` where `op_names` are the UTF-8 spans [fs, fe) of `buf`
    (`_join_names` checked them: each a str `MetaTable.span_strings` gives): the scanner's
    `async_name_codes_at` compares bytes, no str per op; else on the strs."""
    fn = getattr(_scan, "async_name_codes_at", None)
    got = None if fn is None else fn(names, buf, fs, fe)
    if got is not None:
        return got
    ops = MetaTable.span_strings_of(buf, fs, fe)
    assert ops is not None  # (checked by `_join_names`)
    return _async_codes(names, ops)


def _async_codes_py(names: list, op_names: list) -> tuple[np.ndarray, ...]:
    """`_async_codes` in Python: one step per distinct Async op, into lists (not numpy
    items), and a dict lookup per XLA Ops op."""
    code: dict[str, int] = {}
    setd = code.setdefault
    s_list: list[int] = []
    d_list: list[int] = []
    for n in names:
        if n and "-start" in n:
            head, _, tail = n.rpartition("-start")
            s_list.append(setd(n, len(code)))
            d_list.append(setd(f"{head}-done{tail}", len(code)))
        else:
            s_list.append(-1)
            d_list.append(-1)
    op_code = np.fromiter(map(code.get, op_names, repeat(-1)), np.int64, len(op_names))
    return np.array(s_list, np.int64), np.array(d_list, np.int64), op_code


def _join(codes: np.ndarray, times: np.ndarray, q_codes: np.ndarray,
          q_times: np.ndarray) -> np.ndarray:
    """Per query (code, time): the index of the first entry with the same code and time, -1
    where none (code -1 never matches). Where the entries' times rise strictly (one entry
    per time: the clocked many-ops shape's 72k boundary events, in the capture's order),
    that entry is the only candidate: found by a binary search, then its code compared
    (`_join_rising`; ~0.6 ms for 36k queries, where a hash table of the entries cost ~1.4 ms
    and ~330 page faults). Else the scanner's `join_first` (a hash table of the entries),
    else `_join_numpy`; the same answers (tests/trace/test_text_facts.py,
    test_join_rising.py)."""
    if len(times) and bool(np.all(times[1:] > times[:-1])):
        return _join_rising(codes, times, q_codes, q_times)
    fn = getattr(_scan, "join_first", None)
    if fn is not None:
        return fn(*(np.ascontiguousarray(a, np.int64) for a in (codes, times, q_codes,
                                                                 q_times)))
    return _join_numpy(codes, times, q_codes, q_times)


def _join_rising(codes: np.ndarray, times: np.ndarray, q_codes: np.ndarray,
                 q_times: np.ndarray) -> np.ndarray:
    """`_join` where `times` rise strictly: per query the entry at its time, if any, when
    that entry's code is the query's (and not -1)."""
    i = np.minimum(np.searchsorted(times, q_times), len(times) - 1)
    return np.where((times[i] == q_times) & (codes[i] == q_codes) & (q_codes >= 0), i, -1)


def _join_numpy(codes: np.ndarray, times: np.ndarray, q_codes: np.ndarray,
          q_times: np.ndarray) -> np.ndarray:
    """`_join` by numpy: times are ranked among all of them, so (code, rank) is one int64
    key: one stable sort (the first of equal keys found first), one binary search per
    query."""
    if not len(times):  # no entries: nothing found (the gathers below need one)
        return np.full(len(q_codes), -1, np.int64)
    _, rank = np.unique(np.concatenate([times, q_times]), return_inverse=True)
    rank = rank.reshape(-1)
    n = len(rank) + 1
    key = codes * n + rank[:len(times)]
    q = q_codes * n + rank[len(times):]
    order = np.argsort(key, kind="stable")
    ks = key[order]
    pos = np.minimum(np.searchsorted(ks, q), max(len(ks) - 1, 0))
    found = (len(ks) > 0) & (codes[order[pos]] >= 0) & (q_codes >= 0)
    found &= ks[pos] == q if len(ks) else False
    return np.where(found, order[pos], -1)
