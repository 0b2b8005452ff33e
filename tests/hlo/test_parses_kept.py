"""One parse per program text while a prediction reads it (`program.parses_kept`, issue 32):
the copies' join, the estimate's schedule and timeline and the streams each parsed the same
text, and found its inventory, again (the real H100 transformer program: 13 parses and 8
inventories in one `report --predict`). Kept parses are the ones a fresh parse gives; nothing
is kept outside the scope; the prediction is the same."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from overlap.hlo import program
from overlap.hlo.program import (
    _COMMENT_RE,
    _parse_module,
    offload_inventory,
    parsed,
    parses_kept,
)

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
RUN = SAMPLES / "gpu-h100" / "scan-h100" / "offload_x"


def _text() -> str:
    return next((RUN / "hlo").glob("*.hlo.txt")).read_text()


def _records(p) -> list:
    return [(c, [(i.name, i.computation, i.opcode, i.operands, i.attrs, i.root, i.shape,
                  i.operand_shapes) for i in instrs]) for c, instrs in p.comps.items()]


def _same_parse(a, b) -> None:
    assert list(a.comps) == list(b.comps) and a.entry == b.entry
    assert _records(a) == _records(b)


def test_one_parse_per_text_inside_and_none_kept_outside() -> None:
    text = _text()
    # a comment inside a line: the uncommented parse is the one the estimate's readers made
    text = text.replace(" = ", " = /*c*/ ", 1) if "/*" not in text else text
    assert parsed(text) is not parsed(text)  # outside: a parse per call
    with parses_kept():
        a = parsed(text)
        assert parsed(text) is a
        with parses_kept():  # (nested: the outer one's)
            assert parsed(text) is a
        assert parsed(text) is a
        # (its comments within lines: the uncommented parse reads alike, the same one)
        u = parsed(text, uncommented=True)
        assert u is a and parsed(text, uncommented=True) is u
        comps, entry = _parse_module(_COMMENT_RE.sub("", text))
        assert list(u.comps) == list(comps) and u.entry == entry
        inv = offload_inventory(text)
        assert offload_inventory(text) is inv and inv.ops
        # (a thread has its own context: it keeps nothing of this scope's)
        seen = []
        t = threading.Thread(target=lambda: seen.append(parsed(text) is a))
        t.start()
        t.join()
        assert seen == [False]
    assert parsed(text) is not a
    _same_parse(a, parsed(text))
    fresh = offload_inventory(text)
    assert fresh is not inv and fresh.ops == inv.ops


def test_a_prediction_parses_each_program_once_and_says_the_same(monkeypatch) -> None:
    from overlap.analysis.pod import read_and_analyze
    from overlap.plan.predict import predict_capture

    trace, result = read_and_analyze(RUN)
    calls = []
    real = program._parse_module

    def counted(text):
        calls.append(1)
        return real(text)

    monkeypatch.setattr(program, "_parse_module", counted)
    kept = predict_capture(trace, result)
    n_kept = len(calls)
    assert kept["predicted"] and n_kept == 1  # (the text; uncommented, it reads alike)
    # the same prediction where every reader parses for itself, as before
    monkeypatch.setattr(program, "_KEPT", _NoKeep())
    calls.clear()
    every = predict_capture(trace, result)
    assert len(calls) > 4 * n_kept
    assert json.dumps(kept, sort_keys=True, default=str) == \
        json.dumps(every, sort_keys=True, default=str)


class _NoKeep:
    """A `_KEPT` stand-in whose scope never keeps anything."""

    def get(self):
        return None

    def set(self, value):
        return None

    def reset(self, token):
        pytest.fail("nothing was set")


@pytest.mark.parametrize("field", ["peak_flops_bf16", "peak_flops_f32", "hbm_Bps",
                                   "compute_scale", "kernel_floor_ps", "host_link_Bps"])
def test_estimates_of_one_parse_share_roofline_times_only_on_the_same_compute(field) -> None:
    """Within a scope, the estimates of one parse reuse its instructions' roofline times
    (`ParsedHlo.roofline`) where their models agree on what those times read, and only there:
    each estimate and timeline equals the one of a fresh parse, whichever model came first."""
    import dataclasses

    from overlap.hlo.schedule import estimate_overlap, predicted_timeline
    from overlap.plan.estimate import roofline_for
    from overlap.plan.targets import get_target

    text = _text()
    base = roofline_for(get_target("h100"))[0]
    v = getattr(base, field)
    other = dataclasses.replace(base, **{field: v * 3 if v else 2_000_000})

    def both(model):
        return (json.dumps(estimate_overlap(text, model), sort_keys=True, default=str),
                json.dumps(predicted_timeline(text, model), sort_keys=True, default=str))

    fresh_base, fresh_other = both(base), both(other)
    assert fresh_base != fresh_other  # (the field changes the estimate)
    with parses_kept():
        assert both(base) == fresh_base
        assert both(other) == fresh_other
        assert both(base) == fresh_base
        shared = parsed(text, uncommented=True).roofline
    # the models agree on the compute, or they do not (the link alone: one table)
    assert len(shared) == (1 if field == "host_link_Bps" else 2)


# ---- the text and the text uncommented: one parse where they read alike ----------------------


def _programs() -> list[Path]:
    return sorted(SAMPLES.glob("*/*/*/hlo/*.hlo.txt")) + sorted(SAMPLES.glob("*/*/hlo/*.hlo.txt"))


def test_every_sample_program_reads_alike_with_and_without_its_comments() -> None:
    paths = _programs()
    assert len(paths) >= 10
    commented = 0
    for path in paths:
        text = path.read_text()
        commented += "/*" in text
        assert program._read_alike(text), path
        _same_parse(program.ParsedHlo(text), program.ParsedHlo(_COMMENT_RE.sub("", text)))
        with parses_kept():
            a = parsed(text)
            assert parsed(text, uncommented=True) is a
    assert commented  # (XLA prints `/*index=N*/` in long tuples)


@pytest.mark.parametrize("text,alike", [
    ("e {\n  ROOT %a = f32[2]{0} /*x*/ parameter(0)\n}\n", True),
    # taken out once, the pieces around a comment make another: the uncommented text's line
    # loses it too, the text's keeps it
    ("ENTRY e {\n  %a = f32[2]{0} parameter(0)\n  ROOT %b = f32[2]{0} add(%a, %a) "
     "//*x*/*y*/\n}\n", False),
    ("ENTRY e {\n  ROOT %a = f32[2]{0} parameter(0), m=//*x*/*y*/z\n}\n", False),
    # a comment across a break `splitlines` reads ("\r", "\u2028"): gone from the text
    # uncommented, two lines' pieces in the text
    ("ENTRY e {\n  %a = f32[2]{0} parameter(0) /*x\r  ROOT %b = f32[2]{0} negate(%a) */\n"
     "  ROOT %c = f32[2]{0} abs(%a)\n}\n", False),
    ("ENTRY e {\n  %a = f32[2]{0} parameter(0) /*x\u2028  %b = f32[2]{0} negate(%a) */\n"
     "  ROOT %c = f32[2]{0} abs(%a)\n}\n", False),
    ("ENTRY e {\r\n  ROOT %a = f32[2]{0} parameter(0)\r\n}\r\n", False),  # (CR: not tried)
])
def test_texts_that_read_apart_keep_a_parse_each(text: str, alike: bool) -> None:
    assert program._read_alike(text) is alike
    fresh = program.ParsedHlo(text), program.ParsedHlo(_COMMENT_RE.sub("", text))
    if alike:
        _same_parse(*fresh)
    elif "\r\n" not in text:
        assert _records(fresh[0]) != _records(fresh[1])  # (the case is one that matters)
    for first in (False, True):
        with parses_kept():
            a = parsed(text, uncommented=first)
            b = parsed(text, uncommented=not first)
            assert (a is b) is alike
            _same_parse(a, fresh[first])
            _same_parse(b, fresh[not first])


_PIECES = ["ENTRY e {", "c {", "}", "  %a = f32[2]{0} parameter(0)", "  %i = s32[] parameter(1)",
           "  ROOT %b = f32[2]{0} add(%a, %a)",
           "  %t = (f32[2]{0}, /*index=1*/s32[]) tuple(%a, %i)",
           ", m=", "/*", "*/", "//*x*/*", "y*/", "/*z*/", " ", "\r", "\u2028", "\x0c"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_PIECES), st.sampled_from(["\n", "", "\r\n", "\r"])),
                max_size=14), st.booleans())
def test_any_text_kept_parses_as_fresh_ones(parts, first) -> None:
    """Whichever of the two is asked first, each reads as its own fresh parse does."""
    text = "".join(a + b for a, b in parts)
    with parses_kept():
        a = parsed(text, uncommented=first)
        b = parsed(text, uncommented=not first)
        _same_parse(a, program.ParsedHlo(_COMMENT_RE.sub("", text) if first else text))
        _same_parse(b, program.ParsedHlo(text if first else _COMMENT_RE.sub("", text)))
