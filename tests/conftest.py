"""Shared fixtures: a real CPU capture made once per test session, and CLI runners."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# The suite runs on the CPU backend (plan tests compile for GPU/TPU targets explicitly): with
# the [plan] extra installed, jax would otherwise probe CUDA and libtpu and fail loudly.
os.environ.setdefault("JAX_PLATFORMS", "cpu")
SAMPLE_TRACES = REPO / "sample_traces"


@pytest.fixture(scope="session", autouse=True)
def private_cache_dir(tmp_path_factory) -> Iterator[Path]:
    """The dashboard's result cache (`OVERLAP_CACHE_DIR`, else ~/.cache/overlap/dashboard) goes
    to a temporary directory for the whole session: tests never read or write the user's cache.
    Set in the environment, so the servers and CLI subprocesses the tests start inherit it."""
    d = tmp_path_factory.mktemp("overlap-cache")
    saved = os.environ.get("OVERLAP_CACHE_DIR")
    os.environ["OVERLAP_CACHE_DIR"] = str(d)
    yield d
    if saved is None:
        os.environ.pop("OVERLAP_CACHE_DIR", None)
    else:
        os.environ["OVERLAP_CACHE_DIR"] = saved


GPU_CORPUS = REPO / "tests" / "data" / "gpu-corpus"  # the 38 real H100/H200 captures (SOURCES)


@pytest.fixture(scope="session")
def gpu_corpus(tmp_path_factory) -> Path:
    """The real H100/H200 corpus (tests/data/gpu-corpus/*.tar.xz) unpacked once per session:
    `gpu_corpus / "gpu-h100" / "transformer-h100" / "full"` is a run directory. Read only."""
    import shutil
    import tarfile

    root = tmp_path_factory.mktemp("gpu-corpus")
    for gpu in ("gpu-h100", "gpu-h200"):
        with tarfile.open(GPU_CORPUS / f"{gpu}.tar.xz") as tf:
            tf.extractall(root, filter="data")
        # the workloads module that made the captures, as sample_traces/ ships it beside them
        # (the per-name offload table reads the checkpoint_name calls at the recorded lines)
        shutil.copy(SAMPLE_TRACES / gpu / "workloads.py", root / gpu / "workloads.py")
    return root


GPU_LARGE = REPO / "tests" / "data" / "gpu-large"  # real H200 captures of many steps (SOURCES)


@pytest.fixture(scope="session")
def gpu_large(tmp_path_factory) -> Path:
    """The real H200 captures (tests/data/gpu-large/*.tar.xz, SOURCES.md there lists them)
    unpacked once per session: `gpu_large / "transformer_control_qkv_cb_300"` (a run
    directory: 300 steps, command buffers on, 305,700 device events, the executed program
    carried), `gpu_large / "user_pytracer_700"` (a user's loop, the Python tracer on),
    `"buckets_offload_32"` (32 offloading programs in one capture) and
    `"eager_transfers_60"` (eager dispatch, device_put to pinned host and back); the last
    three without run.json. Read only."""
    import tarfile

    root = tmp_path_factory.mktemp("gpu-large")
    for f in sorted(GPU_LARGE.glob("*.tar.xz")):
        with tarfile.open(f) as tf:
            tf.extractall(root, filter="data")
    return root


@pytest.fixture(scope="session")
def h200_cb_run(gpu_large) -> Path:
    """The command-buffer run's directory (`gpu_large`)."""
    return gpu_large / "transformer_control_qkv_cb_300"


@pytest.fixture(scope="session")
def cpu_capture(tmp_path_factory) -> Path:
    """A real jax.profiler capture of a tiny jitted function: 3 annotated steps on XLA:CPU."""
    import jax
    import jax.numpy as jnp

    logdir = tmp_path_factory.mktemp("cpu_capture")

    @jax.jit
    def f(x):
        return jnp.tanh(x @ x).sum()

    x = jnp.ones((128, 128))
    f(x).block_until_ready()  # compile outside the capture
    with jax.profiler.trace(str(logdir)):
        for i in range(3):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                f(x).block_until_ready()
    return logdir


def run_cli(*args: str, env: dict | None = None, cwd: Path | None = None,
            timeout: float = 120) -> subprocess.CompletedProcess:
    """Run `python -m overlap ARGS` the way a user's shell would."""
    full_env = dict(os.environ)
    full_env.setdefault("PYTHONPATH", str(REPO))
    if env:
        full_env.update(env)
    return subprocess.run([sys.executable, "-m", "overlap", *args], capture_output=True,
                          text=True, env=full_env, cwd=cwd or REPO, timeout=timeout)


class Hang(Exception):
    """What `bounded` raises when its block runs past its time."""


@contextlib.contextmanager
def bounded(seconds: int) -> Iterator[None]:
    """Fail instead of hanging: SIGALRM raises `Hang` in the main thread after `seconds` (a
    command that never returns must fail its test, not stall CI)."""
    def on_alarm(*_):
        raise Hang(f"no answer in {seconds} s")
    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
