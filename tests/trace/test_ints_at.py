"""`LineEvents.ints_of(at_only=True)` on the scanner: its one walk (`_scan.ints_at`, values
written per event as it goes) against the stat records it replaced (`decode_events_at` and
`intstats.ints_from_records`), and against upb's records, for any encoding of the events and
any kind of stat value (int64, uint64 on both sides of 2**63, doubles, strings, refs, no
value; several stats of one set, a stat id in two sets)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from overlap.trace import intstats, wire
from tests.trace.test_scanner import _lines, event, space_bytes

pytestmark = pytest.mark.skipif(wire._scan is None or not hasattr(wire._scan, "ints_at"),
                                reason="the scanner was not built")

SETS = ([[1, 3], [2]], [[1], [1, 3], [42]], [[2, 42], [0], [99]], [[3]])


def _ints(line, sets, mids, at):
    """`ints_of(sets, mids, at=at, at_only=True)` of a fresh read (the scanner's walk)."""
    return wire.LineEvents(line, 7, wanted=()).ints_of(sets, mids, at=at, at_only=True)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(event, max_size=8), min_size=1, max_size=3),
       st.sampled_from(SETS), st.sampled_from([[1], [0, 7], [1, 2, 3], [-1, 1, 2, 3, 7]]),
       st.sampled_from([1, 2, 3]), st.booleans())
def test_walk_equals_records(lines, sets, mids, step, skip):
    """The walk's values and flags equal the records' on every event asked for, for lines
    with skipped events (rows renumbered) and impossible times (rows dropped) too."""
    raw = space_bytes(lines, False)
    for line, uline in zip(_lines(raw, wire._scan), _lines(raw, None)):
        kw = {"skip_mids": [7]} if skip else {}
        ev = wire.LineEvents(line, 7, wanted=(), **kw)
        at = np.flatnonzero(np.isin(ev.mids, mids))[::step]
        if skip:
            line.decoded = uline.decoded = True
        got = [ev.ints_of(sets, mids, at=at, at_only=True)]
        real = wire.ints_at_scanned
        wire.ints_at_scanned = lambda *a: None
        try:
            got.append(wire.LineEvents(line, 7, wanted=(), **kw).ints_of(
                sets, mids, at=at, at_only=True))
        finally:
            wire.ints_at_scanned = real
        got.append(wire.LineEvents(uline, 7, wanted=(), **kw).ints_of(sets, mids, at=at,
                                                                       at_only=True))
        for (wv, wh), (rv, rh), (uv, uh) in zip(*got):
            assert len(wv) == len(wh) == len(at)
            assert wh.dtype == bool and wv.dtype == np.int64
            assert wh.tolist() == rh.tolist() == uh.tolist()
            assert wv[wh].tolist() == rv[rh].tolist() == uv[uh].tolist()


def test_first_stat_of_a_set_decides():
    """An event's first stat of a set decides alone: a double or a uint64 of 2**63 first
    means no value even where an int64 of the set follows; a stat id may be in two sets
    (each set its own first); no stat of the set: no value."""
    stats = [
        [(1, (4, -5), "canonical"), (3, (4, 9), "canonical")],       # int64 first: -5
        [(3, (2, 1.5), "canonical"), (1, (4, 9), "canonical")],      # double first: none
        [(1, (3, 1 << 63), "canonical"), (3, (3, 4), "canonical")],  # too big first: none
        [(1, (3, (1 << 63) - 1), "canonical")],                      # the largest kept
        [(2, (4, 11), "canonical")],                                 # not in the set
        [],
    ]
    evs = [{"mid": 1, "offset": i, "dur": 1, "stats": s, "layout": "canonical", "unknown": 0}
           for i, s in enumerate(stats)]
    raw = space_bytes([evs], False)
    line = _lines(raw, wire._scan)[0]
    at = np.arange(len(stats), dtype=np.int64)
    (v13, h13), (v2, h2), (v1, h1) = _ints(line, [[1, 3], [2], [1]], [1], at)
    assert h13.tolist() == [True, False, False, True, False, False]
    assert v13[h13].tolist() == [-5, (1 << 63) - 1]
    assert h2.tolist() == [False, False, False, False, True, False] and v2[4] == 11
    # set {1} alone: the double of id 3 is not its stat; the int64 9 after it is
    assert h1.tolist() == [True, True, False, True, False, False]
    assert v1[h1].tolist() == [-5, 9, (1 << 63) - 1]


def test_too_many_sets_use_the_records():
    """More sets than the walk's 64: the records answer (the same rule)."""
    line = _lines(space_bytes([[{"mid": 1, "offset": 0, "dur": 1, "stats": [
        (1, (4, 3), "canonical")], "layout": "canonical", "unknown": 0}]], False),
        wire._scan)[0]
    sets = [[1]] * 65
    assert intstats.ints_at_scanned(wire._scan, line, np.zeros(1, np.int64),
                                    [frozenset(s) for s in sets]) is None
    got = _ints(line, sets, [1], np.zeros(1, np.int64))
    assert all(h.tolist() == [True] and v.tolist() == [3] for v, h in got)
