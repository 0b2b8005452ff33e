"""A compiled program's HloProto read by the scanner (`_scan.hlo_lite`, through
`overlap.trace.programs.hlo_message`) gives upb's values for every field overlap reads, on every
program of the real captures, and refuses (None: upb reads it) whatever it is not sure of: a
damaged or doubtful byte never gives a value upb would not."""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from overlap.hlo.program import hlo_protos_from_xspace
from overlap.trace import wire
from overlap.trace.protos import HloProto

try:  # the error upb raises on bytes it cannot parse
    from google.protobuf.message import DecodeError
except ImportError:  # pragma: no cover - protobuf is a core dependency
    DecodeError = ValueError  # type: ignore[misc,assignment]

pytestmark = pytest.mark.skipif(wire._scan is None, reason="the compiled scanner is not built")


def _shape(s) -> tuple:
    return (s.element_type, list(s.dimensions), s.layout.memory_space,
            [_shape(t) for t in s.tuple_shapes])


def fields(msg) -> tuple:
    """Every field overlap reads of an HloProto (lite or upb), as plain values."""
    m = msg.hlo_module
    si = m.stack_frame_index
    return (
        m.name, m.entry_computation_name, m.id, m.entry_computation_id,
        [(c.name, c.id, c.root_id,
          [(i.name, i.opcode, i.id, i.parameter_number, i.tuple_index, list(i.operand_ids),
            list(i.control_predecessor_ids), list(i.called_computation_ids),
            i.metadata.op_name, i.metadata.stack_frame_id, _shape(i.shape))
           for i in c.instructions[:]])
         for c in m.computations[:]],
        list(si.file_names), list(si.function_names),
        [(f.file_name_id, f.function_name_id, f.line, f.column, f.end_line, f.end_column)
         for f in si.file_locations],
        [(f.file_location_id, f.parent_frame_id) for f in si.stack_frames])


def buffer_fields(msg) -> tuple:
    """Every field the heap simulation's replay reads of a buffer assignment (`heap._replay`,
    `host_memory.pinned_host_peak`), as plain values."""
    ba = msg.buffer_assignment
    return ([(b.id, b.size, b.color, b.defined_at.instruction_name,
              list(b.defined_at.shape_index), b.defined_at.instruction_id)
             for b in ba.logical_buffers],
            [[(e.kind, e.buffer_id, e.instruction_name, e.share_with_canonical_id)
              for e in t.events] for t in ba.heap_simulator_traces])


def agrees(raw: bytes) -> bool:
    """lite equals upb where it answers, with and without its buffers; where upb refuses the
    bytes, lite refuses them too. True where lite answered (without its buffers)."""
    lite = wire._scan.hlo_lite(raw)
    full = wire._scan.hlo_lite(raw, True)
    try:
        msg = HloProto.FromString(raw)
    except Exception:  # noqa: BLE001 - upb refuses: so must lite
        assert lite is None and full is None
        return False
    if full is not None:
        # (with its buffers it refuses what it refuses without them, and a kind beyond
        # int32, which upb wraps)
        assert lite is not None and fields(full) == fields(msg)
        assert buffer_fields(full) == buffer_fields(msg)
    if lite is None:
        return False
    assert lite.buffer_assignment is None and fields(lite) == fields(msg)
    return True


def _real_protos(gpu_corpus, gpu_large) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    files = sorted(gpu_corpus.glob("**/*.xplane.pb")) + sorted(gpu_large.glob("**/*.xplane.pb"))
    for f in files:
        for k, raw in hlo_protos_from_xspace(f).items():
            out[f"{f.parent.parent.parent.parent.name}/{k}"] = raw
    return out


@pytest.fixture(scope="module")
def real_protos(gpu_corpus, gpu_large) -> dict[str, bytes]:
    return _real_protos(gpu_corpus, gpu_large)


def test_every_real_program_reads_as_upb_reads_it(real_protos):
    assert len(real_protos) > 500
    answered = sum(agrees(raw) for raw in real_protos.values())
    # (their heap simulations too, each answered: the programs that ran hold hundreds of
    # events, the constants' programs none)
    events = [sum(len(t.events) for t in wire._scan.hlo_lite(raw, True).buffer_assignment
                  .heap_simulator_traces) for raw in real_protos.values()]
    assert max(events) > 400 and min(events) == 0
    assert answered == len(real_protos)  # none of XLA's own is refused


def _small_real(real_protos) -> list[bytes]:
    return sorted((r for r in real_protos.values() if 200 < len(r) < 6000), key=len)[:12]


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_damaged_real_programs_never_read_other_than_upb(real_protos, data):
    raws = _small_real(real_protos)
    raw = bytearray(data.draw(st.sampled_from(raws)))
    for _ in range(data.draw(st.integers(1, 4))):
        op = data.draw(st.sampled_from(["flip", "cut", "insert", "byte"]))
        at = data.draw(st.integers(0, max(len(raw) - 1, 0)))
        if op == "flip" and raw:
            raw[at] ^= 1 << data.draw(st.integers(0, 7))
        elif op == "byte" and raw:
            raw[at] = data.draw(st.integers(0, 255))
        elif op == "cut":
            del raw[at:]
        else:
            raw[at:at] = data.draw(st.binary(min_size=1, max_size=6))
    agrees(bytes(raw))


def test_random_damage_answers_mostly(real_protos):
    """Most single-byte damages still parse (a changed number, a skipped unknown field): the
    reader answers those, not only refuses (a reader refusing everything passes the test
    above)."""
    rng = random.Random(7)
    raws = _small_real(real_protos)
    answered = 0
    for k in range(400):
        raw = bytearray(raws[k % len(raws)])
        raw[rng.randrange(len(raw))] = rng.randrange(256)
        answered += agrees(bytes(raw))
    assert answered > 100


def _proto(build) -> bytes:
    h = HloProto()
    build(h)
    return h.SerializeToString()


def _tag(fn: int, wt: int) -> bytes:
    return wire._scan.enc_varint(fn << 3 | wt)


def _ld(fn: int, payload: bytes) -> bytes:
    return _tag(fn, 2) + wire._scan.enc_varint(len(payload)) + payload


def _instr(body: bytes) -> bytes:
    """An HloProto of one computation of one instruction of `body`'s bytes."""
    return _ld(1, _ld(3, _ld(1, b"main") + _ld(2, body)))


def test_packed_and_unpacked_ids_and_repeated_scalars_read_as_upb():
    packed = _ld(1, b"a") + _ld(36, b"".join(wire._scan.enc_varint(v) for v in (3, 1 << 40)))
    unpacked = _ld(1, b"a") + _tag(36, 0) + wire._scan.enc_varint(3) + _tag(36, 0) \
        + wire._scan.enc_varint(1 << 40)
    negative = _ld(1, b"a") + _tag(35, 0) + wire._scan.enc_varint((1 << 64) - 5)
    twice = _ld(1, b"a") + _ld(1, b"b") + _tag(35, 0) + b"\x01" + _tag(35, 0) + b"\x02"
    for body in (packed, unpacked, negative, twice):
        assert agrees(_instr(body))
    lite = wire._scan.hlo_lite(_instr(twice))
    assert lite.hlo_module.computations[0].instructions[0].name == "b"  # the last one
    assert lite.hlo_module.computations[0].instructions[0].id == 2
    assert wire._scan.hlo_lite(_instr(negative)).hlo_module.computations[0] \
        .instructions[0].id == -5


def test_defaults_where_fields_are_absent():
    for raw in (b"", _proto(lambda h: None), _instr(b"")):
        assert agrees(raw)
    i = wire._scan.hlo_lite(_instr(b"")).hlo_module.computations[0].instructions[0]
    assert (i.shape.layout.memory_space, list(i.shape.dimensions), i.metadata.op_name) \
        == (0, [], "")


@pytest.mark.parametrize("body, why", [
    (_ld(7, _ld(2, b"x")) + _ld(7, _tag(15, 0) + b"\x03"), "metadata twice: upb merges"),
    (_ld(3, _tag(2, 0) + b"\x0b") + _ld(3, _tag(3, 0) + b"\x04"), "shape twice: upb merges"),
    (_tag(35, 2) + b"\x01\x05", "a varint field written length-delimited: upb keeps it unknown"),
    (_ld(1, b"\xff\xfe"), "invalid UTF-8: upb refuses the message"),
    (_ld(3, _tag(2, 0) + wire._scan.enc_varint(1 << 31)), "an int32 beyond int32: upb wraps"),
    (_tag(40, 3) + _tag(40, 4), "a group: upb reads it, this reader does not"),
    (_ld(3, _ld(4, b"") * 0 + (_tag(4, 2) + b"\x02" + _tag(4, 2) + b"\x00")), "nested shapes"),
])
def test_what_upb_reads_otherwise_is_refused(body, why):
    raw = _instr(body)
    if why == "nested shapes":  # (a control: well-formed nesting is answered)
        assert wire._scan.hlo_lite(raw) is not None and agrees(raw)
        return
    assert wire._scan.hlo_lite(raw) is None, why


def test_nesting_beyond_64_is_refused_and_within_answered():
    def nested(depth: int) -> bytes:
        s = b""
        for _ in range(depth):
            s = _ld(4, s)
        return _instr(_ld(3, s))
    assert wire._scan.hlo_lite(nested(55)) is not None and agrees(nested(55))
    assert wire._scan.hlo_lite(nested(70)) is None


def test_unread_messages_are_checked_as_upb_checks_them():
    """A buffer assignment or schedule nothing reads: invalid UTF-8 there fails upb's parse of
    the whole program, so it is refused; a well-formed one is answered."""
    ok = _proto(lambda h: h.buffer_assignment.heap_simulator_traces.add().events.add(
        instruction_name="x"))
    assert wire._scan.hlo_lite(ok) is not None and agrees(ok)
    bad = _ld(3, _ld(4, _ld(1, _ld(4, b"\xc0\x80"))))  # an overlong encoding of NUL
    assert wire._scan.hlo_lite(bad) is None
    with pytest.raises(DecodeError):
        HloProto.FromString(bad)
    sched = _proto(lambda h: h.hlo_module.schedule.sequences[4].instruction_ids.extend([1, 2]))
    assert wire._scan.hlo_lite(sched) is not None and agrees(sched)


def test_hlo_message_falls_back_to_upb(monkeypatch):
    from overlap.trace.programs import hlo_message

    raw = _instr(_ld(7, _ld(2, b"x")) + _ld(7, _ld(1, b"y")))  # metadata twice: refused
    msg = hlo_message(raw)
    assert not isinstance(msg, wire._scan.HProto)
    assert msg.hlo_module.computations[0].instructions[0].metadata.op_name == "x"
    assert isinstance(hlo_message(_instr(b"")), wire._scan.HProto)
    monkeypatch.setattr(wire, "SCANNER", None)  # OVERLAP_SCANNER=0: upb alone
    assert not isinstance(hlo_message(_instr(b"")), wire._scan.HProto)
    with pytest.raises(DecodeError):
        hlo_message(_instr(_ld(1, b"\xff")))


# ---- the buffer assignment, kept where asked (`hlo_lite(raw, buffers=True)`) -----------------


def _buffers(body: bytes) -> bytes:
    """An HloProto whose buffer assignment is `body`'s bytes."""
    return _ld(3, body)


_EVENT = _tag(1, 0) + b"\x02" + _tag(2, 0) + b"\x07" + _ld(4, b"fusion.1") + _tag(5, 0) + b"\x05"


@pytest.mark.parametrize("body", [
    b"",
    _ld(1, _tag(1, 0) + b"\x07" + _tag(2, 0) + b"\x80\x02" + _tag(4, 0) + b"\x05"),
    _ld(1, _ld(3, _ld(2, b"copy.3") + _ld(3, b"\x00\x01") + _tag(4, 0) + b"\x09")),  # packed
    _ld(1, _ld(3, _tag(3, 0) + b"\x01" + _tag(3, 0) + b"\x02")),  # unpacked shape index
    _ld(1, b"") + _ld(4, _ld(1, _EVENT) + _ld(1, b"") + _tag(2, 0) + b"\x01"),
    _ld(4, _ld(1, _EVENT + _ld(3, b"main"))) + _ld(3, _tag(1, 0) + b"\x02"),  # an allocation
    _ld(4, _ld(1, _tag(1, 0) + wire._scan.enc_varint((1 << 64) - 1))),  # kind -1 (int32)
    _ld(1, _tag(9, 0) + b"\x01") + _ld(4, _tag(7, 0) + b"\x01"),  # unknown fields
])
def test_a_buffer_assignment_reads_as_upb_reads_it(body):
    raw = _buffers(body)
    assert wire._scan.hlo_lite(raw, True) is not None and agrees(raw)


def test_a_program_without_one_has_an_empty_one():
    for raw in (b"", _instr(b"")):
        ba = wire._scan.hlo_lite(raw, True).buffer_assignment
        assert (ba.logical_buffers, ba.heap_simulator_traces) == ([], [])
        assert agrees(raw)
    b = wire._scan.hlo_lite(_buffers(_ld(1, b"")), True).buffer_assignment.logical_buffers[0]
    assert (b.defined_at.instruction_name, b.defined_at.shape_index) == ("", [])


@pytest.mark.parametrize("body, why", [
    (_ld(1, _ld(3, _ld(2, b"a")) + _ld(3, _tag(4, 0) + b"\x01")), "defined_at twice: merged"),
    (_ld(4, _ld(1, _tag(1, 0) + wire._scan.enc_varint(1 << 31))), "a kind beyond int32: wraps"),
    (_ld(4, _ld(1, _ld(4, b"\xff"))), "invalid UTF-8 in an event's instruction"),
    (_ld(4, _ld(1, _ld(3, b"\xc0\x80"))), "invalid UTF-8 in an event's computation"),
    (_ld(1, _tag(2, 2) + b"\x00"), "a varint field written length-delimited"),
])
def test_what_upb_reads_otherwise_in_one_is_refused(body, why):
    raw = _buffers(body)
    assert wire._scan.hlo_lite(raw, True) is None, why
    agrees(raw)  # (and upb's answer, or refusal, is the one `hlo_message` gives)


def test_the_heap_simulation_replays_alike_from_either(real_protos):
    """`memory_peak` and `pinned_host_peak` of every real program's lite message (with its
    buffers) equal those of upb's: the pinned-host peak a report gives, without protobuf."""
    from overlap.analysis.host_memory import HOST_COLOR, pinned_host_peak
    from overlap.hlo.heap import live_bytes, memory_peak

    replayed = 0
    for raw in real_protos.values():
        lite, msg = wire._scan.hlo_lite(raw, True), HloProto.FromString(raw)
        assert pinned_host_peak(raw, lite) == pinned_host_peak(raw, msg) == \
            pinned_host_peak(raw)
        for color in (0, HOST_COLOR):
            try:
                want = memory_peak(msg, color=color, top=5)
            except ValueError as e:
                with pytest.raises(ValueError, match=re.escape(str(e))):
                    memory_peak(lite, color=color, top=5)
                continue
            replayed += 1
            assert memory_peak(lite, color=color, top=5) == memory_peak(raw, color, 5) == want
            assert live_bytes(lite, color).tolist() == live_bytes(msg, color).tolist()
    assert replayed > 20


def test_hlo_message_with_buffers_falls_back_to_upb(monkeypatch):
    from overlap.trace.programs import hlo_message

    raw = _buffers(_ld(4, _ld(1, _tag(1, 0) + wire._scan.enc_varint(1 << 31))))
    msg = hlo_message(raw, buffers=True)  # (refused by the scanner: upb reads it)
    assert not isinstance(msg, wire._scan.HProto)
    assert msg.buffer_assignment.heap_simulator_traces[0].events[0].kind == -(1 << 31)
    assert isinstance(hlo_message(raw), wire._scan.HProto)  # (without: only checked)
    assert hlo_message(raw).buffer_assignment is None


def test_the_execution_order_reads_alike_from_either(real_protos):
    """`streams.proto_order` of a program's bytes (the scanner's message, round 44: no
    protobuf in a `report --predict`) is upb's, on every real program."""
    from overlap.hlo.streams import proto_order

    for raw in real_protos.values():
        assert proto_order(raw) == proto_order(HloProto.FromString(raw))
