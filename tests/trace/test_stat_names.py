"""A plane's stat metadata read by the scanner (`_scan._stat_names`, never in the skeleton upb
parses) is upb's map: the same id -> name pairs in the same iteration order, the same strings
with invalid UTF-8 replaced and counted, the same refusal of damaged entries. Each case is a
file written by hand (wire_bytes): plain dense ids, ids out of order or repeated, sparse and
negative ids, a value written twice (upb merges it), unknown fields, wrong wire types, bad
UTF-8 and damage; the answer is upb's parse of the whole file."""

from __future__ import annotations

import random

import pytest
from google.protobuf.message import DecodeError

from overlap.trace import wire
from overlap.trace.protos import XSpace
from tests.trace.wire_bytes import field

pytestmark = pytest.mark.skipif(wire._scan is None, reason="scanner not built")


def _value(rng: random.Random, key: int) -> bytes:
    """An XStatMetadata: id, name, description, in any order, some left out or repeated."""
    name = rng.choice(["bytes", "memcpy_details", "hlo_op", "", "é", "kind:1 size:%d" % key])
    parts = [field(1, 0, key), field(2, 2, name.encode()), field(3, 2, b"about")]
    rng.shuffle(parts)
    parts = [p for p in parts if rng.random() < 0.85]
    if rng.random() < 0.1:
        parts.append(field(2, 2, b"second name"))  # the last name wins
    return b"".join(parts)


def _entry(rng: random.Random, key: int, odd: str | None) -> bytes:
    body = [field(1, 0, key), field(2, 2, _value(rng, key))]
    if odd == "no key":
        body = body[1:]
    elif odd == "no value":
        body = body[:1]
    elif odd == "value twice":
        body.append(field(2, 2, field(3, 2, b"merged")))
    elif odd == "unknown in entry":
        body.append(field(7, 0, 1))
    elif odd == "unknown in value":
        body[1] = field(2, 2, _value(rng, key) + field(9, 2, b"x"))
    elif odd == "key as bytes":
        body[0] = field(1, 2, b"\x01")
    elif odd == "bad utf-8 name":
        body[1] = field(2, 2, field(2, 2, b"ab\xffcd"))
    elif odd == "bad utf-8 description":
        body[1] = field(2, 2, field(2, 2, b"fine") + field(3, 2, b"\xc3"))
    elif odd == "over-long key":
        body[0] = field(1, 0, key, pad=3)
    elif odd == "damaged":
        body[1] = b"\x12\x05\x0a\x01"  # a value shorter than its length says
    return field(5, 2, b"".join(body))


_ODD = ["no key", "no value", "value twice", "unknown in entry", "unknown in value",
        "key as bytes", "bad utf-8 name", "bad utf-8 description", "over-long key", "damaged"]


def _file(rng: random.Random) -> bytes:
    n = rng.choice([0, 1, 2, 5, 30, 300])
    shape = rng.choice(["dense", "shuffled", "sparse", "negative", "repeats"])
    keys = list(range(1, n + 1)) if shape != "sparse" else \
        [rng.randrange(1, 1 << 50) for _ in range(n)]
    if shape == "shuffled":
        rng.shuffle(keys)
    elif shape == "negative" and keys:
        keys[rng.randrange(len(keys))] = -rng.randrange(1, 9)
    elif shape == "repeats" and keys:
        keys += rng.sample(keys, min(len(keys), 3))
    odd = rng.choice(_ODD) if rng.random() < 0.4 else None
    at = rng.randrange(len(keys)) if keys else -1
    entries = [_entry(rng, k, odd if i == at else None) for i, k in enumerate(keys)]
    plane = [field(1, 0, 7), field(2, 2, b"/device:GPU:0"), *entries,
             field(6, 2, field(1, 0, 1) + field(4, 0, 3))]  # a plane stat
    rng.shuffle(plane)
    return field(1, 2, b"".join(plane)) + field(1, 2, field(2, 2, b"/host:CPU"))


def _read(raw: bytes, scanner) -> tuple:
    """(per plane its stat names as items in order, strings replaced) or the refusal."""
    before = wire.BAD_STRINGS[0]
    old = wire.SCANNER
    wire.SCANNER = scanner
    try:
        _, planes, _ = wire.parse_space(wire.padded(raw), len(raw))
        names = [list(wire.Plane(pv).stat_names.items()) for pv in planes]
    except wire.parse_errors():
        return ("refused",)
    finally:
        wire.SCANNER = old
    return names, wire.BAD_STRINGS[0] - before


@pytest.mark.parametrize("lazy", [-1, 1])
def test_stat_names_are_upbs_map_in_upbs_order(monkeypatch, lazy):
    """(`lazy` 1: every plain dense map left in the bytes, `LazyStatNames`; -1: never)"""
    monkeypatch.setattr(wire, "LAZY_STAT_NAMES", lazy)
    rng = random.Random(20261127)
    seen = {"plain": 0, "upb": 0, "refused": 0}
    for _ in range(600):
        raw = _file(rng)
        want = _read(raw, None)
        assert _read(raw, wire._scan) == want, raw.hex()
        if want == ("refused",):
            seen["refused"] += 1
        else:
            seen["upb" if want[1] else "plain"] += 1
    # every kind of case was met: plain maps, replaced strings, refusals
    assert all(seen.values()), seen


def test_plain_dense_map_is_read_without_upb():
    """The common case (ids 1..n written in order) gives the map itself, no bytes for upb;
    out of order, the same map in ascending order (upb's for dense ids)."""
    plane = b"".join(field(5, 2, field(1, 0, k) + field(2, 2, field(2, 2, b"s%d" % k)))
                     for k in (3, 1, 2))
    raw = field(1, 2, plane)
    got = wire._scan.split_space(wire.padded(raw), len(raw))
    assert got[0] == field(1, 2, b"")  # nothing of it left in the skeleton
    assert got[5] == [{1: "s1", 2: "s2", 3: "s3"}]
    assert list(got[5][0]) == [1, 2, 3]
    assert XSpace.FromString(raw).planes[0].stat_metadata[2].name == "s2"


def test_damaged_entry_is_refused_as_upb_refuses_it():
    entry = field(1, 0, 1) + b"\x12\x05\x0a\x01"  # a value shorter than its length says
    raw = field(1, 2, field(5, 2, entry))
    with pytest.raises(DecodeError):
        XSpace.FromString(raw)
    assert _read(raw, wire._scan) == ("refused",) == _read(raw, None)
