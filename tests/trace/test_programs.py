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
