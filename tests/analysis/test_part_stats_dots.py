"""The causes' evidence sums per direction (`causes.part_stats`) as int64 dot products of
0/1 masks (issue 32 round 8) equal the sums of the rows taken per direction and cause (the
rule written out here as it was): every number, key order, the worst copy (first of the most
needed bandwidth, ties included), copies of no direction or no cause left out, sums past
2**53 and int64's wrap alike."""

from __future__ import annotations

import json

import numpy as np
import pytest

from overlap.analysis import causes as C


def _random_part(rng, n, big=False):
    direction = np.array(rng.choice(["D2H", "H2D", None, "D2D"], n, p=[.4, .4, .1, .1]),
                         object)
    hi = 2**60 if big else 10**9
    table = {"direction": direction,
             "bytes": rng.choice([0, 64, 4096, 1 << 20], n).astype(np.int64),
             "span_ps": rng.integers(0, hi, n), "hidden_ps": rng.integers(0, 10**6, n),
             "hlo_op": np.array([f"copy.{i % 5}" for i in range(n)], object),
             "host": np.array(["h"] * n, object), "device": np.array(["GPU:0"] * n, object)}
    extra = {col: np.where(rng.random(n) < rng.random(), rng.integers(1, 10**6, n), 0)
             for col in C.CAUSE_COLUMNS}
    extra.update(queue_ahead=rng.integers(0, 5, n), bytes_ahead=rng.integers(0, 10**7, n),
                 group=np.zeros(n, np.int64), stream=rng.integers(0, 3, n),
                 line=np.array(["Stream #1"] * n, object),
                 stream_kernels=rng.integers(0, 100, n), stall_ps=rng.integers(0, 10**6, n),
                 # ties of the needed bandwidth: equal bytes over equal ready times
                 ready_ps=rng.choice([-1, 0, 1000, 1000, 5000], n).astype(np.int64),
                 unknown_no_resume_ps=rng.integers(0, 10**5, n),
                 unknown_late_resume_ps=rng.integers(0, 10**5, n),
                 unknown_not_copy_bound_ps=rng.integers(0, 10**5, n))
    return table, extra


def _masked(table, extra):
    """`part_stats` by masked copies of each column, per direction and cause."""
    direction = np.asarray(table["direction"], object)
    nbytes = np.asarray(table["bytes"], np.int64)
    span = np.asarray(table["span_ps"], np.int64)
    hidden = np.asarray(table["hidden_ps"], np.int64)
    hlo = np.asarray(table["hlo_op"], object)
    out = {}
    has = {c: h for c, h in ((c, np.asarray(extra[col]) > 0)
                             for c, col in zip(C.CAUSES, C.CAUSE_COLUMNS)) if h.any()}
    for d in C.DIRECTIONS if has else ():
        dm = direction == d
        per = {}
        for c in C.CAUSES:
            if c not in has:
                continue
            m = dm & has[c]
            if not m.any():
                continue
            st = {"transfers": int(m.sum()), "bytes": int(nbytes[m].sum()),
                  "span_ps": int(span[m].sum()), "hidden_ps": int(hidden[m].sum())}
            if c == C.QUEUED:
                st["max_queue"] = int(extra["queue_ahead"][m].max()) + 1
                st["max_bytes_ahead"] = int(extra["bytes_ahead"][m].max())
            elif c == C.SHARES_STREAM:
                st["streams"] = C._stream_rows(table, extra, m)
            elif c == C.DEVICE_WAITS:
                ready = np.asarray(extra["ready_ps"])[m]
                st["stall_ps"] = int(np.asarray(extra["stall_ps"])[m].sum())
                pos = ready > 0
                st["ready_ps"] = int(ready[pos].sum())
                st["ready_bytes"] = int(nbytes[m][pos].sum())
                st["no_work"] = int((ready == 0).sum())
                with np.errstate(divide="ignore", invalid="ignore"):
                    need = np.where(pos, nbytes[m] * 1e12 / np.where(pos, ready, 1), 0.0)
                if pos.any():
                    i = int(np.argmax(need))
                    st["worst"] = {"hlo_op": str(hlo[m][i]), "needed_Bps": float(need[i]),
                                   "bytes": int(nbytes[m][i]), "ready_ps": int(ready[i]),
                                   "span_ps": int(span[m][i])}
            elif c == C.UNKNOWN:
                for k in ("no_resume", "late_resume", "not_copy_bound"):
                    st[f"{k}_ps"] = int(np.asarray(extra[f"unknown_{k}_ps"])[m].sum())
            per[c] = st
        if per:
            out[d] = per
    return out


@pytest.mark.parametrize("big", [False, True])
@pytest.mark.parametrize("seed", range(40))
def test_dot_sums_equal_the_sums_of_the_rows_taken(seed, big):
    rng = np.random.default_rng(seed)
    table, extra = _random_part(rng, int(rng.integers(0, 80)), big=big)
    got = C.part_stats(table, extra)
    assert json.dumps(got) == json.dumps(_masked(table, extra))  # numbers, key order


@pytest.mark.parametrize("seed", range(40))
def test_worst_is_the_argmax_over_every_copy(seed):
    """`_worst` (the bandwidth of the rows asked only, round 40) is the argmax of the whole
    column as it was written: 0.0 where there is no ready time, ties to the first row; with
    zero and negative byte counts (no reader writes one; the rule still says which row)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40))
    nbytes = rng.choice([-4096, -1, 0, 0, 64, 4096], n).astype(np.int64)
    ready = rng.choice([-1, 0, 1000, 5000], n).astype(np.int64)
    m = rng.random(n) < 0.7
    pos = ready > 0
    if not (m & pos).any():
        m[np.flatnonzero(pos)[:1]] = True
    if not (m & pos).any():
        return
    with np.errstate(divide="ignore", invalid="ignore"):
        need = np.where(pos, nbytes * 1e12 / np.where(pos, ready, 1), 0.0)
    i = int(np.argmax(np.where(m, need, -np.inf)))
    assert C._worst(m, pos, nbytes, ready) == (i, float(need[i]))
