"""`trace_ops.Location`, `Ins` and `Program` are plain classes that behave as the dataclasses
they were (construction by position and keyword with the same defaults, `repr`, equality,
`Location` frozen and hashed by its fields): checked against dataclasses of the same fields
declared here."""

from __future__ import annotations

import dataclasses

import pytest

from overlap.hlo import trace_ops


@dataclasses.dataclass(frozen=True)
class Location:
    file: str
    function: str
    line: int
    column: int
    end_line: int
    end_column: int


@dataclasses.dataclass
class Ins:
    name: str
    opcode: str
    computation: str
    operands: list[str]
    calls: list[str]
    tuple_index: int | None = None
    parameter_number: int | None = None
    frame: int = 0
    op_name: str = ""
    control_predecessors: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Program:
    name: str
    instrs: dict
    roots: dict
    frames: dict
    callers: dict = dataclasses.field(default_factory=dict)
    by_computation_called: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        for ins in self.instrs.values():
            for c in ins.calls:
                self.callers.setdefault(c, []).append(ins.name)


def _same(mine, ref) -> None:
    assert repr(mine) == repr(ref)
    fields = [f.name for f in dataclasses.fields(ref)]
    assert list(mine._fields) == fields  # (`Ins` has slots: its fields compared by name)
    assert [getattr(mine, f) for f in fields] == [getattr(ref, f) for f in fields]
    if hasattr(mine, "__dict__"):  # (and nothing else held)
        assert vars(mine) == vars(ref) and list(vars(mine)) == list(vars(ref))


def test_location():
    args = ("/a/b.py", "f", 3, 4, 3, 9)
    loc, ref = trace_ops.Location(*args), Location(*args)
    _same(loc, ref)
    assert loc == trace_ops.Location(*args) and hash(loc) == hash(ref) == hash(args)
    assert loc != trace_ops.Location("/a/b.py", "f", 3, 4, 3, 10)
    assert loc != args and (loc == ref) is False  # another class: never equal
    assert len({loc, trace_ops.Location(*args)}) == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        loc.line = 5
    with pytest.raises(dataclasses.FrozenInstanceError):
        del loc.file
    kw = dict(file="x.py", function="g", line=1, column=0, end_line=2, end_column=1)
    _same(trace_ops.Location(**kw), Location(**kw))


def test_ins():
    for args, kw in ((("a", "add", "c", ["x"], []), {}),
                     (("a", "get-tuple-element", "c", ["t"], ["body"], 2, None, 7, "jit/f"),
                      {"control_predecessors": ["p"]}),
                     (("p", "parameter", "c", [], []), {"parameter_number": 0, "frame": 1})):
        mine, ref = trace_ops.Ins(*args, **kw), Ins(*args, **kw)
        _same(mine, ref)
        assert mine == trace_ops.Ins(*args, **kw) and mine != ref
    a, b = trace_ops.Ins("a", "add", "c", [], []), trace_ops.Ins("a", "add", "c", [], [])
    assert a.control_predecessors is not b.control_predecessors  # one list each
    with pytest.raises(TypeError):
        hash(a)
    a.operands = ["y"]  # mutable, as before
    assert a != b


def test_program():
    def instrs(cls):
        return {"w": cls("w", "while", "main", ["t"], ["body", "cond"]),
                "r": cls("r", "tuple", "body", ["x"], []),
                "f": cls("f", "fusion", "main", [], ["body"])}

    frames = {1: (trace_ops.Location("/a.py", "f", 1, 0, 1, 3), 0)}
    mine = trace_ops.Program("m", instrs(trace_ops.Ins), {"body": "r"}, frames)
    ref = Program("m", instrs(Ins), {"body": "r"}, frames)
    assert mine.callers == ref.callers == {"body": ["w", "f"], "cond": ["w"]}
    assert list(vars(mine)) == list(vars(ref))
    assert repr(mine).startswith("Program(name='m', instrs={'w': Ins(name='w', opcode='while'")
    assert repr(mine) == repr(ref)
    assert mine == trace_ops.Program("m", instrs(trace_ops.Ins), {"body": "r"}, frames)
    kw = trace_ops.Program(name="m", instrs={}, roots={}, frames={}, callers={"x": ["y"]})
    assert kw.callers == {"x": ["y"]} and kw.by_computation_called == {}
