"""Checkpoint names survive edits of the source (`overlap.analysis.names.record_sources`): a
real CPU capture made here with `overlap.capture.api.profile_steps` of a script written here
records the script's checkpoint_name spans and hash in run.json; after the script is edited
(lines shifted, the call gone) or deleted, the names are read from the record, and the evidence
says so. Without the record the same edit loses the name (the failure this guards against)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from overlap.analysis import names as nm
from overlap.hlo import trace_ops
from overlap.runs.rundir import load_manifest, normalize_manifest

SCRIPT = '''import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

POLICY = jax.checkpoint_policies.save_and_offload_only_these_names(
    names_which_can_be_saved=[], names_which_can_be_offloaded=["probe_act"],
    offload_src="device", offload_dst="pinned_host")


def layer(x, w):
    a = checkpoint_name(jnp.tanh(x @ w), "probe_act")
    return x + a, None


def loss(ws, x):
    y, _ = jax.lax.scan(jax.checkpoint(layer, policy=POLICY), x, ws)
    return jnp.sum(y)


@jax.jit
def step(ws, x):
    g = jax.grad(loss)(ws, x)
    return ws - 0.01 * g, jnp.sum(g)
'''
REPO = Path(__file__).resolve().parents[2]
CALL_LINE = 11  # `a = checkpoint_name(jnp.tanh(x @ w), "probe_act")`


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    """(script path, run directory) of one CPU capture of the script, made in a process of its
    own (jax caches traced helpers with the source location of their first caller: compiling
    the script here would lend its locations to other tests' programs)."""
    d = tmp_path_factory.mktemp("names_recorded")
    script = d / "probe_workload.py"
    script.write_text(SCRIPT)
    driver = (
        "import importlib.util, sys\n"
        "import jax.numpy as jnp\n"
        "from overlap.capture.api import profile_steps\n"
        "spec = importlib.util.spec_from_file_location('probe_workload', sys.argv[1])\n"
        "mod = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(mod)\n"
        "profile_steps(mod.step, jnp.ones((3, 8, 8)), jnp.ones((4, 8)), out=sys.argv[2],\n"
        "              steps=1, warmup=0)\n")
    subprocess.run([sys.executable, "-c", driver, str(script), str(d / "run")], check=True,
                   timeout=600, env={**os.environ, "JAX_PLATFORMS": "cpu"}, cwd=REPO)
    return script, d / "run"


def _program(run: Path) -> trace_ops.Program:
    (text,) = sorted(run.glob("hlo/*.hlo.txt"))
    return trace_ops.program_from_text(text.read_text())


def _here(prog: trace_ops.Program, script: Path) -> list[trace_ops.Location]:
    return [loc for ins in prog.instrs.values() for loc in trace_ops.frame_locations(
        prog, ins.name) if loc.file == str(script) and loc.line == CALL_LINE]


def test_capture_records_the_spans_and_hash(captured):
    script, run = captured
    rec = load_manifest(run)["checkpoint_names"]
    assert rec[str(script)]["sha256"] == nm.file_sha256(str(script))
    (span,) = rec[str(script)]["spans"]
    assert span[0] == CALL_LINE and span[4] == "probe_act"
    # the raw run.json holds the same record (normalisation keeps a well-formed one whole)
    assert json.loads((run / "run.json").read_text())["checkpoint_names"] == rec


def test_names_survive_an_edit_and_a_deletion(captured, tmp_path):
    script, run = captured
    prog = _program(run)
    rec = load_manifest(run)["checkpoint_names"]
    locs = _here(prog, script)
    assert locs, "the program's stack frames lead to the checkpoint_name call"
    original = script.read_text()
    try:
        # unchanged: the file itself, and it says it is unchanged
        spans, where, how = nm._spans_for(str(script), (), rec)
        assert where == str(script) and how.endswith("unchanged since the capture")
        assert nm.tagged_names(prog, (), rec)["probe_act"] == f"{script}:{CALL_LINE}"
        # edited: three lines on top shift the call; without the record the location names
        # nothing, with it the name is the one the code had when it ran
        script.write_text("# edited\n# after\n# the capture\n" + original)
        assert not any(nm.name_at(str(script), loc) for loc in locs)
        assert nm.tagged_names(prog, (), None)["probe_act"] == f"{script}:{CALL_LINE + 3}"
        spans, where, how = nm._spans_for(str(script), (), rec)
        assert how == "recorded at capture (the file changed since)"
        assert {nm._name_in(spans, loc) for loc in locs} == {"probe_act"}
        assert nm.tagged_names(prog, (), rec)["probe_act"] == f"{script}:{CALL_LINE}"
        # the call removed: still named from the record
        script.write_text(original.replace('checkpoint_name(jnp.tanh(x @ w), "probe_act")',
                                           "jnp.tanh(x @ w)"))
        assert "probe_act" not in nm.tagged_names(prog, (), None)
        assert nm.tagged_names(prog, (), rec)["probe_act"] == f"{script}:{CALL_LINE}"
        # deleted
        script.unlink()
        assert nm.tagged_names(prog, (), None) == {}
        spans, where, how = nm._spans_for(str(script), (), rec)
        assert how == "recorded at capture (the file is missing here)"
        assert {nm._name_in(spans, loc) for loc in locs} == {"probe_act"}
    finally:
        script.write_text(original)


def test_a_damaged_record_is_dropped_not_trusted():
    good = {"sha256": "ab", "spans": [[1, 0, 1, 5, "x"]]}
    m = normalize_manifest({"checkpoint_names": {
        "a.py": good, "b.py": {"sha256": "ab", "spans": [[1, 0, -1, 5, "x"]]},
        "c.py": {"spans": []}, "d.py": {"sha256": 3, "spans": []},
        "e.py": {"sha256": "ab", "spans": [[1, 0, 1, 5]]}, 7: good}})
    assert m["checkpoint_names"] == {"a.py": good}
    assert normalize_manifest({"checkpoint_names": "x"})["checkpoint_names"] is None
    assert "checkpoint_names" not in normalize_manifest({})
