"""`program._parse_plain`: an instruction line of the plain form (`_PLAIN_LINE_RE`: a name,
an array or tuple shape, an opcode, operands of such shapes and names) read off one match
gives the record the general reader (`_parse_general`) gives (issue 32, round 27: a module
of 1,819 instructions read ~2x as fast). Checked on every line of the real corpus' programs
and on lines made of odd pieces."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from overlap.hlo import program as P

REPO = Path(__file__).resolve().parents[2]


def _same(line: str) -> bool:
    """Whether the line took the plain form (and, then, gave the general reader's record)."""
    m = P._PLAIN_LINE_RE.fullmatch(line)
    try:
        want = P._parse_general(line, "c")
    except ValueError:
        want = None
        assert m is None, line  # (a plain line always reads)
    if m is None:
        return False
    got = P._parse_plain(m, "c")
    assert want is not None and _slots(got) == _slots(want), line
    # and a module holding the line reads it so (`_parse_module`'s own dispatch)
    comps, _ = P._parse_module("ENTRY %c {\n" + line + "\n}")
    assert [_slots(i) for i in comps["c"]] == [_slots(want)], line
    return True


def _slots(ins: P._Instr) -> dict:
    """A record's slots as they are (shapes' texts unread: the same text either way)."""
    return {k: getattr(ins, k) for k in P._Instr.__slots__}


def _programs(gpu_corpus) -> list[Path]:
    """The real corpus's programs first, then the repository's, each in path order under its
    own root: the order must not depend on where pytest's temporary directory and the
    checkout lie (CI's checkout under /check sorted before /tmp and made the first program
    a small test file)."""
    return [*sorted(gpu_corpus.rglob("*.hlo.txt")),
            *sorted([*(REPO / "tests").rglob("*.hlo.txt"),
                     *(REPO / "sample_traces").rglob("*.hlo.txt")])]


def test_real_programs(gpu_corpus):
    files = _programs(gpu_corpus)
    assert len(files) >= 30
    lines = plain = 0
    for f in files:
        for line in f.read_text(encoding="utf-8", errors="replace").splitlines():
            s = P._COMMENT_RE.sub("", line).strip()
            if " = " not in s:
                continue
            lines += 1
            plain += _same(s)
    assert lines > 40_000 and plain / lines > 0.95, (lines, plain)


class _NeverPlain:
    """A stand-in for `_PLAIN_LINE_RE` that matches no line."""

    def fullmatch(self, line: str) -> None:
        return None


def test_modules_read_alike(gpu_corpus, monkeypatch):
    """A whole module read with the plain form equals the same module read the general way."""
    texts = [f.read_text(encoding="utf-8", errors="replace") for f in _programs(gpu_corpus)[:8]]
    got = [P._parse_module(t) for t in texts]
    # (no line takes the plain form: `_parse_module` reads the pattern where it is called)
    monkeypatch.setattr(P, "_PLAIN_LINE_RE", _NeverPlain())
    general = P._parse_general
    calls = []
    monkeypatch.setattr(P, "_parse_general", lambda *a: calls.append(1) or general(*a))
    want = [P._parse_module(t) for t in texts]
    # (every instruction read the general way)
    assert len(calls) >= sum(len(i) for _, (c, _) in enumerate(want) for i in c.values()) > 1000
    for (gc, ge), (wc, we) in zip(got, want):
        assert ge == we and list(gc) == list(wc)
        for name in gc:
            assert [_slots(i) for i in gc[name]] == [_slots(i) for i in wc[name]]
            assert [i.shape for i in gc[name]] == [i.shape for i in wc[name]]
            assert [i.operand_shapes for i in gc[name]] == [i.operand_shapes for i in wc[name]]


NAMES = ["%a", "a.1", "%%x", "ROOT", "p-2", "%t", "0", "x=y", "%"]
SHAPES = ["f32[4]", "f32[4,8]{1,0}", "bf16[2]{0:S(5)}", "s32[]", "(s32[], f32[2]{0})", "()",
          "f32[4]{0:T(8,128)(2,1)}", "f32[4]{(}", "f32[4]{0)}", "f32[4]{[}", "(f32[2], (s32[]))",
          "f32[<=4]", "pred[1]{0:S(5)(1)}", "f32[4]{0:T(8,128)}", "f32[4] ", "(f32[2],s32[])",
          "u8[3]{0}", "((f32[2]{0}, s32[]), f32[1]{0:S(5)}, u32[])", "(((s32[])), f32[2])",
          "((), ())", "((f32[4]{(}), s32[])", "((f32[2], s32[]),u32[])", "(f32[2], ((s32[])))"]
# (shapes no plain line holds: an unclosed or stray bracket in a layout, tuples three deep,
# a dimension bound, a trailing space, a tuple without ", "; a tuple of tuples is plain as a
# result since round 30, not as an operand)
ODD_SHAPES = ["f32[4]{(}", "f32[4]{0)}", "f32[4]{[}", "f32[<=4]", "f32[4] ", "(f32[2],s32[])",
              "f32[4]{0:T(8,(128))}", "(((s32[])), f32[2])", "((f32[4]{(}), s32[])",
              "((f32[2], s32[]),u32[])", "(f32[2], ((s32[])))"]
OPS = ["add", "get-tuple-element", "constant", "copy-start", "custom-call", "bad op"]
ATTRS = ["", ", index=1", ', metadata={op_name="a" stack_frame_id=2}', ")", " (", "]",
         ", calls=%f", ", x={a, b}"]
SEPS = [", ", ",", " , ", ",  "]


def _pick(draw, plain: list[str], odd: list[str], odd_weight: int):
    """One of `plain` mostly, one of `odd` one time in `odd_weight` (so that about half the
    lines made are of the plain form, the rest one odd piece away from it)."""
    if draw(st.integers(0, odd_weight - 1)) == 0:
        return draw(st.sampled_from(odd))
    return draw(st.sampled_from(plain))


PLAIN_SHAPES = [s for s in SHAPES if s not in ODD_SHAPES]


@st.composite
def _lines(draw):
    ops = []
    for _ in range(draw(st.integers(0, 4))):
        name = draw(st.sampled_from(NAMES))
        shape = _pick(draw, PLAIN_SHAPES + [""] * 3, ODD_SHAPES, 12)
        ops.append(f"{shape} {name}" if shape else name)
    seps = [_pick(draw, [", "], SEPS, 12) for _ in ops]
    # (a separator after the last operand, now and then: "f(%a, )" is no plain line)
    tail = _pick(draw, [""], SEPS, 12)
    operands = "".join(op + (seps[i] if i < len(ops) - 1 else tail) for i, op in enumerate(ops))
    return (_pick(draw, ["", "ROOT "], ["ROOT  ", " "], 12) + draw(st.sampled_from(NAMES))
            + _pick(draw, [" = "], ["=", " =  "], 12) + _pick(draw, PLAIN_SHAPES, ODD_SHAPES, 8)
            + _pick(draw, [" "], ["  ", ""], 12) + _pick(draw, OPS[:-1], OPS[-1:], 12) + "("
            + operands + ")" + draw(st.sampled_from(ATTRS)))


@settings(max_examples=600, deadline=None)
@given(_lines())
def test_odd_lines(line):
    _same(line)


def test_a_module_holds_each_opcode_shape_and_none_list_once(gpu_corpus):
    """`_parse_module` hands `_parse_plain` one `seen` per module: equal opcodes and shape
    texts are one object, and operands without printed shapes one list of Nones per length
    (issue 32, round 30: 6 MB of a 6 MB unrolled program's report), the values unchanged."""
    text = _programs(gpu_corpus)[0].read_text(encoding="utf-8", errors="replace")
    comps, _ = P._parse_module(text)
    ins = [i for c in comps.values() for i in c if type(i._shape) is str]  # (texts, unread)
    assert len(ins) > 1000
    for key in ("opcode", "_shape"):
        by_value: dict = {}
        for i in ins:
            v = getattr(i, key)
            assert by_value.setdefault(v, v) is v
        assert len(by_value) < len(ins) / 4
    nones = [i._operand_shapes for i in ins if not any(i._operand_shapes)]
    assert len({id(t) for t in nones}) == len({len(t) for t in nones}) < len(nones) / 100
    # each instruction's operand shapes its own list, equal to its own reading
    a, b = [i for i in ins if len(i.operands) == 2 and not any(i._operand_shapes)][:2]
    assert a.operand_shapes == b.operand_shapes == [None, None]
    assert a.operand_shapes is not b.operand_shapes


def test_operand_shapes_of_a_module_are_each_lines_own():
    """Lists of Nones are shared only by operands with no printed shape: a line whose
    operands print theirs keeps its own, whichever of two lines of as many operands comes
    first (SYNTHETIC lines in XLA's printed form)."""
    shaped = "  %s = f32[2]{0} add(f32[2]{0} %a, f32[2]{0} %b)"
    bare = "  %t = f32[2]{0} add(%a, %b)"
    for lines in ((shaped, bare), (bare, shaped)):
        comps, _ = P._parse_module("\n".join(["ENTRY %c {", *lines, "}"]))
        got = {i.name: i.operand_shapes for i in comps["c"]}
        two = P.parse_shape("f32[2]{0}")
        assert got == {"s": [two, two], "t": [None, None]}
