"""An op's break-even bisection walks its own computation alone (`schedule.estimate_overlap`),
where no walk can reach a while past the cut (`callgraph.nesting`): every
estimate equals the one that walks the whole program at each bandwidth, on the real XLA
programs here (the fixtures, the samples' run directories, the corpus's programs) and on
hand-written modules of nested loops; a module whose loops nest past the cut, or whose
computations reach themselves, is walked whole as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from overlap.hlo import callgraph, schedule
from overlap.hlo.program import parsed
from overlap.hlo.schedule import Roofline, estimate_overlap
from overlap.plan.estimate import roofline_for
from overlap.plan.targets import get_target

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
MODEL = Roofline(hbm_Bps=1e12, peak_flops_bf16=1e18, peak_flops_f32=1e18, host_link_Bps=1e10)


def _texts() -> list[Path]:
    return sorted((HERE / "fixtures").glob("*.hlo.txt")) + \
        sorted((REPO / "sample_traces").rglob("hlo/*.hlo.txt"))


def _whole(monkeypatch, text: str, model) -> str:
    """The estimate with every bisection step walking the whole program (as before)."""
    with monkeypatch.context() as mp:
        mp.setattr(schedule, "_BISECT_ALONE", False)
        return json.dumps(estimate_overlap(text, model), sort_keys=True, default=str)


def _alone(text: str, model) -> str:
    return json.dumps(estimate_overlap(text, model), sort_keys=True, default=str)


def _comps(text: str):
    return parsed(text, uncommented=True).comps


@pytest.mark.parametrize("path", _texts(), ids=lambda p: p.name)
def test_each_real_program_is_estimated_as_when_walked_whole(monkeypatch, path):
    text = path.read_text()
    for model in (MODEL, roofline_for(get_target("h100"))[0]):
        assert _alone(text, model) == _whole(monkeypatch, text, model)


def test_the_corpus_programs_are_estimated_as_when_walked_whole(monkeypatch, gpu_corpus):
    seen = set()
    for path in sorted(gpu_corpus.rglob("hlo/*.hlo.txt")):
        text = path.read_text()
        if text in seen:
            continue
        seen.add(text)
        model = roofline_for(get_target("h100"))[0]
        assert _alone(text, model) == _whole(monkeypatch, text, model), path
    assert len(seen) >= 5


def _nested(depth: int, cycle: bool = False) -> str:
    """A module whose entry runs a loop, each loop body another loop, `depth` deep (with
    `cycle`, the innermost body's loop runs the outermost body again); the entry and the
    first body each hold a host copy around their loop (each body's compute, ~8 MB moved, a
    few microseconds: the copies' break-even bandwidths depend on how deep the walk goes)."""
    trip = ', backend_config={"known_trip_count":{"n":"2"}}'
    comps = []
    for d in range(depth, 0, -1):
        inner = f"body{d + 1}" if d < depth else ("body1" if cycle else None)
        loop = (f"  w{d} = (s32[], f32[1024]) while(p{d}), condition=cond, body={inner}"
                f"{trip}\n") if inner else ""
        start, done = ("", "") if d != 1 else (
            "  cs1 = (f32[1048576]{0:S(5)}, f32[1048576]{0}, u32[]) copy-start(e1)\n",
            "  cd1 = f32[1048576]{0:S(5)} copy-done(cs1)\n")
        comps.append(
            f"body{d} {{\n  p{d} = (s32[], f32[1024]) parameter(0)\n"
            f"  x{d} = f32[1024]{{0}} get-tuple-element(p{d}), index=1\n"
            f"  e{d} = f32[1048576]{{0}} exponential(x{d})\n{start}{loop}{done}"
            f"  ROOT t{d} = (s32[], f32[1024]) tuple(p{d})\n}}\n")
    return ("HloModule m\n\ncond {\n  q = (s32[], f32[1024]) parameter(0)\n"
            "  ROOT r = pred[] constant(true)\n}\n\n" + "\n".join(comps) +
            "\nENTRY main {\n  a = f32[1048576]{0} parameter(0)\n"
            "  i = (s32[], f32[1024]) parameter(1)\n"
            "  cs = (f32[1048576]{0:S(5)}, f32[1048576]{0}, u32[]) copy-start(a)\n"
            f"  w0 = (s32[], f32[1024]) while(i), condition=cond, body=body1{trip}\n"
            "  cd = f32[1048576]{0:S(5)} copy-done(cs)\n"
            "  ROOT o = f32[1048576]{0} add(a, a)\n}\n")


@pytest.mark.parametrize("depth", [1, 3, 8, 9, 12])
def test_nesting_is_the_longest_chain_of_loops(depth):
    assert callgraph.nesting(_comps(_nested(depth))) == depth


def test_a_module_whose_loops_reach_themselves_has_no_nesting():
    assert callgraph.nesting(_comps(_nested(3, cycle=True))) is None


@pytest.mark.parametrize("depth, cycle", [(2, False), (8, False), (9, False), (11, False),
                                          (3, True)])
def test_nested_loops_are_estimated_as_when_walked_whole(monkeypatch, depth, cycle):
    text = _nested(depth, cycle)
    got = _alone(text, MODEL)
    ops = json.loads(got)["ops"]
    assert len(ops) == 2  # (both copies planned and costed)
    assert got == _whole(monkeypatch, text, MODEL)


def test_past_the_cut_a_loop_body_walked_alone_would_not_say_the_same(monkeypatch):
    """Why the bisection walks the whole program where loops nest past the cut: the first
    body's copy, walked from that body, would see one more loop level costed."""
    text = _nested(12)
    monkeypatch.setattr(schedule, "nesting", lambda comps: 0)  # (as if nothing were nested)
    assert _alone(text, MODEL) != _whole(monkeypatch, text, MODEL)
