"""`trace_ops.program_from_proto` names each operand and control predecessor id (its own
computation's instruction of that id, else the module's, else `#<id>`), on HloProtos built
here whose answers are known by construction: ids shared between computations, an id written
twice, ids no instruction has, negative ids, instruction names that look like ids, and the
capture's own programs (text and proto of one program agree: tests/analysis)."""

from __future__ import annotations

import pytest

from overlap.hlo import trace_ops
from overlap.trace.protos import HloProto


def _proto(comps: list[tuple[str, int, list[tuple]]]) -> HloProto:
    """comps: (name, id, [(instr name, id, opcode, operand ids, control predecessor ids)])."""
    h = HloProto()
    h.hlo_module.name = "m"
    for cname, cid, instrs in comps:
        c = h.hlo_module.computations.add()
        c.name, c.id = cname, cid
        for name, iid, opcode, ops, preds in instrs:
            i = c.instructions.add()
            i.name, i.id, i.opcode = name, iid, opcode
            i.operand_ids.extend(ops)
            i.control_predecessor_ids.extend(preds)
        c.root_id = instrs[-1][1] if instrs else 0
    return h


def test_operands_own_computation_first_then_module_then_unknown():
    h = _proto([
        ("body", 1, [("p", 10, "parameter", [], []), ("x", 11, "add", [10, 20, 99], [])]),
        ("entry", 2, [("a", 20, "constant", [], []), ("p2", 10, "parameter", [], []),
                      ("y", 21, "add", [10, 11, -5], [11, 98])]),
    ])
    for prog in (trace_ops.program_from_proto(h, "m"),
                 trace_ops.program_from_proto(h.SerializeToString(), "m")):
        # x: 10 in its own computation (p), 20 only in entry (a), 99 nowhere
        assert prog.instrs["x"].operands == ["p", "a", "#99"]
        # y: 10 in its own computation (p2, not body's p), 11 in body, -5 nowhere
        assert prog.instrs["y"].operands == ["p2", "x", "#-5"]
        assert prog.instrs["y"].control_predecessors == ["x", "#98"]
        assert prog.instrs["x"].control_predecessors == []
        assert prog.roots == {"body": "x", "entry": "y"}


def test_an_id_written_twice_names_the_last_computations_instruction():
    h = _proto([
        ("c1", 1, [("u", 5, "constant", [], [])]),
        ("c2", 2, [("v", 5, "constant", [], [])]),
        ("c3", 3, [("w", 6, "negate", [5], [5])]),
    ])
    prog = trace_ops.program_from_proto(h, "m")
    assert prog.instrs["w"].operands == ["v"]
    assert prog.instrs["w"].control_predecessors == ["v"]


def test_names_that_look_like_ids():
    # a name `#<digits>` of the own computation is read as an id of the module
    h = _proto([
        ("c1", 1, [("#7", 3, "constant", [], []), ("r", 4, "negate", [3], [])]),
        ("c2", 2, [("seven", 7, "constant", [], [])]),
    ])
    assert trace_ops.program_from_proto(h, "m").instrs["r"].operands == ["seven"]
    h = _proto([("c1", 1, [("#8", 3, "constant", [], []), ("r", 4, "negate", [3], [])])])
    assert trace_ops.program_from_proto(h, "m").instrs["r"].operands == ["#8"]
    # any other name starting with `#` is no id: the program is refused
    h = _proto([("c1", 1, [("#x", 3, "constant", [], []), ("r", 4, "negate", [3], [])])])
    with pytest.raises(ValueError):
        trace_ops.program_from_proto(h, "m")


def test_a_name_written_twice_keeps_the_last_instruction():
    h = _proto([
        ("c1", 1, [("k", 1, "constant", [], []), ("z", 2, "negate", [1], [])]),
        ("c2", 2, [("z", 3, "add", [1, 2], [4]), ("q", 4, "constant", [], [])]),
    ])
    prog = trace_ops.program_from_proto(h, "m")
    assert list(prog.instrs) == ["k", "z", "q"]
    z = prog.instrs["z"]
    assert (z.opcode, z.computation, z.operands, z.control_predecessors) == (
        "add", "c2", ["k", "z"], ["q"])
