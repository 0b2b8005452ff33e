"""Listed stat groups (issue 32, round 27): a group whose reader takes a table of values that
may repeat (`LineEvents(listed=)`, the GPU rules' `memcpy_details`) is interned until three
values in four coded are new (from `_scan._LIST_MIN`, 65,536 values), then each value is
listed without a lookup (a million copies, each its own details text: ~90 ms of lookups
that found nothing). Whatever the table, each event's code gives its own first value of the
group, as interning gives it; where values repeat (a real capture's few distinct details)
nothing is listed. SYNTHETIC lines, written by hand."""

from __future__ import annotations

import numpy as np
import pytest

from overlap.trace import wire
from tests.trace.test_scanner import STAT_NAMES, _lines, space_bytes

pytestmark = pytest.mark.skipif(wire._scan is None, reason="the compiled scanner is not built")

N = 90_000  # (more than `_LIST_MIN` distinct values: the listing starts within the line)


def _event(i: int, val) -> dict:
    return {"mid": 1, "offset": i, "dur": 1, "layout": "canonical", "unknown": 0,
            "stats": [] if val is None else [(2, val, "canonical")]}


def _values(kind: str) -> list:
    """Each event's `memcpy_details` (stat id 2) value, (field, value) as `stat_value_bytes`
    takes it, or None (no stat)."""
    if kind == "new":  # all but a few new: repeats, a run, numbers, gaps, all after the switch
        out: list = [(5, f"kind_src:device kind_dst:pinned size:{i} async:1") for i in range(N)]
        for i in range(70_000, N, 997):
            out[i] = out[5]  # a value seen before the listing
        for i in range(80_000, 80_050):
            out[i] = (5, "a run of one text")
        for i in range(81_000, N, 1009):
            out[i] = (3, i % 7)  # a number
        for i in range(85_000, N, 503):
            out[i] = None
        out[86_000] = (6, b"\xff\x00bytes")
        return out
    # few distinct values, repeated: interned, nothing listed
    return [(5, f"size:{i % 50}") if i % 11 else (3, i % 3) for i in range(N)]


def _decode(kind: str, scanner) -> tuple[wire.LineEvents, wire.LineEvents]:
    raw = space_bytes([[_event(i, v) for i, v in enumerate(_values(kind))]], False)
    line = _lines(raw, scanner)[0]
    listed = wire.LineEvents(line, 0, wanted=(), listed=[[2]])
    line = _lines(raw, scanner)[0]
    interned = wire.LineEvents(line, 0, wanted=(), groups=[[2]])
    return listed, interned


def _per_event(ev: wire.LineEvents) -> list:
    """Each event's value as the table holds it (kind, and the integer or the bytes)."""
    codes, t = ev.interned([2])
    buf = ev.buf.tobytes()
    vals = [(k, buf[p:p + n] if k in (5, 6) else n)
            for k, n, p in zip(t["kind"].tolist(), t["ival"].tolist(), t["vpos"].tolist())]
    return [None if c < 0 else vals[c] for c in codes.tolist()]


def test_mostly_new_values_are_listed_and_read_alike():
    listed, interned = _decode("new", wire._scan)
    assert _per_event(listed) == _per_event(interned)
    n_listed = len(listed.interned([2])[1]["kind"])
    n_interned = len(interned.interned([2])[1]["kind"])
    assert n_listed > n_interned  # (repeats after the switch listed again)
    assert n_interned == len({v for v in _values("new") if v is not None})
    # and as objects, the rules' form
    lc, lv = listed.first_codes([2], STAT_NAMES)
    ic, iv = interned.first_codes([2], STAT_NAMES)
    assert (lc >= 0).tolist() == (ic >= 0).tolist()
    assert lv[lc[lc >= 0]].tolist() == iv[ic[ic >= 0]].tolist()


def test_repeated_values_stay_interned():
    listed, interned = _decode("few", wire._scan)
    lc, lt = listed.interned([2])
    ic, it = interned.interned([2])
    assert lc.tolist() == ic.tolist()
    assert all(np.array_equal(lt[k], it[k]) for k in ("kind", "ival", "vpos"))
    assert len(lt["kind"]) == 53


def test_upb_reads_listed_groups_as_interned():
    """Without the scanner (upb's messages), a listed group is interned: the same values."""
    fast, _ = _decode("new", wire._scan)
    slow, _ = _decode("new", None)
    fc, fv = fast.first_codes([2], STAT_NAMES)
    sc, sv = slow.first_codes([2], STAT_NAMES)
    assert (fc >= 0).tolist() == (sc >= 0).tolist()
    assert fv[fc[fc >= 0]].tolist() == sv[sc[sc >= 0]].tolist()
