"""A `PlaneGroup`'s keys (`plane * GROUP_STRIDE + id`, ids in [0, GROUP_IDS)) and the
frozensets `LineEvents` files a group's answers under (`statids.StatKeys`, `ids_key`).

The stride is above every id and not a power of two, so that one id's keys over many planes
differ in their low bits (where Python's sets and dicts place an int); ids at or above
`GROUP_IDS` key nothing (-1) on both decoders, as before the stride moved off 2**31. A
group's keys of one stat name are one `StatKeys`, whose frozenset is made once and is the
object its line's answers are filed under."""

from __future__ import annotations

import numpy as np
import pytest

from overlap.trace import wire
from overlap.trace.groups import _in_stride
from overlap.trace.statids import GroupStatIds, StatKeys, ids_key
from overlap.trace.values import GROUP_IDS, GROUP_STRIDE, _group_keys
from tests.trace.test_scanner import _lines, space_bytes

pytestmark = pytest.mark.skipif(wire._scan is None, reason="the scanner was not built")

EDGE_IDS = [0, 1, GROUP_IDS - 1, GROUP_IDS, GROUP_IDS + 5, GROUP_STRIDE - 1, GROUP_STRIDE]


def test_stride_spreads_one_ids_keys_over_the_low_bits():
    assert GROUP_STRIDE > GROUP_IDS and GROUP_STRIDE & (GROUP_STRIDE - 1)
    # 10k planes' keys of one id: as many distinct low 14 bits as a table of 16k slots has
    # room for (with a stride of 2**31 they were all the id itself: one slot)
    for k in (0, 5, 20):
        low = {(i * GROUP_STRIDE + k) & ((1 << 14) - 1) for i in range(10_000)}
        assert len(low) == 10_000
    # keys stay in plane order, then id order
    keys = [i * GROUP_STRIDE + k for i in range(3) for k in (0, 7, GROUP_IDS - 1)]
    assert keys == sorted(keys)
    assert [divmod(x, GROUP_STRIDE) for x in keys] == \
        [(i, k) for i in range(3) for k in (0, 7, GROUP_IDS - 1)]


def test_ids_outside_the_group_range_key_nothing():
    ids = np.array(EDGE_IDS + [-1], np.int64)
    got = _group_keys(np.full(len(ids), 3, np.int64), ids).tolist()
    assert got == [3 * GROUP_STRIDE + k if 0 <= k < GROUP_IDS else -1 for k in ids.tolist()]
    assert _in_stride({0: "a", GROUP_IDS - 1: "b"})
    assert not _in_stride({0: "a", GROUP_IDS: "b"})
    assert not _in_stride(np.array([GROUP_IDS + 5], np.int64))


def _edge_space() -> bytes:
    """A GPU plane's line of events, each with a stat of one of `EDGE_IDS` and one ref of
    one of them (to its plane's key, or nothing)."""
    evs = [{"mid": 1, "offset": 10 * j, "dur": 5, "layout": "canonical", "unknown": 0,
            "stats": [(sid, (4, j), "canonical"), (2, (7, sid), "canonical")]}
           for j, sid in enumerate(EDGE_IDS)]
    return space_bytes([evs * 2], False)


def test_scanner_and_upb_key_edge_ids_alike():
    raw = _edge_space()
    segs = []
    for scanner in (wire._scan, None):
        seg = wire.merge_lines(_lines(raw, scanner))
        n = seg.n_events
        plane_of = np.arange(n) % 2
        segs.append(wire.LineEvents(seg, np.zeros(n, np.int64), plane_of=plane_of,
                                    wanted=None,
                                    groups=[[p * GROUP_STRIDE + 2 for p in (0, 1)]]))
    fast, upb = segs
    rec_f, rec_u = fast._batches[0][1], upb._batches[0][1]
    assert rec_f["sid"].tolist() == rec_u["sid"].tolist()
    # each event's stats: its plane's key of an id below GROUP_IDS, else -1
    n = fast.n
    want = []
    for e in range(n):
        p, sid = e % 2, EDGE_IDS[e % len(EDGE_IDS)]
        want += [p * GROUP_STRIDE + sid if 0 <= sid < GROUP_IDS else -1,
                 p * GROUP_STRIDE + 2]
    assert rec_f["sid"].tolist() == want
    # the refs, interned as their plane's keys on both decoders (one code per distinct
    # value; a ref outside the range one value, -1, as 2**64 - 1)
    key = frozenset(p * GROUP_STRIDE + 2 for p in (0, 1))
    (cf, tf), (cu, tu) = fast._groups[key], upb._groups[key]
    assert cf.tolist() == cu.tolist()
    refs = [int(tf["ival"][c]) for c in cf.tolist()]
    assert refs == [int(tu["obj"][c]) for c in cu.tolist()]  # (upb: the values as objects)
    assert [r - (1 << 64) if r >> 63 else r for r in refs] == \
        [(e % 2) * GROUP_STRIDE + EDGE_IDS[e % len(EDGE_IDS)]
         if 0 <= EDGE_IDS[e % len(EDGE_IDS)] < GROUP_IDS else -1 for e in range(n)]


class _P:
    """A plane as `GroupStatIds` reads it: a dict of stat names and its `stat_ids`."""

    def __init__(self, names: dict[int, str]) -> None:
        self.stat_names = names
        self.stat_ids = {}
        for k, v in names.items():
            self.stat_ids.setdefault(v, []).append(k)


@pytest.mark.parametrize("asked", [(), ("memcpy_details", "hlo_op")])
def test_group_stat_ids_are_stat_keys_made_once(asked):
    planes = [_P({1: "hlo_op", 2: "memcpy_details", 3 + i % 2: "hlo_op"}) for i in range(50)]
    ids = GroupStatIds(planes, asked)
    got = ids.get("hlo_op")
    assert type(got) is StatKeys
    assert got == [i * GROUP_STRIDE + k for i in range(50) for k in (1, 3 + i % 2)]
    assert ids.get("hlo_op") is got  # the same list each time
    assert ids_key(got) is ids_key(ids.get("hlo_op"))  # and the same frozenset
    assert ids_key(got) == frozenset(got)
    assert ids.get("absent") is None and ids.get("absent", ()) == ()
    # a plain list's key is made each time, equal
    assert ids_key(list(got)) == ids_key(got) and ids_key(list(got)) is not ids_key(got)
    assert ids_key(np.array([5, 6])) == frozenset({5, 6})


def test_line_answers_filed_under_one_frozenset():
    """A group's line asked for one stat through its `StatKeys` and through an equal plain
    list: the same answers, and the line's groups keyed by the `StatKeys`' own set."""
    raw = _edge_space()
    seg = wire.merge_lines(_lines(raw, wire._scan))
    n = seg.n_events
    keys = StatKeys(p * GROUP_STRIDE + 2 for p in (0, 1))
    ev = wire.LineEvents(seg, np.zeros(n, np.int64), plane_of=np.arange(n) % 2, wanted=(),
                         groups=[keys])
    assert any(k is keys.key for k in ev._groups)
    assert ev.has_stat(keys).tolist() == ev.has_stat(list(keys)).tolist() == [True] * n
    assert ev.interned(keys)[0].tolist() == ev.interned(list(keys))[0].tolist()


def test_maps_in_stride_equals_each_maps_own():
    """`groups._maps_in_stride` (every dict's keys tested at once) against `_in_stride` of
    each map: keys in and out of [0, GROUP_IDS), one no int64 holds, shared and empty
    maps, and a map that is not a dict."""
    import random
    from collections import OrderedDict

    from overlap.trace.groups import _maps_in_stride

    rng = random.Random(7)
    pool = [0, 1, 20, GROUP_IDS - 1, GROUP_IDS, GROUP_STRIDE, -1, -(1 << 40), 1 << 62]
    empty: dict = {}
    for case in range(60):
        maps = []
        for _ in range(rng.randrange(0, 30)):
            r = rng.random()
            if r < 0.2:
                maps.append(empty)
            elif r < 0.3 and maps:
                maps.append(rng.choice(maps))  # (shared by planes)
            else:
                ks = rng.sample(pool if rng.random() < 0.3 else range(40), rng.randrange(1, 6))
                maps.append({k: f"s{k}" for k in ks})
        if case % 10 == 1 and maps:
            maps[0] = {1 << 64: "too wide"}
        if case % 10 == 2 and maps:
            maps[-1] = OrderedDict({3: "x", GROUP_IDS: "y"})
        assert _maps_in_stride(maps).tolist() == [_in_stride(m) for m in maps], maps
