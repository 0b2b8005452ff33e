"""Typed integer stats of some events of a line (`LineEvents.ints_of`: the TPU device clock
of copy boundaries), as int64 columns: no Python object per event.

The rule (one definition, both decoders): per set of stat ids, an event's value is its first
stat (in the order written) with an id of the set, where that stat holds an int64, or a
uint64 below 2**63; an event whose first such stat holds anything else (a double, a string,
a larger uint64, no value) has none, whatever its later stats hold.
"""

from __future__ import annotations

import numpy as np

from overlap.trace.values import _K_I64, _K_U64, INT64_MAX, INT64_MIN, isin_ids


def ints_from_records(st: dict, sets: list[frozenset], out: list[tuple[np.ndarray, np.ndarray]],
                      ev_ok, at_only: bool) -> None:
    """Fill `out` (per set: values, has) from stat records `st` (ev, sid, kind, and ival, or
    upb's obj; in event order, each event's in the order written). `ev_ok(ev)`: per record's
    event, (whether it was asked for, its position in `at`: None where the columns are per
    event of the line); with `at_only` the columns are indexed by that position."""
    for ids, (val, has) in zip(sets, out):
        # a stat id or two per set (the clock's): compared one at a time by `isin_ids`, not
        # `np.isin` (~1 ms on the clocked many-ops file's 144k records, where this is 0.1)
        sel = np.flatnonzero(isin_ids(st["sid"], ids))
        ev = st["ev"][sel].astype(np.int64)
        first = np.ones(len(ev), bool)  # records are in event order: an event's first
        first[1:] = ev[1:] != ev[:-1]
        ev, rec = ev[first], sel[first]
        ok, pos = ev_ok(ev)
        kind = st["kind"][rec]
        if "obj" in st:  # upb: values as Python objects (a few: these events only)
            ints = [int(v) if k in (_K_I64, _K_U64) and INT64_MIN <= int(v) <= INT64_MAX
                    else None for k, v in zip(kind.tolist(), st["obj"][rec].tolist())]
            ok &= np.array([v is not None for v in ints], bool)
            got = np.array([v or 0 for v in ints], np.int64)
        else:
            iv = st["ival"][rec]
            ok &= (kind == _K_I64) | ((kind == _K_U64) & (iv <= np.uint64(INT64_MAX)))
            got = iv.view(np.int64)
        where = pos[ok] if at_only else ev[ok]
        val[where] = got[ok]
        has[where] = True


def ints_at_scanned(scan, line, raw_at: np.ndarray, sets: list[frozenset]
                    ) -> list[tuple[np.ndarray, np.ndarray]] | None:
    """`ints_of(at_only=True)` for events `raw_at` (sorted indices among the line's events)
    by the scanner's `ints_at`: the rule above in its one walk over those events (no stat
    records, no numpy pass per set); None where the scanner has no `ints_at` or there are
    too many sets."""
    fn = getattr(scan, "ints_at", None)
    if fn is None or len(sets) > 64:
        return None
    pairs = [(sid, s) for s, ids in enumerate(sets) for sid in sorted(ids)]
    sids = np.array([p[0] for p in pairs], np.int64)
    set_of = np.array([p[1] for p in pairs], np.int64)
    val, has = fn(line.buf, line.pay_s, line.pay_e, raw_at, sids, set_of, len(sets))
    return [(val[s], has[s].view(bool)) for s in range(len(sets))]
