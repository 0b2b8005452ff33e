"""`overlap.trace.skeleton`: a skeleton decoded without protobuf must be upb's answer, or none.

upb is the reference: wherever `decode_space` answers, upb must accept the same bytes and give
the same fields (the map iteration order included: readers iterate event metadata), and
wherever upb refuses, `decode_space` must refuse too (the caller then asks upb, which raises
its own message). Checked on the skeletons of every sample capture and synthetic ones, on
byte-level mutations of them, and on encodings the canonical writers never produce.
"""

from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest
from google.protobuf.message import DecodeError

from overlap.trace import files, reader, skeleton, wire
from overlap.trace.protos import XPlane, XSpace
from overlap.trace.synthetic import gpu_offload_scenario, many_ops_scenario
from tests.trace.wire_bytes import field, split_planes, varint

pytestmark = pytest.mark.skipif(wire._scan is None, reason="the scanner was not built")

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"


def _stat(s) -> tuple:
    kind = s.WhichOneof("value")
    vals = (s.double_value, s.uint64_value, s.int64_value, s.str_value, s.bytes_value,
            s.ref_value)
    return (s.metadata_id, kind, struct.pack("<d", vals[0]), *vals[1:])


def _plain(xs) -> tuple:
    """What the reader reads of a skeleton, in iteration order."""
    planes = []
    for p in xs.planes:
        ems = [(k, m.id, m.name, m.display_name, bytes(m.metadata),
                [_stat(s) for s in m.stats], list(m.child_id))
               for k, m in p.event_metadata.items()]
        sms = [(k, m.id, m.name, m.description) for k, m in p.stat_metadata.items()]
        planes.append((p.id, p.name, len(p.lines), ems, sms, [_stat(s) for s in p.stats]))
    return planes, list(xs.errors), list(xs.warnings), list(xs.hostnames)


def _upb(raw: bytes):
    try:
        return XSpace.FromString(raw)
    except DecodeError:
        return None


def _agree(raw: bytes) -> bool:
    """decode_space answers upb's answer or none; True where it answered."""
    ours = skeleton.decode_space(raw)
    if ours is None:
        return False
    ref = _upb(raw)
    assert ref is not None, raw
    assert _plain(ours) == _plain(ref)
    return True


def _skeletons(path: Path) -> list[bytes]:
    chunks = files.read_chunks(path, wire.PAD, alone=reader._read_alone)
    assert chunks is not None
    return [wire._scan.split_space(buf, n, reader._strip_meta)[0] for buf, n, _, _ in chunks]


def _many_ops(path: Path, steps: int = 20) -> Path:
    # SYNTHETIC: the shape of benchmarks/bench_shapes.py's many-ops TPU capture (every copy its
    # own copy-start op), no HLO protos
    return many_ops_scenario(steps).write(path)


def test_sample_captures_decode_as_upb_does():
    answered = 0
    for f in sorted(SAMPLES.rglob("*.xplane.pb")):
        for raw in _skeletons(f):
            _agree(raw)
            # each plane alone too (a chunk of several planes is refused where one of them is:
            # the `/host:metadata` plane keys its entries by program id)
            for pl in XSpace.FromString(raw).planes:
                one = XSpace()
                one.planes.append(pl)
                answered += _agree(one.SerializeToString())
    assert answered > 10  # (planes of dense ids: device planes, most host planes)


def test_synthetic_captures_decode_as_upb_does(tmp_path: Path):
    for f in (_many_ops(tmp_path / "many.xplane.pb"),
              gpu_offload_scenario(steps=2, layers=2).write(tmp_path / "gpu.xplane.pb")):
        raws = _skeletons(f)
        assert all(_agree(raw) for raw in raws if len(raw) <= skeleton.LIMIT)


def test_mutated_skeletons_never_disagree_with_upb(tmp_path: Path):
    raws = _skeletons(_many_ops(tmp_path / "many.xplane.pb", 2))
    rng = random.Random(24)
    answered = refused = 0
    for _ in range(3000):
        b = bytearray(rng.choice(raws))
        for _ in range(rng.randint(1, 3)):
            op = rng.randrange(4)
            i = rng.randrange(len(b))
            if op == 0:
                b[i] = rng.randrange(256)
            elif op == 1:
                b[i] ^= 1 << rng.randrange(8)
            elif op == 2:
                del b[i:i + rng.randint(1, 4)]
            else:
                b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 3)))
            if not b:
                break
        if _agree(bytes(b)):
            answered += 1
        else:
            refused += 1
    assert answered > 100 and refused > 100


def _plane(*fields: bytes) -> bytes:
    return field(1, 2, b"".join(fields))


def _entry(fn: int, key: int, value: bytes) -> bytes:
    return field(fn, 2, field(1, 0, key) + field(2, 2, value))


def test_encodings_the_writers_never_write():
    st = field(1, 0, 3) + field(3, 0, 7) + field(5, 2, b"last") + field(9, 5, b"abcd")
    em = (field(2, 2, b"op") + field(6, 0, 5) + field(6, 2, varint(1) + varint(-2))
          + field(5, 2, st) + field(2, 2, b"op2") + field(15, 1, b"12345678"))
    raw = (field(4, 2, b"host")
           + _plane(field(2, 2, b"/host:CPU"), field(1, 0, -4),
                    _entry(4, 2, em), _entry(4, 1, b""), _entry(4, 2, field(2, 2, b"again")),
                    field(4, 2, field(2, 2, field(2, 2, b"no key"))),
                    _entry(5, 1, field(2, 2, b"name") + field(3, 2, b"why")),
                    field(6, 2, field(1, 0, 1) + field(6, 2, b"\xff\x00") + field(2, 1,
                                                                              b"\0" * 8)),
                    field(6, 2, b""))
           + field(2, 2, "ü".encode()) + field(3, 2, b"w") + field(99, 0, 1))
    assert _agree(raw)
    # ids upb keeps in its hash table's order (not ascending): that order (`upb_int_order`),
    # or upb builds the map where the installed upb is another
    sparse = _plane(_entry(4, 1, b""), _entry(4, 1 << 40, b""))
    assert _upb(sparse) is not None
    assert _agree(sparse) == skeleton._upb_inttable()
    for bad in (_plane(field(2, 2, b"\xff")),  # invalid UTF-8: upb refuses too
                _plane(field(1, 2, b"")),  # a known field of another wire type
                _plane(field(3, 2, b"")),  # lines: never in a skeleton
                _plane(field(7, 3, b"")),  # a group
                _plane(field(4, 2, field(2, 2, b"") + field(2, 2, b""))),  # merged value
                field(1, 2, b"\x08"),  # a truncated varint
                b"\x00\x00",  # field number 0
                b"x" * (skeleton.LIMIT + 1)):
        assert skeleton.decode_space(bad) is None, bad


def test_stat_reads_like_upb():
    raw = _plane(field(6, 2, field(7, 0, 9) + field(1, 0, 2)), field(6, 2, b""))
    ours = skeleton.decode_space(raw)
    ref = XSpace.FromString(raw)
    assert ours is not None
    for a, b in zip(ours.planes[0].stats, ref.planes[0].stats):
        assert a.WhichOneof("value") == b.WhichOneof("value")
        assert (a.ref_value, a.str_value, a.bytes_value) == (b.ref_value, b.str_value,
                                                            b.bytes_value)
    with pytest.raises(ValueError):
        ours.planes[0].stats[0].WhichOneof("data")
    with pytest.raises(AttributeError):
        ours.planes[0].stats[0].no_such_field  # noqa: B018
    assert isinstance(XPlane.FromString(b""), object)  # (the message classes still load)


def _kept_host(name: str):
    """`reader._strip_meta` as before round 44: the host plane's entries in the skeleton."""
    return False if name == reader.HOST_PLANE else reader._strip_meta(name)


def _with_entries(path: Path, strip=reader._strip_meta) -> list[tuple[bytes, int]]:
    """(skeleton, its event metadata entries) per chunk: the count the scanner's split gives
    (the entries of planes whose metadata stays in the skeleton)."""
    chunks = files.read_chunks(path, wire.PAD, alone=reader._read_alone)
    assert chunks is not None
    out = []
    for buf, n, _, _ in chunks:
        skel, planes, _ = split_planes(buf, n, strip)
        out.append((skel, sum(len(ms) for _, ms, _, stripped, _, _ in planes if not stripped)))
    return out


def test_entry_count_decides_instead_of_bytes_and_answers_as_upb():
    """Given the entries' count, a large skeleton of few entries (a CPU capture's, 0.5 MB of
    `Hlo Proto` blobs) is decoded here, as upb decodes it; one of many entries is refused."""
    answered = refused = 0
    # (the host planes kept too: the V100 sample's 5,056 entries are refused; its own split
    # keeps them out of the skeleton, `reader._strip_meta`'s 4)
    for f, strip in [(f, s) for f in sorted(SAMPLES.rglob("*.xplane.pb"))
                     for s in (reader._strip_meta, _kept_host)]:
        for raw, n in _with_entries(f, strip):
            ref = _upb(raw)
            assert sum(len(p.event_metadata) for p in ref.planes) == n
            ours = skeleton.decode_space(raw, entries=n)
            if ours is None:
                refused += 1
                continue
            answered += 1
            assert _plain(ours) == _plain(ref)
            assert len(raw) > skeleton.LIMIT or skeleton.decode_space(raw) is not None
    cpu = [raw for f in sorted((SAMPLES / "cpu-transformer-tiny").rglob("*.xplane.pb"))
           for raw, n in _with_entries(f)]
    assert cpu and all(len(r) > skeleton.LIMIT for r in cpu)
    assert all(skeleton.decode_space(r, entries=10) is not None for r in cpu)
    assert answered and refused


def test_entry_count_over_the_limit_and_plane_fields_over_budget_are_refused():
    many = _plane(*[_entry(5, k, field(2, 2, b"s")) for k in range(skeleton.MAX_FIELDS + 1)])
    assert _upb(many) is not None
    assert skeleton.decode_space(many, entries=0) is None  # the budget
    few = _plane(*[_entry(5, k, field(2, 2, b"s")) for k in range(10)])
    assert _agree(few)
    assert skeleton.decode_space(few, entries=skeleton.MAX_ENTRIES + 1) is None
    assert skeleton.decode_space(few, entries=0) is not None


@pytest.mark.skipif(not skeleton._upb_inttable(), reason="another upb: such maps go to upb")
def test_int_map_order_is_upbs_for_any_keys():
    """`upb_int_order` against upb itself: maps of 1 to 3,000 entries, keys of every shape
    (full 64-bit, negative, multiples of 2**32 whose halves cancel in the hash, small and
    sparse), written in any order, keys written more than once; and the decoder's answer
    for such a plane equals upb's, order included."""
    rng = random.Random(32)
    for _ in range(600):
        m = rng.choice([1, 2, 7, 8, 9, 15, 16, 17, 57, 100, 300, 1000, 3000])
        kind = rng.randrange(5)
        pool = [(rng.randrange(1 << 63), rng.randrange(-(1 << 63), 1 << 63),
                 rng.randrange(4 * m + 10), rng.randrange(1 << 20) * rng.choice(
                     [1, 1 << 32, (1 << 32) + 1, 1024]), rng.randrange(10**5))[kind]
                for _ in range(m)]
        keys = [rng.choice(pool) for _ in range(m + rng.randrange(m + 1))] \
            if rng.random() < 0.5 else pool
        raw = _plane(*[_entry(4, k, field(2, 2, b"n")) for k in keys])
        ref = _upb(raw)
        assert list(ref.planes[0].event_metadata.keys()) == skeleton.upb_int_order(keys)
        if m <= 100:
            assert _agree(raw)


def test_int_map_order_is_left_to_upb_on_another_protobuf(monkeypatch, tmp_path):
    """Where the installed protobuf is not the upb `upb_int_order` follows (an older or newer
    release, the pure-Python backend), a map of sparse keys is refused (upb builds it); dense
    ones are still decoded."""
    sparse = _plane(_entry(4, 1, b""), _entry(4, 1 << 40, b""))
    dense = _plane(_entry(4, 2, b""), _entry(4, 1, b""))
    import importlib.util

    real = importlib.util.find_spec("google.protobuf")
    assert real is not None and real.origin
    for env, version in (("upb", "7.35.2"), ("upb", "7.38.0"), ("python", "7.36.2"),
                         ("upb", "x")):
        init = tmp_path / version / "__init__.py"
        init.parent.mkdir(exist_ok=True)
        init.write_text(f"__version__ = '{version}'\n")
        monkeypatch.setenv("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", env)
        monkeypatch.setattr(importlib.util, "find_spec", lambda name, init=init: type(
            "Spec", (), {"origin": str(init)})())
        assert not skeleton._upb_inttable()
        monkeypatch.setattr(skeleton, "_UPB_INTTABLE", [None])
        assert skeleton.decode_space(sparse) is None
        assert _agree(dense)


def test_plane_stats_over_the_cap_are_refused():
    st = field(6, 2, field(1, 0, 1) + field(3, 0, 7))
    many = _plane(*[st] * (skeleton.MAX_PLANE_STATS + 1))
    assert _upb(many) is not None and skeleton.decode_space(many) is None
    assert _agree(_plane(*[st] * skeleton.MAX_PLANE_STATS))
