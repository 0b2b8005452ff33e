"""Peak device memory: one definition, from the program that ran, the same in every view
(issue 12). The scan samples hold helper programs (`jit__normal`, 31,457,348 B of heap) next
to the step (`jit_step`): the headline is temp + arguments + outputs - aliases of jit_step."""

from __future__ import annotations

import json
import shutil

import pytest

from overlap.analysis.memory import executed_module, memory_analysis_peak, peak_memory
from overlap.hlo.program import buffer_assignment_sizes, pick_module
from overlap.trace import read_trace
from tests.conftest import SAMPLE_TRACES, run_cli

SCAN = SAMPLE_TRACES / "cpu-scan"


def _expected(run) -> int:
    return memory_analysis_peak(json.loads((run / "run.json").read_text())["memory_analysis"])


def test_the_executed_module_is_the_step_not_the_largest_helper():
    trace = read_trace(SCAN / "offload_x")
    assert executed_module(trace) == "jit_step"


def test_capture_without_manifest_gets_the_same_number_from_its_hlo(tmp_path):
    run = SCAN / "offload_x"
    bare = tmp_path / "bare"
    shutil.copytree(run / "plugins", bare / "plugins")  # a plain jax.profiler logdir
    trace = read_trace(bare)
    pm = peak_memory(None, trace)
    assert pm["bytes"] == _expected(run) == 48_759_060
    assert "buffer assignment" in pm["source"] and "jit_step" in pm["source"]
    with_manifest = peak_memory(json.loads((run / "run.json").read_text()), read_trace(run))
    assert with_manifest["bytes"] == pm["bytes"]
    assert with_manifest["source"].startswith("memory_analysis")


def test_buffer_assignment_matches_memory_analysis_on_both_samples():
    for name in ("offload_x", "nothing_saveable"):
        run = SCAN / name
        trace = read_trace(run)
        step_modules = trace.modules[trace.modules["name"].str.startswith("jit_step(")]
        proto = step_modules["hlo_proto"].iloc[0]
        assert memory_analysis_peak(buffer_assignment_sizes(proto)) == _expected(run)


def test_a_damaged_hlo_proto_gives_no_sizes_and_no_crash():
    """A capture whose HLO proto does not parse (fuzz seed 8, case 44): the buffer-assignment
    peak is unknown, and the headline falls back to what else the capture says."""
    run = SCAN / "offload_x"
    trace = read_trace(run)
    assert buffer_assignment_sizes(b"\xff\xff\xff") is None
    damaged = trace.modules.copy()
    damaged["hlo_proto"] = [b"\x0a\xff\xff\xff" for _ in range(len(damaged))]
    trace.modules = damaged
    pm = peak_memory({}, trace)
    assert "buffer assignment" not in pm["source"]


def test_pick_module_never_guesses_the_largest():
    protos = {"jit__normal(8)": b"x" * 100, "jit_step(18)": b"y"}
    assert pick_module(protos, "jit_step")[0] == "jit_step(18)"
    with pytest.raises(ValueError, match="which one ran"):
        pick_module(protos)
    assert pick_module({"jit_f(1)": b"a", "jit_f(3)": b"b"})[0] == "jit_f(3)"


def test_one_peak_in_compare_dashboard_and_html(tmp_path):
    from overlap.dashboard import data
    from overlap.report import figures

    want = _expected(SCAN / "offload_x")
    r = run_cli("compare", "--json", str(SCAN))
    assert r.returncode == 0, r.stderr
    rows = {x["label"]: x for x in json.loads(r.stdout)["runs"]}
    assert rows["offload_x"]["peak_bytes"] == want
    runs = data.discover_runs([SCAN])
    loaded = [(x.name, data.load_run(x)) for x in runs]
    assert {x["run"]: x["peak_bytes"] for x in figures.compare_rows(loaded, None)}[
        "offload_x"] == want
    assert data.run_row(data.find_run(runs, "offload_x"))["peak"] == "46.5 MiB"
    page = tmp_path / "r.html"
    r = run_cli("report", str(SCAN / "offload_x"), "--html", str(page), "--baseline",
                str(SCAN / "nothing_saveable"))
    assert r.returncode == 0, r.stderr
    html = page.read_text()
    assert "memory_analysis (temp + arguments + outputs - aliases)" in html
    assert "31457348" not in html and "31.457348" not in html


def test_executed_module_and_program_id_by_construction():
    """Compute time per module and per compile, known by construction, from the trace's
    numpy columns and from a caller's DataFrame stand-in alike (issue 32: no pandas)."""
    import pandas as pd

    from overlap.analysis.memory import _ran_program_id, executed_program
    from overlap.trace.tables import Trace

    compute = pd.DataFrame({
        "host": "h", "device": "GPU:0",
        "start_ps": [0, 10, 20, 40, 100, 200, 300],
        "end_ps": [10, 15, 35, 80, 90, 210, 300],   # (100, 90): negative, counts 0
        "name": "k", "hlo_op": "op",
        "hlo_module": ["a", "a", "a", "b", "b", None, "c"],
        "program_id": pd.array([7, 7, 9, None, 3, 4, 5], dtype="UInt64"),
        "stream": 7, "line": "s"})
    modules = pd.DataFrame({"host": "h", "program_id": pd.array([9, 7], dtype="UInt64"),
                            "name": ["a(9)", "a(7)"], "hlo_proto": [b"nine", b"seven"]})

    class StandIn:  # what overlap.capture.api hands executed_module
        pass

    standin = StandIn()
    standin.compute, standin.modules = compute, modules  # type: ignore[attr-defined]
    empty = pd.DataFrame()
    trace = Trace(sources=[], backend="gpu", transfers=empty, compute=compute, steps=empty,
                  memory=empty, modules=modules, devices=empty, lines=empty)
    for t in (trace, standin):
        assert executed_module(t) == "b"  # 40 ps against a's 30
        # a: compile 7 ran 10 + 5 ps, compile 9 15 ps: a tie, the lower id
        assert _ran_program_id(t, "a") == 7
        assert _ran_program_id(t, "b") == 3  # the row without an id is not a compile
        assert _ran_program_id(t, "zzz") is None
        got = executed_program(t, {"program": {"module": "a"}})
        assert (got["name"], got["proto"], got["program_id"]) == ("a(7)", b"seven", 7)
        assert got["how"] == "program id of the capture's XLA op events"
        many = executed_program(t, {"module": "a", "program": {"program_id": 11}})
        assert many["proto"] is None and "a(11)" in many["how"]
