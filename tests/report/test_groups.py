"""Like with like (issue 21): comparison groups, what differs, the verdict sentence, the step a
view opens on."""

from __future__ import annotations

import pytest

from overlap.analysis.compare import compare
from tests.analysis.test_compare import MS, _row
from tests.conftest import SAMPLE_TRACES


def _prog(row, module, inputs=None):
    return {**row, "program": {"module": module, "inputs": inputs}}


def test_same_module_other_inputs_is_said_and_the_baseline_program_is_judged():
    rows = [_prog(_row("full", "full", "remat", 100, 40 << 30), "jit_train_step", "aaaa"),
            _prog(_row("off", "qkv_proj_offloaded", "offload", 90, 30 << 30, offloads=True,
                       transfers=4, overlap=0.9), "jit_train_step", "aaaa"),
            _prog(_row("big", "full", "remat", 300, 90 << 30), "jit_train_step", "bbbb"),
            _prog(_row("scan", "nothing_saveable", "remat", 5, 1 << 30), "jit_step", "cccc")]
    res = compare(rows, baseline="full")
    v = {r["label"]: r["verdict"] for r in res["runs"]}
    # the baseline's program: judged as usual
    assert v["off"].startswith("off: 10.0% faster than full")
    # same module name, other shapes: says so, never "jit_train_step vs jit_train_step"
    assert "same module jit_train_step" in v["big"] and "input shapes" in v["big"]
    assert "aaaa" in v["big"] and "bbbb" in v["big"]
    assert "jit_train_step vs jit_train_step" not in " ".join(v[k] or "" for k in v)
    assert "(jit_step vs jit_train_step)" in v["scan"]
    big = next(r for r in res["runs"] if r["label"] == "big")
    assert big["step_delta"] is None and big["peak_delta"] is None


def test_compare_cli_on_sample_traces_judges_the_baselines_program():
    from tests.conftest import run_cli

    r = run_cli("compare", str(SAMPLE_TRACES))
    assert r.returncode == 0, r.stderr
    assert "jit_train_step vs jit_train_step" not in r.stdout
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("everything_saveable:"))
    assert "not compared" not in line and "peak memory than full" in line
    tpu = next(ln for ln in r.stdout.splitlines() if ln.startswith("tpu-v6e-offload:"))
    assert "not compared" in tpu


def _loaded(*names):
    from overlap.dashboard import data

    runs = data.discover_runs([SAMPLE_TRACES / n for n in names])
    return [(r.name, data.load_run(r), 0.0) for r in runs]


def test_groups_of_the_sample_traces():
    from overlap.report import groups

    items = _loaded("cpu-transformer-tiny", "cpu-scan", "tpu-v6e-offload")
    gs = groups.groups(items)
    sizes = sorted(len(g["runs"]) for g in gs)
    assert sizes == [1, 2, 3]
    assert all(len(g["runs"]) >= 2 for g in gs[:2])  # a comparison needs two: those first
    tiny = next(g for g in gs if len(g["runs"]) == 3)
    assert "transformer:tiny" in tiny["label"] and "cpu" in tiny["label"]
    d = dict((n, dd) for n, dd, _ in items)
    tpu = next(n for n in d if "tpu" in n)
    full = next(n for n in d if n.endswith("full"))
    assert "another device" in groups.what_differs(d[tpu], d[full])


def test_group_verdict_sentence_on_real_cpu_runs():
    from overlap.report import groups

    items = _loaded("cpu-transformer-tiny")
    datas = [(n, d) for n, d, _ in items]
    full = next(n for n in dict(datas) if n.endswith("full"))
    v = groups.group_verdict(datas, full)
    # 3 steps per run: no speed call; full remat holds the least; offload measured, no copies
    assert "outside the noise" in v and "too few steps" in v
    assert f"{full} uses the least memory (2.29 MiB" in v
    assert "qkv_proj_offloaded's transfers: none in the trace" in v and "(measured)" in v


def test_group_verdict_calls_a_faster_run_with_its_interval():
    from overlap.report import groups
    from overlap.report.rundata import RunData

    def run(step_ms, offloaded, ratio):
        return RunData(result={"summary": {"transfers": 4, "overlap_ratio": ratio},
                               "steps": [], "peak_memory": {"bytes": 100, "source": "s"}},
                       backend="gpu", synthetic=False, compute={}, transfers={}, memory={},
                       program_memory=None, device_names=["H100"],
                       manifest={"step_ns": [step_ms * MS + k * 1000 for k in range(8)],
                                 "policy": {"name": "p", "offloaded": offloaded}})

    v = groups.group_verdict([("base", run(100, [], None)), ("off", run(90, ["x"], 0.75))],
                             "base")
    assert v.startswith("offload pays here: off is 10.0% faster than base (99% CI ")
    assert v.count("faster than base") == 1  # said once, by the offload answer
    assert "off's transfers: 75% hidden (measured)" in v


@pytest.mark.parametrize("durations,want", [([7, 1, 2], 2), ([7, 1, 3, 2], 3), ([5], 0)])
def test_views_open_on_the_median_step(durations, want):
    from overlap.report.rundata import RunData, default_step

    steps = [{"host": "h", "step": i, "start_ps": 10 * i, "duration_ps": d,
              "exposed_wall_ps": d} for i, d in enumerate(durations)]
    d = RunData(result={"steps": steps}, backend="cpu", synthetic=False, compute={},
                transfers={}, memory={}, program_memory=None, device_names=[])
    assert default_step(d) == ("h", want)
    d.result["compute_scope"] = "worst steps only"  # a pod read kept the worst step's compute
    assert default_step(d) == ("h", 0)
