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


# The call pattern with its `\b` first (what `program._CALLS_RE` was, round 35): the reference
_CALLS_REF = re.compile(r"\b(body|condition|calls|to_apply|true_computation|false_computation|"
                        r"async_execution_thread_computation)=%?([\w.\-]+)")
CALL_PIECES = ["calls=", "body=", "condition=", "to_apply=", "true_computation=",
               "false_computation=", "async_execution_thread_computation=", "%f.1", "x", "_",
               " ", ",", "=", "%", "\u00e9", "fusion_", "calls", "{", "}"]


@settings(max_examples=800, deadline=None)
@given(st.lists(st.sampled_from(CALL_PIECES), max_size=12).map("".join))
def test_call_pattern_finds_what_the_leading_boundary_found(s):
    from overlap.hlo.program import _CALLS_RE

    assert _CALLS_RE.findall(s) == _CALLS_REF.findall(s)
    assert [m.span() for m in _CALLS_RE.finditer(s)] == [m.span() for m in
                                                          _CALLS_REF.finditer(s)]


def test_call_pattern_and_predecessors_on_every_real_program(gpu_corpus):
    """Every instruction of the corpus' programs and the test fixtures: the same calls as the
    `\\b` pattern, and `Ins.predecessors` as `control_predecessors` read whole."""
    from pathlib import Path

    from overlap.hlo.program import _CALLS_RE, ParsedHlo

    repo = Path(__file__).resolve().parents[2]
    files = sorted([*gpu_corpus.rglob("*.hlo.txt"), *(repo / "tests").rglob("*.hlo.txt")])
    calls = preds = 0
    for f in files:
        text = f.read_text(encoding="utf-8", errors="replace")
        for instrs in ParsedHlo(text).comps.values():
            for i in instrs:
                assert _CALLS_RE.findall(i.attrs) == _CALLS_REF.findall(i.attrs)
                calls += bool(_CALLS_REF.search(i.attrs))
        fast, whole = trace_ops.program_from_text(text), trace_ops.program_from_text(text)
        for name, ins in fast.instrs.items():
            got = ins.predecessors()
            assert got == whole.instrs[name].control_predecessors
            preds += bool(got)
    assert calls > 1000 and preds > 10  # (both kinds are in the corpus)
