"""`overlap.hlo.program`'s records (`ArrayShape`, `_Instr`, `OffloadOp`, `OffloadInventory`,
`MemoryTimeline`) are plain `trace_ops.Record`s that behave as the dataclasses they were
(construction by position and keyword with the same defaults, `repr`, the instance's fields,
equality, `ArrayShape` frozen and equal/hashed by dtype, dims and memory space alone;
`OffloadOp.as_dict` is `dataclasses.asdict`, `Record.replaced` is `dataclasses.replace`):
checked against dataclasses of the same fields declared here."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from overlap.hlo import program
from tests.hlo.test_trace_ops_records import _same


@dataclasses.dataclass(frozen=True)
class ArrayShape:
    dtype: str
    dims: tuple[int, ...]
    memory_space: int = 0
    minor_to_major: tuple[int, ...] | None = dataclasses.field(default=None, compare=False)
    tile: tuple[int, ...] | None = dataclasses.field(default=None, compare=False)


@dataclasses.dataclass
class _Instr:
    name: str
    computation: str
    shape: Any
    opcode: str
    operands: list[str]
    operand_shapes: list[Any]
    attrs: str
    root: bool = False


@dataclasses.dataclass
class OffloadOp:
    name: str
    computation: str
    opcode: str
    direction: str
    bytes: int
    executions: int
    trip_count_known: bool
    is_async: bool
    shape: str
    layout_bytes: int = 0


@dataclasses.dataclass
class MemoryTimeline:
    frame: Any
    peak_bytes: int
    peak_index: int
    peak_buffers: list[tuple[str, int]]
    trace_index: int
    color: int


def test_array_shape():
    for args, kw in ((("f32", (8, 128)), {}), (("bf16", (4,), 5, (0,), (8, 128)), {}),
                     (("u8", ()), {"tile": (128,)}), ((), {"dtype": "s32", "dims": (2, 3),
                                                          "memory_space": 5})):
        mine, ref = program.ArrayShape(*args, **kw), ArrayShape(*args, **kw)
        _same(mine, ref)
        assert hash(mine) == hash(ref)
        assert mine == program.ArrayShape(*args, **kw) and mine != ref
    a = program.ArrayShape("f32", (8, 128), 0, (1, 0), (8, 128))
    b = program.ArrayShape("f32", (8, 128), 0, (0, 1), None)
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1  # layout not compared
    assert a != program.ArrayShape("f32", (8, 128), 5, (1, 0), (8, 128))
    assert a != program.ArrayShape("f32", (8, 64), 0, (1, 0), (8, 128))
    assert a != program.ArrayShape("bf16", (8, 128), 0, (1, 0), (8, 128))
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.dims = (1,)  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del a.tile
    assert a.nbytes == 8 * 128 * 4 and str(b) == "f32[8,128]"


def test_instr_and_replace():
    sh = program.ArrayShape("f32", (4,))
    args = ("copy-start.1", "main", [sh, sh], "copy-start", ["p"], [sh], ", x=1")
    mine, ref = program._Instr(*args), _Instr(*args)
    _same(mine, ref)
    assert mine == program._Instr(*args) and mine != ref
    assert program._Instr(*args, root=True) != mine
    with pytest.raises(TypeError):
        hash(mine)
    new, want = (mine.replaced(opcode="copy", shape=sh),
                 dataclasses.replace(ref, opcode="copy", shape=sh))
    _same(new, want)
    assert new is not mine and mine.opcode == "copy-start"  # the original unchanged
    with pytest.raises(TypeError):
        mine.replaced(no_such_field=1)


def test_offload_op_and_inventory():
    args = ("copy-start.3", "body", "copy-start", "D2H", 4096, 10, False, True, "f32[1024]")
    mine, ref = program.OffloadOp(*args), OffloadOp(*args)
    _same(mine, ref)
    assert mine.as_dict() == dataclasses.asdict(ref)
    assert list(mine.as_dict()) == list(dataclasses.asdict(ref))
    mine2, ref2 = program.OffloadOp(*args, layout_bytes=8192), OffloadOp(*args, layout_bytes=8192)
    assert mine2.as_dict() == dataclasses.asdict(ref2) and mine2 != mine
    inv = program.OffloadInventory([mine, mine2])
    assert repr(inv) == f"OffloadInventory(ops={[mine, mine2]!r})"
    assert inv.to_dict()["ops"] == [dataclasses.asdict(ref), dataclasses.asdict(ref2)]
    assert inv == program.OffloadInventory([program.OffloadOp(*args), mine2])


def test_memory_timeline():
    args = (None, 100, 3, [("a{0}", 100)], 1, 0)
    _same(program.MemoryTimeline(*args), MemoryTimeline(*args))
    kw = dict(zip(("frame", "peak_bytes", "peak_index", "peak_buffers", "trace_index",
                   "color"), args))
    _same(program.MemoryTimeline(**kw), MemoryTimeline(**kw))


def test_proto_inventory_leaves_no_reference_cycle(gpu_corpus):
    """`report` runs with the cyclic collector off (`overlap.cli.main.run`): the proto
    inventory's instructions, which resolve operands through a map of themselves, must not
    outlive it in a cycle (they held each program's decoded message: 12 MiB of the real H100
    transformer captures' peak)."""
    import gc

    from overlap.analysis.names import capture_protos
    from overlap.hlo.program import offload_inventory
    from overlap.trace import read_trace

    (xplane,) = (gpu_corpus / "gpu-h100/transformer-h100/full").glob(
        "plugins/profile/*/*.xplane.pb")
    protos = [p for p in capture_protos(read_trace(str(xplane))).values() if len(p) > 100_000]
    assert protos
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        counts = [len(offload_inventory(p).ops) for p in protos]
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        # (upb makes a message class on first use, a cycle of its own: not counted here)
        left = [o for o in gc.garbage if isinstance(o, program._ProtoInstr)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was:
            gc.enable()
    assert left == [] and len(counts) == len(protos)


def test_memory_peak_is_the_timelines_peak_without_pandas(gpu_corpus, tmp_path):
    """`memory_peak` (what the report's sections read) is `memory_timeline`'s peak and peak
    buffers, in a process that never imports pandas (issue 32: ~0.3 s and ~15 MiB)."""
    import json
    import subprocess
    import sys

    from overlap.analysis.names import capture_protos
    from overlap.trace import read_trace

    (xplane,) = (gpu_corpus / "gpu-h100/params-h100/full").glob("plugins/profile/*/*.xplane.pb")
    raw = max(capture_protos(read_trace(str(xplane))).values(), key=len)
    tl = program.memory_timeline(raw, top=5)
    assert tl.peak_bytes > 0 and len(tl.frame) > 0
    f = tmp_path / "p.hlo.pb"
    f.write_bytes(raw)
    code = ("import json, sys\nfrom overlap.hlo.program import memory_peak\n"
            f"peak, bufs = memory_peak(open({str(f)!r}, 'rb').read(), top=5)\n"
            "print(json.dumps([peak, bufs, 'pandas' in sys.modules]))")
    got = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True,
                                    text=True, check=True).stdout)
    assert got == [tl.peak_bytes, [list(b) for b in tl.peak_buffers], False]
