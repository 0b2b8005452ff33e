"""The scanner's walk of a file's top-level fields (`_scan.top_fields`, under `files._fields`)
is the Python walk (`files._fields_py`): the same fields, plane flags and refusals, on files
of fields of every wire type and size, varints of every length (over-long and beyond 64
bits among them), fields across the read-ahead blocks, damage and garbage; and the chunks
`read_chunks` cuts from them are the ones the Python walk gives."""

from __future__ import annotations

import os
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from overlap.trace import files, wire

pytestmark = pytest.mark.skipif(getattr(wire._scan, "top_fields", None) is None,
                                reason="scanner not built")


def _varint(v: int, pad: int = 0) -> bytes:
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v or pad:
            out.append(b | 0x80)
            if not v:
                pad -= 1
                if pad < 0:
                    out[-1] &= 0x7F
                    break
        else:
            out.append(b)
            break
    return bytes(out)


def _field(rng: random.Random, big: bool) -> bytes:
    odd = rng.random() < 0.003  # (one odd field refuses the whole file)
    fn = rng.choice([0] if odd and rng.random() < 0.5 else [1, 1, 1, 2, 3, 4, 15, 16, 1 << 28,
                                                           (1 << 61) - 1])
    wt = rng.choice([3, 4, 6, 7] if odd else [2, 2, 2, 2, 0, 1, 5])
    pad = rng.choice([0, 0, 0, 1, 3, 9])
    tag = _varint(fn << 3 | wt, pad)
    if rng.random() < 0.03:  # a tag of 2**64 and more (Python reads it, wire type intact)
        tag = b"\xff" * 9 + b"\x7f"
    if wt == 0:
        return tag + _varint(rng.choice([0, 1, 300, (1 << 64) - 1, 1 << 66]), pad)
    if wt == 1:
        return tag + bytes(8)
    if wt == 5:
        return tag + bytes(4)
    n = rng.choice([0, 1, 100, 127, 128, 129, 5000] + ([70000, 200000] if big else []))
    if rng.random() < 0.003:
        return tag + _varint(rng.choice([1 << 40, (1 << 64) - 1, 1 << 65]))  # past the end
    body = bytes(rng.randrange(256) for _ in range(min(n, 64))) + bytes(max(0, n - 64))
    return tag + _varint(n, pad) + body


def _file(rng: random.Random) -> bytes:
    parts = [_field(rng, rng.random() < 0.2) for _ in range(rng.choice([0, 1, 3, 40, 400]))]
    raw = b"".join(parts)
    r = rng.random()
    if r < 0.1 and raw:
        raw = raw[:rng.randrange(len(raw))]  # cut
    elif r < 0.15:
        raw += bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40)))  # garbage
    return raw


def _both(tmp_path, raw: bytes):
    p = tmp_path / "f.pb"
    p.write_bytes(raw)
    fd = os.open(p, os.O_RDONLY)
    try:
        fast = files._fields(fd, len(raw))
        slow = files._fields_py(fd, len(raw))
    finally:
        os.close(fd)
    return fast, slow


def test_walk_is_the_python_walk(tmp_path):
    rng = random.Random(20261127)
    seen = {"fields": 0, "refused": 0, "across blocks": 0}
    for _ in range(400):
        raw = _file(rng)
        fast, slow = _both(tmp_path, raw)
        if slow is None:
            assert fast is None, raw[:200].hex()
            seen["refused"] += 1
            continue
        assert fast is not None, raw[:200].hex()
        st_, en, pl = fast
        assert [(int(a), int(b), bool(c)) for a, b, c in zip(st_, en, pl)] == slow
        seen["fields"] += bool(slow)
        seen["across blocks"] += len(raw) > (1 << 16) and len(slow) > 1
    assert all(seen.values()), seen


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_any_bytes(tmp_path_factory, raw):
    fast, slow = _both(tmp_path_factory.mktemp("b"), raw)
    if slow is None:
        assert fast is None
    else:
        assert fast is not None
        assert [(int(a), int(b), bool(c)) for a, b, c in zip(*fast)] == slow


def test_fields_at_the_block_edges(tmp_path):
    """Fields whose heads lie just before, on and after a read-ahead block's last 128
    bytes: each is read from a block that holds them."""
    for n in range(65300, 65420, 7):
        first = b"\x0a" + _varint(n) + bytes(n)
        for tail in (b"\x0a\x00", b"\x12\x05hello", b"\x08" + b"\xff" * 9 + b"\x01"):
            raw = first + tail * 3
            fast, slow = _both(tmp_path, raw)
            assert slow is not None
            assert [(int(a), int(b), bool(c)) for a, b, c in zip(*fast)] == slow


def test_chunks_are_the_python_walks(tmp_path, monkeypatch):
    """`read_chunks` over a file of many small planes, a large host plane between them and
    host names: the same chunks with either walk."""
    from overlap.trace.protos import XSpace

    sp = XSpace()
    for d in range(300):
        sp.planes.add(id=d, name=f"/device:GPU:{d}")
    host = sp.planes.add(id=999, name="/host:CPU")
    host.lines.add(name="x" * (files.ALONE_MIN_BYTES + 10))
    for d in range(300, 310):
        sp.planes.add(id=d, name=f"/device:GPU:{d}")
    sp.hostnames.append("h")
    p = tmp_path / "c.xplane.pb"
    p.write_bytes(sp.SerializeToString())

    def chunks():
        got = files.read_chunks(p, 16, alone=lambda name: name == "/host:CPU")
        assert got is not None
        return [(bytes(b[:n]), n, offs, alone) for b, n, offs, alone in got]

    fast = chunks()
    monkeypatch.setattr(wire, "SCANNER", None)
    assert chunks() == fast
    assert [c[3] for c in fast] == [True, False]
    assert np.diff(fast[1][2]).min() > 0 and len(fast[1][2]) == 310


@pytest.mark.parametrize("raw, ok", [
    (_varint(1 << 64) + _varint(5) + b"\x0a\x00", True),  # a tag of 2**64: field 2**61, wt 0
    (_varint((1 << 67) | 10) + bytes(3) + b"\x0a\x00", False),  # ... wt 2, its length 0 read
    (b"\x0a" + _varint(1 << 65) + b"\x0a\x00", False),  # a length of 2**65 (low bits 0)
    (b"\x0a" + _varint((1 << 64) - 1), False),
    (b"\x0a\x83" + b"\x80" * 8 + b"\x00abc", True),  # over-long, ten bytes
    (b"\x0a\x83" + b"\x80" * 9 + b"\x00abc", False),  # eleven bytes: no varint
    (b"\x08" + _varint(1 << 66), True),  # a value beyond 64 bits: stepped over
    (_varint(0) + b"\x00", False), (b"\x0b\x00", False), (b"\x0a\x05ab", False),
])
def test_varints_beyond_64_bits(tmp_path, raw, ok):
    fast, slow = _both(tmp_path, raw)
    assert (slow is not None) == ok
    if slow is None:
        assert fast is None
    else:
        assert [(int(a), int(b), bool(c)) for a, b, c in zip(*fast)] == slow


def test_heads_are_each_fields_first_bytes(tmp_path):
    """`files._heads` (names peeked over blocks read ahead) gives each field's first bytes,
    fields of any size across the blocks' edges."""
    rng = random.Random(5)
    raw = b"".join(b"\x0a" + _varint(n) + bytes(rng.randrange(256) for _ in range(n))
                   for n in [rng.choice([0, 3, 120, 200, 40000]) for _ in range(300)])
    p = tmp_path / "h.pb"
    p.write_bytes(raw)
    fd = os.open(p, os.O_RDONLY)
    try:
        st_, en, _ = files._fields(fd, len(raw))
        starts, ends = st_.tolist(), en.tolist()
        got = list(files._heads(fd, starts, ends))
    finally:
        os.close(fd)
    assert got == [raw[a:min(b, a + 128)] for a, b in zip(starts, ends)]
