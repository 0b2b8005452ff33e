"""`_parse_module` reads an instruction's shapes when first asked for (issue 32): the same
values as reading them at once, the same instructions left out. Inline SYNTHETIC HLO text in
XLA's printed form, answers known by construction."""

from __future__ import annotations

from overlap.hlo import program
from overlap.hlo.program import ArrayShape, _parse_module, parse_shape

HLO = """HloModule m

ENTRY main {
  p = f32[8,128]{1,0} parameter(0)
  h = f32[8,128]{1,0:S(5)} copy(f32[8,128]{1,0} p)
  t = (f32[8]{0}, s32[]) tuple(f32[8]{0} a, s32[] b)
  n = ((f32[8]{0}), s32[]) tuple(t, s32[] b)
  n3 = (((f32[8]{0})), s32[]) tuple(t, s32[] b)
  d = f32[<=8]{0} dynamic-slice(f32[8]{0} a, s32[] b)
  bad = f32[?]{0} negate(p)
  q = f32[8]{0} negate(f32[?]{0} a)
}
"""


def test_shapes_read_on_first_use_equal_shapes_read_at_once():
    comps, entry = _parse_module(HLO)
    assert entry == "main"
    by = {i.name: i for i in comps["main"]}
    # `bad`'s result shape does not parse: left out, as when every shape was read at once
    assert list(by) == ["p", "h", "t", "n", "n3", "d", "q"]
    # plain shapes (and tuples of them, and tuples of those) wait as text; others were read
    # while parsing
    # (the `_shape` slot: its text until read; a read shape is never a str)
    assert type(by["h"]._shape) is str
    assert type(by["t"]._shape) is str and type(by["n"]._shape) is str
    assert type(by["n3"]._shape) is list and type(by["d"]._shape) is ArrayShape
    assert by["n"].shape == [[parse_shape("f32[8]{0}")], parse_shape("s32[]")]
    assert by["n3"].shape == [[[parse_shape("f32[8]{0}")]], parse_shape("s32[]")]
    assert by["h"].shape == ArrayShape("f32", (8, 128), 5, (1, 0)) == \
        parse_shape("f32[8,128]{1,0:S(5)}")
    assert by["h"]._shape is by["h"].shape  # (read once, kept)
    assert by["t"].shape == [parse_shape("f32[8]{0}"), parse_shape("s32[]")]
    assert by["d"].shape == parse_shape("f32[<=8]{0}")
    assert by["h"]._operand_shapes == ("f32[8,128]{1,0}",)  # (texts until read)
    assert by["h"].operand_shapes == [parse_shape("f32[8,128]{1,0}")]
    assert by["h"]._operand_shapes is by["h"].operand_shapes
    assert by["n"].operand_shapes == [None, parse_shape("s32[]")]  # `t` printed bare
    assert by["q"].operand_shapes == [None]  # an operand shape that does not parse: None
    assert by["p"].operand_shapes == [None]  # `parameter(0)`: no shape


def test_records_of_parsed_instructions_compare_and_replace_as_read():
    comps, _ = _parse_module(HLO)
    h = comps["main"][1]
    again = _parse_module(HLO)[0]["main"][1]
    assert h == again  # equality reads both sides' shapes
    new = h.replaced(opcode="copy-start")
    assert new.shape == h.shape and new.opcode == "copy-start"
    assert repr(again).startswith("_Instr(name='h', computation='main', shape=ArrayShape(")
    assert isinstance(program._Instr.__dict__["shape"], property)
    assert not hasattr(h, "__dict__")  # (slots: one 96-byte record a line)


def test_calls_in_is_the_calls_patterns_findall():
    """`calls_in` skips the search only where none of the pattern's words is present: the same
    (kind, computation) pairs, in order, on every kind of call and on attributes without one."""
    from overlap.hlo.program import _CALLS_RE, calls_in

    cases = [
        "", ', metadata={op_name="jit(f)/while/body" source_line=3}',
        ', condition=%cond.1, body=%body.2, backend_config={"known_trip_count":{"n":"4"}}',
        ", calls=%fused_computation.7", ", to_apply=%add.clone",
        ", true_computation=%t, false_computation=%f",
        ", async_execution_thread_computation=%h", ", nobody=%x, xcalls=%y",
        ", branch_computations={%b0, %b1}", "calls= body=%z",
    ]
    for a in cases:
        assert calls_in(a) == _CALLS_RE.findall(a), a
    assert calls_in(", calls=%fused_computation.7") == [("calls", "fused_computation.7")]
    assert calls_in(", nobody=%x, xcalls=%y") == []  # no call named inside a word
