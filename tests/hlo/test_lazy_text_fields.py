"""An instruction of a program read from HLO text (`trace_ops.program_from_text`) reads its
`tuple_index`, `frame`, `op_name` and `control_predecessors` from its attributes when first
asked (`trace_ops.Ins._read_attrs`): each equals what reading them at once gave (the searches kept
here as the reference), on the real corpus' programs; the record compares, prints and
pickles as one built with every field; a name that is no field is still an AttributeError."""

from __future__ import annotations

import pickle

import pytest

from overlap.hlo import program as P
from overlap.hlo import trace_ops as T
from tests.hlo.test_plain_lines import _programs


def _eager(i) -> T.Ins:
    """The record `program_from_text` made before, every field read at once."""
    idx = T._INDEX_RE.search(i.attrs) if i.opcode == "get-tuple-element" else None
    fr = T._search_from(T._FRAME_RE, "stack_frame_id=", i.attrs)
    on = T._search_from(T._OPNAME_RE, 'op_name="', i.attrs)
    cp = T._CONTROL_RE.search(i.attrs) if "control-predecessors=" in i.attrs else None
    pnum = int(i.operands[0]) if i.opcode == "parameter" and i.operands and \
        i.operands[0].isdigit() else None
    return T.Ins(i.name, i.opcode, i.computation,
                 [] if i.opcode in ("parameter", "constant") else i.operands,
                 [c for _, c in P.calls_in(i.attrs)], int(idx.group(1)) if idx else None,
                 pnum, int(fr.group(1)) if fr else 0, on.group(1) if on else "",
                 [x.strip().lstrip("%") for x in cp.group(1).split(",") if x.strip()]
                 if cp else [])


def test_fields_read_when_asked_equal_those_read_at_once(gpu_corpus):
    files = _programs(gpu_corpus)[:10]
    seen = {"frame": 0, "op_name": 0, "control_predecessors": 0, "tuple_index": 0}
    for f in files:
        parsed = P.ParsedHlo(f.read_text(encoding="utf-8", errors="replace"))
        prog = T.program_from_text(parsed, "m")
        by_name = {i.name: i for lst in parsed.comps.values() for i in lst}
        for name, ins in prog.instrs.items():
            want = _eager(by_name[name])
            if name.endswith("7"):  # some pickled before any field is read
                again = pickle.loads(pickle.dumps(ins))
                assert again == want and repr(again) == repr(want)
            assert ins == want and repr(ins) == repr(want), name
            assert ins._attrs is None and ins._more is not None  # read once, the text let go
            for k in seen:
                seen[k] += bool(getattr(ins, k))
    assert all(seen.values()), seen  # every field met with a value


def test_one_field_asked_reads_all_and_other_names_are_refused():
    prog = T.program_from_text(
        'HloModule m\n\nENTRY %e (p: (f32[2], s32[])) -> f32[2] {\n'
        '  %p = (f32[2]{0}, s32[]) parameter(0)\n'
        '  %g = f32[2]{0} get-tuple-element((f32[2]{0}, s32[]) %p), index=1, '
        'control-predecessors={%p}, metadata={op_name="jit(f)/a\\"b" stack_frame_id=3}\n'
        '  ROOT %c = f32[2]{0} copy(f32[2]{0} %g)\n}\n', "m")
    g = prog.instrs["g"]
    assert g._more is None  # (nothing read before a field is asked)
    assert g.frame == 3 and g._more[2] == 'jit(f)/a\\"b' and g._attrs is None
    assert g.tuple_index == 1 and g.control_predecessors == ["p"]
    assert prog.instrs["c"].op_name == "" and prog.instrs["c"].frame == 0
    assert prog.instrs["p"].parameter_number == 0 and prog.callers == {}
    with pytest.raises(AttributeError):
        g.no_such_field  # noqa: B018
    with pytest.raises(AttributeError):
        g.no_such_field = 1  # (slots: no field is added by a typo)
    whole = T.Ins("a", "add", "c", [], [], frame=4)  # built whole: its own fields
    assert whole.frame == 4 and whole.op_name == "" and whole._attrs is None
    whole.control_predecessors = ["b"]  # (a field set: the others kept)
    assert whole.control_predecessors == ["b"] and whole.frame == 4 and whole.tuple_index is None
    whole._more = None  # (nothing left to read the four fields from)
    with pytest.raises(AttributeError):
        whole.frame  # noqa: B018
