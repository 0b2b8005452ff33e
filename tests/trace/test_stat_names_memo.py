"""Stat metadata of many planes read by the scanner (`_scan._stat_names`, `_scan._name_of`): a
plane's name for an id is the object the last plane with that id named it by only where the
bytes are the same, and a map written with its ids in any order is upb's map in upb's order.
Each file holds many GPU planes whose maps share ids, with the same or another name of the
same length, ASCII or not, ids shuffled and repeated; the answer is upb's parse of the file."""

from __future__ import annotations

import random

import pytest

from overlap.trace import wire
from tests.trace.test_stat_names import _read
from tests.trace.wire_bytes import field

pytestmark = pytest.mark.skipif(wire._scan is None, reason="scanner not built")

# names of one length that differ in a byte, a non-ASCII one of that length in characters,
# an empty one, and longer ones
_NAMES = ["abcd", "abce", "abcé", "", "memcpy_details", "hlo_op", "kind:1 size:4096",
          "kind:1 size:8192"]


def _map(rng: random.Random, n: int) -> bytes:
    keys = list(range(1, n + 1))
    rng.shuffle(keys)
    if rng.random() < 0.3:
        keys += rng.sample(keys, min(n, 2))  # an id written twice: its last entry
    return b"".join(field(5, 2, field(1, 0, k) + field(2, 2, field(1, 0, k) + field(
        2, 2, rng.choice(_NAMES).encode()))) for k in keys)


def _file(rng: random.Random, planes: int) -> bytes:
    out = []
    for d in range(planes):
        plane = field(1, 0, d + 10) + field(2, 2, b"/device:GPU:%d" % d)
        if rng.random() < 0.9:
            plane += _map(rng, rng.choice([1, 3, 8, 20]))
        out.append(field(1, 2, plane))
    return b"".join(out) + field(1, 2, field(2, 2, b"/host:CPU"))


def test_many_planes_maps_are_upbs():
    rng = random.Random(20261128)
    for _ in range(150):
        raw = _file(rng, rng.choice([2, 5, 30]))
        want = _read(raw, None)
        assert want != ("refused",)
        assert _read(raw, wire._scan) == want, raw.hex()


def test_same_id_other_bytes_of_one_length_is_its_own_name():
    """Plane 2 names id 1 by bytes of the same length as plane 1's: its own name, not plane
    1's; plane 3 names it as plane 1 did: the same object."""
    maps = [{1: "abcd", 2: "x"}, {1: "abce", 2: "x"}, {1: "abcd", 2: "é"}, {2: "x", 1: "abcé"}]
    raw = b"".join(field(1, 2, field(2, 2, b"/device:GPU:%d" % i) + b"".join(
        field(5, 2, field(1, 0, k) + field(2, 2, field(2, 2, v.encode())))
        for k, v in m.items())) for i, m in enumerate(maps))
    _, planes, _ = wire.parse_space(wire.padded(raw), len(raw))
    got = [wire.Plane(pv).stat_names for pv in planes]
    assert [dict(sorted(m.items())) for m in maps] == got
    assert [list(g) for g in got] == [[1, 2]] * 4  # ids ascending, as upb iterates them
    assert got[0][1] is got[2][1] and got[0][2] is got[1][2] is got[3][2]
    assert got[1][1] == "abce" and got[3][1] == "abcé"
