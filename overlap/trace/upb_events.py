"""`_scan.decode_events`' answer from upb's messages: the reader's path where the compiled
scanner was not built (`OVERLAP_SCANNER=0`), and for lines upb parsed itself. Same arrays as
the scanner's, the stat values as Python objects; kept apart from wire.py, which holds the
scanner's side.
"""

from __future__ import annotations

import struct

import numpy as np

from overlap.trace.values import (
    _K_BYTES,
    _K_DOUBLE,
    _K_I64,
    _K_NONE,
    _K_REF,
    _K_STR,
    _K_U64,
    GROUP_IDS,
    GROUP_STRIDE,
    object_array,
)

# XStat value fields, as the scanner's `kind` (0: no value).
_UPB_KIND = {None: _K_NONE, "double_value": _K_DOUBLE, "uint64_value": _K_U64,
             "int64_value": _K_I64, "str_value": _K_STR, "bytes_value": _K_BYTES,
             "ref_value": _K_REF}



def upb_events(events, skip_mids, wanted, plane_of, groups=None, time_limit=-1,
               drop=False, cond=None, need=None) -> tuple:
    """`_scan.decode_events` from upb messages: the same arrays, the stat values as objects
    (`obj`; a ref's is the referenced id, in a group's values read with `plane_of` its key
    as the scanner makes it: `plane * GROUP_STRIDE + id`, 2**64 - 1 outside); `time_limit`
    and `drop` as the scanner's (its `times`: with `drop`, no row for a skipped event), and
    so are `cond` and `need`."""
    n = len(events)
    mid = np.zeros(n, np.int64)
    off = np.zeros(n, np.int64)
    dur = np.zeros(n, np.int64)
    agg = np.zeros(n, bool)
    skip = set(skip_mids) if skip_mids else set()
    want = None if wanted is None else {int(x) for x in wanted}
    ng = 0 if groups is None else groups[2]
    group_of = {} if groups is None else dict(zip(groups[0].tolist(), groups[1].tolist()))
    only = [0] * ng if groups is None or len(groups) < 4 else groups[3].tolist()
    codes = [[-1] * n for _ in range(ng)]
    seen: list[dict] = [{} for _ in range(ng)]  # value -> code, per group
    tabs: list[tuple[list, list]] = [([], []) for _ in range(ng)]  # (kinds, objects)
    ev, sid, kind, obj = [], [], [], []
    cond_ids = set(cond.tolist()) if cond is not None and len(cond) else set()
    drop = drop and time_limit >= 0 and (bool(skip) or bool(cond_ids))
    if not drop:
        cond_ids = set()
    need_ids = set(need.tolist()) if cond_ids and need is not None else set()
    skipped = np.zeros(n if drop else 0, bool)
    row = -1  # the event's row: its index less the events dropped before it
    for k, e in enumerate(events):
        m = mid[k] = e.metadata_id
        dur[k] = e.duration_ps
        if e.WhichOneof("data") == "num_occurrences":
            agg[k] = True
        else:
            off[k] = e.offset_ps
        if m in skip or (m in cond_ids and not any(s.metadata_id in need_ids
                                                    for s in e.stats)):
            if drop:
                skipped[k] = True
            continue
        row += 1
        pl = None if plane_of is None else int(plane_of[k])
        for s in e.stats:
            i = s.metadata_id
            if pl is not None:
                i = pl * GROUP_STRIDE + i if 0 <= i < GROUP_IDS else -1
            w = s.WhichOneof("value")
            v = None if w is None else getattr(s, w)
            if want is None or i in want:
                ev.append(row if drop else k)
                sid.append(i)
                kind.append(_UPB_KIND[w])
                obj.append(v)
            g = group_of.get(i)
            if g is not None and codes[g][k] < 0 and only[g] == 1:
                codes[g][k] = 0
            elif g is not None and codes[g][k] < 0:
                kd = _UPB_KIND[w]
                if kd == _K_REF and pl is not None:
                    r = int(s.ref_value)
                    v = pl * GROUP_STRIDE + r if 0 <= r < GROUP_IDS else (1 << 64) - 1
                # equal as the scanner's values are: by kind, and a double by its bits
                vk = (kd, struct.pack("<d", v) if kd == _K_DOUBLE else v)
                c = seen[g].get(vk)
                if c is None:
                    c = seen[g][vk] = len(tabs[g][0])
                    tabs[g][0].append(kd)
                    tabs[g][1].append(v)
                codes[g][k] = c
    st = {"ev": np.array(ev, np.int64), "sid": np.array(sid, np.int64),
          "kind": np.array(kind, np.int8), "obj": object_array(obj)}
    all_codes = np.array(codes, np.int32).reshape(ng, n)
    raw, neg_n, big_n = None, 0, 0
    if drop and skipped.any():
        # the skipped events' impossible times, by reason, as the reader counts kept ones
        s_off, s_dur = off[skipped], dur[skipped]
        pos = ~agg[skipped]
        neg = pos & ((s_off < 0) | (s_dur < 0))
        big = pos & ~neg & ((s_off >= time_limit) | (s_dur >= time_limit))
        raw = np.flatnonzero(~skipped)
        mid, off, dur, agg, all_codes = mid[raw], off[raw], dur[raw], agg[raw], all_codes[:, raw]
        neg_n, big_n = int(neg.sum()), int(big.sum())
    times = None
    if time_limit >= 0:
        odd = agg | (off < 0) | (dur < 0) | (off >= time_limit) | (dur >= time_limit)
        times = (raw, neg_n, big_n, int(odd.sum()))
    grp = (all_codes,
           [{"kind": np.array(kd, np.int8), "obj": object_array(vs)} for kd, vs in tabs])
    # (upb refused invalid UTF-8: none is left)
    return mid, off, dur, agg, st, grp, 0, times


def rows_of(st: dict, raw: np.ndarray) -> dict:
    """Upb's stat records (`upb_events`) numbered by the line's event indices, renumbered by
    row (`raw`: per row, its event's index, sorted), those of events without a row left
    out."""
    ev = st["ev"]
    pos = np.minimum(np.searchsorted(raw, ev), max(len(raw) - 1, 0))
    ok = raw[pos] == ev if len(raw) else np.zeros(len(ev), bool)
    out = {k: v[ok] for k, v in st.items()}
    out["ev"] = pos[ok]
    return out
