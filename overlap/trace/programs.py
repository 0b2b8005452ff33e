"""TPU copy facts from the compiled programs a capture carries (`/host:metadata` HLO protos).

A TPU op's event metadata names it by its HLO text (`%copy-start.5 = (f32[8,128]{1,0:S(5)}, ...)
copy-start(...)`), and the reader can read a copy's direction and bytes from that text. Where
the capture also carries the op's program (the `Hlo Proto` stat of the `/host:metadata` plane's
entry for the program id: JAX writes one per compiled program), the same facts come from the
program's instruction shapes instead, once per program: parsed once, a lookup per copy op
rather than a text match per distinct op.

Rule (the text rule of `reader.copy_directions`, on the proto's fields): a `copy-start`'s shape
is the tuple (destination, source, u32 context); memory space 5 (host) on element 0 makes it a
D2H of element 0's bytes, on element 1 an H2D of element 1's bytes, neither: not a host
transfer. Bytes are the element's (`reader.array_bytes`, the text rule's own definition, given
the type's HLO name; a type without a size there: bytes unknown). Anything else (an
instruction the program does not hold, another opcode such as the async slices, a tuple
element that is itself a tuple) is left to the text rule: `facts` returns None.
Tests: tests/trace/test_programs.py checks this equals the text rule on every copy of the real
TPU capture and on constructed programs.

Reading a program: by the compiled scanner where it is built (`hlo_message`: the fields read,
without protobuf); else a small one (at most `SMALL` bytes: a TPU capture's programs are a few
KB) by `_small_program` in Python, where `import google.protobuf` (~10-12 ms) would cost
more than the whole report's other work on it; upb reads the others, and any either reader is
not sure of. It answers only where upb would parse the bytes and give the same facts: it
checks every field of the schema (`overlap/trace/protos/hlo.proto`) as upb does (wire types,
varint and length bounds, UTF-8 of string fields, nesting) and refuses, leaving the bytes to
upb, anything else (a known field of an unexpected wire type, groups, a message field read
here written twice (upb merges them), nesting beyond 64, an element type beyond int32).
"""

from __future__ import annotations

from typing import Any, Callable

from overlap.trace import skeleton, wire

HOST_MEMORY_SPACE = 5

# xla_data.proto PrimitiveType -> the dtype names HLO text uses (reader._DTYPE_BYTES's keys).
PRIMITIVE_NAMES = {
    1: "pred", 2: "s8", 3: "s16", 4: "s32", 5: "s64", 6: "u8", 7: "u16", 8: "u32", 9: "u64",
    10: "f16", 11: "f32", 12: "f64", 15: "c64", 16: "bf16", 18: "c128", 19: "f8e5m2",
    20: "f8e4m3fn", 21: "s4", 22: "u4", 23: "f8e4m3b11fnuz", 24: "f8e5m2fnuz",
    25: "f8e4m3fnuz", 26: "s2", 27: "u2", 28: "f8e4m3", 29: "f8e3m4", 30: "f4e2m1fn",
    31: "f8e8m0fnu",
}

Facts = tuple[str | None, int | None]


def hlo_message(raw: bytes | bytearray | memoryview, buffers: bool = False) -> Any:
    """A serialized HloProto's message: the compiled scanner's (`_scan.hlo_lite`: the fields
    overlap reads, with upb's names and values, without protobuf), else upb's where the scanner
    is not at hand (or is turned off: `OVERLAP_SCANNER=0`) or refuses the bytes. Raises as
    `HloProto.FromString` does on bytes upb cannot parse. `buffers`: its buffer assignment's
    logical buffers and heap-simulator traces read too (`overlap.hlo.heap`'s replay; the
    scanner's message has no `buffer_assignment` without it)."""
    scan = wire.SCANNER
    if scan is not None:
        got = scan.hlo_lite(raw, buffers)
        if got is not None:
            return got
    from overlap.trace.protos import HloProto  # protobuf loads only where upb reads a program

    return HloProto.FromString(bytes(raw))


def program_key(metadata_id: int) -> int:
    """The program id an `/host:metadata` entry is keyed by (an int64 key: the uint64 id)."""
    return metadata_id % (1 << 64)


class ProgramCopies:
    """Per program id: the host-transfer facts of its `copy-start` instructions by name, from
    the program's HloProto (parsed on first use, once).

    `protos`: program id -> serialized HloProto bytes (or a callable giving them)."""

    def __init__(self, protos: dict[int, Any],
                 array_bytes: Callable[[str, Any], int | None]):
        self._protos = protos
        self._array_bytes = array_bytes  # the reader's: (HLO type name, dims) -> bytes
        self._facts: dict[int, dict[str, Facts] | None] = {}

    def __bool__(self) -> bool:
        return bool(self._protos)

    def _program(self, pid: int) -> dict[str, Facts] | None:
        if pid in self._facts:
            return self._facts[pid]
        raw = self._protos.get(pid)
        got = None
        # (the scanner's reader, where built, is faster than the small one at any size)
        small = _small_program(bytes(raw)) if raw is not None and len(raw) <= SMALL \
            and wire.SCANNER is None else None
        if small is not None:
            got = {}
            for name, opcode, shape in small:
                if opcode == "copy-start":
                    f = self._copy_start(shape)
                    if f is not None:
                        got[name] = f
        elif raw is not None:
            try:
                mod = hlo_message(raw).hlo_module
            except Exception:  # noqa: BLE001 - a program we cannot parse: the text rule decides
                mod = None
            if mod is not None:
                got = {}
                for comp in mod.computations:
                    for ins in comp.instructions:
                        if ins.opcode == "copy-start":
                            f = self._copy_start(ins.shape)
                            if f is not None:
                                got[ins.name] = f
        self._facts[pid] = got
        return got

    def _copy_start(self, shape) -> Facts | None:
        elems = shape.tuple_shapes
        if len(elems) < 2 or elems[0].tuple_shapes or elems[1].tuple_shapes:
            return None
        for k, direction in ((0, "D2H"), (1, "H2D")):
            e = elems[k]
            if e.layout.memory_space == HOST_MEMORY_SPACE:
                return direction, self._bytes(e)
        return (None, None)

    def _bytes(self, e) -> int | None:
        return self._array_bytes(PRIMITIVE_NAMES.get(e.element_type, ""), e.dimensions)

    def facts(self, pid: int | None, instruction: str) -> Facts | None:
        """(direction, bytes) of the copy-start `instruction` of program `pid` ((None, None):
        not a host transfer), or None where the program cannot say (the text rule then
        decides)."""
        if pid is None:
            return None
        prog = self._program(pid)
        return None if prog is None else prog.get(instruction)


# ---------------------------------------------------------------------------------------------
# Small programs without protobuf

SMALL = 1 << 16  # bytes of HloProto read here at most (~1 ms per 10 KB)
_MAX_DEPTH = 64  # message nesting read here (upb's limit: 100)

# The schema (overlap/trace/protos/hlo.proto): message -> field number -> kind: "v" a varint,
# "v*" a repeated varint (packed or not), "s" a string, "s*" repeated strings, or (message,
# repeated?). Fields read (`_Shape`, instructions' name/opcode/shape) are marked in `_READ`.
_SCHEMA: dict[str, dict[int, Any]] = {
    "HloProto": {1: ("HloModuleProto", False), 3: ("BufferAssignmentProto", False)},
    "HloModuleProto": {1: "s", 2: "s", 3: ("HloComputationProto", True), 5: "v", 6: "v",
                       7: ("HloScheduleProto", False), 17: ("StackFrameIndexProto", False)},
    "HloComputationProto": {1: "s", 2: ("HloInstructionProto", True), 5: "v", 6: "v", 7: "v"},
    "HloInstructionProto": {1: "s", 2: "s", 3: ("ShapeProto", False), 7: ("OpMetadata", False),
                            9: "v", 13: "v", 35: "v", 36: "v*", 37: "v*", 38: "v*"},
    "ShapeProto": {2: "v", 3: "v*", 4: ("ShapeProto", True), 5: ("LayoutProto", False)},
    "LayoutProto": {1: "v*", 8: "v"},
    "OpMetadata": {1: "s", 2: "s", 15: "v"},
    "HloScheduleProto": {1: ("SequencesEntry", True)},
    "SequencesEntry": {1: "v", 2: ("InstructionSequence", False)},
    "InstructionSequence": {1: "v*"},
    "StackFrameIndexProto": {1: "s*", 2: "s*", 3: ("FileLocation", True),
                             4: ("StackFrame", True)},
    "FileLocation": {1: "v", 2: "v", 3: "v", 4: "v", 5: "v", 6: "v"},
    "StackFrame": {1: "v", 2: "v"},
    "BufferAssignmentProto": {1: ("LogicalBufferProto", True), 3: ("BufferAllocationProto", True),
                              4: ("HeapSimulatorTrace", True)},
    "LogicalBufferProto": {1: "v", 2: "v", 3: ("Location", False), 4: "v"},
    "Location": {2: "s", 3: "v*", 4: "v"},
    "BufferAllocationProto": {1: "v", 2: "v", 3: "v", 5: "v", 6: "v", 7: "v", 8: "v",
                              9: ("Assigned", True), 11: "v", 12: "v"},
    "Assigned": {1: "v", 2: "v", 3: "v"},
    "HeapSimulatorTrace": {1: ("Event", True), 2: "v", 3: "v"},
    "Event": {1: "v", 2: "v", 3: "s", 4: "s", 5: "v"},
}


class _Shape:
    """What `ProgramCopies._copy_start` reads of a ShapeProto (a LayoutProto's memory space
    as `layout.memory_space`: the layout is the shape itself here)."""

    __slots__ = ("element_type", "dimensions", "tuple_shapes", "memory_space")

    def __init__(self) -> None:
        self.element_type = 0
        self.dimensions: list[int] = []
        self.tuple_shapes: list[_Shape] = []
        self.memory_space = 0

    @property
    def layout(self) -> "_Shape":
        return self


def _small_program(raw: bytes) -> list[tuple[str, str, _Shape]] | None:
    """Every instruction of a serialized HloProto as (name, opcode, shape), in the order upb
    gives them, or None where upb must read it (the module docstring)."""
    out: list[tuple[str, str, _Shape]] = []
    try:
        _message(raw, 0, len(raw), "HloProto", 0, out)
    except (skeleton.Refused, IndexError, UnicodeDecodeError):
        return None
    return out


def _message(b: bytes, i: int, end: int, kind: str, depth: int, out: list) -> Any:
    """Check one message of the schema; what it reads: an instruction's (name, opcode,
    shape) appended to `out`, a shape as a `_Shape`."""
    if depth > _MAX_DEPTH:
        raise skeleton.Refused
    fields = _SCHEMA[kind]
    name = opcode = ""
    shape: _Shape | None = _Shape() if kind in ("ShapeProto", "LayoutProto") else None
    got_shape: _Shape | None = None
    seen: set[int] = set()  # singular message fields met: a second is merged by upb
    while i < end:
        fn, wt, i = skeleton._tag(b, i, end)
        f = fields.get(fn)
        if f is None:  # unknown: framing checked, skipped (groups refused)
            i = skeleton._skip(b, i, end, wt)
            continue
        if f == "v":
            if wt != 0:
                raise skeleton.Refused
            v, i = skeleton._varint(b, i, end)
            if shape is not None:
                if kind == "ShapeProto" and fn == 2:
                    if v >= 1 << 31:
                        raise skeleton.Refused  # an int32 upb would wrap
                    shape.element_type = v
                elif kind == "LayoutProto" and fn == 8:
                    shape.memory_space = skeleton._signed(v)
        elif f == "v*":
            if wt == 0:
                v, i = skeleton._varint(b, i, end)
                vals = [v]
            elif wt == 2:
                s, i = skeleton._len(b, i, end)
                vals = []
                while s < i:
                    v, s = skeleton._varint(b, s, i)
                    vals.append(v)
            else:
                raise skeleton.Refused
            if shape is not None and kind == "ShapeProto" and fn == 3:
                shape.dimensions += [skeleton._signed(v) for v in vals]
        elif f in ("s", "s*"):
            if wt != 2:
                raise skeleton.Refused
            s, i = skeleton._len(b, i, end)
            text = b[s:i].decode("utf-8")  # strict: upb refuses invalid UTF-8 too
            if kind == "HloInstructionProto":
                if fn == 1:
                    name = text
                elif fn == 2:
                    opcode = text
        else:
            sub, repeated = f
            if wt != 2:
                raise skeleton.Refused
            if not repeated:
                if fn in seen:
                    raise skeleton.Refused
                seen.add(fn)
            s, i = skeleton._len(b, i, end)
            got = _message(b, s, i, sub, depth + 1, out)
            if kind == "HloInstructionProto" and fn == 3:
                got_shape = got
            elif shape is not None and kind == "ShapeProto":
                if fn == 4:
                    shape.tuple_shapes.append(got)
                elif fn == 5:
                    shape.memory_space = got.memory_space
    if kind == "HloInstructionProto":
        out.append((name, opcode, got_shape if got_shape is not None else _Shape()))
    return shape
