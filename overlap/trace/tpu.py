"""TPU device planes: host transfers (async copy ops across host memory space) and compute
ops (see `overlap.trace.reader` for the rules and their evidence).

Speed: every rule here is decided once per distinct op (metadata id), never per event, and
once for all the chips of a file whose metadata is the same bytes (`tpu_twins`); small such
chips whose lines hold the same ops are read as one batch (`tpu_chips`, `_read_tpu_chips`).
Where the plane has a `wire.MetaTable` (the compiled scanner's), the per-op rules run on whole
columns of name bytes (`overlap.trace.hlotext`'s byte-level rules: async boundaries, the
instruction name, a copy-start's result-tuple head) and only the values that reach a table
become Python objects; an op whose text those rules do not cover (not ASCII, a NUL, an
unusual layout) is read by the same rules on its Python string, as where there is no table.

Two clocks (docs/xspace.md, "TPU copy durations"). `start_ps`/`end_ps` of transfers and
compute are the host-aligned timeline (`line_base_ps + offset_ps`), on which the overlap,
steps and every other plane are measured. `device_span_ps` of a transfer is its length on the
chip's own clock: the start event's `device_offset_ps` to the done event's `device_offset_ps
+ device_duration_ps` (`DEVICE_CLOCK_STATS`), None where either event lacks them. The
host-aligned alignment jumps by up to ~100 ms at a time (v6e sample: one 5 GiB copy spans
0.136 ms there, 182 ms on the chip), so per-copy durations and bandwidth use the device span
(`copy_durations`); hidden time does not (blind spot: a copy a jump squeezed under compute
reads hidden: 1 hidden + 6 partial of the v6e sample's 2400, 0 + 0 on the device clock).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from overlap.arrays import factorize, object_addresses, repeated, sorted_unique
from overlap.trace.hlotext import (
    _SEND_RECV_RE,
    _START_DONE_RE,
    array_bytes,
    async_boundaries_by_bytes,
    copy_head_facts,
    find_all,
    first_within,
    host_transfer_directions,
    instruction_name_spans,
    instruction_names,
    is_host_async_start,
    plain_texts,
)
from overlap.trace.metatable import _scan
from overlap.trace.names import TPU_ASYNC_LINE, TPU_OPS_LINES
from overlap.trace.planeview import BAD_STRINGS
from overlap.trace.programs import ProgramCopies, program_key
from overlap.trace.tables import MEMORY_KINDS
from overlap.trace.tpu_async import _async_codes as _async_codes
from overlap.trace.tpu_async import _async_codes_at as _async_codes_at
from overlap.trace.tpu_async import _async_codes_py as _async_codes_py
from overlap.trace.tpu_async import _async_device_spans, _pair_spans
from overlap.trace.tpu_async import _join as _join
from overlap.trace.tpu_async import _join_numpy as _join_numpy
from overlap.trace.tpu_async import _join_rising as _join_rising
from overlap.trace.tpu_async import _pairs_by_time as _pairs_by_time
from overlap.trace.tpu_twins import OpFacts
from overlap.trace.values import id_table_base
from overlap.trace.wire import (
    TIME_LIMIT_PS,
    Coded,
    Cols,
    LineEvents,
    MetaTable,
    Plane,
    as_int,
    narrow_codes,
    object_array,
    unique_inverse,
)

_COPY_FACTS = ("hlo_module", "program_id", "raw_bytes_accessed", "bytes_accessed")
_OP_COLUMNS = ("hlo_module", "program_id")


def _read_tpu_plane(P: Plane, device, host, line_base_ps, tr: Cols, co: Cols,
                    programs: Callable[[], ProgramCopies | None] = lambda: None,
                    twins: OpFacts | None = None) -> None:
    """One chip's transfers and compute rows (`_read_tpu_chips` of it alone)."""
    _read_tpu_chips([P], [device], host, line_base_ps, tr, co, programs, twins)


def _read_tpu_chips(Ps: list[Plane], devices: list, host, line_base_ps, tr: Cols, co: Cols,
                    programs: Callable[[], ProgramCopies | None] = lambda: None,
                    twins: OpFacts | None = None, merged: dict | None = None) -> None:
    """The transfers and compute rows of one chip, or of several read as one (`merged`,
    `tpu_chips.decode`: twin chips whose lines' ops are the same, their events side by
    side, each event's chip known). Several chips give the rows one at a time would, in
    the same order: each per-op rule is asked once for all of them (its replaced strings
    counted once a chip, as each chip's own asking would, `_each`), the device column is
    each row's chip's, and the Async line's join and the pairing keep to one chip."""
    P = Ps[0]
    k = len(Ps)
    # The per-op rules read the plane's metadata alone: a chip whose metadata is an earlier
    # chip's (`twins`, `tpu_twins`) gets that chip's answers; its events are its own.
    M = P if twins is None else twins.bind(P)
    for Q in Ps:
        if twins is not None and twins.bind(Q) is not Q:
            # (its entries as the split decoded them: no table of its own is built)
            Q.plane.meta_decoded = None

    def per_op(rule: Callable, ops: np.ndarray, *args, chips: int = k):
        if twins is None:
            return rule(P, ops, *args)
        return _each(chips, twins.get, rule, ops, *args)

    # per row: its chip's device (one chip: the device itself, a scalar)
    dev = devices[0] if k == 1 else object_array(devices)

    def device_of(chip_rows: np.ndarray | None):
        return dev if chip_rows is None else Coded(chip_rows, dev)

    def line_events(line) -> tuple[LineEvents, np.ndarray | None]:
        if merged is None:
            return LineEvents(line, line_base_ps(line), wanted=line_wanted(P, line.name)), None
        return merged[line.name]

    by_name = {line.name: line for line in P.plane.lines}
    async_line = by_name.get(TPU_ASYNC_LINE)
    op_lines = [by_name[n] for n in sorted(TPU_OPS_LINES) if n in by_name]
    a_ids = P.ids("_a")
    # the TPU's own clock: read where the plane declares both stats (`device_spans`)
    clock_ids = [P.stat_ids.get(n) for n in DEVICE_CLOCK_STATS]
    clocked = all(clock_ids)

    # Without an Async XLA Ops line, copies are paired from the boundary ops' names.
    pairing = async_line is None or not async_line.n_events
    # the XLA Ops line's boundary events: (begins, ends, metadata ids, op index, op names)
    boundaries: tuple[np.ndarray, ...] | None = None
    # the boundary ops' names for the Async line's join: (their indices into the line's
    # distinct ops, their names: a list, or their spans in the file's bytes), where the
    # join needs them
    join_ops: tuple[np.ndarray, list | tuple[np.ndarray, ...]] | None = None
    # per boundary event: (begin, end) on the device clock, and whether it has both stats
    clock: tuple[np.ndarray, ...] | None = None
    b_chip = np.zeros(0, np.intp)  # per boundary event, its chip (several chips)
    for line in op_lines:
        if not line.n_events:
            continue
        ev, chip = line_events(line)
        has_a = ev.has_stat(a_ids) if a_ids else None
        # None: every event (no `_a` on the line: no mask to apply, `&` per event saved)
        keep = None if has_a is None or not has_a.any() else ~has_a
        del has_a
        ops = _OpIndex(ev.mids)  # once per distinct op
        uniq = ops.uniq
        xla = line.name == "XLA Ops" and (pairing or clocked)
        u_names, b_u, u_spans, by_bytes = per_op(_op_names, uniq, xla and pairing)
        # per event: a boundary op's? (one gather; its complement is the compute mask)
        bm = ops.take(b_u, ev.mids) if b_u.any() else np.zeros(ev.n, bool)
        if xla:
            b = np.flatnonzero(bm if keep is None else bm & keep)
            if clocked:
                clock = _boundary_clock(ev, b, uniq, b_u, clock_ids)
                if not pairing and clock[2].any():
                    # the Async line's join needs the boundary ops' names, where an event
                    # has the clock at all (the many-ops shape's 72k copy ops have none)
                    # (read here, not at the join: a name refused is refused before the
                    # Async line is read, as it always was)
                    at = np.flatnonzero(b_u)
                    # (asked by each chip that has the clock at all)
                    join_ops = at, _each(1 if chip is None else len(sorted_unique(
                        chip[b[clock[2]]])), _join_names, M, uniq, u_names, at, u_spans,
                        by_bytes)
            if chip is not None:
                b_chip = chip[b]
            bmid = ev.mids[b]
            b0 = ev.starts[b]  # (taken once: the ends add to it)
            boundaries = (b0, b0 + ev.durs[b], bmid, ops.codes(bmid).astype(np.intp),
                          u_names)
            del bmid, b0
        del u_spans  # (two int64 per op: not held through the compute columns below)
        m = np.logical_not(bm, out=bm)  # compute events (in place: the mask's last use)
        if keep is not None:
            m &= keep
        rows_chip = None if chip is None else chip[m]
        # the line's own arrays, the compute events' moved to their fronts (`_own_rows`);
        # each compute event's op as its index into the line's ops, narrow
        iu = ops.codes(_own_rows(ev.mids, m))
        n_compute = len(iu)
        # the metadata columns once per distinct compute op
        nb = np.flatnonzero(~b_u)
        cols = per_op(_op_columns, uniq[nb])
        module = np.empty(len(uniq), object)  # (np.empty's are None)
        pid = np.empty(len(uniq), object)
        module[nb] = cols["hlo_module"]
        pid[nb] = cols["program_id"]
        starts = _own_rows(ev.starts, m)
        ends = _own_rows(ev.durs, m)
        del m, ev, chip  # (their rows are the compute columns' now)
        ends += starts  # (in place: no third million-row array on the read's peak)
        # one object column for both (the name is the HLO op), made by `Cols.rows` once the
        # plane's bytes and this line's arrays are freed
        names = Coded(iu, u_names)
        co.add(n_compute, host=host, device=device_of(rows_chip), start_ps=starts,
               end_ps=ends, name=names, hlo_op=names,
               hlo_module=_per_event(module, nb, iu),
               program_id=_per_event(pid, nb, iu, True), stream=line.id, line=line.name)

    def add_transfers(starts: np.ndarray, ends: np.ndarray, ok: np.ndarray,
                      facts: dict[str, np.ndarray], at: np.ndarray, line,
                      device_span: np.ndarray | None = None,
                      chips: np.ndarray | None = None) -> None:
        """Transfers of the spans (starts, ends) whose op `at` (index into `facts`) is a host
        transfer (`ok`); `device_span`: per span, its length on the device clock, -1 where
        the capture does not give it (None: nowhere); `chips`: per span, its chip (None:
        one chip's spans)."""
        sel = np.flatnonzero(ok[at])
        if not sel.size:
            return
        at = at[sel]
        # Every span a transfer, each of its own op in op order (the many-ops capture: 36k
        # Async events of 36k distinct copy ops): the columns are the facts' and the spans'
        # arrays themselves, not copies made by a take (five 36k-row object takes, ~0.8 ms).
        # The arrays are this read's own (`copy_columns` made them for this call; `starts`
        # and `ends` are not read again), so the table may keep them.
        every = len(sel) == len(starts) == len(ok) and bool(
            (at == np.arange(len(at))).all())

        def per(col: np.ndarray, rows: np.ndarray) -> np.ndarray:
            return col if every else col[rows]

        dspan = None if device_span is None else _nullable_ints(per(device_span, sel))
        direction = per(facts["direction"], at)
        # (compared once per op, then taken per transfer: no str comparison per transfer)
        h2d = per(_is_h2d(facts["direction"]), at)
        tr.add(len(sel), host=host,
               device=device_of(None if chips is None else per(chips, sel)),
               direction=direction,
               start_ps=per(np.asarray(starts, np.int64), sel),
               end_ps=per(np.asarray(ends, np.int64), sel), bytes=per(facts["bytes"], at),
               src_kind=MEMORY_KINDS[h2d.astype(np.intp)],
               dst_kind=MEMORY_KINDS[(~h2d).astype(np.intp)],
               **{"async": True}, stream=line.id, line=line.name,
               hlo_op=per(facts["hlo_op"], at), hlo_module=per(facts["hlo_module"], at),
               program_id=per(facts["program_id"], at), device_span_ps=dspan)

    if async_line is not None and async_line.n_events:
        # Only metadata (names, metadata stats) decides here: no event stat is ever read (and
        # none is kept: `wanted` is empty).
        ev, chip = line_events(async_line)
        uniq, inv = _distinct_ops(ev.mids)  # once per distinct op
        ok, facts = per_op(copy_columns, uniq, programs())
        dspan = None
        if clock is not None and boundaries is not None:
            # The Async line's events carry no device clock: each takes its start and done
            # events' on the XLA Ops line (`_async_device_spans`).
            dspan = _async_device_spans(ev.starts, ev.starts + ev.durs, inv, facts["hlo_op"],
                                        boundaries, clock, join_ops,
                                        None if chip is None else (b_chip, chip, k))
        add_transfers(ev.starts, ev.starts + ev.durs, ok, facts, inv, async_line, dspan,
                      chip)
        return

    # No Async XLA Ops line: pair each copy-start with the next copy-done of the same key, in
    # order of begin time. Tie-break (explicit, not left to the rest of the tuple): at one
    # picosecond a start comes before a done, so a done can close the start issued at that
    # instant. Real XLA:TPU v6e (sample_traces/tpu-v6e-offload, TPU:1-3) has a zero-length
    # copy-start.5 that begins at the same picosecond as its 172 ms copy-done.5; taking the
    # done first (xprof sorts on begin time only) leaves it without a start and shifts every
    # later pair of that op (598 of 600 pairs).
    if boundaries is None:
        return
    # (several chips: each paired, and its copy ops asked, as it alone would be; its
    # boundary events are a run of them, the chips' in order)
    cut = [0, len(boundaries[0])] if k == 1 else \
        np.searchsorted(b_chip, np.arange(k + 1)).tolist()
    for c in range(k):
        lo, hi = cut[c], cut[c + 1]
        one = boundaries if k == 1 else (*(x[lo:hi] for x in boundaries[:4]), boundaries[4])
        p0, p1, pm, si, di = pair_copies(*one, positions=True)
        if not len(pm):
            continue
        smids, at = np.unique(pm, return_inverse=True)
        ok, facts = per_op(copy_columns, smids, programs(), chips=1)
        add_transfers(p0, p1, ok, facts, at, by_name.get("XLA Ops"),
                      None if clock is None else _pair_spans(clock, si + lo, di + lo),
                      None if k == 1 else np.full(len(p0), c, np.intp))


def line_wanted(P: Plane, name: str) -> dict[int, str] | tuple:
    """The stat ids the TPU read keeps of a line's events (`LineEvents(wanted=)`): `_a` on
    an op line (an event with it is neither compute nor a boundary, as xprof's rule has
    it: docs/xspace.md), none on the Async XLA Ops line (only metadata decides there). One
    chip's read and a batch's decode (`tpu_chips`) both ask it."""
    return () if name == TPU_ASYNC_LINE else P.ids("_a")


def _each(chips: int, fn: Callable, *args):
    """`fn(*args)` asked once for `chips` chips that would each have asked it (twins: the
    same question of the same metadata): the strings it replaced counted once a chip
    (`BAD_STRINGS`), as reading each chip by itself counts them."""
    before = BAD_STRINGS[0]
    got = fn(*args)
    BAD_STRINGS[0] += (BAD_STRINGS[0] - before) * (chips - 1)
    return got


def _op_columns(P: Plane, mids: np.ndarray) -> dict[str, np.ndarray]:
    """The compute ops' module and program columns (`Plane.meta_columns`)."""
    return P.meta_columns(mids, _OP_COLUMNS, ids=("program_id",))


def _is_h2d(direction: np.ndarray) -> np.ndarray:
    """Per op of a `copy_columns` direction column (object: "D2H", "H2D" or None): is it
    "H2D"? Told by identity where the value is one of `_DIRECTIONS`' own objects (what the
    byte rules write: 36k copy ops of a many-ops capture, ~0.5 ms of str comparisons), by
    `==` for any other object."""
    addr = object_addresses(direction)
    out = addr == id(_DIRECTIONS[2])
    other = np.flatnonzero(~out & (addr != id(_DIRECTIONS[1])) & (addr != id(None)))
    if other.size:
        out[other] = np.asarray(direction[other] == "H2D", bool)
    return out


# The TPU's own clock per event (see the module docstring): begin and duration in ps.
DEVICE_CLOCK_STATS = ("device_offset_ps", "device_duration_ps")


def _boundary_clock(ev: LineEvents, b: np.ndarray, uniq: np.ndarray, b_u: np.ndarray,
                    clock_ids: list) -> tuple[np.ndarray, ...]:
    """Per boundary event `b` of the XLA Ops line `ev`: (begin, end) on the device clock
    and whether it has both stats as integers within the reader's time limit (read for the
    boundary ops' events only: `LineEvents.ints_of`)."""
    (off, has_off), (dur, has_dur) = ev.ints_of(clock_ids, uniq[b_u], uniq[~b_u], at=b,
                                                at_only=True)
    ok = has_off & has_dur
    if not ok.any():  # (the many-ops shape's 72k copy ops: no pass over values never used)
        return np.zeros(len(ok), np.int64), np.zeros(len(ok), np.int64), ok
    if ok.all() and _within(off) and _within(dur):
        # every event has both, each in range (the clocked many-ops shape's 72k): the
        # values as read, four reductions where the masks took eight passes and two wheres
        # (a copy of the begins: `off` is a row of the reader's two, which it would keep)
        return off.copy(), off + dur, ok
    ok &= (off >= 0) & (off < TIME_LIMIT_PS) & (dur >= 0) & (dur < TIME_LIMIT_PS)
    return np.where(ok, off, 0), np.where(ok, off + dur, 0), ok


def _within(v: np.ndarray) -> bool:
    """Whether every value of `v` (not empty) lies in [0, TIME_LIMIT_PS)."""
    return int(v.min()) >= 0 and int(v.max()) < TIME_LIMIT_PS


def _nullable_ints(v: np.ndarray) -> np.ndarray:
    """An int64 column with -1 for "none" as the reader's nullable ints: the int64 array
    where every value is known (made Python ints once the planes are freed: `tables.
    as_columns`, not on the read's peak), else an object array of Python ints and None
    (None alone where none is known: no int made)."""
    none = v < 0
    if not none.any():
        return v
    if none.all():
        return np.empty(len(v), object)  # (np.empty's are None)
    out = v.astype(object)
    out[none] = None
    return out


def _own_rows(a: np.ndarray, sel: np.ndarray) -> np.ndarray:
    """`a[sel]` (`sel` a bool mask) for an array the caller owns and reads no more: its
    selected rows moved to its front in place (`_scan.compact`), a view of them returned:
    the compute rows of a TPU op line (most of its million events) take no new array on the
    read's peak. A new array where the scanner was not built or `a` is not a writable
    contiguous int64 array."""
    fn = getattr(_scan, "compact", None)
    if (fn is None or a.dtype != np.int64 or not a.flags.writeable
            or not a.flags.c_contiguous):
        return a[sel]
    return a[:fn(a, sel.view(np.uint8))]


def _distinct_ops(mids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`unique_inverse(mids)`; where the ids rise strictly (each event its own op, in op
    order: the many-ops shapes' Async line, 36k copy ops) they are their own distinct ids
    and each event's index its own: no table over the id range (~1 ms, ~400 page faults)."""
    if len(mids) and bool((mids[1:] > mids[:-1]).all()):
        return mids.copy(), np.arange(len(mids))
    return unique_inverse(mids)


class _OpIndex:
    """The distinct metadata ids of a line's events (`uniq`, ascending) and per-event lookups
    by id: `unique_inverse` without its inverse, whose int64 index per event (7.5 MB on the
    TPU 1M file's op line) then took each per-op fact in a second gather; here a table over
    the ids' range (a plane's metadata ids are small) answers per event in one gather, and
    an op index per event is written narrow (the compute names' codes: int8 for < 128 ops)."""

    def __init__(self, mids: np.ndarray) -> None:
        self._size = 0  # the table's length; 0: no table, ids searched in `uniq`
        if len(mids) >= 1024 and mids.dtype == np.intp:
            lo, hi = int(mids.min()), int(mids.max())
            if id_table_base(len(mids), lo, hi) == 0:
                seen = np.zeros(hi + 1, bool)
                seen[mids] = True
                self.uniq = np.flatnonzero(seen).astype(mids.dtype)
                self._size = hi + 1
                return
        self.uniq = sorted_unique(mids)

    def take(self, per_op: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """`per_op[index of each id in uniq]` (each id one of `uniq`)."""
        if self._size:
            table = np.zeros(self._size, per_op.dtype)
            table[self.uniq] = per_op
            return table[ids]
        return per_op[np.searchsorted(self.uniq, ids)]

    def codes(self, ids: np.ndarray) -> np.ndarray:
        """Each id's index in `uniq`, in the narrowest int dtype that holds them."""
        # (a table per call: one kept for the second call cost more in fresh pages, ~140
        # faults, than it saved in a zeroed table and a scatter)
        return self.take(narrow_codes(np.arange(len(self.uniq)), len(self.uniq)), ids)


def _per_event(per_op: np.ndarray, nb: np.ndarray, iu: np.ndarray,
               ids: bool = False) -> np.ndarray:
    """`per_op[iu]` (an object column per event from one per distinct op), a `repeated` view
    of its one value where every compute op (`nb`) has the same (the usual: one module, one
    program per line; or no op has a value: None, told by identity). Only where `==` cannot
    call values of two types the same: a str, or (`ids`: `as_id`'s ints or None) an int."""
    if len(nb) and len(iu):
        v = per_op[nb[0]]
        if v is None:
            # (a TPU op line whose ops name no module: 836k Nones taken one by one, ~5 ms)
            if all(x is None for x in per_op[nb].tolist()):
                return repeated(len(iu), None)
        elif type(v) is str or (ids and type(v) is int):
            if bool((per_op[nb] == v).all()):
                return repeated(len(iu), v)  # no 8 bytes per event (`repeated`)
    return per_op[iu]


_HOST_SLICE_OPS = ("dynamic-slice", "dynamic-update-slice")


def pair_copies(starts: np.ndarray, ends: np.ndarray, mids: np.ndarray, ops: np.ndarray,
                op_names: np.ndarray, *, positions: bool = False) -> tuple[np.ndarray, ...]:
    """Copy-start/copy-done pairs of boundary events (their begin, end, metadata id, and op:
    an index into `op_names`, the instruction names): (the start's begin, the done's end, the
    start's metadata id) per pair, in the order the dones are met; with `positions`, also the
    start's and the done's index in the arrays given.

    The rule (see `_read_tpu_plane`): in order of (begin, start before done, end, metadata
    id), each copy-start (or host slice start) waits in its key's queue (the name without
    `-start`/`-done`), and each done takes the oldest waiting start of its key; a done with none
    waiting is dropped. Vectorized: per key, the number waiting is the running sum of +1
    (start) / -1 (done) kept from going below 0 (c_i = S_i - min(0, min_{j<=i} S_j)); a done
    is taken where it was above 0 before it, and, since no start is ever dropped, the k-th
    taken done of a key pairs with that key's k-th start."""
    # the role and key once per op that has events here
    used = np.zeros(len(op_names), bool)
    used[ops] = True
    op_role = np.full(len(op_names), -1, np.int64)
    op_key = np.full(len(op_names), -1, np.int64)
    keys: dict[str, int] = {}
    for i in np.flatnonzero(used).tolist():
        g = _START_DONE_RE.match(op_names[i])
        if g and (g["base"].endswith("copy") or g["base"] in _HOST_SLICE_OPS):
            op_key[i] = keys.setdefault(g["base"] + (g["n"] or ""), len(keys))
            op_role[i] = 0 if g["role"] == "start" else 1
    sel = np.flatnonzero(op_role[ops] >= 0)
    s, e, m = starts[sel], ends[sel], mids[sel]
    role, kc = op_role[ops[sel]], op_key[ops[sel]]
    t_order = np.lexsort((m, e, role, s))  # stable: ties keep the events' order
    by_key = np.argsort(kc[t_order], kind="stable")  # by key, that order within each key
    o = t_order[by_key]
    s, e, m, role, kc = s[o], e[o], m[o], role[o], kc[o]
    n = len(o)
    first = np.ones(n, bool)
    first[1:] = kc[1:] != kc[:-1]
    gid = np.cumsum(first) - 1
    heads = np.flatnonzero(first)
    is_s = role == 0
    step = np.where(is_s, 1, -1)
    run = np.cumsum(step)
    run -= (run[heads] - step[heads])[gid]  # the running sum within each key
    big = 2 * n + 2  # keys apart: earlier keys' sums all lie above later keys'
    low = np.minimum.accumulate(run - gid * big) + gid * big
    waiting = run - np.minimum(low, 0)
    before = np.zeros(n, np.int64)
    before[1:] = waiting[:-1]
    before[first] = 0
    taken = ~is_s & (before > 0)
    # the k-th taken done of a key <-> the key's k-th start
    cs = np.cumsum(is_s)
    ct = np.cumsum(taken)
    s_base = (cs[heads] - is_s[heads])[gid]
    t_base = (ct[heads] - taken[heads])[gid]
    done = np.flatnonzero(taken)
    partner = np.flatnonzero(is_s)[s_base[done] + (ct[done] - t_base[done] - 1)]
    back = np.argsort(by_key[done])  # the order the dones are met (positions are distinct)
    done, partner = done[back], partner[back]
    if positions:  # `o` maps the sorted events back to the arrays given (through `sel`)
        return s[partner], e[done], m[partner], sel[o[partner]], sel[o[done]]
    return s[partner], e[done], m[partner]


def _op_names(P: Plane, uniq: np.ndarray, pairing: bool
              ) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray] | None, bool]:
    """Per distinct op id of an ops line: (its instruction name, object: the display name,
    else parsed from the HLO text; None where not needed: a boundary op when not pairing),
    (is it an async boundary, bool), and the display names' spans in the plane's table (None
    without one), for `fill_names` of the rest later (not looked up twice); and whether
    every boundary op was told one by its display name's bytes (`_boundaries`: then each
    of those names is non-empty ASCII without a NUL, `_join_names`' `checked`)."""
    t = P.table()
    out = np.full(len(uniq), None, object)
    spans = None
    if t is not None:
        spans = t.spans(uniq, display=True)
        # decided on the display names' bytes: an id with a display name is its instruction
        b_u = _boundaries(t, spans)
    else:
        b_u = np.full(len(uniq), -1, np.int8)
    # names only where needed: compute ops, ops not decided yet, boundaries to pair
    fill_names(P, uniq, out, np.flatnonzero((b_u != 1) | pairing), spans)
    und = np.flatnonzero(b_u == -1)
    by_bytes = t is not None
    if und.size:
        sd, sr = _START_DONE_RE.match, _SEND_RECV_RE.match  # is_async_boundary, inlined
        b_u[und] = [bool(sd(n) or sr(n)) for n in out[und].tolist()]
        by_bytes = by_bytes and not b_u[und].any()
    return out, b_u.astype(bool), spans, by_bytes


def _boundaries(t: MetaTable, spans: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """`async_boundaries_by_bytes` of the names at `spans` in the table's buffer: the
    scanner's `boundary_names` (in place, one walk per name: 7 ms -> 1 on 72k copy-start/
    copy-done names; a name holding a NUL left to the regexes, `nul_left`, so that a name
    decided here is one `MetaTable.span_strings` gives as a str), else (a build without
    it) numpy over the names gathered, -1 where a name holds a NUL (the same rule)."""
    fn = getattr(_scan, "boundary_names", None)
    if fn is not None:
        return fn(t.buf, np.ascontiguousarray(spans[0], np.int64),
                  np.ascontiguousarray(spans[1], np.int64), True)
    g = t.gather(*spans)
    ln = spans[1] - spans[0]
    out = async_boundaries_by_bytes(g, ln)
    nul = np.flatnonzero(g == 0)
    if nul.size:  # (names side by side: the NUL's name by its end)
        out[np.searchsorted(np.cumsum(ln), nul, side="right")] = -1
    return out


def fill_names(P: Plane, uniq: np.ndarray, out: np.ndarray, at: np.ndarray,
               spans: tuple[np.ndarray, np.ndarray] | None = None) -> None:
    """`out[at]` = the instruction names of the ops `uniq[at]` (`_op_names`): the display
    name, else parsed from the HLO text. `spans`: the display names' spans of all of `uniq`
    where the caller has them."""
    t = P.table()
    if t is not None:
        fs, fe = (spans[0][at], spans[1][at]) if spans is not None else \
            t.spans(uniq[at], display=True)
        ln = fe - fs
        disp = np.flatnonzero(ln > 0)
        got = t.span_strings(fs[disp], fe[disp])
        # not UTF-8 or a NUL: upb (which refuses the first as it always did)
        _fill(out, at[disp], got if got is not None else P.names(uniq[at[disp]], display=True))
        bare = np.flatnonzero(ln == 0)
        if bare.size:
            _fill(out, at[bare], _instruction_names(P, t, uniq[at[bare]]))
    else:
        names = P.names(uniq[at], display=True)
        no_disp = [i for i, s in enumerate(names) if not s]
        if no_disp:
            for i, name in zip(no_disp, instruction_names(P.names(uniq[at[no_disp]]))):
                names[i] = name
        _fill(out, at, names)


def _names_list(P: Plane, uniq: np.ndarray, out: np.ndarray, at: np.ndarray,
                spans: tuple[np.ndarray, np.ndarray] | None) -> list:
    """The instruction names of the ops `uniq[at]` as a list (`fill_names`' names; `spans`:
    the display names' spans of all of `uniq` in the plane's table, as `fill_names` takes
    them): the display names' strs as read where every one of them has one (the clocked
    many-ops shape's 72k copy-start/copy-done ops: no object array filled and listed again,
    ~2 ms), else `fill_names` into `out` and its entries at `at`."""
    t = P.table()
    if t is not None and spans is not None:
        fs, fe = spans[0][at], spans[1][at]
        if bool((fe > fs).all()):
            got = t.span_strings(fs, fe)
            if got is not None:
                return got
    fill_names(P, uniq, out, at, spans)
    return out[at].tolist()


def _join_names(P: Plane, uniq: np.ndarray, out: np.ndarray, at: np.ndarray,
                spans: tuple[np.ndarray, np.ndarray] | None,
                checked: bool = False) -> list | tuple[np.ndarray, ...]:
    """`_names_list`, or where the scanner can join on bytes (`_async_codes_at`,
    `_pairs_by_time`) and every one of these ops has a display name that
    `MetaTable.span_strings` would give as a str (non-empty, UTF-8, no NUL), their bytes
    where they lie: (the table's buffer, starts, ends). No str per op and no copy of the
    names side by side (72k copy-start/copy-done ops on the clocked many-ops shape, of which
    the join by time compares at most two per Async event: the gather and its checks took
    ~3 ms and ~700 page faults). `checked`: every one of them is known to be such a name
    (`_op_names`' `by_bytes`: told a boundary by its bytes, ASCII without a NUL), else each
    is checked where it lies (the scanner's `spans_text_ok`); a name `span_strings` would
    not give takes `_names_list` (and upb's refusal) before the Async line is read, as it
    always did."""
    t = P.table()
    ok = getattr(_scan, "spans_text_ok", None)
    if t is not None and spans is not None and ok is not None and hasattr(
            _scan, "async_name_codes_at"):
        fs, fe = spans[0][at], spans[1][at]
        if checked or ok(t.buf, fs, fe):
            return t.buf, fs, fe
        del fs, fe
    return _names_list(P, uniq, out, at, spans)


def _fill(out: np.ndarray, at: np.ndarray, values: list) -> None:
    """`out[at] = values` for a list of Python objects (numpy would read a list of tuples or
    equal-length sequences as rows; `np.fromiter` takes each as it is, without the
    discovery pass over every element that `col[:] = values` makes: ~20 us per 4096)."""
    out[at] = np.fromiter(values, object, len(values))


def _text_bytes(t: MetaTable, mids: np.ndarray) -> tuple[np.ndarray, ...]:
    """The HLO texts of `mids` as one byte buffer: (bytes, each text's [lo, hi) in it, whether
    it is plain ASCII, where its first ` = ` lies or -1), what the byte rules start from."""
    fs, fe = t.spans(mids)
    ln = fe - fs
    b = t.gather(fs, fe)
    hi = np.cumsum(ln)
    lo = hi - ln
    return b, lo, hi, plain_texts(b, lo, hi), first_within(find_all(b, b" = ", 1), lo, hi, 3)


def _instruction_names(P: Plane, t: MetaTable, mids: np.ndarray) -> list[str]:
    """`instruction_names` of the HLO texts of `mids`: on the texts' bytes where they are
    plain ASCII and the name needs no stripping, else on their Python strings."""
    b, lo, hi, plain, eq = _text_bytes(t, mids)
    ns, ne, ok = instruction_name_spans(b, lo, hi, eq)
    ok &= plain
    names: list[str] = [""] * len(mids)
    fast = np.flatnonzero(ok)
    got = MetaTable.gather_spans(b, ns[fast], ne[fast], 0).tobytes().decode("ascii")
    for i, s in zip(fast.tolist(), got.split("\0")):
        names[i] = s
    rest = np.flatnonzero(~ok)
    if rest.size:
        for i, s in zip(rest.tolist(), instruction_names(P.names(mids[rest]))):
            names[i] = s
    return names


_D2H, _H2D = 1, 2
# Texts per block of `_copy_columns_bytes`. Each text's answer is its own, so the rules run on
# blocks of texts: the temporaries (the texts' bytes, a bool per byte, positions of each
# pattern, a bytes object per copy head) are a block's, where all of a many-ops capture's
# (36k copy ops, 5 MB of text) added ~18 MiB to the read's peak.
_TEXTS = 4096
_IDS = 8192  # ids per `meta_columns` call of `_copy_columns_bytes`
_DIRECTIONS = np.array([None, "D2H", "H2D"], object)


def copy_columns(P: Plane, mids: np.ndarray,
                 programs: ProgramCopies | None = None) -> tuple[np.ndarray, dict]:
    """Per distinct async start op id (sorted `mids`): is it a host transfer (bool), and the
    transfer columns `direction`, `bytes`, `hlo_op`, `hlo_module`, `program_id` (arrays over
    `mids`; defined where it is one). The rules of `_copy_facts`; where the plane has a
    `MetaTable`, decided on the HLO texts' bytes (`_copy_columns_bytes`), and on the Python
    strings only for the texts those rules leave open."""
    n = len(mids)
    ok = np.zeros(n, bool)
    # (np.empty's objects are None)
    cols = {"direction": np.empty(n, object), "bytes": np.zeros(n, np.int64),
            "hlo_op": np.empty(n, object), "hlo_module": np.empty(n, object),
            "program_id": np.empty(n, object)}
    t = P.table()
    rest = np.arange(n) if t is None else _copy_columns_bytes(P, t, mids, programs, ok, cols)
    if rest.size:
        rmids = mids[rest]
        texts = P.names(rmids)
        copies = [i for i, s in enumerate(texts) if is_host_async_start(s)]
        facts = _copy_facts(P, rmids[copies].tolist(), [texts[i] for i in copies], programs)
        for i, f in zip(copies, facts):
            if f is not None:
                r = rest[i]
                ok[r] = True
                cols["direction"][r], cols["bytes"][r], cols["hlo_op"][r], \
                    cols["hlo_module"][r], cols["program_id"][r] = f
    return ok, cols


def _copy_columns_bytes(P: Plane, t: MetaTable, mids: np.ndarray,
                        programs: ProgramCopies | None, ok: np.ndarray,
                        cols: dict[str, np.ndarray]) -> np.ndarray:
    """`copy_columns` on the texts' bytes, into `ok` and `cols`; returns the indices of the
    texts left to the string rules.

    Decided here (exactly the string rules' answers, see `hlotext.copy_head_facts`): a plain
    ASCII text with neither `copy-start` nor `slice-start(` in it is no host transfer
    (`is_host_async_start`); one with a ` = ` and a ` copy-start(` after it, and no
    `slice-start(`, is decided by its head (from the ` = ` to the ` copy-start(`), once per
    distinct head, where the head holds the result tuple's first two elements. Everything
    else (slices, heads the tuple rule does not match, non-ASCII or NUL bytes) is left.

    The texts' bytes are read `_TEXTS` at a time (`_text_block`: each text's answer is its
    own); the module and program columns of the copies found (`_copy_metadata`) with each
    block where no program can change a text's answer, else `_IDS` ids at a time (a
    `MetaTable` decodes the stats of the ids asked: a block's records are held, not all)."""
    n = len(mids)
    code = np.full(n, -1, np.int64)  # per text: _D2H, _H2D, 0 (neither), -1 (left)
    nbytes = np.zeros(n, np.int64)
    known = np.zeros(n, bool)  # bytes known from the text (or the program)
    host = np.zeros(n, bool)  # where the program's facts are looked up
    # instruction names, where `host` or code > 0; without programs only the copies' (code
    # > 0), which are their `hlo_op`: written there, not taken again per block
    names = np.empty(n, object) if programs else cols["hlo_op"]
    facts = (code, nbytes, known, names, ok, cols)
    for s in range(0, n, _TEXTS):
        e = s + _TEXTS  # (slices are views: the block writes into the arrays above)
        _text_block(t, mids[s:e], bool(programs), code[s:e], nbytes[s:e], known[s:e],
                    host[s:e], names[s:e])
        if not programs:  # (else the programs may still change a text's answer)
            # the block's copies' metadata now, while the block's entries are in cache (read
            # again after all blocks, each entry's stats were a cache miss: ~1.5 ms on 36k)
            _copy_metadata(P, mids, s + np.flatnonzero(code[s:e] > 0), *facts)
    if programs:
        # The program's facts, where it has the op, replace the text's (`_copy_facts`) for
        # every op `is_host_async_start` admits.
        at = np.flatnonzero(host)
        if at.size:
            pids = P.meta_columns(mids[at], ("program_id",), ids=("program_id",))[
                "program_id"].tolist()
            for i, pid, ins in zip(at.tolist(), pids, names[at].tolist()):
                got = programs.facts(pid, ins)
                if got is not None:
                    d, size = got
                    code[i] = 0 if d is None else _D2H if d == "D2H" else _H2D
                    nbytes[i], known[i] = (0, False) if size is None else (size, True)
        cand = np.flatnonzero(code > 0)
        for s in range(0, cand.size, _IDS):
            # (the stat records of all 36k copy ops of a many-ops capture at once were the
            # read's peak, +7 MiB; a call costs next to nothing more per block)
            _copy_metadata(P, mids, cand[s:s + _IDS], *facts)
    return np.flatnonzero(code < 0)


def _copy_metadata(P: Plane, mids: np.ndarray, cand: np.ndarray, code: np.ndarray,
                   nbytes: np.ndarray, known: np.ndarray, names: np.ndarray, ok: np.ndarray,
                   cols: dict[str, np.ndarray]) -> None:
    """The transfer columns of the copies `cand` (indices into `mids`, each with code > 0),
    into `ok` and `cols`: direction, bytes (the text's, else the op's own byte counts, else
    0), instruction name, and the op's module and program from its metadata."""
    if not cand.size:
        return
    nb = nbytes[cand]
    unknown = np.flatnonzero(~known[cand])
    if unknown.size:  # the text gave no size: the op's own byte counts, else 0
        sizes = P.meta_columns(mids[cand[unknown]], _COPY_FACTS[2:])
        nb[unknown] = [as_int(r) or as_int(a) or 0 for r, a in
                       zip(sizes["raw_bytes_accessed"].tolist(),
                           sizes["bytes_accessed"].tolist())]
    col = P.meta_columns(mids[cand], _OP_COLUMNS, ids=("program_id",))
    if int(cand[-1]) - int(cand[0]) == len(cand) - 1:
        # one run of ops (every text of the block a copy: the many-ops shape): a slice
        # assigns without an index per row
        cand = slice(int(cand[0]), int(cand[-1]) + 1)  # type: ignore[assignment]
    ok[cand] = True
    cols["direction"][cand] = _DIRECTIONS[code[cand]]
    cols["bytes"][cand] = nb
    if names is not cols["hlo_op"]:  # (else written there already, `_copy_columns_bytes`)
        cols["hlo_op"][cand] = names[cand]
    cols["hlo_module"][cand] = col["hlo_module"]
    cols["program_id"][cand] = col["program_id"]


def _text_block(t: MetaTable, mids: np.ndarray, programs: bool, code: np.ndarray,
                nbytes: np.ndarray, known: np.ndarray, host: np.ndarray,
                names: np.ndarray) -> None:
    """The byte rules of `_copy_columns_bytes` on one block of texts, into its arrays'
    slices: `code`, `nbytes`, `known` from the texts; with `programs`, `host` (the ops whose
    program's facts are looked up) and their `names`, else the names where code > 0."""
    lo, hi = t.spans(mids)
    plain, eq, has_cs, has_sl, j, s5 = _text_facts(t.buf, lo, hi)
    done = plain & ~has_cs & ~has_sl  # not an async start across host memory
    head = np.flatnonzero(plain & ~has_sl & (eq >= 0) & (j >= 0))
    code[done] = 0
    if head.size:
        # the heads alone as bytes (plain texts: no NUL inside), decided once per distinct
        # head; not a bytes copy of all the texts to slice them from
        hs, he = eq[head], j[head]
        fn = getattr(_scan, "span_codes", None)
        hc, one = fn(t.buf, hs, he) if fn is not None else (None, slice(None))
        heads = t.gather(hs[one], he[one], 0).tobytes().split(b"\0")
        heads.pop()  # after the last separator
        got = copy_head_facts(heads)  # (each head's answer is its own)
        code[head], nbytes[head], known[head] = got if hc is None else (c[hc] for c in got)
        del heads
    if programs:
        # a decided head with a direction has S(5) in its tuple; one without needs S(5)
        # looked for in the text
        host[:] = code > 0
        nodir = np.flatnonzero(code == 0)
        if nodir.size:
            host[nodir] = s5[nodir] & (has_cs[nodir] | has_sl[nodir]) & ~done[nodir]
        need = np.flatnonzero(host)
    else:
        need = np.flatnonzero(code > 0)
    if need.size:
        _fill(names, need, _names_from(t.buf, lo, hi, eq, need))


def _text_facts(buf: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per HLO text [lo, hi) of `buf`: (plain ASCII without a NUL; where its first ` = `
    begins; has `copy-start`; has `slice-start(`; where the first ` copy-start(` at or after
    that ` = ` begins; has `S(5)`), positions in `buf`, -1 where none: what the copy rules of
    `_text_block` decide on. The scanner's `text_facts` (in place, one walk per text), else
    (a build without it) `_text_facts_numpy`, the same rule by numpy over the texts' bytes
    (tests/trace/test_text_facts.py holds them equal)."""
    fn = getattr(_scan, "text_facts", None)
    if fn is not None:
        return fn(np.asarray(buf, np.uint8).reshape(-1), np.ascontiguousarray(lo, np.int64),
                  np.ascontiguousarray(hi, np.int64))
    return _text_facts_numpy(buf, lo, hi)


def _text_facts_numpy(buf: np.ndarray, lo: np.ndarray,
                      hi: np.ndarray) -> tuple[np.ndarray, ...]:
    """`_text_facts` by numpy: the texts gathered into one buffer, each pattern found in a
    pass over it (`find_all`), each text's first within it (`first_within`)."""
    lo = np.asarray(lo, np.int64)
    ln = np.asarray(hi, np.int64) - lo
    b = MetaTable.gather_spans(buf, lo, lo + ln)
    e = np.cumsum(ln)
    s = e - ln  # each text's span in `b`
    eq = first_within(find_all(b, b" = ", 1), s, e, 3)
    cs = find_all(b, b"copy-start", 4)
    has_cs = first_within(cs, s, e, 10) >= 0
    has_sl = first_within(find_all(b, b"slice-start(", 1), s, e, 12) >= 0
    # ` copy-start(` occurrences, the first one at or after the ` = `
    c = cs[(cs >= 1) & (cs + 10 < len(b))]
    call = c[(b[c - 1] == 0x20) & (b[c + 10] == 0x28)] - 1
    j = first_within(call, np.where(eq >= 0, eq, e), e, 12)
    s5 = first_within(find_all(b, b"S(5)", 0), s, e, 4) >= 0
    back = lo - s  # from a position in `b` to the same byte in `buf`
    return (plain_texts(b, s, e), np.where(eq >= 0, eq + back, -1), has_cs, has_sl,
            np.where(j >= 0, j + back, -1), s5)


def _names_from(b: np.ndarray, lo: np.ndarray, hi: np.ndarray, eq: np.ndarray,
                at: np.ndarray) -> list[str]:
    """`instruction_names` of the texts `at` (plain ASCII, joined in `b`), on their bytes
    where the name needs no stripping: the scanner's `instruction_name_strings` where every
    one of them does (and holds no NUL), else by numpy (tests/trace/test_tpu_bytes.py holds
    the two equal)."""
    fn = getattr(_scan, "instruction_name_strings", None)
    if fn is not None:
        got_l = fn(np.asarray(b, np.uint8).reshape(-1), np.ascontiguousarray(lo, np.int64),
                   np.ascontiguousarray(hi, np.int64), np.ascontiguousarray(eq, np.int64),
                   np.ascontiguousarray(at, np.int64))
        if got_l is not None:
            return got_l
    ns, ne, ok = instruction_name_spans(b, lo[at], hi[at], eq[at])
    fast = np.flatnonzero(ok)
    got = MetaTable.gather_spans(b, ns[fast], ne[fast], 0).tobytes().decode("ascii")
    if len(fast) == len(at):
        return got.split("\0")[:-1]
    out: list[str] = [""] * len(at)
    for i, s in zip(fast.tolist(), got.split("\0")):
        out[i] = s
    rest = np.flatnonzero(~ok)
    if rest.size:
        texts = [bytes(b[p:q]).decode("ascii") for p, q in zip(lo[at[rest]].tolist(),
                                                                hi[at[rest]].tolist())]
        for i, s in zip(rest.tolist(), instruction_names(texts)):
            out[i] = s
    return out


def _copy_facts(P: Plane, mids: list[int], texts: list[str],
                programs: ProgramCopies | None = None) -> list[tuple | None]:
    """Per host async start op's metadata id (with its HLO text: copy-start or
    dynamic-(update-)slice-start): (direction, bytes, instruction, hlo_module, program_id), or
    None where the text names no host memory side. Both TPU
    paths (`Async XLA Ops` spans and copy-start/copy-done pairs) use it, once per distinct op;
    program ids are converted once per distinct value. Where `programs` holds the op's program
    (its HLO proto), a copy-start's direction and bytes come from there (`overlap.trace.
    programs`: the same rule on the instruction's shape, once per program); the text decides
    the rest."""
    got: list[tuple[str | None, int | None] | None] = [None] * len(mids)
    if programs and mids:
        pids_all = P.meta_columns(mids, ("program_id",), ids=("program_id",))[
            "program_id"].tolist()
        got = [programs.facts(pid, ins) for pid, ins in zip(pids_all, instruction_names(texts))]
    rest = [i for i, d in enumerate(got) if d is None]
    if rest:
        for i, d in zip(rest, host_transfer_directions([texts[i] for i in rest])):
            got[i] = d
    cand, dirs = [], []
    for i, g in enumerate(got):
        if g is not None and g[0] is not None:
            cand.append(i)
            dirs.append(g)
    out: list[tuple | None] = [None] * len(mids)
    if not cand:
        return out
    col = P.meta_columns([mids[i] for i in cand], _COPY_FACTS, ids=("program_id",))
    module, raw, acc = (col[k].tolist() for k in ("hlo_module", "raw_bytes_accessed",
                                                  "bytes_accessed"))
    pids = col["program_id"].tolist()
    instrs = instruction_names([texts[i] for i in cand])
    for j, i in enumerate(cand):
        direction, nbytes = dirs[j]
        if nbytes is None:
            nbytes = as_int(raw[j]) or as_int(acc[j]) or 0
        out[i] = (direction, nbytes, instrs[j], module[j], pids[j])
    return out


# TPU copy facts from the capture's HLO protos where it carries them (tests compare with the
# text rule by turning this off).
_PROGRAM_FACTS = True


def _program_copies(plane) -> ProgramCopies:
    """Program id -> its serialized HloProto, from the `/host:metadata` plane's entries (keyed
    by program id; the proto in their `Hlo Proto` stat)."""
    P = Plane(plane)
    wanted = P.ids("Hlo Proto")
    protos = {}
    if wanted:
        for k, md in plane.event_metadata.items():
            proto = P.stats(md.stats, wanted).get("Hlo Proto")
            if isinstance(proto, bytes) and proto:
                protos[program_key(k)] = proto
    return ProgramCopies(protos, array_bytes)


def copy_durations(tr, span: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per transfer of a transfers column table (`Trace.columns`): its duration, the
    `device_span_ps` where the capture gave the chip's clock, else `span` (the host-aligned
    or CUPTI span); and whether it came from the device clock. `overlap.analysis.overlap`'s
    `duration_ps`, the denominator of every bandwidth."""
    dev = tr.get("device_span_ps")
    if dev is None:
        return span, np.zeros(len(span), bool)
    dev = np.asarray(dev)
    has = _device_clocked(dev)
    dt = np.result_type(np.int64, span)  # (`np.where`'s below)
    if not has.any():  # (no copy clocked: the spans themselves, as where `dev` is None: no
        # array is changed in place, `analysis.memo`; a copy was 8 MB a million copies)
        return span if span.dtype == dt else span.astype(dt), has
    if dev.dtype == object:
        if has.all():  # (every copy clocked, the clocked many-ops shape's 36k: converted
            # as a whole, no take, scatter or where)
            return dev.astype(dt), has
        d = np.zeros(len(span), np.int64)
        d[has] = dev[has].astype(np.int64)
    else:
        d = dev.astype(np.int64)
    return np.where(has, d, span), has


def _device_clocked(dev: np.ndarray) -> np.ndarray:
    """`copy_durations`' flag per transfer: has a `device_span_ps` (an object column: by
    address, no value converted)."""
    if dev.dtype == object:
        return object_addresses(dev) != id(None) if len(dev) else np.zeros(0, bool)
    return dev.astype(np.int64) >= 0


def clock_counts(tr, table) -> dict[str, int]:
    """TPU transfers timed on the chip's own clock (`device`) and on the host-aligned
    timeline only (`host_aligned`: no `device_offset_ps`/`device_duration_ps` for them)."""
    # the flag alone (the durations were made for the table: converting every clocked
    # copy's span again cost ~0.6 ms of the clocked many-ops file's 36k)
    dev = tr.get("device_span_ps")
    has = np.zeros(len(table["span_ps"]), bool) if dev is None else \
        _device_clocked(np.asarray(dev))
    if not len(has):
        return {"device": 0, "host_aligned": 0}
    codes, devices = factorize(np.asarray(table["device"], object))  # once per device
    tpu = np.array([str(d).startswith("TPU") for d in devices.tolist()] + [False], bool)[codes]
    return {"device": int((tpu & has).sum()), "host_aligned": int((tpu & ~has).sum())}
