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
"""

from __future__ import annotations

from typing import Any, Callable

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
        if raw is not None:
            from overlap.trace.protos import HloProto  # protobuf loads only where a program is read

            try:
                mod = HloProto.FromString(bytes(raw)).hlo_module
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
