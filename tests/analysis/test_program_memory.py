"""Memory from the program a run executed (issue 21).

A sweep compiles every policy's step (all named `jit_train_step`) before profiling, so each of
its captures carries every policy's HloProto. Each run's memory curve must be its own
program's heap-simulator timeline, in every view that draws one, or say it cannot tell.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

POLICIES = ("qkv_proj_offloaded", "full", "everything_saveable")


@pytest.fixture(scope="module")
def sweep_runs(tmp_path_factory) -> dict[str, Path]:
    """A real CPU sweep of three policies of the tiny transformer (one capture per policy),
    in a fresh process: the profiler's captures carry every program the process compiled, so
    a sweep in the test process also carried the `jit_train_step`s other tests had compiled
    (four programs where the premise says three, when tests/hlo ran first)."""
    import subprocess
    import sys

    out = tmp_path_factory.mktemp("sweep3")
    code = ("import json, sys\nfrom overlap.capture.sweep import sweep\n"
            f"runs = sweep('transformer:tiny', {list(POLICIES)!r}, {str(out)!r}, steps=1, "
            "warmup=1)\nprint(json.dumps([str(r) for r in runs]))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={**os.environ, "JAX_PLATFORMS": "cpu"}, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    runs = json.loads(p.stdout.strip().splitlines()[-1])
    return dict(zip(POLICIES, (Path(r) for r in runs)))


def _own_timeline(run: Path) -> np.ndarray:
    """The heap-simulator live bytes of the program this run's op events executed, read
    straight from the capture (not through the code under test)."""
    from overlap.hlo.program import hlo_protos_from_xspace, memory_timeline
    from overlap.trace import read_trace

    t = read_trace(run)
    ran = t.compute[t.compute["hlo_module"] == "jit_train_step"]["program_id"].dropna()
    assert ran.nunique() == 1  # a capture profiles one policy's steps
    (xplane,) = run.glob("plugins/profile/*/*.xplane.pb")
    protos = hlo_protos_from_xspace(xplane)
    return memory_timeline(protos[f"jit_train_step({int(ran.iloc[0])})"]).frame[
        "live_bytes"].to_numpy(dtype=np.int64)


def _load(run: Path, manifest: dict | None = None):
    from overlap.analysis.overlap import analyze
    from overlap.report.rundata import run_data
    from overlap.trace import read_trace

    t = read_trace(run)
    m = json.loads((run / "run.json").read_text()) if manifest is None else manifest
    return run_data(t, analyze(t), m)


def test_each_capture_carries_every_policys_program(sweep_runs):
    """The premise: three programs of one name in each capture (why newest-wins was wrong)."""
    from overlap.hlo.program import hlo_protos_from_xspace

    for run in sweep_runs.values():
        (xplane,) = run.glob("plugins/profile/*/*.xplane.pb")
        names = [n for n in hlo_protos_from_xspace(xplane) if n.startswith("jit_train_step(")]
        assert len(names) == 3


def test_three_policies_draw_three_curves_each_its_own_program(sweep_runs):
    curves = {}
    for pol, run in sweep_runs.items():
        d = _load(run)
        own = _own_timeline(run)
        assert d.program_memory is not None
        np.testing.assert_array_equal(d.program_memory["bytes"], own)
        m = json.loads((run / "run.json").read_text())
        # run.json records the compile that ran; its heap-simulator facts are that program's
        assert d.result["program"]["program_id"] == m["program"]["program_id"]
        assert m["heap_simulator"]["module"] == d.result["program"]["name"]
        assert m["heap_simulator"]["peak_bytes"] == int(own.max())
        curves[pol] = own
    peaks = {p: int(c.max()) for p, c in curves.items()}
    assert len(set(peaks.values())) == 3, peaks
    # remat holds less than saving everything: the curves are the policies', not one program's
    assert peaks["full"] < peaks["everything_saveable"]


def _curve_peaks(fig) -> dict[str, float]:
    return {tr.name.split()[0]: float(np.max(np.asarray(tr.y))) for tr in fig.data}


def test_compare_and_html_draw_each_runs_own_curve(sweep_runs, tmp_path, monkeypatch):
    from overlap.analysis.overlap import analyze
    from overlap.report import figures
    from overlap.report.html import write_html
    from overlap.trace import read_trace

    datas = [(p, _load(r)) for p, r in sweep_runs.items()]
    peaks = _curve_peaks(figures.compare_figures(datas, "full")["memory"])
    assert set(peaks) == set(POLICIES) and len(set(peaks.values())) == 3
    # `overlap report --html --baseline`: the offload run against full remat; the page's
    # memory figure is the one compare_figures built there
    built = []
    real = figures.compare_figures
    monkeypatch.setattr(figures, "compare_figures",
                        lambda *a, **k: built.append(real(*a, **k)) or built[-1])
    run, base = sweep_runs["qkv_proj_offloaded"], sweep_runs["full"]
    t, bt = read_trace(run), read_trace(base)
    write_html(analyze(t), t, tmp_path / "r.html", analyze(bt),
               manifest=json.loads((run / "run.json").read_text()), baseline_trace=bt,
               baseline_manifest=json.loads((base / "run.json").read_text()))
    got = _curve_peaks(built[0]["memory"])
    mib = {k: v * 2**20 for k, v in got.items()}  # the figure draws MiB at this size
    assert mib["qkv_proj_offloaded"] == pytest.approx(_own_timeline(run).max())
    assert mib["full"] == pytest.approx(_own_timeline(base).max())


def test_old_manifest_without_program_id_uses_the_op_events(sweep_runs):
    """Captures made before run.json recorded the program id: the op events decide."""
    run = sweep_runs["full"]
    m = json.loads((run / "run.json").read_text())
    m["program"].pop("program_id")
    d = _load(run, m)
    assert d.result["program"]["how"] == "program id of the capture's XLA op events"
    np.testing.assert_array_equal(d.program_memory["bytes"], _own_timeline(run))


def test_cannot_tell_is_said_not_guessed(sweep_runs):
    """No program id anywhere and three candidates: no curve, and the reason."""
    from overlap.analysis.overlap import analyze
    from overlap.report.rundata import run_data
    from overlap.trace import read_trace

    run = sweep_runs["full"]
    t = read_trace(run)
    # a table is modified by setting it (Trace.columns reads the reader's columns, not a
    # frame changed in place)
    t.compute = t.compute.assign(program_id=pd.array([None] * len(t.compute), dtype="UInt64"))
    m = json.loads((run / "run.json").read_text())
    m["program"].pop("program_id")
    d = run_data(t, analyze(t), m)
    assert d.program_memory is None
    assert d.result["program"]["how"].startswith("cannot tell which of 3 programs")
    # the Compare view says so next to the curves it can draw
    from overlap.report import figures

    other = _load(sweep_runs["qkv_proj_offloaded"])
    fig = figures.compare_figures([("qkv", other), ("full", d)], "qkv")["memory"]
    assert len(fig.data) == 1
    note = " ".join(a.text for a in fig.layout.annotations)
    assert "full (cannot tell which of 3 programs named jit_train_step ran)" in note
