"""GPU device planes: transfers (CUPTI memcpy events) and kernels, per event (see
`overlap.trace.reader` for the rules and their evidence)."""

from __future__ import annotations

from typing import Any

import numpy as np

from overlap.arrays import Later, now, positions, ranges, sorted_unique
from overlap.trace import lines, vendors, wire
from overlap.trace.groups import MANY_PLANES, groupable_all
from overlap.trace.lines import LineBlock, RowNames, merge_rows, wide
from overlap.trace.names import MEMCPY_DIRECTIONS, parse_details
from overlap.trace.statcols import apply_once, meta_values
from overlap.trace.tables import missing_mask
from overlap.trace.values import _K_REF, _K_STR, _stat_objects, isin_ids
from overlap.trace.wire import (
    GROUP_STRIDE,
    Coded,
    Cols,
    LineEvents,
    Plane,
    PlaneGroup,
    as_id,
    as_int,
    as_text,
    coded_stat,
    map_unique,
    narrow_codes,
    object_array,
    per_mid,
    stat_codes,
    stat_keys,
)

# Lines with fewer events than this are read together with other planes' small lines (one
# `LineEvents` per segment of up to _SEGMENT events): numpy's fixed cost per call would otherwise
# make a capture of thousands of few-event planes take seconds per thousand planes.
_SMALL_LINE = 512
# Planes of at most this many lines are walked line by line; more, their small lines are
# found and queued with numpy (a million one-event lines: a Python step per line before).
_FEW_LINES = 32
# (16k, not 64k: a segment of one-event lines holds ~150 bytes a line of temporaries, its
# events, their line and plane indices, origins and classification, through the walk; 64k
# lines of them were ~10 MB on the read's peak, 32k ~2 MiB more than 16k, for no time saved)
_SEGMENT = 1 << 14
# Lines of more events than this, on a plane where no event can give a row, are decoded a
# piece of this many events at a time (`lines.pieces`): a line of a million events no rule
# reads held 24 bytes an event (ids, starts, durations) through its classification, for the
# counts of the "cannot tell" list.
_PIECE = 1 << 16
# Event stats the GPU rules read (the decoder keeps only these; another one asked for costs a
# second pass over the line, never a wrong answer). Not `correlation_id`: only ROCm blit
# kernels read it (vendors.split_kernels), and keeping it for every CUDA kernel costs ~30 MB
# per million kernels. `cuda_graph_id` (vendors.graph_device_copies, command buffers): few
# distinct values, interned; read after the decode, it cost the real H200 command-buffer
# run a second pass over its 305,700-event line (~60 ms of 0.33 s).
_GPU_STATS = ("kernel_details", "memcpy_details", "hlo_op", "hlo_module", "program_id",
              "cuda_graph_id")


def _read_gpu_planes(planes: list[Plane], devices_: list[str], host, line_base_ps, tr: Cols,
                     co: Cols, side: vendors.GpuSide | None = None) -> None:
    """All GPU planes of one file: `planes`, and each one's device name (`devices_`; two
    lists, not a tuple per plane: 100k small planes)."""
    details_cache: dict[Any, tuple] = {}
    # small lines to merge, in order: each one's index into planes, and its row in its plane's
    # `LineBlock`: as ints a line at a time (planes of a few lines), and as arrays a run of a
    # plane's lines at a time (`pend`; no int object per line: a million one-event lines)
    pend_i: list[int] = []
    pend_r: list[int] = []
    runs: list[tuple[np.ndarray, np.ndarray]] = []
    n_pending = 0
    devices = object_array(devices_)

    def seal() -> None:
        """The lines pending one at a time as a run, after the runs before them."""
        if pend_r:
            runs.append((np.array(pend_i, np.int64), np.array(pend_r, np.int64)))
            pend_i.clear()
            pend_r.clear()

    def flush():
        nonlocal n_pending
        seal()
        if not runs:
            return
        at_i, at_r = runs[0] if len(runs) == 1 else map(np.concatenate, zip(*runs))
        runs.clear()
        n_pending = 0
        # (one block: a file's GPU planes are parsed together, `reader._read_alone`)
        block = planes[int(at_i[0])].plane.lines.block
        used = sorted_unique(at_i)
        if any(planes[i].plane.lines.block is not block for i in used.tolist()):
            raise ValueError("GPU planes of one file parsed apart")
        # (many planes: the rules' stat names found in one pass over their maps; a few
        # planes' maps, thousands of interned texts each in a real capture, are indexed in C
        # plane by plane, as before)
        G = PlaneGroup([planes[i] for i in used.tolist()],
                       (meta_rows, used) if meta_rows is not None else None,
                       _GPU_STATS if len(used) >= MANY_PLANES else ())
        seg = merge_rows(block, at_r)
        # (the rows' names, each decoded where it is read)
        names = RowNames(block.names, at_r)
        # per event of the segment, its line's index into `names`: each per-event column
        # is its line's value read through it (and what is asked of a line, once a line)
        line_of = np.repeat(np.arange(len(names)), wide(block.rec[at_r, lines.EVENTS]))
        plane_of = np.searchsorted(used, at_i)[line_of]
        base = line_base_ps.many(wide(block.rec[at_r, lines.TIMESTAMP_NS]),
                                 names.__getitem__)[line_of]
        groups, presence, listed = _groups(G)
        ev = LineEvents(seg, base, plane_of=plane_of, wanted=(), groups=groups,
                        presence=presence, listed=listed)
        if ev.n:
            at = ev.kept(line_of)
            # (a segment of one plane's lines: its device, one value for every event, not
            # an object per event)
            device = devices_[int(used[0])] if len(used) == 1 else devices[at_i[at]]
            _gpu_events(G, _gpu_meta_kinds(G), ev, device, wide(block.rec[at_r, lines.ID])[at],
                        Later(lambda: names.take(at)), host, tr, co, details_cache, side,
                        (names, at, block, at_r))

    def pend(i: int | np.ndarray, rows: np.ndarray, counts: np.ndarray) -> None:
        """Small lines `rows` (with `counts` events each, all > 0) of plane `i` (or each of
        its plane, `i` an array) pending, in order, flushed as the line that brings the
        pending events to `_SEGMENT` is added: what adding them one by one does, without a
        Python step per line."""
        nonlocal n_pending
        while len(rows):
            cum = np.cumsum(counts) + n_pending
            # (counts > 0: `cum` rises; the first line where it reaches _SEGMENT, else all)
            k = min(int(np.searchsorted(cum, _SEGMENT)) + 1, len(rows))
            seal()
            runs.append((np.full(k, i, np.int64) if isinstance(i, int) else i[:k],
                         rows[:k].astype(np.int64, copy=False)))
            n_pending = int(cum[k - 1])
            if n_pending >= _SEGMENT:
                flush()
            rows, counts = rows[k:], counts[k:]
            if not isinstance(i, int):
                i = i[k:]

    def read_line(i: int, r: int) -> None:
        """Line `r` of plane `i` read on its own (not merged)."""
        P, device = planes[i], devices_[i]
        line = P.plane.lines.block.line(r)
        groups, presence, listed = _groups(P)
        base = line_base_ps(line)
        # A long line whose events can give no row (the plane names no copy, no graph and no
        # kernel_details: each is only counted, `vendors.note_other_events`) a piece at a
        # time: what one decode of it gives, in order, a piece's events held through their
        # classification, not the line's. (Not a line of kernels or copies: their rows are
        # kept whole anyway, and each piece would read its distinct stat values again.)
        every = _PIECE if line.n_events > _PIECE and _unread_only(P, plane_kinds(i)) \
            else line.n_events
        for piece in lines.pieces(line, every, wire.SCANNER):
            ev = LineEvents(piece, base, wanted=(), groups=groups, presence=presence,
                            listed=listed)
            if ev.n:
                _gpu_events(P, plane_kinds(i), ev, device, line.id, line.name, host, tr, co,
                            details_cache, side, line_at=(P.plane.lines.block, r))
            del ev
        line.decoded = True

    def plane_kinds(i: int) -> Any:
        if i not in kinds:
            kinds.clear()  # (the plane before's: one plane's kinds kept at a time)
            kinds[i] = _gpu_meta_kinds(planes[i])
        return kinds[i]

    def walk(at: int | np.ndarray, rows: np.ndarray, counts: np.ndarray,
             alone: np.ndarray) -> None:
        """Lines `rows` (`counts` events each, all > 0) of plane `at` (or each of its plane,
        `at` an array), in order: those at the positions `alone` read on their own, the runs
        between them pending."""
        prev = 0
        for j in [*alone.tolist(), len(rows)]:
            if j > prev:
                pend(at if isinstance(at, int) else at[prev:j], rows[prev:j], counts[prev:j])
            if j < len(rows):
                read_line(at if isinstance(at, int) else int(at[j]), int(rows[j]))
            prev = j + 1

    kinds: dict[int, Any] = {}  # the plane whose lines are read on their own: its kinds
    # (many planes: their metadata decoded at once, for `groupable` and each group's table)
    small_all, meta_rows = groupable_all(planes)
    every = _every_line(planes) if len(planes) >= MANY_PLANES else None
    if every is not None:
        # (many planes' lines at once, in order, as the loop below reads them one plane at
        # a time: 100k planes of a line each were a Python step a plane)
        at_i, rows, counts = every
        walk(at_i, rows, counts,
             np.flatnonzero(~np.array(small_all, bool)[at_i] | (counts >= _SMALL_LINE)))
    for i, P in enumerate(planes if every is None else ()):
        small = small_all[i]
        table = P.plane.lines
        if len(table) <= _FEW_LINES:  # a few lines: one by one (numpy's calls cost more)
            ns = table.block.events()
            for r in range(table.a, table.b):
                n = ns[r]
                if not n:
                    continue
                if small and n < _SMALL_LINE:
                    pend_i.append(i)
                    pend_r.append(r)
                    n_pending += n
                    if n_pending >= _SEGMENT:
                        flush()
                else:
                    read_line(i, r)
            continue
        # (`_SEGMENT` lines at a time, in order: what one walk of them all does, without
        # their rows and counts at once, 16 MB a million lines on the read's peak)
        for a in range(table.a, table.b, _SEGMENT):
            n = table.block.rec[a:min(a + _SEGMENT, table.b), lines.EVENTS]
            rows = np.flatnonzero(n)
            counts = n[rows]
            rows += a
            walk(i, rows, counts,
                 np.flatnonzero(counts >= _SMALL_LINE) if small else np.arange(len(rows)))
    flush()


def _every_line(planes: list[Plane]) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Every line with events of the planes, in order, where they lie in one `LineBlock`:
    (per line its plane's index, its row in the block, its events); else None."""
    tables = [P.plane.lines for P in planes]
    block = tables[0].block
    if any(t.block is not block for t in tables):
        return None
    a = np.fromiter([t.a for t in tables], np.int64, len(tables))
    lens = np.fromiter([t.b for t in tables], np.int64, len(tables)) - a
    at_i = np.repeat(np.arange(len(tables)), lens)
    rows = ranges(a, lens)
    counts = block.rec[rows, lines.EVENTS]
    keep = np.flatnonzero(counts > 0)
    return at_i[keep], rows[keep], counts[keep]


def _unread_only(P, kinds: tuple[dict[int, str], list[int]]) -> bool:
    """Whether no event of plane `P` can be a copy or a kernel (`_gpu_events`): its kinds
    (`_gpu_meta_kinds`) name none and it has no kernel_details stat."""
    return not kinds[0] and not kinds[1] and not P.stat_ids.get("kernel_details")


def _groups(P) -> tuple[list[list[int]], list[list[int]], list[list[int]]]:
    """`LineEvents(groups=, presence=, listed=)`: the ids of each stat the GPU rules read
    (each one's first stat per event is interned while decoding; no record per stat is
    kept); of `kernel_details`, which they only test for (a ref in the captures here; a
    producer that writes it as a ~100-byte string per kernel would otherwise have every one
    hashed); and of `memcpy_details`, whose values `_details_facts` parses one by one
    (repeated ones too: listed once most are new, a million copies each its own text)."""
    return ([stat_keys(P, (n,)) for n in _GPU_STATS if n not in _NOT_INTERNED],
            [stat_keys(P, ("kernel_details",))], [stat_keys(P, ("memcpy_details",))])


_NOT_INTERNED = ("kernel_details", "memcpy_details")  # (`_groups`: tested; listed)


_TABLE_MIN = 256  # metadata entries from which a plane's kinds are read through `MetaTable`


def _gpu_meta_kinds(P) -> tuple[dict[int, str], list[int]]:
    """(memcpy metadata id -> direction, ids whose events are kernels whatever their stats).

    A plane with many entries (one per distinct kernel: tens of thousands in a large model)
    is read through its `MetaTable` (names and the kernel_details test for all entries at
    once, ~0.5 us per entry instead of ~5 us through upb), and so is a `PlaneGroup` whose
    planes' entries were decoded at once (`groups.MetaRows`: 100k one-entry planes); other
    small planes through upb, which costs less than a table each."""
    memcpy_mids, kernel_mids = {}, []
    group = isinstance(P, PlaneGroup)
    grouped = _group_meta_rows(P) if group else None
    rows_of: Any = [(0, grouped)] if grouped is not None else (
        (i * GROUP_STRIDE if group else 0, _plane_meta_rows(Q))
        for i, Q in enumerate(P.planes if group else [P]))
    for off, rows in rows_of:
        for k, name, has_kd in rows:
            if name in MEMCPY_DIRECTIONS:
                memcpy_mids[k + off] = MEMCPY_DIRECTIONS[name]
            elif name.startswith("CudaGraphExec"):
                kernel_mids.append(k + off)
            # Metadata-level kernel_details also makes a kernel (stats merge event over
            # metadata).
            elif has_kd:
                kernel_mids.append(k + off)
    return memcpy_mids, kernel_mids


def _plane_meta_rows(Q) -> Any:
    """(id, name, holds kernel_details) of each metadata entry of one plane (a plane whose
    entries upb never parsed, `reader._strip_many`: from its table, not a map parsed now)."""
    t = Q.table() if getattr(Q.plane, "meta_stripped", False) or len(Q.meta) >= _TABLE_MIN \
        else None
    if t is not None:
        return _taken_rows(t, t.has_stat(t.keys, Q.stat_ids.get("kernel_details", ())),
                           Q.names)
    m = Q.meta  # (its keys, then each entry: `items()` is a Python-level view)
    return ((k, (md := m[k]).name, len(md.stats) and "kernel_details" in Q.meta_stats(k))
            for k in m)


def _taken_rows(t, kd: np.ndarray, names: Any) -> Any:
    """(id, name, holds kernel_details) of the entries of the table `t` that
    `_gpu_meta_kinds` takes: named like a copy or a graph, or holding kernel_details (`kd`,
    per entry in `t.keys`' order); a million distinct kernel names are not a million Python
    strings. `names(keys)`: their names (None: not read here; then None)."""
    sel = np.flatnonzero(kd | _named(t, _KIND_PREFIXES))
    keys = t.keys[sel]
    got = names(keys)
    return None if got is None else zip(keys.tolist(), got, kd[sel].tolist())


# What a name `_gpu_meta_kinds` acts on starts with (the copies' whole names among them)
_KIND_PREFIXES = tuple(k.encode() for k in MEMCPY_DIRECTIONS) + (b"CudaGraphExec",)


def _named(t, prefixes: tuple[bytes, ...]) -> np.ndarray:
    """Per entry of the table `t` (in `t.keys`' order): do its name's bytes start with one of
    `prefixes`? The same test as on its text: a name with invalid UTF-8 reads with U+FFFD
    where its bytes are not ASCII, which no prefix holds."""
    fs, fe = t.name  # (every entry's, in the keys' order)
    out = np.zeros(len(fs), bool)
    # (the names long enough for the shortest prefix, a block of entries at a time: a
    # million entries' lengths were 5 MB of temporaries per prefix on the read's peak)
    shortest = min(map(len, prefixes))
    cand = np.concatenate([np.flatnonzero(fe[b:b + _SEGMENT] - fs[b:b + _SEGMENT] >= shortest)
                           + b for b in range(0, len(fs), _SEGMENT)] or [np.zeros(0, np.int64)])
    size = fe[cand] - fs[cand]
    for pre in prefixes:
        at = cand[size >= len(pre)]
        for i, c in enumerate(pre):
            at = at[t.buf[fs[at] + i] == c]
        out[at] = True
    return out


def _group_meta_rows(G: PlaneGroup) -> Any:
    """`_plane_meta_rows` of a group's planes at once, from its table (keys as the group's);
    None where it has none or a name is not valid UTF-8 (each plane's then)."""
    t = G.table()
    if t is None:
        return None
    # (only the entries `_gpu_meta_kinds` takes, as a plane's table is read: 16k one-kernel
    # planes' names were 16k strs, ~1 MiB a segment on the read's peak)
    return _taken_rows(t, t.has_keyed_stat(G.stat_ids.get("kernel_details", ())),
                       lambda keys: t.strings(keys, False))


def _gpu_events(P, kinds, ev: LineEvents, device, stream, line_name, host, tr: Cols, co: Cols,
                details_cache: dict, side: vendors.GpuSide | None = None,
                lines_of: tuple[RowNames, np.ndarray, LineBlock, np.ndarray] | None = None,
                line_at: tuple[LineBlock, int] | None = None) -> None:
    """Transfers and kernels of one line (or one merged segment: `P` is then a `PlaneGroup`,
    and `device`, `stream` and `line_name` are per-event arrays, `line_name` a `Later` made
    only where a row reads it; `lines_of` the segment's
    line names, per event its line's index among them, their block and their rows there;
    `line_at` a line's block and row, `vendors.note_other_events`)."""
    def pick(v, idx):
        # every event (a kernel-only line): the array itself, not a copy of it
        if not isinstance(v, np.ndarray) or len(idx) == ev.n:
            return v
        return v[idx]

    memcpy_mids, kernel_mids = kinds
    kd_sids = P.stat_ids.get("kernel_details", [])
    mids = ev.mids
    is_mc = isin_ids(mids, memcpy_mids) if memcpy_mids else np.zeros(ev.n, bool)
    # Per event, never per line or per metadata alone: any event may carry kernel_details.
    is_k = ~is_mc & (ev.has_stat(kd_sids) | isin_ids(mids, kernel_mids))
    # (every event a copy, a copy-only line: the positions counted, int32, not searched)
    idx = positions(ev.n) if is_mc.all() else np.flatnonzero(is_mc)
    if idx.size:
        # (bytes, src kind, dst kind, async, bytes known) once per distinct details value
        codes, facts = _details_facts(P, ev, idx, details_cache)
        codes = narrow_codes(codes, len(facts.size))
        # every copy its own value, in order (codes are given in order of first occurrence:
        # n increasing codes into n values are 0..n-1): the facts are the columns, no gather
        # (a million copies each with its own details: 12 MB less on the read's peak)
        own = len(codes) == len(facts.size) and bool((codes[1:] > codes[:-1]).all())

        def per_copy(a: np.ndarray) -> np.ndarray:
            return a if own else a[codes]
        # The object columns as codes (`Coded`: made objects by `Cols.rows`, once the file's
        # bytes and the line's arrays are gone; one kind over the copies, a `repeated`
        # column); every event a copy: the line's starts, and its durations made ends in
        # place (no kernel or other event of the line reads them after). Why: a million
        # copies held seven object columns and two time copies beside the file's bytes,
        # ~70 MB of the read's peak.
        if len(idx) == ev.n:
            start, end = ev.starts, ev.durs
            ev.durs = None
            end += start
        else:
            start = ev.starts[idx]
            end = start + ev.durs[idx]
        tr.add(len(idx), host=host, device=pick(device, idx),
               direction=per_mid(mids, memcpy_mids.get, at=idx, coded=True),
               start_ps=start, end_ps=end, bytes=per_copy(facts.size),
               src_kind=Coded(per_copy(narrow_codes(facts.src, len(facts.kinds))), facts.kinds),
               dst_kind=Coded(per_copy(narrow_codes(facts.dst, len(facts.kinds))), facts.kinds),
               **{"async": Coded(per_copy(facts.asy), _ASYNC)},
               bytes_known=per_copy(facts.known),
               stream=pick(stream, idx), line=pick(now(line_name), idx),
               hlo_op=coded_stat(P, ev, idx, "hlo_op", _clean_hlo_op),
               hlo_module=coded_stat(P, ev, idx, "hlo_module"),
               program_id=coded_stat(P, ev, idx, "program_id", as_id))
        del start, end, codes, facts
    # Neither a memcpy nor a kernel: the shape checks look at these (vendors.shape_unknowns).
    # (every event, a line no rule reads: the positions counted, int32 where they fit, not
    # found: 4 bytes less per event on that line's peak)
    other = ~(is_mc | is_k)
    at_other = np.flatnonzero(other) if not other.all() else positions(ev.n)
    del other
    vendors.note_other_events(P, ev, at_other, device, line_name, side, lines_of, line_at)
    del at_other
    # (every event a kernel, a kernel-only line: the positions counted, not searched)
    idx = np.arange(ev.n) if is_k.all() else np.flatnonzero(is_k)
    if idx.size:
        # ROCm runtime copy/fill kernels are copies and memsets, not compute.
        idx, knames, kmids = vendors.split_kernels(P, ev, idx, device, stream, now(line_name),
                                                   side)
    if idx.size:
        uniq = kmids.tolist()  # the kernels' distinct metadata ids (`_kernel_stat`)
        # The names as codes (`Coded`, made objects by `Cols.rows` once this line's arrays
        # and the file's bytes are gone), the end in place of a copy of the durations: the
        # read's peak is here, on a line of a million kernels.
        if len(idx) == ev.n:  # every event (a kernel-only line): the line's own arrays,
            # the durations made ends in place (the caller drops `ev` after this; no copy of
            # a million starts and durations on the read's peak)
            start, end = ev.starts, ev.durs
            ev.durs = None
        else:
            start, end = ev.starts[idx], ev.durs[idx]
        end += start
        co.add(len(idx), host=host, device=pick(device, idx), start_ps=start, end_ps=end,
               name=knames, hlo_op=_kernel_stat(P, ev, idx, knames, "hlo_op", uniq, _clean_hlo_op),
               hlo_module=_kernel_stat(P, ev, idx, knames, "hlo_module", uniq),
               stream=pick(stream, idx), line=pick(now(line_name), idx))


# A copy's async flag as the details' facts code it (`_Facts`, `_scan.memcpy_details`)
_ASYNC = object_array([None, False, True])


class _Facts:
    """What the `memcpy_details` values say, one row per distinct value: bytes (int64),
    source and destination kinds (int8 or int32 codes into `kinds`, an object array of texts),
    async (int8 codes into `_ASYNC`), bytes known (bool). Why codes: a capture of a million
    copies, each its own details, held three object columns of a million pointers to a few
    kinds and flags (24 MB on the read's peak), and its copies' columns as many again."""

    __slots__ = ("size", "src", "dst", "asy", "known", "kinds")

    def __init__(self, size, src, dst, asy, known, kinds) -> None:
        self.size, self.src, self.dst, self.asy, self.known = size, src, dst, asy, known
        self.kinds = kinds

    @classmethod
    def of_tuples(cls, facts: list[tuple]) -> "_Facts":
        """From `_memcpy_facts` tuples (a few values the scanner did not answer)."""
        codes: dict[Any, int] = {}
        kinds: list = []

        def code(k: Any) -> int:
            if k not in codes:
                codes[k] = len(kinds)
                kinds.append(k)
            return codes[k]

        n = len(facts)
        size, known = np.zeros(n, np.int64), np.zeros(n, bool)
        src, dst, asy = np.zeros(n, np.int32), np.zeros(n, np.int32), np.zeros(n, np.int8)
        for j, (b, s, d, a, k) in enumerate(facts):
            size[j], src[j], dst[j], known[j] = b, code(s), code(d), k
            asy[j] = 0 if a is None else 2 if a else 1
        return cls(size, src, dst, asy, known, object_array(kinds))

    def put(self, at: np.ndarray, other: "_Facts") -> None:
        """Rows `at` replaced by `other`'s rows (its kinds appended to the texts; the codes
        int32 from here: the scanner's may be int8)."""
        base = len(self.kinds)
        self.kinds = np.concatenate([self.kinds, other.kinds])
        self.size[at], self.asy[at], self.known[at] = other.size, other.asy, other.known
        self.src, self.dst = self.src.astype(np.int32), self.dst.astype(np.int32)
        self.src[at] = other.src.astype(np.int32) + base
        self.dst[at] = other.dst.astype(np.int32) + base

    def joined(self, other: "_Facts") -> "_Facts":
        """`other`'s rows after these (the codes int32)."""
        base = len(self.kinds)
        return _Facts(*(np.concatenate([a, b]) for a, b in (
            (self.size, other.size), (self.src.astype(np.int32),
                                      other.src.astype(np.int32) + base),
            (self.dst.astype(np.int32), other.dst.astype(np.int32) + base),
            (self.asy, other.asy), (self.known, other.known), (self.kinds, other.kinds))))


def _details_facts(P, ev: LineEvents, idx: np.ndarray, cache: dict
                   ) -> tuple[np.ndarray, _Facts]:
    """`stat_codes(P, ev, idx, "memcpy_details")` and `_details_columns` of its values: (per
    copy `idx` a code, the facts the codes index). Where the line's details were interned by
    the scanner, the distinct values' facts are read where their bytes lie
    (`_scan.memcpy_details_at`): text in the file, and refs (CUPTI's form, on the H100/H200
    captures) in their stat names' bytes where the plane keeps those undecoded
    (`statids.LazyStatNames`); only a value it does not answer (not ASCII) becomes an
    object. A copy without the stat reads its metadata's, as `stat_codes` does. Elsewhere
    (a few refs' names, a dict already), through objects.
    Why: a capture of a million copies, each its own details, made a million `str` to parse
    them (text: 0.7 s and ~270 MiB on the read's peak; refs: 88 MiB of names)."""
    sids = P.stat_ids.get("memcpy_details")
    got = ev.interned(sids) if sids else None
    fast = getattr(wire.SCANNER, "memcpy_details_at", None)
    c = got[0][idx] if got is not None else None
    spans = getattr(P.stat_names, "spans", None)  # (refs' names undecoded: many of them)
    named = spans() if spans is not None else None
    if got is None or c is None or fast is None or not (c >= 0).any() \
            or not ((got[1]["kind"] == _K_STR).any()
                    or (named is not None and (got[1]["kind"] == _K_REF).any())):
        codes, details = stat_codes(P, ev, idx, "memcpy_details")
        return codes, _details_columns(details.tolist(), cache)
    t = got[1]
    names, pos, ns, ne = named if named is not None else (None, None, None, None)
    size, src, dst, asy, known, ok, kinds = fast(ev.buf, t["kind"], t["ival"], t["vpos"],
                                                 _K_STR, _K_REF, names, pos, ns, ne)
    facts = _Facts(size, src, dst, asy, known.astype(bool, copy=False), object_array(kinds))
    odd = np.flatnonzero(ok == 0)
    if odd.size:  # (values the bytes do not answer: as objects, as before)
        vals = _stat_objects(ev.buf, {k: t[k][odd] for k in ("kind", "ival", "vpos")},
                             P.stat_names)
        facts.put(odd, _details_columns(vals.tolist(), cache))
    # (the line keeps none of the details: read here only, their table and codes freed
    # before the copies' columns are made; a million distinct values: 21 MB)
    ev.forget(sids)
    del got, t
    missing = np.flatnonzero(c < 0)
    if missing.size:  # (the metadata's details, once per metadata id: `stat_codes`)
        inv, mv = meta_values(P, ev.mids[idx[missing]], "memcpy_details")
        c = c.astype(np.int64)
        c[missing] = len(size) + inv
        facts = facts.joined(_details_columns(mv.tolist(), cache))
    return c, facts


def _details_columns(dl: list, cache: dict) -> _Facts:
    """The facts (`_Facts`) of each distinct `memcpy_details` value `dl`: by the scanner
    (`memcpy_details`) where it answers, else by `_memcpy_facts` (of its `str` where it is
    neither text, bytes nor None: the scanner answers text only), once per value over the
    file (`cache`).

    Why columns, and no cache of what the scanner answers: a capture whose copies all
    differ in size holds 100k distinct values, and a tuple of facts each, kept for the
    whole file, was 14 MiB on the read's peak; parsing a value again costs less than the
    lookup that saved it."""
    fast = getattr(wire.SCANNER, "memcpy_details", None)
    if fast is None:
        ok = np.zeros(len(dl), np.uint8)
        facts = _Facts.of_tuples([(0, None, None, None, False)] * len(dl))
    else:
        size, src, dst, asy, known, ok, kinds = fast(dl, True)
        facts = _Facts(size, src, dst, asy, known.astype(bool, copy=False), object_array(kinds))
    odd = np.flatnonzero(ok == 0)
    if odd.size:
        got = []
        for j in odd.tolist():
            d = dl[j] if isinstance(dl[j], (str, bytes)) or dl[j] is None else str(dl[j])
            f = cache.get(d)
            if f is None:
                f = cache[d] = _memcpy_facts(d)
            got.append(f)
        facts.put(odd, _Facts.of_tuples(got))
    return facts


def _memcpy_facts(d: Any) -> tuple:
    """(bytes, source kind, destination kind, async, bytes known) of one `memcpy_details`
    value (the scanner's `memcpy_details` gives the same for plain ASCII text)."""
    det = parse_details(d)
    a = det.get("async")
    size = as_int(det.get("size"))
    if size is not None and not 0 <= size < (1 << 53):
        size = None  # no byte count a copy can have: unknown, never negative
    return (size or 0, det.get("kind_src", "unknown"), det.get("kind_dst", "unknown"),
            None if a is None else a == "1",
            # ROCm writes `kind:Unknown size:0` when it did not record the size: unknown,
            # not 0 bytes
            not ("kind" in det and not size))


def _kernel_stat(P, ev: LineEvents, idx: np.ndarray, knames: Coded, name: str, uniq: list,
                 fn=None) -> Any:
    """Stat `name` of kernels `idx` for `Cols.add`: `coded_stat(P, ev, idx, name, fn)`, and
    `_one_or_coded` of it for `hlo_module` (`fn` None), without a code per kernel where
    they are not needed. Where no kernel carries the stat, every kernel's value is its
    metadata's: `knames`' codes (one per distinct metadata id `uniq` of the kernels before
    `split_kernels`) index those values too. Where every kernel carries it and the line holds
    one value (`hlo_module`), that value. Else `coded_stat`: a million kernels' ids coded twice
    more and their codes gathered (~4-5 ms each) for what one pass over the ids tells."""
    sids = P.stat_ids.get(name)
    has = ev.has_stat(sids) if sids else np.zeros(ev.n, bool)
    has = has if len(idx) == ev.n else has[idx]
    if not has.any():
        vals = object_array([P.meta_stats(u).get(name) for u in uniq])
        if fn is not None:
            vals = object_array(apply_once(fn, vals.tolist()))
        got = Coded(knames.codes, vals)
        return got if fn is not None else _one_or_coded(got)
    if fn is None and has.all():
        _, vals = ev.codes_at(sids, P.stat_names, idx[:1])
        if len(vals) == 1 and (vals[0] is None or type(vals[0]) is str):
            return vals[0]
    got = coded_stat(P, ev, idx, name, fn)
    return got if fn is not None else _one_or_coded(got)


def _one_or_coded(c: Coded) -> Any:
    """A `Coded` column whose values are all None, or all one str, as that value (a scalar
    for `Cols.add`: a `repeated` column), else as is. Why: a kernel line whose events name
    no module reads it from each kernel's metadata, one None per distinct kernel, so the
    codes differ and `Coded.column` took a million Nones one by one (~5-10 ms)."""
    vals = c.values.tolist()
    if not vals or len(vals) > _ONE_VALUE_MAX:
        return c
    v = vals[0]
    if v is None and all(x is None for x in vals):
        return None
    if type(v) is str and all(type(x) is str and x == v for x in vals):
        return v
    return c


_ONE_VALUE_MAX = 4096  # values `_one_or_coded` compares (one per distinct kernel at most)


def _clean_hlo_op(v: Any) -> str | None:
    """`hlo_op` can be a `::`-joined stack of annotations (xprof splits it); keep the last."""
    v = as_text(v)
    if v is None:
        return None
    return v.rsplit("::", 1)[-1] if "::" in v else v


def _clean_column(values: np.ndarray) -> np.ndarray:
    """`_clean_hlo_op` over a column, once per distinct value."""
    out = map_unique(values, _clean_hlo_op)
    # map_unique reads NaN as missing (None); a NaN stat is the text "nan" here
    is_none = np.equal(values, None)  # type: ignore[call-overload]
    nan = np.flatnonzero(missing_mask(values) & ~is_none)
    if nan.size:
        out[nan] = [_clean_hlo_op(v) for v in values[nan].tolist()]
    return out
