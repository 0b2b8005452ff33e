"""TPU copy facts from the programs' HLO protos (`overlap.trace.programs`) equal the text rule
(`reader.copy_start_direction`) they replace where a capture carries its programs."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from overlap.trace import reader, tpu
from overlap.trace.programs import PRIMITIVE_NAMES, ProgramCopies, program_key
from overlap.trace.protos import HloProto, XSpace

REAL_TPU = Path("/work/shared/captures/tpu_v6e_offload.xplane.pb")


def _program(copies: list[tuple[str, tuple, tuple]]) -> bytes:
    """An HloProto holding one computation of copy-start instructions: (name, dest element,
    source element), each element (PrimitiveType, dims, memory space)."""
    h = HloProto()
    comp = h.hlo_module.computations.add(name="main")
    for name, dst, src in copies:
        ins = comp.instructions.add(name=name, opcode="copy-start")
        for et, dims, ms in (dst, src, (8, (), 0)):
            t = ins.shape.tuple_shapes.add(element_type=et)
            t.dimensions.extend(dims)
            t.layout.memory_space = ms
    return h.SerializeToString()


def _text(name: str, dst: tuple, src: tuple) -> str:
    """The HLO text XLA writes for the same copy-start."""
    def shape(e):
        et, dims, ms = e
        lay = ",".join(str(i) for i in reversed(range(len(dims))))
        return (f"{PRIMITIVE_NAMES[et]}[{','.join(map(str, dims))}]"
                f"{{{lay}{':S(5)' if ms == 5 else ''}}}")
    return (f"%{name} = ({shape(dst)}, {shape(src)}, u32[]) copy-start({shape(src)} %p)")


element = st.tuples(st.sampled_from(sorted(PRIMITIVE_NAMES)),
                    st.lists(st.integers(0, 1 << 20), max_size=4).map(tuple),
                    st.sampled_from([0, 5, 1]))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(element, element), min_size=1, max_size=8))
def test_program_facts_equal_the_text_rule(pairs):
    copies = [(f"copy-start.{k}", dst, src) for k, (dst, src) in enumerate(pairs)]
    progs = ProgramCopies({7: _program(copies)}, reader.array_bytes)
    for name, dst, src in copies:
        assert progs.facts(7, name) == reader.copy_start_direction(_text(name, dst, src))
    assert progs.facts(7, "copy-start.999") is None  # not in the program: the text decides
    assert progs.facts(8, "copy-start.0") is None  # a program the capture does not carry
    assert progs.facts(None, "copy-start.0") is None


def test_program_keys_are_the_uint64_program_ids():
    assert program_key(-6255983156473747731) == 12190760917235803885
    assert program_key(5) == 5


@pytest.mark.skipif(not REAL_TPU.exists(), reason="the shared real TPU capture is not here")
def test_real_tpu_capture_reads_the_same_from_its_programs(monkeypatch):
    """tpu_v6e_offload carries jit_f's HLO proto: every copy's facts come from it, and the
    tables equal those the text rule gives."""
    with_programs = reader.part_frames(reader.read_host_file(REAL_TPU))
    tr = with_programs["transfers"]
    xs = XSpace.FromString(REAL_TPU.read_bytes())
    meta = next(p for p in xs.planes if p.name == reader.METADATA_PLANE)
    progs = reader._program_copies(reader.PlaneView(meta, []))
    assert len(tr) == 2400
    for op, pid, direction, nbytes in zip(tr["hlo_op"], tr["program_id"], tr["direction"],
                                          tr["bytes"]):
        assert progs.facts(int(pid), op) == (direction, nbytes)
    monkeypatch.setattr(tpu, "_PROGRAM_FACTS", False)
    from_text = reader.part_frames(reader.read_host_file(REAL_TPU))
    for k in ("transfers", "compute", "steps", "memory", "modules", "devices"):
        pd.testing.assert_frame_equal(with_programs[k], from_text[k], check_exact=True)


# ---------------------------------------------------------------------------------------------
# Small programs read without protobuf (`programs._small_program`): upb's facts, or none


def _facts(raw: bytes, small: bool) -> dict | None:
    """`ProgramCopies._program` of `raw`, read by `_small_program` or by upb."""
    from overlap.trace import programs

    saved = programs.SMALL
    programs.SMALL = saved if small else -1
    try:
        return ProgramCopies({1: raw}, reader.array_bytes)._program(1)
    finally:
        programs.SMALL = saved


def _small_agrees(raw: bytes) -> bool:
    """`_small_program` answers only bytes upb parses, with upb's facts; True where it
    answered."""
    from google.protobuf.message import DecodeError

    from overlap.trace.programs import _small_program

    got = _small_program(raw)
    if got is None:
        return False
    try:
        ref = HloProto.FromString(raw)
    except DecodeError:
        raise AssertionError("answered bytes upb refuses") from None
    names = [(i.name, i.opcode) for c in ref.hlo_module.computations for i in c.instructions]
    assert [(n, o) for n, o, _ in got] == names
    assert _facts(raw, True) == _facts(raw, False)
    return True


def _sample_protos() -> list[bytes]:
    from overlap.trace.programs import SMALL

    root = Path(__file__).resolve().parents[2] / "sample_traces"
    out = []
    for rel in ("tpu-v6e-offload", "gpu-h100/scan-h100", "rocm"):
        for f in sorted((root / rel).rglob("*.xplane.pb"))[:3]:
            mods = reader.read_host_file(f)["modules"]
            out += [bytes(p) for p in mods["hlo_proto"] if p and len(p) <= SMALL]
    return out


def test_small_programs_read_as_upb_reads_them():
    """Every small HloProto of the TPU, H100 and ROCm samples: read here, the same
    instructions and copy facts as upb's; the v6e program with copies among them."""
    raws = _sample_protos()
    assert len(raws) > 5
    assert all(_small_agrees(r) for r in raws)
    assert any(_facts(r, True) for r in raws)


def test_mutated_small_programs_never_disagree_with_upb():
    import random

    raws = _sample_protos()
    rng = random.Random(32)
    answered = 0
    for _ in range(2500):
        b = bytearray(rng.choice(raws))
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(b))
            op = rng.randrange(3)
            if op == 0:
                b[i] = rng.randrange(256)
            elif op == 1:
                del b[i]
            else:
                b.insert(i, rng.randrange(256))
        answered += _small_agrees(bytes(b))
    assert answered > 100


def test_encodings_of_small_programs():
    """Packed and unpacked dimensions, unknown fields, fields out of order: read; a message
    field read here written twice (upb merges), invalid UTF-8, a group, an element type
    beyond int32, nesting beyond the limit: left to upb."""
    from overlap.trace.programs import _small_program
    from tests.trace.wire_bytes import field, varint

    def elem(et: int, dims: list[int], ms: int, packed: bool = True) -> bytes:
        d = field(3, 2, b"".join(varint(x) for x in dims)) if packed else \
            b"".join(field(3, 0, x) for x in dims)
        return field(2, 0, et) + d + field(5, 2, field(8, 0, ms))

    def copy(name: bytes, *elems: bytes, extra: bytes = b"") -> bytes:
        shape = b"".join(field(4, 2, e) for e in elems)
        ins = field(1, 2, name) + field(2, 2, b"copy-start") + field(3, 2, shape) + extra
        return field(1, 2, field(3, 2, field(1, 2, b"main") + field(2, 2, ins)))

    ctx = elem(8, [], 0)
    ok = [copy(b"c", elem(11, [4, 8], 5), elem(11, [4, 8], 0), ctx),
          copy(b"c", elem(11, [4, 8], 0, packed=False), elem(11, [4, 8], 5), ctx,
               extra=field(999, 2, b"\xff\xfe") + field(40, 5, b"abcd") + field(41, 1, b"x" * 8)),
          copy(b"c", elem(11, [-1], 5), elem(11, [2], 0), ctx),
          field(3, 2, b"") + copy(b"c", elem(16, [3], 5), elem(16, [3], 0), ctx)]
    for raw in ok:
        assert _small_agrees(raw), raw
    bad = [copy(b"c\xff", elem(11, [4], 5), elem(11, [4], 0), ctx),
           copy(b"c", elem(11, [4], 5), elem(11, [4], 0), ctx, extra=field(3, 2, b"")),
           copy(b"c", elem(11, [4], 5), elem(11, [4], 0), ctx, extra=field(50, 3, b"")),
           copy(b"c", elem(1 << 31, [4], 5), elem(11, [4], 0), ctx),
           copy(b"c", elem(11, [4], 5), elem(11, [4], 0), ctx) * 2,
           field(1, 0, 7)]
    nested = elem(11, [1], 0)
    for _ in range(70):
        nested = field(4, 2, nested)
    bad.append(copy(b"c", nested, nested, ctx))
    for raw in bad:
        assert _small_program(raw) is None, raw
