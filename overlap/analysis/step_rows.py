"""The per-step rows of the analysis (`steps` and `step_summary` of the result).

The metrics are defined in `overlap.analysis.overlap` (steps, `exposed_wall_ps`,
`exposed_frac`) and `overlap.analysis.causes` (`exposure_causes`); this module computes them
per step window. A capture has one row per annotated step and host: thousands on a 1M-event
capture, 470k on a pod. So every column is computed over all of a host's steps with numpy and
turned into Python values once per column; the only Python work per step is making its dict.

The rows come as a `StepRows`: a plain list of the dicts for every consumer (text, HTML,
dashboard, compare, JUnit, the library), which also keeps the columns they were made from,
so the JSON writer (`overlap.report.text`) writes the rows from those instead of turning
thousands of dicts back into columns (the many-ops result's JSON, 3,000 step rows: 4.6-4.9 ->
1.8-1.9 ms).
"""

from __future__ import annotations

from itertools import chain
from operator import attrgetter, is_, itemgetter
from typing import Any

import numpy as np

from overlap.analysis import causes as exposure
from overlap.analysis.grouping import Columns, codes_equal, key_codes
from overlap.arrays import EXACT_FLOAT, bin_sums, dict_rows, factorize

DIRECTIONS = exposure.DIRECTIONS  # the same two as overlap.analysis.overlap.DIRECTIONS



def _row(host, step, name, start_ps, end_ps, duration_ps, transfers, nbytes, span_ps,
         d2h_transfers, h2d_transfers, d2h_bytes, h2d_bytes, hidden_ps, exposed_ps,
         overlap_ratio, exposed_wall_ps, exposed_frac, worst_device, exposure_causes):
    """One step row; its keys' order is the JSON's. A dict display, which makes the dict in
    one step (dict(zip(keys, values)) per row took a third longer)."""
    return {"host": host, "step": step, "name": name, "start_ps": start_ps, "end_ps": end_ps,
            "duration_ps": duration_ps, "transfers": transfers, "bytes": nbytes,
            "span_ps": span_ps, "d2h_transfers": d2h_transfers, "h2d_transfers": h2d_transfers,
            "d2h_bytes": d2h_bytes, "h2d_bytes": h2d_bytes, "hidden_ps": hidden_ps,
            "exposed_ps": exposed_ps, "overlap_ratio": overlap_ratio,
            "exposed_wall_ps": exposed_wall_ps, "exposed_frac": exposed_frac,
            "worst_device": worst_device, "exposure_causes": exposure_causes}


# The keys of a step row, in order (per direction: `d2h_*`, `h2d_*`, DIRECTIONS in order).
STEP_KEYS = tuple(_row(*[None] * 20))
assert STEP_KEYS[9:13] == tuple(f"{d.lower()}_{w}" for w in ("transfers", "bytes")
                                for d in DIRECTIONS)

def step_rows(trace, table: Columns, coverages) -> tuple[StepRows, int]:
    """Per-step rows of every host in `trace` (hosts in order, each host's steps by start),
    and how many transfers started in no step."""
    steps = trace.columns("steps")
    blocks: list[StepBlock] = []
    t_host = np.asarray(table["host"], dtype=object)
    assigned = np.zeros(len(t_host), bool)
    t_start = np.asarray(table["start_ps"], dtype=np.int64)
    # One group per host, hosts in order; steps without a host are in none (as
    # `groupby("host", sort=True)` drops missing keys).
    host_code, step_hosts = factorize(np.asarray(steps["host"], dtype=object), sort=True)
    st_start = np.asarray(steps["start_ps"], dtype=np.int64)
    # the transfers' hosts and directions numbered once (a reader's host column is one run,
    # its directions a few shared objects: no comparison of every row's str, per host and
    # per direction); a row is a host's or a direction's where its value equals it
    t_hcode, t_hosts = key_codes(t_host, sort=False)
    t_dcode, t_dirs = key_codes(np.asarray(table["direction"], dtype=object), sort=False)
    for g, host in enumerate(step_hosts.tolist()):  # one iteration per host
        sel = np.flatnonzero(host_code == g)
        sel = sel[np.argsort(st_start[sel], kind="stable")]  # in start order, ties as read
        s0 = st_start[sel]
        s1 = np.maximum(np.asarray(steps["end_ps"], dtype=np.int64)[sel], s0)
        n = len(sel)
        # the host's transfers (None: every row, in order; a host file's host is every
        # copy's: no index of the whole table, a copy-sized int64, on the step rows' peak)
        hit = codes_equal(t_hcode, t_hosts, host)
        ti = None if hit.all() else np.flatnonzero(hit)
        del hit
        tt = t_start if ti is None else t_start[ti]
        idx = latest_start(s0, tt)  # latest step starting <= t
        # ... and t before that step's end (a host has a step: index -1's test is discarded)
        ok = (idx >= 0) & (tt < s1[np.maximum(idx, 0)])
        del tt
        if not ok.all():  # (every transfer in a step: no copies of the two columns)
            ti = np.flatnonzero(ok) if ti is None else ti[ok]
            idx = idx[ok]
        del ok
        if ti is None:
            assigned[:] = True
        else:
            assigned[ti] = True

        def per_step(values: np.ndarray, _idx=idx, _n=n) -> np.ndarray:
            return bin_sums(_idx, np.asarray(values, dtype=np.int64), _n)

        def col(name: str, _ti=ti) -> np.ndarray:
            # every transfer of the table in this host's steps (one host file): the column
            # itself, not a gather of each of its ten columns
            v = np.asarray(table[name], dtype=np.int64)
            return v if _ti is None else v[_ti]

        t_bytes = col("bytes")
        # per direction (the transfer gates count copies per step): both in one pass
        counts, nbytes, dir_counts, dir_bytes = direction_sums(
            idx, t_dcode if ti is None else t_dcode[ti], t_dirs, t_bytes, n)
        del t_bytes
        span = per_step(col("span_ps"))
        hidden = per_step(col("hidden_ps"))
        causes = [per_step(col(k)) for k in exposure.CAUSE_COLUMNS]
        del per_step, col, idx, ti  # (the transfers' index lets go before the rows are made)
        wall = np.zeros(n, np.int64)
        worst = np.full(n, None, dtype=object)
        for (h, dev), (_, exposed_cov) in sorted(coverages.items()):  # per device
            if h != host:
                continue
            w = exposed_cov.covered(s0, s1)
            better = w > wall
            worst[better] = dev
            wall = np.maximum(wall, w)
        dur = s1 - s0
        with np.errstate(divide="ignore", invalid="ignore"):
            frac = np.where(dur > 0, wall / np.where(dur > 0, dur, 1), np.nan)
        # One row per step, from columns turned into Python values once (not per cell)
        step = np.asarray(steps["step"])[sel]
        cols = [_One(host), step if step.dtype.kind == "i" else
                [int(x) for x in step.tolist()],
                _objects(np.asarray(steps["name"], dtype=object)[sel].tolist()),
                s0, s1, dur, counts, nbytes, span, *[dir_counts[d] for d in DIRECTIONS],
                *[dir_bytes[d] for d in DIRECTIONS], hidden, span - hidden,
                _floats(ratios(hidden, span)), wall, _fractions(frac),
                _objects(worst.tolist()), exposure.cause_dicts(causes)]
        if n:
            blocks.append(StepBlock(host, n, *_split(cols)))
    return StepRows(chain.from_iterable(b.rows for b in blocks), blocks), \
        int((~assigned).sum())


def latest_start(s0: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Per time of `t`, the last index of the ascending `s0` whose value is <= it (-1: none):
    `searchsorted(s0, t, side="right") - 1`. Where `t` ascends too (a reader's transfers, in
    start order), from where each step's start falls among them: a search per step, not per
    transfer (many-ops: 3,000 steps, 36k transfers, 0.33 -> ~0.1 ms)."""
    if len(t) < 2 * len(s0) or not (t[1:] >= t[:-1]).all():
        return np.searchsorted(s0, t, side="right") - 1
    # transfer i is at or after step j's start where i >= (transfers before that start)
    first = np.searchsorted(t, s0, side="left")
    return np.cumsum(np.bincount(first, minlength=len(t) + 1)[:len(t)]) - 1


def direction_sums(idx: np.ndarray, t_dir: np.ndarray, dirs: np.ndarray,
                   t_bytes: np.ndarray, n: int
                   ) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray],
                              dict[str, np.ndarray]]:
    """Per step (`idx`: each transfer's step, 0..n-1): transfers and bytes of all, and of each
    of `DIRECTIONS` (transfers whose direction, numbered by `key_codes` as `t_dir`, `dirs`,
    equals it). One count and one sum over (step, direction) pairs, not a mask, gather and
    two sums per direction (~0.6 ms of many-ops' 36k transfers); all transfers' sums are
    their directions' where every transfer has one of them (else sums of their own)."""
    k = len(DIRECTIONS)
    # a direction code -> its place in DIRECTIONS, k for another value or none (code -1 last)
    # (int8 places, the pair made in its own array: one transfer-sized int64 temporary, not
    # three, on the step rows' peak: 8 MiB -> 4 of 256k copies)
    place = np.array([next((j for j, d in enumerate(DIRECTIONS) if u == d), k)
                      for u in dirs.tolist()] + [k], np.int8)
    pair = idx * (k + 1)
    pair += place[t_dir]
    by_pair = np.bincount(pair, minlength=n * (k + 1)).reshape(n, k + 1)
    bytes_pair = bin_sums(pair, t_bytes, n * (k + 1)).reshape(n, k + 1)
    counts = by_pair.sum(axis=1)
    nbytes = bytes_pair.sum(axis=1)
    return (counts, nbytes, {d: by_pair[:, j] for j, d in enumerate(DIRECTIONS)},
            {d: bytes_pair[:, j] for j, d in enumerate(DIRECTIONS)})


class StepBlock:
    """One host's step rows (`rows`, its dicts) and the columns they were made from: `one`,
    the columns of one value in every row (key -> that value, immutable), and `vary`, the
    others (key -> a list of `n` Python values); keys in `STEP_KEYS` order between them."""

    __slots__ = ("host", "n", "one", "vary", "rows")

    def __init__(self, host: Any, n: int, one: dict[str, Any],
                 vary: list[tuple[str, list]]) -> None:
        self.host, self.n, self.one, self.vary = host, n, one, dict(vary)
        self.rows = _rows_of(n, one, vary)


class StepRows(list):
    """Step rows: a list of their dicts, which is what every reader of a result reads, that
    also keeps its hosts' `StepBlock`s for the JSON writer (`overlap.report.text`).

    The blocks hold while the list holds exactly their dicts, in order (`intact_blocks`
    checks by identity: a list sorted, cut, appended to or replaced is written from its
    dicts, as any list). A step row is an answer: nothing changes one in place (no reader
    does; one that must copies it). Copies and pickles are plain lists."""

    __slots__ = ("blocks",)

    def __init__(self, rows: Any = (), blocks: list[StepBlock] | None = None) -> None:
        super().__init__(rows)
        self.blocks = blocks or []

    def intact_blocks(self) -> list[StepBlock] | None:
        """The blocks, where this list still holds their dicts in order; else None."""
        b = self.blocks
        if len(self) != sum(x.n for x in b) or not all(
                map(is_, self, chain.from_iterable(x.rows for x in b))):
            return None
        # a key added to or taken from a row (a caller annotating its steps) shows in its
        # size (~0.05 ms for 3,000 rows); a value replaced in place does not: rows are answers
        for x in b:
            if x.n and set(map(len, x.rows)) != {len(x.one) + len(x.vary)}:
                return None
        return b

    def __reduce_ex__(self, protocol: Any) -> Any:  # copy, deepcopy, pickle: a plain list
        return list, (list(self),)


def joined(parts: list[list[dict]]) -> list[dict]:
    """The step rows of several parts as one list, sorted by host (stable: each host's
    steps keep their order), as `reduce_parts` shows them (`joined_blocks`)."""
    return joined_blocks(parts)[0]


def joined_blocks(parts: list[list[dict]]) -> tuple[list[dict], list[StepBlock] | None]:
    """`joined`'s rows, and their intact blocks (None: a plain list). Where every part is an
    intact `StepRows` (each block one host's steps), the blocks sorted by host the same
    way, so the result keeps its columns; one part in host order is that part's list."""
    blocks = [x.intact_blocks() if isinstance(x, StepRows) else None for x in parts]
    kept = [b for b in blocks if b is not None]
    if parts and len(kept) == len(parts):
        ordered = sorted(chain.from_iterable(kept), key=attrgetter("host"))
        if len(parts) == 1 and all(map(is_, ordered, kept[0])):
            return parts[0], kept[0]
        return StepRows(chain.from_iterable(b.rows for b in ordered), ordered), ordered
    rows = list(chain.from_iterable(parts))
    rows.sort(key=itemgetter("host"))
    return rows, None


class _One:
    """A step column of one value in every row (`_rows_of` writes it into the rows' template).
    Only immutable values: rows never share a mutable one."""

    __slots__ = ("v",)

    def __init__(self, v: Any) -> None:
        self.v = v


def _objects(col: list) -> list | _One:
    """A column of names (str or None): `_One` where every row holds an equal value of one
    type (equal strs are the same text)."""
    v = col[0] if col else None
    if col and col.count(v) == len(col) and (v is None or type(v) is str) and \
            set(map(type, col)) == {type(v)}:
        return _One(v)
    return col


def _floats(col: list) -> list | _One:
    """A column of floats or None: `_One` where all are None, or all equal one float that is
    not 0 (equal nonzero floats are the same number; 0.0 and -0.0 are equal, not the same)."""
    v = col[0] if col else None
    if col and col.count(v) == len(col) and (v is None or (type(v) is float and v != 0)):
        return _One(v)
    return col


def _fractions(frac: np.ndarray) -> list | _One:
    """A float64 column as Python floats, NaN as None (`_floats` of it). Where every value
    is one number of one sign (a step's `exposed_frac` of 0.0 in every step: nothing
    exposed), `_One` of it: the rows hold one float object, as equal objects print alike
    (-0.0 and 0.0 kept apart by their sign bit)."""
    if len(frac) and not np.isnan(frac[0]) and (frac == frac[0]).all() and \
            (np.signbit(frac) == np.signbit(frac[0])).all():
        return _One(float(frac[0]))
    col = frac.astype(object)
    col[np.isnan(frac)] = None
    return _floats(col.tolist())


_TEMPLATE_MAX = 10  # varying columns up to which rows are copies of a template, filled in


def _split(cols: list) -> tuple[dict[str, Any], list[tuple[str, list]]]:
    """`cols` (in `STEP_KEYS` order: int64 arrays, lists of Python values or `_One`) as the
    columns of one value (key -> value: `_One`s and arrays of one int) and the others (key,
    list of Python values), in `STEP_KEYS` order."""
    one: dict[str, Any] = {}
    vary: list[tuple[str, Any]] = []
    for key, c in zip(STEP_KEYS, cols):
        if isinstance(c, np.ndarray):
            if len(c) > 1 and not (c != c[0]).any():
                c = _One(int(c[0]))
            else:
                c = c.tolist()
        if isinstance(c, _One):
            one[key] = c.v
        else:
            vary.append((key, c))
    return one, vary


def _rows_of(n: int, one: dict[str, Any], vary: list[tuple[str, list]]) -> list[dict]:
    """`n` step rows of the columns `_split` gives. Where most columns hold one value (a
    capture's steps alike: their copies, bytes, device, often their times), each row is a
    copy of one template dict holding those, its own values set a column at a time
    (`arrays.dict_rows`: a 20-key dict display costs ~1 us a row, a copy ~0.15, a value set
    ~0.06); else one `_row` per step. The same dicts, keys in the same order."""
    if len(vary) > _TEMPLATE_MAX:
        by = dict(vary)
        return list(map(_row, *[by[k] if k in by else [one[k]] * n for k in STEP_KEYS]))
    return dict_rows(_row(*[one.get(k) for k in STEP_KEYS]), n, vary)


def ratios(num: np.ndarray, den: np.ndarray) -> list[float | None]:
    """`num / den` per row as Python divides ints (None where `den <= 0`). Both under 2**53,
    float64's division is that quotient (exact operands, one correctly rounded division);
    rows with larger operands are divided by Python."""
    num = np.asarray(num, np.int64)
    den = np.asarray(den, np.int64)
    pos = den > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        q = (num / np.where(pos, den, 1)).astype(object)
    q[~pos] = None
    big = np.flatnonzero(pos & ((np.abs(num) >= EXACT_FLOAT) | (den >= EXACT_FLOAT)))
    for i in big.tolist():  # beyond float64's integers (none on any capture measured)
        q[i] = int(num[i]) / int(den[i])
    return q.tolist()


def step_summary(rows: list[dict], unassigned: int,
                 blocks: list[StepBlock] | None = None) -> dict[str, Any]:
    """Aggregates over step rows (of one host or of many; pure sums and maxima). `blocks`:
    the intact blocks of `rows`, where the caller has just found them (`joined_blocks`);
    else they are looked for here."""
    if blocks is None and isinstance(rows, StepRows):
        blocks = rows.intact_blocks()
    if blocks is not None:
        got = _block_summary(blocks, len(rows))
        if got is not None:
            walls, total, fracs, worst, durations = got
            return _summary(rows, unassigned, walls, total, fracs, worst, durations)
    walls, fracs, starts, durations = _columns(
        rows, ("exposed_wall_ps", "exposed_frac", "start_ps", "duration_ps"))
    fracs = [f for f in fracs if f is not None]
    return _summary(rows, unassigned, max(walls) if walls else None, sum(walls),
                    max(fracs) if fracs else None, _worst(walls, starts) if rows else None,
                    sum(durations))


def _summary(rows: list[dict], unassigned: int, top_wall: Any, walls: int, top_frac: Any,
             worst: int | None, durations: int) -> dict[str, Any]:
    """`step_summary` of the rows' largest and summed exposed wall times, largest exposed
    fraction (None: no step has one), the worst step's index and the summed durations."""
    worst_row = rows[worst] if worst is not None else None
    return {
        "count": len(rows),
        "mean_exposed_wall_ps": int(round(walls / len(rows))) if rows else None,
        "max_exposed_wall_ps": top_wall if rows else None,
        "max_exposed_frac": top_frac,
        "worst_step": None if worst_row is None else {
            "host": worst_row["host"], "step": worst_row["step"]},
        "mean_duration_ps": int(round(durations / len(rows))) if rows else None,
        "unassigned_transfers": int(unassigned),
    }


def _block_summary(blocks: list[StepBlock], n: int) -> tuple | None:
    """`step_summary`'s numbers from intact blocks' columns: a column of one value is that
    value n times (a sum is the value times n, a maximum the value), not a list of it per
    row (many-ops' 3,000 steps: exposed wall, fraction and duration each one value). The
    same Python ints and floats the rows hold, maxima the first of equals as `max` over the
    rows gives. None where the worst step is one of several tied, not every row (the caller
    reads the columns row by row)."""
    if not n:
        return None
    wall: list[tuple[int, Any, list | None]] = [
        (b.n, b.one["exposed_wall_ps"], None) if "exposed_wall_ps" in b.one
        else (b.n, None, b.vary["exposed_wall_ps"]) for b in blocks]
    top = max(v if c is None else max(c) for _, v, c in wall)
    ties = sum((k if v == top else 0) if c is None else c.count(top) for k, v, c in wall)
    at = 0
    worst = None
    if ties == 1:
        for k, v, c in wall:
            if (c is None and v == top) or (c is not None and top in c):
                worst = at + (0 if c is None else c.index(top))
                break
            at += k
    elif ties == n:  # all alike (nothing exposed in any step): the earliest start's first row
        starts = list(chain.from_iterable(b.vary["start_ps"] if "start_ps" in b.vary
                                          else [b.one["start_ps"]] * b.n for b in blocks))
        worst = starts.index(min(starts))
    else:
        return None
    fracs = []
    for b in blocks:
        if "exposed_frac" in b.one:
            if b.one["exposed_frac"] is not None:
                fracs.append(b.one["exposed_frac"])
        else:
            f = [x for x in b.vary["exposed_frac"] if x is not None]
            if f:
                fracs.append(max(f))
    total = sum(v * k if c is None else sum(c) for k, v, c in wall)
    durations = sum(b.one["duration_ps"] * b.n if "duration_ps" in b.one
                    else sum(b.vary["duration_ps"]) for b in blocks)
    return top, total, max(fracs) if fracs else None, worst, durations


def _columns(rows: list[dict], keys: tuple[str, ...]) -> list[list]:
    """Each of `keys`' values in every row, in row order."""
    return [list(map(itemgetter(k), rows)) for k in keys]


def _worst(walls: list[int], starts: list[int]) -> int:
    """The first row with the most exposed wall time, of those the earliest: what
    `max(rows, key=lambda r: (wall, -start))` picks, with numpy over the ties."""
    top = max(walls)
    ties = walls.count(top)
    if ties == 1:
        return walls.index(top)
    if ties == len(walls):  # all alike (nothing exposed in any step): the earliest start's
        return starts.index(min(starts))  # first row, no arrays of the columns
    tied = np.flatnonzero(np.asarray(walls) == top)
    return int(tied[int(np.argmin(np.asarray(starts)[tied]))])
