"""Plain jax.profiler log directories are first-class runs in every command (issue 12)."""

from __future__ import annotations

import json

import pytest

from overlap.runs.rundir import find_runs
from tests.conftest import SAMPLE_TRACES, run_cli


@pytest.fixture(scope="module")
def profiler_logdir(tmp_path_factory):
    """What a user has: `jax.profiler.trace(logdir)` around a few annotated steps, no run.json."""
    import jax
    import jax.numpy as jnp

    root = tmp_path_factory.mktemp("tb")
    logdir = root / "my_experiment"

    @jax.jit
    def step(x):
        return jnp.tanh(x @ x) * 0.5

    x = jnp.ones((64, 64))
    step(x).block_until_ready()
    with jax.profiler.trace(str(logdir)):
        for i in range(3):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                x = step(x).block_until_ready()
    return root


def test_find_runs_sees_logdirs_and_nested_runs(profiler_logdir):
    assert [p.name for p in find_runs(profiler_logdir)] == ["my_experiment"]
    names = sorted(p.name for p in find_runs(SAMPLE_TRACES))
    # run directories (run.json) and plain log directories (the H100/H200 user-script and
    # device_put captures have no run.json), every level down
    assert names == ["balanced-offload", "balanced-remat", "everything_saveable", "full",
                     "full_cb", "gpu-v100-tf-multiworker", "io", "mi300x-jax08-attention",
                     "mi355-te-fused-attn", "nothing_saveable", "nothing_saveable",
                     "nothing_saveable", "offload_x", "offload_x", "offload_x",
                     "qkv_proj_offloaded", "qkv_proj_offloaded_cb", "tpu-v6e-offload"]


def test_compare_and_report_open_a_plain_logdir(profiler_logdir):
    r = run_cli("compare", "--json", str(profiler_logdir))
    assert r.returncode == 0, r.stderr
    (row,) = json.loads(r.stdout)["runs"]
    assert row["label"] == "my_experiment" and row["policy"] == "unknown"
    assert row["steps"] == 3 and row["peak_bytes"] and "buffer assignment" in row["peak_source"]
    r = run_cli("compare", str(SAMPLE_TRACES))  # runs two levels down
    assert r.returncode == 0 and "offload_x" in r.stdout and "qkv_proj_offloaded" in r.stdout
    assert "different programs" in r.stdout


def test_dashboard_lists_a_plain_logdir(profiler_logdir):
    from overlap.dashboard import data

    runs = data.discover_runs([profiler_logdir])
    assert [r.name for r in runs] == ["my_experiment"]
    row = data.run_row(runs[0])
    assert row["policy"] == "" and row["peak"] and "ERROR" not in row["verdict"]


def test_several_sessions_say_which_one_is_read(profiler_logdir, tmp_path):
    import shutil

    d = tmp_path / "two"
    shutil.copytree(profiler_logdir / "my_experiment", d)
    (s,) = list((d / "plugins" / "profile").iterdir())
    shutil.copytree(s, s.parent / "2099_01_01_00_00_00")
    r = run_cli("compare", str(d))
    assert r.returncode == 0 and "2 capture sessions" in r.stdout and "2099_01_01" in r.stdout


def test_dashboard_lists_each_session_of_a_logdir(profiler_logdir, tmp_path):
    import shutil

    from overlap.dashboard import data

    d = tmp_path / "logs" / "exp"
    shutil.copytree(profiler_logdir / "my_experiment", d)
    (s,) = list((d / "plugins" / "profile").iterdir())
    shutil.copytree(s, s.parent / "2000_01_01_00_00_00")  # an older session
    runs = data.discover_runs([tmp_path / "logs"])
    assert [r.name for r in runs] == ["exp", "exp@2000_01_01_00_00_00"]
    old = data.load_run(runs[1])
    assert "2000_01_01_00_00_00" in old.result["sources"][0]
