"""Real captures on XLA:CPU: profile_steps, capture(), attach() against a live server, sweep."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import jax
import pytest

from overlap.capture import api as cap_mod
from overlap.capture.sweep import label_for, sweep
from overlap.capture.workloads import load_workload
from overlap.runs import rundir
from overlap.trace.protos import XSpace

pytestmark = pytest.mark.slow  # real JAX captures

REPO = Path(__file__).resolve().parents[2]


def step_events(run_dir, step_name="train") -> list[int]:
    """step_num of every `step_name` root event (stat _r) in the run's host planes, read from
    the raw XSpace (independent of overlap.trace.reader)."""
    nums = []
    for f in rundir.find_xplane_files(run_dir):
        xs = XSpace.FromString(f.read_bytes())
        for plane in xs.planes:
            if not plane.name.startswith("/host:"):
                continue
            stat_names = {k: v.name for k, v in plane.stat_metadata.items()}
            for line in plane.lines:
                for ev in line.events:
                    if plane.event_metadata[ev.metadata_id].name != step_name:
                        continue
                    stats = {stat_names[s.metadata_id]: s for s in ev.stats}
                    if "_r" in stats:
                        nums.append(stats["step_num"].int64_value)
    return sorted(nums)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("cap") / "full"
    w = load_workload("transformer", "full")
    return cap_mod.profile_steps(w.step_fn, w.init_state, w.batch, out=out, steps=3, warmup=2,
                                 workload=w, policy="full")


def test_profile_steps_writes_annotated_steps(tiny_run):
    assert step_events(tiny_run) == [0, 1, 2]
    m = rundir.load_manifest(tiny_run)
    assert m["mode"] == "profile_steps" and m["steps"] == 3 and m["warmup"] == 2
    assert len(m["step_ns"]) == 3 and len(m["step_ns_profiled"]) == 3
    assert m["workload"]["name"] == "transformer" and m["workload"]["size"] == "tiny"
    assert m["policy"]["name"] == "full" and m["policy"]["category"] == "remat"
    assert m["profile_options"] == {"python_tracer_level": 0, "host_tracer_level": 2,
                                    "enable_hlo_proto": True}
    assert (tiny_run / "hlo" / f"{m['module']}.hlo.txt").read_text().startswith("HloModule")


def test_manifest_memory_matches_memory_analysis(tiny_run):
    # Compile the same step independently (fresh workload, same policy and size).
    w = load_workload("transformer", "full")
    ma = w.step_fn.lower(w.init_state, w.batch).compile().memory_analysis()
    m = rundir.load_manifest(tiny_run)["memory_analysis"]
    for field in ("temp_size_in_bytes", "argument_size_in_bytes", "output_size_in_bytes",
                  "alias_size_in_bytes", "generated_code_size_in_bytes",
                  "host_temp_size_in_bytes", "host_argument_size_in_bytes"):
        assert m[field] == getattr(ma, field), field
    assert m["argument_size_in_bytes"] > 0 and m["temp_size_in_bytes"] > 0
    # The state is donated: every output buffer except the scalar loss aliases an argument.
    assert m["alias_size_in_bytes"] > 0
    # The heap-simulator peak from the capture's own HloProto agrees with temp_size up to
    # alignment padding (see tests/test_hlo.py::test_heap_simulator_peak_matches_temp_size).
    hs = rundir.load_manifest(tiny_run)["heap_simulator"]
    assert hs["module"].startswith("jit_train_step(")
    assert 0 < hs["peak_bytes"] <= m["temp_size_in_bytes"]
    assert m["temp_size_in_bytes"] - hs["peak_bytes"] <= m["temp_size_in_bytes"] // 100


def test_cpu_offload_inventory_is_empty_but_recorded(tmp_path):
    # XLA:CPU compiles offload away: even an offloading policy shows no S(5) transfers.
    w = load_workload("scan", "offload:x")
    run = cap_mod.profile_steps(w.step_fn, w.init_state, w.batch, out=tmp_path / "x", steps=1,
                                warmup=1, workload=w, policy="offload:x")
    inv = rundir.load_manifest(run)["offload_inventory"]
    if jax.devices()[0].platform == "cpu":
        assert inv["D2H"]["count"] == 0 and inv["H2D"]["count"] == 0
    else:
        assert inv["D2H"]["executed_count"] >= 10 and inv["H2D"]["executed_count"] >= 10


def test_capture_context_manager(tmp_path):
    w = load_workload("transformer", "none")
    state = w.init_state
    compiled = w.step_fn.lower(state, w.batch).compile()
    state, loss = compiled(state, w.batch)
    jax.block_until_ready(loss)
    with cap_mod.capture(tmp_path / "ctx", policy="none", step_name="mystep") as cap:
        cap.set_compiled(compiled)
        for i in range(2):
            with cap.step(i):
                state, loss = compiled(state, w.batch)
                jax.block_until_ready((state, loss))
    assert cap.path == tmp_path / "ctx"
    assert step_events(cap.path, "mystep") == [0, 1]
    m = rundir.load_manifest(cap.path)
    assert m["mode"] == "capture" and len(m["step_ns_profiled"]) == 2 and m["step_ns"] is None
    assert (m["memory_analysis"]["temp_size_in_bytes"]
            == compiled.memory_analysis().temp_size_in_bytes)
    assert m["policy"]["category"] == "no-remat"


def test_capture_context_manager_discards_on_error(tmp_path):
    with pytest.raises(ZeroDivisionError):
        with cap_mod.capture(tmp_path / "bad") as cap:
            with cap.step(0):
                _ = 1 / 0
    assert list(tmp_path.iterdir()) == []


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


SERVER = textwrap.dedent("""
    import sys, time, jax, jax.numpy as jnp
    port, lifetime = int(sys.argv[1]), float(sys.argv[2])
    deadline = time.time() + lifetime          # never outlive the test
    jax.profiler.start_server(port)
    f = jax.jit(lambda x: jnp.tanh(x @ x))
    x = jnp.ones((128, 128)); f(x).block_until_ready()
    print("ready", flush=True)
    i = 0
    while time.time() < deadline:
        with jax.profiler.StepTraceAnnotation("train", step_num=i):
            x = f(x); x.block_until_ready()
        i += 1
        time.sleep(0.002)
""")


def test_attach_to_running_process(tmp_path):
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-c", SERVER, str(port), "45"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    try:
        t0 = time.time()
        line = proc.stdout.readline()  # blocks until the server compiled and started (or died)
        assert line.strip() == "ready", f"server did not start (rc={proc.poll()})"
        assert time.time() - t0 < 40
        run = cap_mod.attach(f"127.0.0.1:{port}", 1000, tmp_path / "att", label="remote")
    finally:
        proc.kill()
        proc.wait(timeout=10)
    steps = step_events(run)
    assert len(steps) >= 5, steps  # ~1 s of a loop that runs a step every few ms
    assert steps == list(range(steps[0], steps[0] + len(steps)))  # consecutive, none lost
    m = rundir.load_manifest(run)
    assert m["mode"] == "attach" and m["backend"]["remote"] == f"127.0.0.1:{port}"
    assert m["label"] == "remote" and m["duration_ms"] == 1000


def test_attach_to_nothing_fails_cleanly(tmp_path):
    with pytest.raises(RuntimeError):
        cap_mod.attach(f"127.0.0.1:{_free_port()}", 200, tmp_path / "none", attempts=1)
    assert list(tmp_path.iterdir()) == []


def test_prepare_xla_flags_before_and_after_backend_init():
    code = textwrap.dedent("""
        import os, jax
        from overlap.capture.api import prepare_xla_flags
        a = prepare_xla_flags()
        jax.devices()
        print(a["command_buffer_flag"], os.environ["XLA_FLAGS"])
        os.environ["XLA_FLAGS"] = ""
        print(prepare_xla_flags()["command_buffer_flag"])
        print(prepare_xla_flags(command_buffers=True)["command_buffer_flag"])
    """)
    env = {**os.environ, "PYTHONPATH": str(REPO), "XLA_FLAGS": ""}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines == [f"set {cap_mod.COMMAND_BUFFER_FLAG}", "too late", "opted out"]


def test_sweep_one_dir_per_policy(tmp_path):
    runs = sweep("transformer", ["full", "offload:query_proj,key_proj"], tmp_path, steps=1,
                 warmup=1)
    assert [r.name for r in runs] == ["full", "offload_query_proj_key_proj"]
    assert [rundir.load_manifest(r)["policy"]["category"] for r in runs] == ["remat", "offload"]
    assert rundir.list_runs(tmp_path) == sorted(runs)
    # Validation happens before any capture: a bad name or an existing target writes nothing.
    with pytest.raises(ValueError, match="unknown policy"):
        sweep("transformer", ["none", "bogus"], tmp_path / "v")
    with pytest.raises(rundir.RunExistsError):
        sweep("transformer", ["none", "full"], tmp_path)
    assert not (tmp_path / "v").exists() and not (tmp_path / "none").exists()
    with pytest.raises(ValueError, match="duplicate"):
        sweep("transformer", ["full", "full"], tmp_path / "d")
    assert label_for("save:context+offload:x") == "save_context_offload_x"


def test_real_jax_policy_objects_and_metadata_failures_never_lose_a_capture(tmp_path,
                                                                           monkeypatch):
    import jax
    import jax.numpy as jnp

    from overlap.capture import api

    @jax.jit
    def step(s, b):
        return s + b, (s * b).sum()

    pol = jax.checkpoint_policies.save_and_offload_only_these_names(
        names_which_can_be_saved=[], names_which_can_be_offloaded=["x"],
        offload_src="device", offload_dst="pinned_host")
    out = api.profile_steps(step, jnp.ones(8), jnp.ones(8), out=tmp_path / "a", steps=2,
                            warmup=1, policy=pol)
    m = json.loads((out / "run.json").read_text())
    assert m["policy"]["category"] == "unknown" and m["program"]["module"]

    def broken(*a, **k):
        raise RuntimeError("disk hiccup while describing the run")

    monkeypatch.setattr(api, "environment", broken)
    out = api.profile_steps(step, jnp.ones(8), jnp.ones(8), out=tmp_path / "b", steps=2,
                            warmup=1)
    m = json.loads((out / "run.json").read_text())
    assert "metadata could not be recorded" in m["incomplete"] and len(m["step_ns"]) == 2
    assert list(out.rglob("*.xplane.pb"))
