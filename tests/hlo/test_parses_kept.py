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


def _same_parse(a, b) -> None:
    assert list(a.comps) == list(b.comps) and a.entry == b.entry
    for name in a.comps:
        assert [(i.name, i.opcode, i.operands, i.attrs, i.root) for i in a.comps[name]] == \
            [(i.name, i.opcode, i.operands, i.attrs, i.root) for i in b.comps[name]]


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
        u = parsed(text, uncommented=True)
        assert u is not a and parsed(text, uncommented=True) is u
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
    assert kept["predicted"] and n_kept == 2  # (the text, and the text uncommented)
    # the same prediction where every reader parses for itself, as before
    monkeypatch.setattr(program, "_KEPT", _NoKeep())
    calls.clear()
    every = predict_capture(trace, result)
    assert len(calls) > 2 * n_kept
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
