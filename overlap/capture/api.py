"""Capture training steps under jax.profiler into a run directory (see :mod:`overlap.runs.rundir`).

Three ways in:

* :func:`profile_steps` – give it a step function, state and batch. It runs ``warmup`` steps
  unprofiled, times ``steps`` steps without the profiler, then runs ``steps`` more under
  ``jax.profiler.trace`` with each step inside ``StepTraceAnnotation(step_name, step_num=i)``.
* :func:`capture` – a context manager around a loop you already have; wrap each step in
  ``with cap.step(i):``.
* :func:`attach` – capture ``duration_ms`` from a running process that called
  ``jax.profiler.start_server(port)`` (xprof's gRPC client, the same call as
  ``python -m jax.collect_profile``).

Metrics recorded
    ``step_ns``: wall-clock nanoseconds of each step *without* the profiler, measured from the
    call until ``jax.block_until_ready`` on its outputs returns – dispatch + device time of one
    step, with no pipelining across steps (a real loop overlaps step i+1's dispatch with step
    i's execution, so this is an upper bound on a pipelined step). ``step_ns_profiled``: the same
    under the profiler; the ratio is the profiler's overhead, which the trace's own timings
    carry too.

Defaults that keep traces small and faithful
    * Python tracer off (``python_tracer_level=0``); host tracer level 2, which keeps the
      allocator's ``MemoryAllocation`` events; ``enable_hlo_proto`` on (the HloProto with buffer
      assignment rides in the capture's ``/host:metadata`` plane).
    * ``XLA_FLAGS`` gains ``--xla_gpu_enable_command_buffer=`` (command buffers / CUDA graphs
      hide per-kernel detail from the trace, openxla/xprof#3070) unless the user opts out. It
      only takes effect if set before jax initialises its backends: :func:`prepare_xla_flags`
      must run before the first ``jax.devices()``/jit; the manifest records whether it did.
      Harmless on CPU (the flag is a known DebugOptions field that CPU ignores).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import platform
import socket
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import jax

from overlap.analysis.host_memory import CAP_ENV
from overlap.hlo.program import (
    hlo_protos_from_xspace,
    memory_analysis_dict,
    memory_timeline,
    offload_inventory,
    pick_module,
)
from overlap.runs import rundir

COMMAND_BUFFER_FLAG = "--xla_gpu_enable_command_buffer="
RECORDED_ENV = (CAP_ENV,)

# What prepare_xla_flags did, for the manifest. Module-level because XLA_FLAGS is process state.
_FLAG_STATE: dict[str, Any] = {"command_buffer_flag": "not requested"}


def prepare_xla_flags(command_buffers: bool = False) -> dict[str, Any]:
    """Disable XLA:GPU command buffers for the capture (unless `command_buffers`), by editing
    ``XLA_FLAGS`` – which XLA reads once, when jax initialises its backends.

    Returns (and remembers for the manifest) what happened: ``set``, ``already set`` (the user
    set some ``--xla_gpu_enable_command_buffer``), ``opted out``, or ``too late`` (backends
    were already up, so the current process keeps command buffers)."""
    from jax._src import xla_bridge

    flags = os.environ.get("XLA_FLAGS", "")
    if command_buffers:
        state = "opted out"
    elif "--xla_gpu_enable_command_buffer" in flags:
        state = "already set"
    elif xla_bridge.backends_are_initialized():
        state = "too late"
    else:
        os.environ["XLA_FLAGS"] = (flags + " " + COMMAND_BUFFER_FLAG).strip()
        state = "set"
    _FLAG_STATE["command_buffer_flag"] = state
    return dict(_FLAG_STATE)


def profile_options(python_tracer: bool = False,
                    host_tracer_level: int = 2) -> jax.profiler.ProfileOptions:
    po = jax.profiler.ProfileOptions()
    po.python_tracer_level = 1 if python_tracer else 0
    po.host_tracer_level = host_tracer_level
    po.enable_hlo_proto = True
    return po


def _po_dict(po) -> dict:
    return {"python_tracer_level": po.python_tracer_level,
            "host_tracer_level": po.host_tracer_level, "enable_hlo_proto": po.enable_hlo_proto}


def environment() -> dict:
    """Backend, devices, versions and XLA flags of this process, for the manifest."""
    import jaxlib

    devs = jax.devices()
    return {
        "backend": {"platform": devs[0].platform, "device_kind": devs[0].device_kind,
                    "device_count": len(devs), "local_device_count": jax.local_device_count(),
                    "process_count": jax.process_count()},
        "versions": {"jax": jax.__version__, "jaxlib": jaxlib.__version__,
                     "python": platform.python_version()},
        "xla_flags": {"XLA_FLAGS": os.environ.get("XLA_FLAGS", ""), **_FLAG_STATE},
        # Variables that change what the runtime may do (None: unset): the GPU runtime's
        # pinned host pool cap, read by overlap.analysis.host_memory.cap_in_force.
        "env": {v: os.environ.get(v) for v in RECORDED_ENV},
        "host": socket.gethostname(),
    }


def _block(tree) -> None:
    jax.block_until_ready(tree)


def _hlo_facts(out_dir: Path, compiled, module_hint: str | None) -> dict:
    """Memory analysis, offload inventory and heap-simulator peak for the manifest; writes the
    compiled HLO text next to the trace. Each part degrades to None with a reason."""
    facts: dict[str, Any] = {"memory_analysis": None, "offload_inventory": None,
                             "heap_simulator": None, "module": module_hint,
                             "checkpoint_names": None}
    if compiled is not None:
        facts["memory_analysis"] = memory_analysis_dict(compiled)
        try:
            text = compiled.as_text()
        except Exception as e:  # some backends/plugins cannot print
            facts["offload_inventory"] = {"error": f"as_text failed: {e}"}
        else:
            facts["offload_inventory"] = offload_inventory(text).to_dict()
            (out_dir / "hlo").mkdir(exist_ok=True)
            (out_dir / "hlo" / f"{module_hint or 'program'}.hlo.txt").write_text(text)
            facts["checkpoint_names"] = _checkpoint_names(text)
    try:
        # out_dir is still the .partial- directory, which find_xplane_files refuses on purpose.
        files = sorted(out_dir.glob("plugins/profile/*/*.xplane.pb"))
        protos: dict[str, bytes] = {}
        for f in files:
            protos.update(hlo_protos_from_xspace(f))
        pid = _program_id(compiled)
        if module_hint and pid is not None and f"{module_hint}({pid})" in protos:
            # This run's own compile: a sweep's capture carries every policy's program.
            name = f"{module_hint}({pid})"
            proto = protos[name]
        else:
            name, proto = pick_module(protos, module_hint or _ran_module(files))
        tl = memory_timeline(proto)
        facts["heap_simulator"] = {"module": name, **tl.to_dict()}
        if facts["offload_inventory"] is None:
            # No compiled object (capture()/attach()): the proto has no trip counts.
            facts["offload_inventory"] = offload_inventory(proto).to_dict()
        if facts["checkpoint_names"] is None:
            facts["checkpoint_names"] = _checkpoint_names(proto)
    except (ValueError, OSError) as e:
        # e.g. attach(): the server's profiler only records HLO of programs compiled while it
        # traced, so a steady-state loop's capture carries none.
        facts["heap_simulator"] = {"error": str(e)}
        if facts["offload_inventory"] is None:
            facts["offload_inventory"] = {"error": f"no compiled program or HloProto: {e}"}
    return facts


def _checkpoint_names(hlo: str | bytes) -> dict | None:
    """`overlap.analysis.names.record_sources` of the program (HLO text or HloProto): the
    checkpoint_name spans and hash of each source file its stack frames name, so the report
    names copies as the code stood when it ran, however the files change later. None where
    the program cannot be read (the capture is kept either way)."""
    from overlap.analysis.names import record_sources
    from overlap.hlo import trace_ops

    try:
        prog = (trace_ops.program_from_text(hlo) if isinstance(hlo, str)
                else trace_ops.program_from_proto(hlo))
        return record_sources(prog)
    except Exception:  # noqa: BLE001 - a name record is optional; never lose the capture
        return None


@contextlib.contextmanager
def _native_output_to(path: Path):
    """Send what native code prints on fds 1 and 2 (xprof's retry advice for flags overlap does
    not have) to `path`; Python's own output is unaffected once restored."""
    import sys

    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for f in (*saved, fd):
            os.close(f)


def _fingerprint(module: str | None, state, batch, program_id: int | None = None) -> dict:
    """What makes two runs the same program: the module name and the shapes and dtypes of the
    step's inputs (`overlap compare` refuses to judge runs whose fingerprints differ)."""
    import hashlib

    def sig(x):
        return (tuple(getattr(x, "shape", ())), str(getattr(x, "dtype", type(x).__name__)))

    try:
        leaves = [sig(x) for x in jax.tree.leaves((state, batch))]
    except Exception:  # noqa: BLE001 - donated buffers: shapes are still readable on jax arrays
        leaves = []
    return {"module": module,
            "inputs": hashlib.sha256(repr(leaves).encode()).hexdigest()[:16],
            # Which compile of `module` this run executed (not part of what makes two runs the
            # same program: every policy's compile has its own id).
            "program_id": program_id}


def _ran_module(files) -> str | None:
    """The module with the most compute time in the capture (the step that ran), for captures
    made without a compiled object to name it (capture(), attach())."""
    from overlap.analysis.memory import executed_module
    from overlap.trace.protos import XSpace
    from overlap.trace.reader import read_xspace

    best: dict[str, int] = {}
    for f in files:
        tables = read_xspace(XSpace.FromString(Path(f).read_bytes()), host="h", source=Path(f))

        class _T:  # the attributes executed_module reads
            compute = tables["compute"]

        name = executed_module(_T)
        if name:
            co = tables["compute"]
            sel = co[co["hlo_module"] == name]
            best[name] = best.get(name, 0) + int((sel["end_ps"] - sel["start_ps"]).sum())
    return max(best, key=lambda k: best[k]) if best else None


def _module_name(compiled) -> str | None:
    try:
        return compiled.runtime_executable().hlo_modules()[0].name
    except Exception:
        return None


def _program_id(compiled) -> int | None:
    """The compiled step's HloModuleProto id: the `(<id>)` of `<module>(<id>)` in the capture's
    metadata and the `program_id` of its op events. A sweep compiles every policy's step under
    one name before profiling, so each capture carries all of them; this says which one ran."""
    if compiled is None:
        return None
    try:
        from overlap.trace.protos import HloProto

        raw = compiled.runtime_executable().hlo_modules()[0].as_serialized_hlo_module_proto()
        pid = int(type(HloProto().hlo_module).FromString(raw).id)
    except Exception:  # noqa: BLE001 - a backend that cannot say: the trace's op events decide
        return None
    return pid if pid >= 0 else None


def _meta(workload, policy) -> tuple[Any, Any]:
    w = workload.manifest() if hasattr(workload, "manifest") else workload
    if policy is not None and hasattr(policy, "to_dict"):
        policy = policy.to_dict()
    elif policy is not None and callable(policy):
        # A real JAX policy (jax.checkpoint_policies.*): a function, not one of ours. Its
        # name is all it can tell; what it saves/offloads is in the compiled HLO inventory.
        policy = {"name": getattr(policy, "__name__", None) or type(policy).__name__,
                  "category": "unknown", "description": f"JAX policy object {policy!r}"[:200]}
    elif policy is not None and not isinstance(policy, (str, dict)):
        policy = {"name": str(policy)[:100], "category": "unknown"}
    elif isinstance(policy, str):
        try:
            from overlap.capture.policies import get_policy
            policy = get_policy(policy).to_dict()
        except ValueError:
            policy = {"name": policy}
    return w, policy


def profile_steps(step_fn: Callable, state: Any, batch: Any, *, out: str | os.PathLike,
                  steps: int = 10, warmup: int = 3, label: str | None = None,
                  workload: Any = None, policy: Any = None, step_name: str = "train",
                  python_tracer: bool = False, host_tracer_level: int = 2,
                  extra: dict | None = None, loss_and_grad: Callable | None = None) -> Path:
    """Warm up, time, and profile `steps` calls of ``state, aux = step_fn(state, batch)``.

    `step_fn` should be jitted: it is compiled once via ``step_fn.lower(state, batch).compile()``
    and that executable runs every step (so ``memory_analysis()`` and the HLO describe exactly
    what ran). A non-jitted callable is run as is, and the manifest's memory figures are null.
    `state` is consumed (it may be donated). Writes the run to `out` atomically and returns it;
    raises :class:`overlap.runs.rundir.RunExistsError` if `out` exists.
    `workload`/`policy` are recorded in the manifest (a Workload/Policy object, a name, or a dict).
    `loss_and_grad` (default: the Workload's): ``(state, batch) -> (loss, grads)``, run once on
    `state` and `batch` before anything else to record the run's ``answer``
    (:mod:`overlap.capture.answers`).
    """
    if steps < 1 or warmup < 0:
        raise ValueError(f"need steps >= 1 and warmup >= 0 (got steps={steps}, warmup={warmup})")
    final = Path(out)
    # Up front, so a taken or unwritable target fails before minutes of compiling and stepping.
    partial = rundir.partial_dir_for(final)
    try:
        from overlap.capture import answers

        lg = loss_and_grad or getattr(workload, "loss_and_grad", None)
        # Before the first step: the step may donate `state`.
        extra = {"answer": answers.record(lg, state, batch), **(extra or {})}
        run, compiled, compile_ns = compile_step(step_fn, state, batch)
        state, _ = run_steps(run, state, batch, warmup)
        state, step_ns = run_steps(run, state, batch, steps)
    except BaseException:
        rundir.discard_partial(partial)
        raise
    return write_profiled_run(run, compiled, state, batch, out=final, partial=partial,
                              steps=steps, warmup=warmup, step_ns=step_ns,
                              compile_ns=compile_ns, label=label, workload=workload,
                              policy=policy, step_name=step_name, python_tracer=python_tracer,
                              host_tracer_level=host_tracer_level, extra=extra)[0]


def compile_step(step_fn: Callable, state: Any, batch: Any) -> tuple[Callable, Any, int | None]:
    """(what to call each step, the compiled executable or None, compile ns or None): a jitted
    `step_fn` is compiled once so every step runs exactly the executable the manifest describes."""
    if not hasattr(step_fn, "lower"):
        return step_fn, None, None
    t0 = time.perf_counter_ns()
    compiled = step_fn.lower(state, batch).compile()
    return compiled, compiled, time.perf_counter_ns() - t0


def run_steps(run: Callable, state: Any, batch: Any, n: int) -> tuple[Any, list[int]]:
    """Run `n` blocked steps without the profiler; (the state after them, each step's wall ns)."""
    step_ns = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        state, aux = run(state, batch)
        _block((state, aux))
        step_ns.append(time.perf_counter_ns() - t0)
    return state, step_ns


def write_profiled_run(run: Callable, compiled: Any, state: Any, batch: Any, *,
                       out: str | os.PathLike, partial: Path | None = None, steps: int,
                       warmup: int, step_ns: list[int],
                       compile_ns: int | None, label: str | None = None, workload: Any = None,
                       policy: Any = None, step_name: str = "train", python_tracer: bool = False,
                       host_tracer_level: int = 2, extra: dict | None = None) -> tuple[Path, Any]:
    """Profile `steps` more steps into a partial directory, write the manifest (with the
    unprofiled `step_ns` measured by the caller) and publish the run atomically.
    `partial` is the caller's :func:`overlap.runs.rundir.partial_dir_for` of `out` (made here
    when None). Returns (the run directory, the state after the profiled steps)."""
    final = Path(out)
    if partial is None:
        partial = rundir.partial_dir_for(final)
    try:
        po = profile_options(python_tracer, host_tracer_level)
        profiled_ns = []
        with jax.profiler.trace(str(partial), profiler_options=po):
            for i in range(steps):
                with jax.profiler.StepTraceAnnotation(step_name, step_num=i):
                    t0 = time.perf_counter_ns()
                    state, aux = run(state, batch)
                    _block((state, aux))
                    profiled_ns.append(time.perf_counter_ns() - t0)
        base = {"label": label or final.name, "mode": "profile_steps", "steps": steps,
                "warmup": warmup, "step_name": step_name, "step_ns": step_ns,
                "step_ns_profiled": profiled_ns, "compile_ns": compile_ns,
                "created_unix_ns": time.time_ns()}
        try:
            wl, pol = _meta(workload, policy)
            module = _module_name(compiled) if compiled is not None else None
            manifest = {
                **base, "workload": wl, "policy": pol, "profile_options": _po_dict(po),
                "program": _fingerprint(module, state, batch, _program_id(compiled)),
                **environment(), **_hlo_facts(partial, compiled, module), **(extra or {}),
            }
        except Exception as e:  # noqa: BLE001 - the capture is written; never lose it
            manifest = {**base, "workload": None, "policy": None,
                        "incomplete": f"metadata could not be recorded ({type(e).__name__}: "
                                      f"{e}); the capture and step times are complete"}
        return rundir.write_run(partial, final, manifest), state
    except BaseException:
        # Interrupted while stepping or profiling: the capture is incomplete, so nothing that
        # looks like a run is left. (Metadata failures after a complete capture never get
        # here: the run is written with `incomplete` instead.)
        rundir.discard_partial(partial)
        raise


@dataclasses.dataclass
class Capture:
    """Handle yielded by :func:`capture`. Wrap each step in ``with cap.step(i):`` and block on
    the step's outputs inside the block (so the annotation covers the device work)."""

    step_name: str
    step_ns: list[int] = dataclasses.field(default_factory=list)
    compiled: Any = None
    path: Path | None = None

    @contextlib.contextmanager
    def step(self, i: int) -> Iterator[None]:
        with jax.profiler.StepTraceAnnotation(self.step_name, step_num=i):
            t0 = time.perf_counter_ns()
            yield
            self.step_ns.append(time.perf_counter_ns() - t0)

    def set_compiled(self, compiled) -> None:
        """Optional: the step's ``jax.jit(f).lower(...).compile()``, for memory figures and an
        offload inventory with loop trip counts."""
        self.compiled = compiled


@contextlib.contextmanager
def capture(out: str | os.PathLike, *, label: str | None = None, workload: Any = None,
            policy: Any = None, step_name: str = "train", python_tracer: bool = False,
            host_tracer_level: int = 2, extra: dict | None = None) -> Iterator[Capture]:
    """Profile the body of a ``with`` block into run directory `out`::

        with overlap.capture.api.capture("runs/mine", policy="qkv_proj_offloaded") as cap:
            for i in range(3):
                with cap.step(i):
                    state, loss = train_step(state, batch)
                    jax.block_until_ready(loss)

    The run is finished (manifest written, directory renamed into place) when the block exits
    normally; an exception discards it. ``cap.path`` is the run directory afterwards."""
    final = Path(out)
    partial = rundir.partial_dir_for(final)
    cap = Capture(step_name)
    po = profile_options(python_tracer, host_tracer_level)
    try:
        with jax.profiler.trace(str(partial), profiler_options=po):
            yield cap
        wl, pol = _meta(workload, policy)
        compiled = cap.compiled
        manifest = {
            "label": label or final.name, "workload": wl, "policy": pol, "mode": "capture",
            "steps": len(cap.step_ns), "warmup": None, "step_name": step_name,
            "step_ns": None, "step_ns_profiled": cap.step_ns, "compile_ns": None,
            "profile_options": _po_dict(po), "created_unix_ns": time.time_ns(),
            **environment(),
            **_hlo_facts(partial, compiled,
                         _module_name(compiled) if compiled is not None else None),
            **(extra or {}),
        }
        cap.path = rundir.write_run(partial, final, manifest)
    except BaseException:
        rundir.discard_partial(partial)
        raise


def attach(host_port: str, duration_ms: int, out: str | os.PathLike, *, label: str | None = None,
           workload: Any = None, policy: Any = None, python_tracer: bool = False,
           host_tracer_level: int = 2, attempts: int = 3, extra: dict | None = None) -> Path:
    """Capture `duration_ms` from a process that called ``jax.profiler.start_server(port)``.

    `host_port` is ``"host:port"`` (``grpc://`` prefix allowed). Uses xprof's
    ``_pywrap_profiler_plugin.trace`` – what ``python -m jax.collect_profile`` calls; needs the
    ``xprof`` (or ``tensorboard-plugin-profile``) package. The manifest's ``backend`` is this
    (client) process's, marked ``remote``; step times are not known (use the trace's step
    events). Raises RuntimeError if the server is unreachable or sends nothing."""
    try:
        from xprof.convert import _pywrap_profiler_plugin
    except ImportError:  # older wheels ship it under the TensorBoard plugin name
        from tensorboard_plugin_profile.convert import _pywrap_profiler_plugin
    addr = host_port.removeprefix("grpc://")
    final = Path(out)
    partial = rundir.partial_dir_for(final)
    opts = {"host_tracer_level": host_tracer_level, "device_tracer_level": 1,
            "python_tracer_level": 1 if python_tracer else 0}
    try:
        try:
            # (service_addr, logdir, worker_list, include_dataset_ops, duration_ms, attempts,
            #  options)
            with _native_output_to(partial / ".attach.log"):
                _pywrap_profiler_plugin.trace(addr, str(partial), "", True, int(duration_ms),
                                              int(attempts), opts)
        except Exception as e:
            # xprof's message ends with advice about its own --num_tracing_attempts flag,
            # which `overlap capture` does not have: keep only the first sentence.
            msg = " ".join(str(e).split())
            msg = msg.split("num_tracing_attempts")[0].rsplit(".", 1)[0] or msg[:200]
            raise RuntimeError(f"attach to {addr} failed: {msg[:300]} (is the job running "
                               "jax.profiler.start_server(PORT) there?)") from e
        if not list(partial.glob("plugins/profile/*/*.xplane.pb")):
            raise RuntimeError(f"attach to {addr}: the server returned no trace")
        wl, pol = _meta(workload, policy)
        env = environment()
        env["backend"] = {**env["backend"], "remote": addr,
                          "note": "backend/devices/versions are the capturing client's"}
        manifest = {
            "label": label or final.name, "workload": wl, "policy": pol, "mode": "attach",
            "duration_ms": int(duration_ms), "steps": None, "warmup": None,
            "step_ns": None, "step_ns_profiled": None, "compile_ns": None,
            "profile_options": {**opts, "enable_hlo_proto": True},
            "created_unix_ns": time.time_ns(), **env, **_hlo_facts(partial, None, None),
            **(extra or {}),
        }
        return rundir.write_run(partial, final, manifest)
    except BaseException:
        rundir.discard_partial(partial)
        raise
