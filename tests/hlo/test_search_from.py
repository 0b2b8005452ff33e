"""`trace_ops._search_from`: the attribute searches `program_from_text` makes (a stack frame
id, an op name) give the regex's own match, searched from the word's first place (issue 32,
round 27: a leading `\\b` had the engine try every character)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from overlap.hlo import trace_ops
from overlap.hlo.trace_ops import _FRAME_RE, _OPNAME_RE, _search_from

CASES = [
    "", "stack_frame_id=4", "x stack_frame_id=12, op_name=\"a/b\"",
    "xstack_frame_id=1 stack_frame_id=2",  # the first place fails `\b`: the second matches
    "_stack_frame_id=5", "stack_frame_id=x stack_frame_id=3", "stack_frame_id=",
    'op_name="jit(f)/dot" source_file="a.py"', 'op_name="a\\"b" op_name="c"',
    'xop_name="no" op_name="yes"', 'op_name="unterminated', 'metadata={op_name=""}',
    "stack_frame_id=7 stack_frame_id=8", "\u00e9stack_frame_id=9",  # a non-ASCII word char
]
PIECES = ["stack_frame_id=", 'op_name="', "x", "_", " ", ",", "{", "=", '"', "\\", "12", "a/b",
          "\u00e9", "}"]


def _same(s: str) -> None:
    for pattern, word in ((_FRAME_RE, "stack_frame_id="), (_OPNAME_RE, 'op_name="')):
        want = pattern.search(s)
        got = _search_from(pattern, word, s)
        assert (got is None) == (want is None), (s, word)
        if want is not None:
            assert got.span() == want.span() and got.groups() == want.groups(), (s, word)


def test_cases():
    for s in CASES:
        _same(s)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=12).map("".join))
def test_any_attributes(s):
    _same(s)


def test_program_from_text_reads_frames_and_op_names():
    text = """HloModule m

ENTRY %main (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0), metadata={op_name="jit(f)/x" stack_frame_id=2}
  ROOT %n = f32[4]{0} negate(f32[4]{0} %p), metadata={op_name="jit(f)/neg" source_line=3}
}
"""
    prog = trace_ops.program_from_text(text, "m")
    assert prog.instrs["p"].op_name == "jit(f)/x" and prog.instrs["p"].frame == 2
    assert prog.instrs["n"].op_name == "jit(f)/neg" and prog.instrs["n"].frame == 0


# the op-name pattern as an alternation per character (what `_OPNAME_RE` was): the reference
_OPNAME_REF = re.compile(r'\bop_name="((?:[^"\\]|\\.)*)"')
QUOTED = ['op_name="', '"', "\\", '\\"', "a", "/", " ", "x", "\\\\", "op_name="]


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(QUOTED), max_size=14).map("".join))
def test_op_name_pattern_matches_as_the_alternation(s):
    want = _OPNAME_REF.search(s)
    got = _OPNAME_RE.search(s)
    assert (got is None) == (want is None)
    if want is not None:
        assert got.span() == want.span() and got.group(1) == want.group(1)
