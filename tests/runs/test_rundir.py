"""Run directories: layout, manifest round trip, atomicity, and never overwriting."""

from __future__ import annotations

import json
import shutil

import jax
import jax.numpy as jnp
import pytest

from overlap.capture.api import profile_steps
from overlap.errors import InputError
from overlap.runs import rundir

pytestmark = pytest.mark.slow  # real JAX captures


@jax.jit
def _step(state, batch):
    state = jnp.tanh(state @ batch)
    return state, state.sum()


def _run(path, **kw):
    return profile_steps(_step, jnp.ones((32, 32)), jnp.eye(32) * 0.5, out=path, steps=2,
                         warmup=1, **kw)


@pytest.fixture(scope="module")
def one_run(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("runs") / "a", label="first")


def test_layout_and_manifest(one_run):
    files = rundir.find_xplane_files(one_run)
    assert len(files) == 1 and files[0].name.endswith(".xplane.pb")
    assert files[0].parent.parent.name == "profile"
    assert files[0].parent.parent.parent.name == "plugins"
    m = rundir.load_manifest(one_run)
    assert m["schema_version"] == rundir.SCHEMA_VERSION and m["label"] == "first"
    assert m["session"] == files[0].parent.name
    assert len(m["step_ns"]) == 2 and all(isinstance(t, int) and t > 0 for t in m["step_ns"])
    assert len(m["step_ns_profiled"]) == 2
    assert m["backend"]["platform"] == jax.devices()[0].platform
    assert m["backend"]["device_count"] == len(jax.devices())
    assert m["versions"]["jax"] == jax.__version__
    assert rundir.is_complete(one_run)
    # The file, the session dir and the run dir all name the same capture.
    assert rundir.find_xplane_files(files[0]) == files
    assert rundir.find_xplane_files(files[0].parent) == files
    assert rundir.find_xplane_files(one_run, session=files[0].parent.name) == files
    with pytest.raises(InputError):
        rundir.find_xplane_files(one_run, session="1999_01_01_00_00_00")


def test_existing_dir_is_never_overwritten(one_run):
    before = (one_run / "run.json").read_bytes()
    with pytest.raises(rundir.RunExistsError, match="already exists"):
        _run(one_run)
    assert (one_run / "run.json").read_bytes() == before
    assert not list(one_run.parent.glob("*.partial-*"))
    # An empty directory in the way counts too (rename(2) would silently replace it).
    empty = one_run.parent / "empty"
    empty.mkdir()
    with pytest.raises(rundir.RunExistsError):
        _run(empty)


@pytest.mark.parametrize("exc", [RuntimeError, KeyboardInterrupt])
def test_interrupted_capture_leaves_nothing(tmp_path, exc):
    calls = {"n": 0}

    def step(state, batch):  # not jitted: runs as is; dies inside the profiled phase
        calls["n"] += 1
        if calls["n"] == 4:  # 1 warmup + 2 timed + first profiled step
            raise exc("boom")
        return _step(state, batch)

    with pytest.raises(exc):
        profile_steps(step, jnp.ones((8, 8)), jnp.eye(8), out=tmp_path / "r", steps=2, warmup=1)
    assert calls["n"] == 4
    assert list(tmp_path.iterdir()) == []


def test_crash_before_manifest_is_not_a_run(one_run, tmp_path):
    # Simulate a process killed after the trace was written but before run.json: the partial
    # directory holds a real trace yet is neither complete nor listed nor readable as a run.
    partial = tmp_path / "b.partial-dead"
    shutil.copytree(one_run / "plugins", partial / "plugins")
    assert not rundir.is_complete(partial)
    with pytest.raises(InputError, match="unfinished"):
        rundir.find_xplane_files(partial)
    # A run dir whose run.json is garbage or missing is not complete either.
    broken = tmp_path / "c"
    shutil.copytree(one_run / "plugins", broken / "plugins")
    assert not rundir.is_complete(broken)
    (broken / "run.json").write_text("{not json")
    # ...and it is named, never read as a plain log directory (issue 25).
    with pytest.raises(InputError, match="run.json"):
        rundir.load_manifest(broken)
    assert not rundir.is_complete(broken)
    good = tmp_path / "a"
    shutil.copytree(one_run, good)
    assert rundir.list_runs(tmp_path) == [good]


def test_write_run_requires_a_trace(tmp_path):
    partial = rundir.partial_dir_for(tmp_path / "x")
    with pytest.raises(InputError, match="no .xplane.pb"):
        rundir.write_run(partial, tmp_path / "x", {"label": "x"})
    assert not (tmp_path / "x").exists()


def test_list_runs_sorted(one_run, tmp_path):
    for name in ("zeta", "alpha", "mid"):
        shutil.copytree(one_run, tmp_path / name)
    (tmp_path / "notes").mkdir()
    assert [p.name for p in rundir.list_runs(tmp_path)] == ["alpha", "mid", "zeta"]
    assert rundir.list_runs(tmp_path / "alpha") == [tmp_path / "alpha"]
    with pytest.raises(InputError):
        rundir.list_runs(tmp_path / "missing")
    assert json.loads((tmp_path / "mid" / "run.json").read_text())["label"] == "first"
