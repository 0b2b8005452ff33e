"""Stat columns of a line's events (`LineEvents`) for the rules of `overlap.trace.gpu` and
`overlap.trace.tpu`: an event's stat where it has one, else its metadata's, computed once per
distinct value. Split from `overlap.trace.wire` (issue 32 round 13: the 1000-line limit),
which re-exports them."""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from overlap.trace.values import Coded, object_array, unique_inverse, unique_inverse_at

# `P`: a `wire.Plane` or `groups.PlaneGroup`; `ev`: a `wire.LineEvents` (not imported: wire
# imports this module)


def stat_keys(P: Any, names: Iterable[str]) -> list[int]:
    """The stat ids (keys in a `PlaneGroup`) of these stat names, for `LineEvents(wanted=)`."""
    return [k for n in names for k in (P.stat_ids.get(n) or ())]


def stat_codes(P: Any, ev: Any, idx: np.ndarray,
               name: str) -> tuple[np.ndarray, np.ndarray]:
    """`stat_column` as (codes, values): the column is `values[codes]`, every code valid.
    `values` holds the event stats' distinct values (one per distinct value where the line
    was decoded with the name's ids as a group), then the metadata's, once per metadata id,
    so a rule computes once per value (`map_stat`) instead of once per event."""
    idx = np.asarray(idx)
    if idx.dtype.kind not in "iu":  # (int32 positions are taken as they are)
        idx = idx.astype(np.int64)
    sids = P.stat_ids.get(name)
    c: np.ndarray | None = None
    vals = np.zeros(0, object)
    if sids and len(idx):
        c, vals = ev.codes_at(sids, P.stat_names, idx)  # int32 from groups: half the bytes
    # none of these events has the stat (a module named by the metadata only; a stat the
    # plane never names: no -1 per event made first): no index arrays of a million events,
    # on the read's peak
    if c is None or not len(vals) or not (c >= 0).any():
        # (fall back to the metadata's stats, once per metadata id)
        uniq, inv = unique_inverse_at(ev.mids, idx, len(vals))
        mv = object_array([P.meta_stats(u).get(name) for u in uniq.tolist()])
        return inv, np.concatenate([vals, mv])
    missing = np.flatnonzero(c < 0)
    if missing.size:  # those events read their metadata's, once per metadata id
        inv, mv = meta_values(P, ev.mids[idx[missing]], name)
        if len(vals) + len(mv) > np.iinfo(c.dtype).max:
            c = c.astype(np.int64)
        c[missing] = len(vals) + inv
        vals = np.concatenate([vals, mv])
    return c, vals


def meta_values(P: Any, mids: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray]:
    """(per event of metadata ids `mids`, its code into the values; those values: stat
    `name` of each distinct metadata, None where it has none), read once per metadata id:
    what an event without the stat reads (`stat_codes`)."""
    uniq, inv = unique_inverse(mids)
    return inv, object_array([P.meta_stats(u).get(name) for u in uniq.tolist()])


def stat_column(P: Any, ev: Any, idx: np.ndarray, name: str) -> np.ndarray:
    """Values of stat `name` for events `idx`: the event's first such stat, else its metadata's."""
    codes, vals = stat_codes(P, ev, idx, name)
    return vals[codes] if len(codes) else np.zeros(0, object)


def map_stat(P: Any, ev: Any, idx: np.ndarray, name: str, fn) -> np.ndarray:
    """`fn(v)` for each value of `stat_column(P, ev, idx, name)`, computed once per distinct
    str or int value (`apply_once`: values equal but of different types, 1 and 1.0, each
    get their own call). (Values each their own, a ROCm capture's correlation ids, are read
    a column at a time instead: `vendors.correlation_ids`.)"""
    codes, vals = stat_codes(P, ev, idx, name)
    if not len(codes):
        return np.zeros(0, object)
    return object_array(apply_once(fn, vals.tolist()))[codes]


def coded_stat(P: Any, ev: Any, idx: np.ndarray, name: str, fn=None) -> Coded:
    """`map_stat` (with `fn`) or `stat_column` as a `Coded` column for `Cols.add`: its
    objects are only made by `Cols.rows`, after the line's arrays and the file's bytes are
    freed (a million kernels' names: 7.5 MB of pointers less at the read's peak)."""
    codes, vals = stat_codes(P, ev, idx, name)
    if fn is not None:
        vals = object_array(apply_once(fn, vals.tolist()))
    return Coded(codes, vals)


def apply_once(fn, values: list) -> list:
    """`[fn(v) for v in values]`, `fn` called once per distinct str or int value (of those
    types exactly: equal values of other types, 1.0 and True, or -0.0 and 0.0, may print
    apart). Why: where refs are each plane's own, the values are one per event, not one per
    distinct value (10k GPU planes: ~33k op names of a few distinct texts)."""
    if len(values) < 64:
        return [fn(v) for v in values]
    done: dict = {}
    out = []
    for v in values:
        if type(v) is str or type(v) is int:
            got = done.get(v, done)
            if got is done:
                got = done[v] = fn(v)
        else:
            got = fn(v)
        out.append(got)
    return out
