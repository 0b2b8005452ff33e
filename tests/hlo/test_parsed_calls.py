"""`ParsedHlo.calls`: each instruction's called computations found once, for the program
(`trace_ops.program_from_text`) and the inventory's loop counts (`program._multipliers`),
which each searched every instruction's attributes for them (issue 32, round 30). What either
makes from a parse equals what it makes from the text, on every real program of the corpus."""

from __future__ import annotations

from pathlib import Path

from overlap.hlo import program as P
from overlap.hlo import trace_ops

REPO = Path(__file__).resolve().parents[2]


def _texts(gpu_corpus) -> list[str]:
    files = sorted([*gpu_corpus.rglob("*.hlo.txt"), *(REPO / "tests").rglob("*.hlo.txt")])
    assert len(files) >= 30
    return [f.read_text(encoding="utf-8", errors="replace") for f in files]


def _fields(prog: trace_ops.Program) -> tuple:
    return (prog.name, {k: (v.opcode, v.computation, v.operands, v.calls, v.parameter_number,
                            v.frame, v.op_name, v.tuple_index, v.control_predecessors)
                        for k, v in prog.instrs.items()},
            prog.roots, prog.frames, prog.callers)


def test_calls_are_calls_in_of_each_instruction_in_order(gpu_corpus):
    called = 0
    for text in _texts(gpu_corpus):
        parsed = P.ParsedHlo(text)
        got = parsed.calls()
        assert got is parsed.calls()  # (found once)
        assert [list(c) for c in got] == [P.calls_in(i.attrs) for c in parsed.comps.values()
                                          for i in c]
        assert len({id(c) for c in got if not c}) <= 1  # (none: one shared empty tuple)
        called += sum(map(bool, got))
    assert called > 1000  # (the corpus' fusions, loops and async wrappers call computations)


def test_program_loop_counts_and_inventory_from_a_parse_equal_those_from_the_text(gpu_corpus):
    for text in _texts(gpu_corpus):
        parsed = P.ParsedHlo(text)
        assert _fields(trace_ops.program_from_text(parsed)) == _fields(
            trace_ops.program_from_text(text))
        assert P._multipliers(parsed.comps, parsed.entry, parsed.calls()) == P._multipliers(
            parsed.comps, parsed.entry)
        assert P.offload_inventory(parsed) == P.offload_inventory(text)


def test_calls_are_read_in_the_computations_order():
    """Two computations calling different ones: each instruction gets its own calls (a list
    read out of step would give the first's calls to the second)."""
    text = "\n".join([
        "HloModule m",
        "%a (p: f32[2]) -> f32[2] {", "  ROOT %p = f32[2]{0} parameter(0)", "}",
        "%b (p: f32[2]) -> f32[2] {", "  ROOT %q = f32[2]{0} parameter(0)", "}",
        "ENTRY %main (x: f32[2]) -> f32[2] {",
        "  %x = f32[2]{0} parameter(0)",
        "  %f = f32[2]{0} fusion(f32[2]{0} %x), kind=kLoop, calls=%a",
        "  ROOT %g = f32[2]{0} fusion(f32[2]{0} %f), kind=kLoop, calls=%b",
        "}"])
    parsed = P.ParsedHlo(text)
    prog = trace_ops.program_from_text(parsed)
    assert prog.instrs["f"].calls == ["a"] and prog.instrs["g"].calls == ["b"]
    assert prog.instrs["x"].calls == [] and prog.callers == {"a": ["f"], "b": ["g"]}
    mult, known = P._multipliers(parsed.comps, parsed.entry, parsed.calls())
    assert mult == {"main": 1, "a": 1, "b": 1} and all(known.values())


def test_a_parse_consumed_by_its_program_gives_the_same_program_and_inventory(gpu_corpus):
    """`program_from_text(parsed, consume=True)` (the report's: the parse's instructions let go
    as the program's are made) makes the program the text makes, and leaves the parse empty;
    the inventory found first stands for the parse (`offload_inventory` of it is itself)."""
    copies = 0
    for text in _texts(gpu_corpus)[:12]:
        parsed = P.ParsedHlo(text)
        inventory = P.offload_inventory(parsed)
        prog = trace_ops.program_from_text(parsed, "m", consume=True)
        assert parsed.comps == {}
        assert _fields(prog) == _fields(trace_ops.program_from_text(text, "m"))
        assert P.offload_inventory(inventory) is inventory
        assert inventory == P.offload_inventory(text)
        copies += len(inventory.ops)
    assert copies > 10  # (offloading programs among them)


def test_records_hold_no_dict_of_their_own(gpu_corpus):
    """A plain line's record and the program's have slots: no dict per record, one 96-byte
    block each (round 30 kept their values under their class's shared keys, ~190 bytes an
    instruction less than a dict each: 84.4 -> 68.3 MiB on a 6 MB unrolled program's report;
    round 32's slots are ~50 bytes less again, for each of the two records)."""
    import sys

    text = _texts(gpu_corpus)[0]
    parsed = P.ParsedHlo(text)
    plain = [i for c in parsed.comps.values() for i in c]
    assert not any(hasattr(i, "__dict__") for i in plain)
    assert {sys.getsizeof(i) for i in plain} == {96}  # (the collector's 16 bytes counted)
    prog = trace_ops.program_from_text(parsed, "m", consume=True)
    ins = list(prog.instrs.values())
    assert len(ins) == len(plain) and not any(hasattr(i, "__dict__") for i in ins)
    assert {sys.getsizeof(i) for i in ins} == {96}
