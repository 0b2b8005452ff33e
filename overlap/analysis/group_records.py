"""Group sums and their records: the per-transfer table (`overlap.transfer_columns`) summed
per (host, device, direction, HLO op) group, coarser groups summed from those, and the rows a
result shows of them (`by_device`, `by_host_direction`, `by_hlo_op`, `top_exposed`).

The metrics are defined in `overlap.analysis.overlap` (span, hidden, exposed, the classes,
duration-weighted ratios, bandwidth as bytes over summed `duration_ps`); here they are only
summed and turned into records. Every group sum is an int64 sum of integer picoseconds,
bytes or counts, so any grouping of the same rows gives the same sums (the reducer sums
coarse groups from fine ones, and the parts of several hosts from each host's groups).

`by_hlo_op` keeps the `top` (op, direction) rows by exposed time, ties broken by op name,
then direction; the names are sorted only for the rows that can still be in the top
(`_fewest_tied`, `_at_most_kth`: a capture may have tens of thousands of ops).
"""

from __future__ import annotations

import heapq
import math
from typing import Any

import numpy as np

from overlap.analysis import causes as exposure
from overlap.analysis.grouping import Columns, group_sums, is_none, one_hot, sorted_codes
from overlap.arrays import dict_rows, factorize, repeated
from overlap.trace.strcodes import str_codes
from overlap.trace.tables import concat, missing_mask, n_rows, take

HIDDEN, PARTIAL, EXPOSED = "hidden", "partial", "exposed"


def known_sizes(tr: Columns, n: int) -> np.ndarray:
    """`overlap._bytes_known` of a column table (`Trace.columns` fills the default; a table
    without it, or with None in it, knows those sizes)."""
    v = tr.get("bytes_known")
    if v is None:
        return np.ones(n, bool)
    v = np.asarray(v)
    if v.dtype != bool:
        v = np.where(is_none(v), True, v).astype(bool)
    return v



def _ratio(num: int, den: int) -> float | None:
    return num / den if den > 0 else None


def bucket(count: int, nbytes: int, span: int, hidden: int,
            unknown_bytes: int = 0, duration: int | None = None) -> dict[str, Any]:
    """The common aggregate fields; duration-weighted ratio, bytes / summed `duration_ps`
    (else `span`; none where a size is unknown: `unknown_bytes` counts those transfers)."""
    dur = int(span if duration is None else duration)
    return {
        "count": int(count), "bytes": int(nbytes), "unknown_bytes": int(unknown_bytes),
        "span_ps": int(span), "hidden_ps": int(hidden), "exposed_ps": int(span - hidden),
        "overlap_ratio": _ratio(hidden, span), "duration_ps": dur,
        "bandwidth_Bps": nbytes * 1e12 / dur if dur > 0 and not unknown_bytes else None,
    }


def group_transfers(t: Columns, by: list[str]) -> Columns:
    """Sums per group of `by` (`_SUMS`), groups in the order they first appear."""
    # One-hot class columns so the class counts are plain sums per group.
    cls = np.asarray(t["class"], dtype=object)
    pageable = np.asarray(t["pageable"], dtype=bool)
    span = np.asarray(t["span_ps"], np.int64)
    nbytes = np.asarray(t["bytes"], np.int64)
    n = len(span)
    unknown = ~known_sizes(t, n)
    # Columns of one value (every count 1; no zero-length, pageable or unknown-size copy, as
    # on most captures) are read-only `arrays.repeated` views: where every copy is its own op
    # they are the groups' columns as they are, ~0.3 MB of new pages each on 36k copies.
    any_pageable = bool(pageable.any())
    cols = {"count": repeated(n, 1, np.int64), "bytes": nbytes,
            "span_ps": span, "hidden_ps": np.asarray(t["hidden_ps"], np.int64),
            "duration_ps": np.asarray(t["duration_ps"], np.int64) if "duration_ps" in t
            else span,
            **one_hot(cls, (HIDDEN, PARTIAL, EXPOSED)),
            "zero_length": _ones_where(span == 0),
            "pageable_transfers": _ones_where(pageable),
            "pageable_bytes": np.where(pageable, nbytes, 0) if any_pageable
            else repeated(n, 0, np.int64),
            "unknown_bytes": _ones_where(unknown),
            **{c: np.asarray(t[c], np.int64) for c in exposure.CAUSE_COLUMNS}}
    return group_sums(t, by, cols, sort=False)


def _ones_where(m: np.ndarray) -> np.ndarray:
    """1 where `m`, else 0, as int64; a read-only `arrays.repeated` 0 where `m` holds nowhere."""
    return m.astype(np.int64) if m.any() else repeated(len(m), 0, np.int64)


def records_of(df: Columns, keys: list[str]) -> list[dict[str, Any]]:
    """One record per group (devices, ops), not per event: the group's `keys`, `bucket`'s
    fields, its class counts and `exposure_causes`. Made a column at a time (each field's
    values a list, set into copies of one template, `arrays.dict_rows`), not a dict and a
    `bucket` call per group (10k devices: ~30 ms, a row each)."""
    c = {k: df[k].tolist() for k in (*keys, "count", "bytes", "span_ps", "hidden_ps",
                                      HIDDEN, PARTIAL, EXPOSED)}
    n = len(c["count"])
    if not n:
        return []
    unknown = df["unknown_bytes"].tolist() if "unknown_bytes" in df else [0] * n
    duration = df["duration_ps"].tolist() if "duration_ps" in df else c["span_ps"]
    count, nbytes, span, hidden = c["count"], c["bytes"], c["span_ps"], c["hidden_ps"]
    # `bucket`'s fields, each as it computes them, on the same values
    dur = list(map(int, duration))
    fields = [
        ("count", list(map(int, count))), ("bytes", list(map(int, nbytes))),
        ("unknown_bytes", list(map(int, unknown))), ("span_ps", list(map(int, span))),
        ("hidden_ps", list(map(int, hidden))),
        ("exposed_ps", [int(s - h) for s, h in zip(span, hidden)]),
        ("overlap_ratio", list(map(_ratio, hidden, span))), ("duration_ps", dur),
        ("bandwidth_Bps", [b * 1e12 / d if d > 0 and not u else None
                           for b, d, u in zip(nbytes, dur, unknown)]),
        *((label, list(map(int, c[label]))) for label in (HIDDEN, PARTIAL, EXPOSED)),
        ("exposure_causes", exposure.cause_dicts(
            [np.asarray(df[k]) if k in df else np.zeros(n, np.int64)
             for k in exposure.CAUSE_COLUMNS]))]
    return dict_rows(dict.fromkeys([*keys, *(k for k, _ in fields)]), n,
                     [*((k, c[k]) for k in keys), *fields])


def most_exposed_ops(groups: Columns, top: int, one_device: bool = False) -> dict[str, Any]:
    """`by_hlo_op`: the `top` (op, direction) rows by exposed time (ties: op, then direction);
    records are built for those rows only (a capture may have tens of thousands of ops).
    `one_device`: every group has the same (host, device) key, so that the transfer groups
    (distinct (host, device, direction, op) keys) are the (op, direction) groups already, in
    order of first appearance: taken as they are (numbering 36k op names again to find each
    its own group cost ~0.5 ms)."""
    ops = ({"hlo_op": groups["hlo_op"], "direction": groups["direction"],
            **{c: np.asarray(groups[c], np.int64) for c in _SUMS}} if one_device
           else regroup(groups, ["hlo_op", "direction"], sort=False))  # ordered below
    exposed = ops["span_ps"] - ops["hidden_ps"]
    n = len(exposed)
    k = max(top, 0)
    # Only rows at or above the k-th largest exposed time can be in the top k: the names are
    # sorted for those alone (sorting 36k op names was half of this function).
    cand = np.arange(n)
    if 0 < k < n:
        thr = np.partition(exposed, n - k)[n - k]
        cand = np.flatnonzero(exposed >= thr)
        if len(cand) > 2 * k:  # many ties at the threshold (all hidden: every op exposes 0)
            cand = _fewest_tied(ops["hlo_op"], exposed, cand, thr, k)
    elif k == 0:
        cand = cand[:0]
    sub = take(ops, cand)
    op_code = sorted_codes(sub["hlo_op"])
    dir_code = sorted_codes(sub["direction"])
    keep = take(sub, np.lexsort((dir_code, op_code, -exposed[cand]))[:k])
    rows = records_of(keep, ["hlo_op", "direction"])
    return {"records": rows, "truncated": len(rows) < n, "total_records": n,
            "returned_records": len(rows)}


def _fewest_tied(names: np.ndarray, exposed: np.ndarray, cand: np.ndarray, thr: int,
                 k: int) -> np.ndarray:
    """Of the candidates `cand` (exposed >= thr), those that can still be in the top `k`
    once ties at `thr` are broken by op name (missing names first): every row above the
    threshold, and the tied rows whose name is missing or at most the name the top `k` ends
    on. The caller sorts what is left; the answer is the same, without sorting every name."""
    if len(cand) == len(exposed):  # every row a candidate (all tied, as where every op
        above = np.flatnonzero(exposed > thr)  # hides): the rows themselves, no gathers
        ties = np.flatnonzero(exposed == thr)
    else:
        above = cand[exposed[cand] > thr]
        ties = cand[exposed[cand] == thr]
    need = k - len(above)
    tn = np.asarray(names, dtype=object)
    if len(ties) < len(tn):  # (every row tied, as where every op hides: the column itself)
        tn = tn[ties]
    got = str_codes(tn, False, copy=False)  # (read here, not written)
    if got is not None:
        # every name a str (numbered already where the ties are every op: `group_transfers`'s
        # codes): the name the top ends on is at most the `need`-th smallest distinct name,
        # found without sorting them (`_at_most_kth`; sorting all 36k names in the compiled
        # scanner took ~2 ms), and the rows whose name is at most that one
        # are kept, as below (where names repeat, a few more: the caller sorts them)
        codes, uniq = got
        small = _at_most_kth(uniq, need)
        # (every name its own value: unsorted codes number the rows in order, 0..n-1, so
        # each row's answer is its unique's, no gather of 36k codes)
        return np.sort(np.r_[above, ties[small if len(uniq) == len(codes) else small[codes]]])
    missing = missing_mask(tn)
    n_missing = int(missing.sum())
    if need <= n_missing:  # the top ends among the tied rows with no name
        return np.sort(np.r_[above, ties[missing]])
    named = tn[~missing]
    strs = named.tolist()
    if not set(map(type, strs)) <= {str}:  # names that do not order as strings
        return cand
    cut = np.empty((), object)  # the str itself: numpy would make a str scalar a numpy
    cut[()] = heapq.nsmallest(need - n_missing, strs)[-1]  # string, which drops a final NUL
    keep = missing.copy()
    keep[~missing] = np.asarray(named <= cut, bool)  # str <= str per element, in C
    return np.sort(np.r_[above, ties[keep]])


def _at_most_kth(uniq: np.ndarray, k: int, sample: int = 2048) -> np.ndarray:
    """Per value of `uniq` (an object array of distinct strs, 1 <= k <= its length): is it at
    most the `k`-th smallest of them? Where they are many, a strided sample of `sample` of
    them bounds that value from above first (its `k`-th smallest: at least `k` values lie at
    or below it, so the `k`-th smallest of all does too), one comparison per value in C finds
    those at or below the bound, and only they are ranked (`heapq.nsmallest` over all 36k op
    names of the many-ops capture was ~1.1 ms of Python comparisons; the bound leaves ~200)."""
    n = len(uniq)
    cut = np.empty((), object)  # the str itself: numpy would make a str scalar a numpy string
    if n <= 2 * sample or k > sample // 8:
        cut[()] = heapq.nsmallest(k, uniq.tolist())[-1]
        return np.asarray(uniq <= cut, bool)  # str <= str per distinct name, in C
    cut[()] = heapq.nsmallest(k, uniq[:: n // sample].tolist())[-1]
    small = np.asarray(uniq <= cut, bool)
    at = np.flatnonzero(small)
    cut[()] = heapq.nsmallest(k, uniq[at].tolist())[-1]
    small[at] = np.asarray(uniq[at] <= cut, bool)
    return small



# The finest grouping a part keeps; every aggregate of the result is a sum over these groups.
GROUP_KEYS = ("host", "device", "direction", "hlo_op")
_SUMS = ("count", "bytes", "span_ps", "hidden_ps", "duration_ps", HIDDEN, PARTIAL, EXPOSED,
         "zero_length", "pageable_transfers", "pageable_bytes", "unknown_bytes",
         *exposure.CAUSE_COLUMNS)


def regroup(groups: Columns, by: list[str], sort: bool = True) -> Columns:
    return group_sums(groups, by, {c: np.asarray(groups[c], np.int64) for c in _SUMS}, sort)


def top_transfer_rows(parts: list[dict[str, Any]], top: int) -> Columns:
    """The `top` most exposed transfers over all parts, ties broken as one global sort would
    (by start, then host, then the row's place in its host's table)."""
    t = concat([p["top"] for p in parts])
    if n_rows(t) < 2:
        return t
    h, _ = factorize(t["host"], sort=True)
    order = np.lexsort((t["pos"], h, t["start_ps"], -t["exposed_ps"]))
    return take(t, order[: max(top, 0)])


def top_transfer_records(worst: Columns) -> list[dict[str, Any]]:
    """`top_exposed` records of the rows `top_transfer_rows` kept (at most `top`): Python
    values, NaN ratios and bandwidths as None."""
    c = {k: worst[k].tolist() for k in (
        "host", "device", "direction", "hlo_op", "start_ps", "span_ps", "hidden_ps",
        "exposed_ps", "overlap_ratio", "class", "bytes", "bandwidth_Bps", "pageable")}
    n = len(c["host"])
    known = worst["bytes_known"].tolist() if "bytes_known" in worst else [True] * n
    return [{
        "host": c["host"][i], "device": c["device"][i], "direction": c["direction"][i],
        "hlo_op": c["hlo_op"][i], "start_ps": int(c["start_ps"][i]),
        "span_ps": int(c["span_ps"][i]), "hidden_ps": int(c["hidden_ps"][i]),
        "exposed_ps": int(c["exposed_ps"][i]),
        "ratio": None if math.isnan(c["overlap_ratio"][i]) else float(c["overlap_ratio"][i]),
        "class": c["class"][i] or None, "bytes": int(c["bytes"][i]),
        "bytes_known": bool(known[i]),
        "bandwidth_Bps": None if math.isnan(c["bandwidth_Bps"][i])
        else float(c["bandwidth_Bps"][i]),
        "pageable": bool(c["pageable"][i]),
        **exposure.top_fields(worst, i),
    } for i in range(n)]

