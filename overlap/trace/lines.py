"""A capture's timeline lines: `LineBlock`, the records the compiled scanner writes for every
line of a parse at once, `LineTable`, one plane's range of them, and `_Line`, one XLine where
something reads it as one.

Why records: a capture of a million one-event lines held, per line, the scanner's tuple, five
Python ints and a `_Line` (~0.5 KiB a line: 515 MiB and 3.9 s for a 36 MB file, fuzz round
3's shape; issue 32); and a capture of many small planes paid a numpy array, and its reads,
per plane. A `LineBlock` keeps at most 56 bytes a line in int64 columns (`Records`: 4 bytes a
value in int32 where the lines are many and every value fits, `_scan.NARROW_LINES_MIN`; none
for a column where every line has one value) plus the line's name (where the
distinct names are many, their bytes, decoded when asked: `LineNames`); what reads every
line (the `lines` table, event counts, timestamps, the GPU rules' small lines, the check of
lines no rule decoded) reads the block's columns, once per block where it can, and a
`_Line` is made only for a line read on its own (`LineBlock.line`: a view whose `decoded`
flag is the block's). Lines upb decoded (no scanner) are a block too, over their
`_Line`s (`LineBlock.of_lines`).
"""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np

from overlap.trace.groups import MANY_PLANES

# `Records`' columns (the scanner's `_LREC` layout)
ID, DISPLAY_ID, TIMESTAMP_NS, DURATION_PS, PAY_S, PAY_E, EVENTS = range(7)


class Records:
    """The records of `n` lines by column (`ID` .. `EVENTS`): each an array of the lines'
    values (int64, or int32 from the scanner where the lines are many and every value fits)
    or, where every line has one value, that value repeated: a read-only int64 view of one
    element (`np.broadcast_to`), no memory a line. Indexed as the (n, 7) array it stands for
    where a column is named: `rec[rows, c]` is column c's rows (a view where `rows` is a
    slice); `rec[i]` (a row, or rows) gives int64 records. Why by column: a million one-event
    lines have one display id, timestamp, duration and event count, 16 of their 28 MB of
    int32 records on the read's peak."""

    __slots__ = ("n", "cols")

    def __init__(self, n: int, cols: list) -> None:
        self.n = n
        self.cols: list[np.ndarray] = [
            c if isinstance(c, np.ndarray) else np.broadcast_to(np.int64(c), (n,))
            for c in cols]

    @classmethod
    def of_array(cls, rec: np.ndarray) -> Records:
        """The records of an (n, 7) array (its columns: views)."""
        return cls(len(rec), [rec[:, c] for c in range(rec.shape[1])])

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, key: Any) -> np.ndarray:
        if isinstance(key, tuple):
            rows, c = key
            return self.cols[c][rows]
        return np.stack([c[key].astype(np.int64) for c in self.cols], axis=-1)

    def row(self, i: int) -> list[int]:
        """Line i's record, as ints."""
        return [int(c[i]) for c in self.cols]


class _Line:
    """One XLine: its header fields, and where its payload lies in the file's buffer (`buf`,
    `pay_s`/`pay_e`: one entry per line, several for a `merge_lines` segment) or, decoded by
    upb, its `events`."""

    __slots__ = ("id", "display_id", "name", "display_name", "timestamp_ns", "duration_ps",
                 "buf", "_s", "_e", "events", "n_events", "decoded", "parts")
    id: int
    display_id: int
    name: str
    display_name: str
    timestamp_ns: int
    duration_ps: int
    buf: Any  # np.ndarray of the file's bytes, or None when upb decoded the line
    # the payload's start and end: an int each for a scanned line, made an array when read;
    # arrays for a segment; None for upb's
    _s: Any
    _e: Any
    events: Any
    n_events: int
    parts: list
    decoded: bool  # its events were checked (by `LineEvents` or `check_lines`)

    pay_s = property(lambda self: _offsets(self._s),
                     lambda self, value: setattr(self, "_s", value))
    pay_e = property(lambda self: _offsets(self._e),
                     lambda self, value: setattr(self, "_e", value))


class _RowLine(_Line):
    """A `LineBlock` row read as a `_Line`: its `decoded` flag is the block's, so that a line
    decoded through a view is not checked again (`check_lines`), nor its strings counted."""

    __slots__ = ("_t", "_r")
    _t: LineBlock
    _r: int

    decoded = property(
        lambda self: bool(self._t.decoded[self._r]),
        lambda self, value: self._t.mark(self._r, value))


class _Rows:
    """Rows of a `LineBlock` in a `merge_rows` segment (`parts`): marked decoded with it."""

    __slots__ = ("block", "rows")

    def __init__(self, block: LineBlock, rows: np.ndarray) -> None:
        self.block, self.rows = block, rows

    decoded = property(lambda self: bool(self.block.decoded[self.rows].all()),
                       lambda self, value: self.block.mark(self.rows, value))


# `NameCodes.marks` bits
STREAM, PAREN = 1, 2


class NameCodes:
    """The line names of one parse as the scanner's split coded them (`_scan._LineRecs`):
    per line `codes` (int32: equal names, equal codes; codes in order of first appearance),
    per code its `first` line (int32; None where `names` is a `LineNames`) and its `marks`
    (uint8: bit `STREAM`, the name starts with one of `names.STREAM_LINE_PREFIXES`; bit
    `PAREN`, it holds a `(`), and the lines' `names` (a list, or `LineNames` over the same
    codes). What the GPU rules keep of a block to group and test lines by name
    (`vendors.GpuSide`): not the block, which holds the file's bytes."""

    __slots__ = ("codes", "first", "marks", "names")

    def __init__(self, codes: np.ndarray, first: np.ndarray | None, marks: np.ndarray,
                 names: list | LineNames) -> None:
        self.codes, self.first, self.marks, self.names = codes, first, marks, names

    def __len__(self) -> int:
        return len(self.marks)

    def texts(self, codes: np.ndarray) -> list[str]:
        """The names of `codes`."""
        if isinstance(self.names, LineNames):
            return self.names.texts(codes)
        assert self.first is not None
        return [self.names[r] for r in self.first[codes].tolist()]

    def text_arrays(self, codes: list[np.ndarray]) -> list[np.ndarray]:
        """The names of each array of `codes` (one per event: many repeat), as object
        arrays."""
        from overlap.trace.values import object_array

        if not isinstance(self.names, LineNames):
            assert self.first is not None
            names, first = object_array(self.names), self.first
            return [names[first[c]] for c in codes]
        out = []
        for c in codes:
            u, inv = np.unique(c, return_inverse=True)
            out.append(object_array(self.names.texts(u))[inv])
        return out


class LineNames:
    """The line names of a parse whose `LAZY_NAMES_MIN` (`_scan`) or more distinct names the
    split kept as bytes: per line its name's code (`codes`, int32), per code its bytes in
    `blob` (uint8) from `off[c]` to `off[c + 1]` (int32 where the bytes allow, else int64).
    A name is decoded each time it is asked for (no object kept). Read as the list of names
    it stands for: a name per line, `[i]`, a slice, iteration. Why: a million
    one-event lines held a million `str` and their list (76 MiB on the read's peak) that
    nothing but the `lines` table reads, and a report never reads that table. Why a copy of
    the bytes, not spans into the file's: the file's bytes go with the read."""

    __slots__ = ("codes", "blob", "off")

    def __init__(self, codes: np.ndarray, blob: np.ndarray, off: np.ndarray) -> None:
        # (`off` int32 where the bytes allow, as the split gives it: 4 bytes a name less)
        self.codes, self.blob, self.off = codes, blob, off

    def __len__(self) -> int:
        return len(self.codes)

    def text(self, c: int) -> str:
        """Code c's name."""
        return bytes(self.blob[self.off[c]:self.off[c + 1]]).decode("utf-8")

    def texts(self, codes: np.ndarray) -> list[str]:
        """The names of `codes` (an int array), in order."""
        from overlap.trace import _scan  # (made by the scanner: it is built)

        c = np.asarray(codes, np.int64)
        return _scan.span_texts(self.blob, wide(self.off[c]), wide(self.off[c + 1]))

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return self.texts(self.codes[i])
        return self.text(int(self.codes[i]))

    def __iter__(self) -> Iterator[str]:
        return iter(self.texts(self.codes))


class LineBlock:
    """The lines of one parse (every plane of a file, or of a chunk of it), in file order:
    `rec` (`Records`: id, display_id, timestamp_ns, duration_ps, payload start, payload
    end, events; a column int32 from a split of many lines whose values all fit, read
    through `wide` where computed with), `names`, `displays` (str lists, or `names` a
    `LineNames`: the split's (bytes, offsets) of many distinct names; `displays` None: every
    one empty, as most
    producers write them, not a list of a million ""), `decoded` (bool per line: its events were
    checked) and the file's buffer `buf`. Lines upb decoded are `objs` (their `_Line`s, every
    one checked; `rec`'s payload columns -1, `buf` None).

    `coded`: the names as the scanner's split coded them (`NameCodes`, from `codes`: its
    codes, first lines and marks), or None (upb decoded the lines, or a name has invalid
    UTF-8)."""

    def __init__(self, rec: Records, names: list | tuple, displays: list | None, buf: Any,
                 objs: list | None = None,
                 codes: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> None:
        self.names: list | LineNames = names if not isinstance(names, tuple) \
            else LineNames(codes[0], *names)  # type: ignore[index]  # (its bytes: with codes)
        self.rec, self.displays, self.buf, self.objs = rec, displays, buf, objs
        self.coded = NameCodes(*codes, self.names) if codes is not None else None
        self.cols = (rec, self.names)  # (what outlives the buffer: `reader._rows_of`)
        # (zeros: pages made when first written, not at the read's peak; every line decoded:
        # one read-only True, `_all`)
        self.decoded = np.zeros(len(rec), bool) if objs is None else _all(len(rec))
        self._ns: list | None = None
        self._cum: np.ndarray | None = None

    @classmethod
    def of_lines(cls, objs: list[_Line]) -> LineBlock:
        rec = np.array([(ln.id, ln.display_id, ln.timestamp_ns, ln.duration_ps, -1, -1,
                         ln.n_events) for ln in objs], np.int64).reshape(-1, 7)
        return cls(Records.of_array(rec), [ln.name for ln in objs],
                   [ln.display_name for ln in objs], None, objs)

    def mark(self, rows: Any, value: bool) -> None:
        """`decoded[rows] = value` (nothing where every line is decoded already)."""
        if self.decoded.flags.writeable:
            self.decoded[rows] = value
        elif not value:
            raise ValueError("a decoded line marked undecoded")

    def events(self) -> list[int]:
        """Each line's event count, as ints (made once)."""
        if self._ns is None:
            self._ns = self.rec[:, EVENTS].tolist()
        return self._ns

    def events_in(self, a: int, b: int) -> int:
        """The events of lines [a, b) (a running sum made once: no array pass per plane). A
        range of at least an eighth of the block is summed on its own: at most eight such
        passes, where the running sum of a plane of a million lines is 8 MB on the read's
        peak for the one plane that asks."""
        if self._cum is None and 8 * (b - a) >= len(self.rec):
            return int(self.rec[a:b, EVENTS].sum())
        cum = self.running()
        return int(cum[b] - cum[a])

    def running(self) -> np.ndarray:
        """The running sum of the lines' events (0 first), made once."""
        if self._cum is None:
            self._cum = np.concatenate([[0], np.cumsum(self.rec[:, EVENTS])])
        return self._cum

    def line(self, i: int) -> _Line:
        if self.objs is not None:
            return self.objs[i]
        ln = _RowLine()
        (ln.id, ln.display_id, ln.timestamp_ns, ln.duration_ps, ln._s, ln._e,
         ln.n_events) = self.rec.row(i)
        ln.name = self.names[i]
        ln.display_name = self.displays[i] if self.displays is not None else ""
        ln.buf, ln.events = self.buf, None
        ln._t, ln._r = self, i
        return ln

    def check(self, runs: list[tuple[int, int]], scanner: Any) -> int:
        """Check the events of the lines of `runs` (row ranges [a, b), in order) not yet
        decoded, as upb would (`scanner`'s `check_events`; none where upb decoded them);
        they are then decoded. Returns the strings with invalid UTF-8 among them. (Ranges,
        not rows: a million lines, all decoded by the rules, were 25 MB of row indexes and
        their gathers on the read's peak, to find none: ranges whose every line is decoded
        make nothing; and one range whose every line is checked is read in place, where its
        rows and two gathered payload bounds are 8 MB each a million lines.)"""
        runs = [(a, b) for a, b in runs if b > a and not self.decoded[a:b].all()]
        if not runs:  # (every line decoded: no mask of a million lines made to find none)
            return 0
        if len(runs) == 1:
            a, b = runs[0]
            if not self.decoded[a:b].any() and self.rec[a:b, EVENTS].min() > 0:
                bad = scanner.check_events(self.buf, *_same_width(
                    self.rec[a:b, PAY_S], self.rec[a:b, PAY_E])) if scanner is not None else 0
                if b - a == len(self.rec):  # (the whole block: no page of flags written)
                    self.decoded = _all(b - a)
                else:
                    self.mark(slice(a, b), True)
                return bad
        rows = np.concatenate([np.flatnonzero(~self.decoded[a:b] & (self.rec[a:b, EVENTS] > 0))
                               + a for a, b in runs])
        bad = 0
        if rows.size and scanner is not None:
            bad = scanner.check_events(self.buf, wide(self.rec[rows, PAY_S]),
                                       wide(self.rec[rows, PAY_E]))
        self.mark(rows, True)
        return bad


class LineTable:
    """One plane's lines: rows [a, b) of a `LineBlock`."""

    __slots__ = ("block", "a", "b")

    def __init__(self, block: LineBlock, a: int, b: int) -> None:
        self.block, self.a, self.b = block, a, b

    def __len__(self) -> int:
        return self.b - self.a

    n_events = property(lambda self: self.block.rec[self.a:self.b, EVENTS])

    def events(self) -> int:
        return self.block.events_in(self.a, self.b)

    def line(self, i: int) -> _Line:
        return self.block.line(self.a + i)

    def __getitem__(self, i: int) -> _Line:
        if not -len(self) <= i < len(self):
            raise IndexError("line index out of range")
        return self.line(i % len(self))

    def __iter__(self) -> Iterator[_Line]:
        return (self.block.line(i) for i in range(self.a, self.b))


def events_of(tables: list[LineTable]) -> list[int]:
    """`LineTable.events` of each table: where there are many and they share a block, from
    its running sum at once (100k small planes: no call per plane)."""
    if len(tables) < MANY_PLANES or any(t.block is not tables[0].block for t in tables):
        return [t.events() for t in tables]
    cum = tables[0].block.running()
    a = np.fromiter([t.a for t in tables], np.int64, len(tables))
    b = np.fromiter([t.b for t in tables], np.int64, len(tables))
    return (cum[b] - cum[a]).tolist()


def _all(n: int) -> np.ndarray:
    """n lines' `decoded` flags where every one is set: one read-only True."""
    return np.broadcast_to(np.True_, (n,))


def _same_width(s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two columns' ranges as contiguous arrays of one dtype (int32 where both are: no copy
    of a block's slices), for the scanner's readers of either width."""
    if s.dtype != np.int32 or e.dtype != np.int32:
        s, e = wide(s), wide(e)
    return np.ascontiguousarray(s), np.ascontiguousarray(e)


def wide(a: np.ndarray) -> np.ndarray:
    """Records (or a column of them) as int64: a block's may be int32 (`_scan.NARROW_LINES_MIN`),
    and what reads them computes in int64 (timestamps times 1000, the scanner's offsets)."""
    return a.astype(np.int64, copy=False)


def upb_line(msg) -> _Line:
    """A `_Line` of an XLine message upb decoded (its events with it, every byte checked)."""
    ln = _Line()
    ln.id, ln.display_id, ln.name, ln.display_name = (msg.id, msg.display_id, msg.name,
                                                      msg.display_name)
    ln.timestamp_ns, ln.duration_ps = msg.timestamp_ns, msg.duration_ps
    ln.buf = ln.pay_s = ln.pay_e = None
    ln.events = msg.events
    ln.n_events = len(msg.events)
    ln.decoded = True
    return ln


def _offsets(v: Any) -> Any:
    """A line's payload offset(s) as an array (`_Line._s`/`_e`: an int, an array or None)."""
    return np.array([v], np.int64) if type(v) is int else v


def _payloads(lines: list[_Line]) -> tuple[np.ndarray, np.ndarray]:
    """The payload starts and ends of scanned `lines`, in order, as two arrays."""
    starts, ends = [ln._s for ln in lines], [ln._e for ln in lines]
    if all(type(x) is int for x in starts) and all(type(x) is int for x in ends):
        return np.array(starts, np.int64), np.array(ends, np.int64)
    return (np.concatenate([ln.pay_s for ln in lines]),
            np.concatenate([ln.pay_e for ln in lines]))


def merge_lines(lines: list) -> Any:
    """One segment of several lines' events (of one file), in the given order, for
    `LineEvents`."""
    seg = _Line()
    seg.buf = lines[0].buf
    seg.n_events = sum(ln.n_events for ln in lines)
    seg.decoded = False
    seg.parts = lines  # marked decoded with the segment
    if lines[0].events is not None:  # decoded by upb
        seg.events = [e for ln in lines for e in ln.events]
        seg.pay_s = seg.pay_e = None
    else:
        seg.events = None
        seg.pay_s, seg.pay_e = _payloads(lines)
    return seg


def pieces(line: _Line, every: int, scanner: Any) -> Iterator[_Line]:
    """A scanned line of more than `every` events as consecutive pieces of `every` events
    each, the last the rest (`_scan.event_cuts`: whole fields each, the events numbered as
    one decode of the line numbers them); else the line itself, once (upb's lines, bytes the
    cut refuses: decoded whole, and refused, as before). A piece is a `_Line` of its payload
    alone whose `decoded` flag starts as the line's (its strings counted once, as the
    line's would be); the caller marks the line decoded after the last piece."""
    got = None
    if line.events is None and scanner is not None and line.n_events > every \
            and type(line._s) is int and type(line._e) is int:
        got = scanner.event_cuts(line.buf, line._s, line._e, every)
    if got is None or int(got[1].sum()) != line.n_events:
        yield line
        return
    cuts, counts = got[0].tolist(), got[1].tolist()
    for a, b, k in zip(cuts, cuts[1:], counts):
        piece = _Line()
        piece.buf, piece.events, piece.parts = line.buf, None, []
        piece._s, piece._e, piece.n_events = a, b, k
        piece.decoded = line.decoded
        yield piece


def adjacent_runs(keys: list, a: list[int], b: list[int]) -> list[list]:
    """Row ranges [a[i], b[i]) of key `keys[i]`, in order, those of one key (the same
    object) that continue each other merged: [key, first, end] per run (the planes of a block
    lie one after the other: one range for all of them, not one per plane). The ranges are
    compared with numpy (100k small planes: a Python step each was ~30 ms)."""
    n = len(keys)
    if n < 2:  # (one range is its own run: no arrays for it, ~14 us a TPU chip's lines)
        return [[keys[0], a[0], b[0]]] if n else []
    ids = np.fromiter(map(id, keys), np.uint64, n)
    lo, hi = np.asarray(a, np.int64), np.asarray(b, np.int64)
    cut = (np.flatnonzero((ids[1:] != ids[:-1]) | (lo[1:] != hi[:-1])) + 1).tolist()
    return [[keys[i], a[i], b[j - 1]] for i, j in zip([0, *cut], [*cut, n])]


def merge_rows(block: LineBlock, rows: np.ndarray) -> Any:
    """`merge_lines` of rows `rows` of `block`, in that order, with no `_Line` per row
    (scanned lines). (The columns it reads gathered one by one: the rows' whole records as
    int64 were 3.5 MB a segment of 64k one-event lines, for three columns.)"""
    if block.objs is not None:
        return merge_lines([block.objs[r] for r in rows.tolist()])
    seg = _Line()
    seg.buf = block.buf
    seg.decoded = False
    seg.parts = [_Rows(block, rows)]
    seg.events = None
    seg.n_events = int(block.rec[rows, EVENTS].sum(dtype=np.int64))
    seg.pay_s, seg.pay_e = wide(block.rec[rows, PAY_S]), wide(block.rec[rows, PAY_E])
    return seg


class RowNames:
    """The names of rows `rows` of a block, as the list they stand for (`[i]`, `len`), each
    decoded when asked where the block keeps them as bytes (`LineNames`); `take(at)`: the
    names of rows `rows[at]` as an object array. Why: a segment of 64k one-event lines
    decoded every name (4.4 MiB on the read's peak, 20 ms a million lines) that only the rows
    of copies and kernels read, and a line of events no rule reads gives none."""

    __slots__ = ("names", "rows")

    def __init__(self, names: Any, rows: np.ndarray) -> None:
        self.names, self.rows = names, rows

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> str:
        return self.names[int(self.rows[i])]

    def take(self, at: np.ndarray) -> np.ndarray:
        r = self.rows[at]
        got = self.names.texts(self.names.codes[r]) if isinstance(self.names, LineNames) \
            else [self.names[j] for j in r.tolist()]
        return np.fromiter(got, object, len(got))
