"""Compile a training step for a target without the hardware, and write plan runs.

`plan_step(step_fn, state, batch, target=..., policies=...)` lowers the jitted step on abstract
shapes (`jax.ShapeDtypeStruct`s placed on a compile-only device of the target), compiles it with
the target's real XLA compiler (XLA:GPU through the CUDA PJRT plugin and a written device spec,
XLA:TPU through libtpu), and keeps what the compiler says:

* `memory_analysis`: every field of `compiled.memory_analysis()`, device and host (`host_*`);
* the optimized HLO text (schedule order) and an HloProto with buffer assignment;
* the heap-simulator live-bytes timeline over program order (device memory);
* the offload inventory (copies to/from host memory space S(5), executions per step);
* the roofline overlap estimate (`overlap.hlo.schedule`), labelled as an estimate, with the
  async ops on XLA:GPU's execution streams as the HloProto's instruction order assigns them
  (`overlap.plan.estimate.plan_streams`).

A plan is compiled, never run: nothing here measures time, and every view labels a plan
"compiled for TARGET, not run". A step that does not fit is a finding: the compiler's
out-of-memory message is kept in the plan (`status: "does_not_fit"`), never raised.

Parameters or other state meant to live in host memory: give their `ShapeDtypeStruct` a
`sharding` whose `memory_kind` is `"pinned_host"` (any device; the plan moves it onto the
target's device with the same memory kind), and move them inside the step with
`jax.device_put(x, jax.memory.Space.Device)`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import platform as _platform
import re
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable

from overlap.errors import UsageError, has_module, install_hint
from overlap.plan.targets import MemoryBudget, Target, get_target, memory_budget

EXTRA_HINT = f"plan mode needs the compilers: {install_hint('plan')}"


class PlanUnavailable(UsageError):
    """The target's compiler is not installed (exit 2, naming the extra)."""


def require_compiler(target: Target) -> None:
    """Exit 2 naming the `plan` extra unless jax and the target's compiler can be imported."""
    if target.platform == "tpu":
        need = [("jax", "jax"), ("libtpu", "libtpu")]
    else:
        need = [("jax", "jax"),
                ("jax_plugins.xla_cuda12", "the jax CUDA plugin (jax-cuda12-plugin)")]
    for module, what in need:
        if not has_module(module):
            raise PlanUnavailable(f"{target.name}: {what} is not installed; {EXTRA_HINT}")


# File descriptor 2 is one per process: nested or concurrent (threads compiling at once, as
# `overlap advise` does) quiet sections share one redirection, made by the first to enter and
# undone by the last to leave.
_QUIET_LOCK = threading.Lock()
_QUIET: dict[str, Any] = {"depth": 0, "saved": None, "tmp": None}


@contextlib.contextmanager
def quiet_native_stderr(log: list[str] | None = None):
    """Silence what libtpu and the CUDA plugin print on file descriptor 2 while they load and
    compile with no device (cuInit errors, TPU metadata-server warnings); keep it in `log`
    (with concurrent sections, `log` may also hold what the others printed meanwhile)."""
    import sys

    with _QUIET_LOCK:
        if _QUIET["depth"] == 0:
            sys.stderr.flush()
            _QUIET["saved"] = os.dup(2)
            _QUIET["tmp"] = tempfile.TemporaryFile(mode="w+b")
            os.dup2(_QUIET["tmp"].fileno(), 2)
        _QUIET["depth"] += 1
        tmp = _QUIET["tmp"]
        start = os.lseek(tmp.fileno(), 0, os.SEEK_END)
    try:
        yield
    finally:
        with _QUIET_LOCK:
            sys.stderr.flush()
            if log is not None:
                end = os.lseek(tmp.fileno(), 0, os.SEEK_END)
                log.append(os.pread(tmp.fileno(), end - start, start).decode("utf-8",
                                                                             "replace"))
            _QUIET["depth"] -= 1
            if _QUIET["depth"] == 0:
                os.dup2(_QUIET["saved"], 2)
                os.close(_QUIET["saved"])
                _QUIET["tmp"].close()
                _QUIET.update(saved=None, tmp=None)


_DEVICES: dict[tuple[str, str], list] = {}


def target_devices(target: Target, topology: str | None = None) -> list:
    """Compile-only devices of `target` (cached per target and topology)."""
    require_compiler(target)
    topo = topology or target.topology
    key = (target.name, topo)
    if key not in _DEVICES:
        from jax.experimental import topologies

        try:
            with quiet_native_stderr():
                if target.platform == "tpu":
                    # No metadata server off-cloud: without this libtpu waits for one.
                    os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")
                    # libtpu takes /tmp/libtpu_lockfile when it loads, so a second process
                    # (another plan, or a training job on a TPU VM) fails with "Internal error
                    # when accessing libtpu multi-process lockfile". A compile-only client
                    # claims no chip; this is libtpu's own switch for concurrent loads.
                    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
                    desc = topologies.get_topology_desc(platform="tpu", topology_name=topo)
                else:
                    desc = topologies.get_topology_desc(
                        "", platform="cuda", target_config=target.gpu_spec, topology=topo)
        except Exception as e:  # noqa: BLE001 - the plugin's message is the useful part
            msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise UsageError(f"{target.name}: no compile-only device for topology {topo!r}: "
                             f"{msg}") from None
        _DEVICES[key] = list(desc.devices)
    return _DEVICES[key]


def _placed(tree, device) -> Any:
    """Abstract copies of `tree`'s leaves on `device`, keeping each leaf's memory kind."""
    import jax

    def one(x):
        kind = getattr(getattr(x, "sharding", None), "memory_kind", None)
        sh = jax.sharding.SingleDeviceSharding(device, memory_kind=kind if kind in (
            "pinned_host", "unpinned_host") else "device")
        return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sh)

    return jax.tree.map(one, tree)


def versions() -> dict[str, str]:
    from importlib import metadata

    import jax
    import jaxlib

    out = {"jax": jax.__version__, "jaxlib": jaxlib.__version__,
           "python": _platform.python_version()}
    for dist in ("libtpu", "jax-cuda12-plugin", "jax-cuda12-pjrt"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return out


_OOM_RE = re.compile(r"RESOURCE_EXHAUSTED|[Oo]ut of memory|exceeds the memory|Ran out of memory")


@dataclasses.dataclass
class Plan:
    """One compiled policy: what the compiler said, and where it was written."""

    policy: str
    target: str
    status: str                    # "ok" | "does_not_fit" | "compile_error"
    manifest: dict[str, Any]
    hlo_text: str = ""
    hlo_proto: bytes = b""
    path: Path | None = None
    error: str = ""


def _module_name(hlo_text: str) -> str:
    m = re.match(r"\s*HloModule\s+([\w.\-]+)", hlo_text)
    return m.group(1) if m else "module"


def compile_one(jitted, state, batch, target: Target, *, topology: str | None = None,
                host_link_Bps: float | None = None, policy: str = "as given",
                policy_info: dict | None = None, workload: dict | None = None,
                budget: MemoryBudget | None = None, kernel_floor_us: float | None = None,
                h2d_link_Bps: float | None = None, lowered: Any = None,
                calibration: Any = None, command_buffers: bool | None = None) -> Plan:
    """Compile `jitted(state, batch)` for `target`; never raises for a step that does not fit.

    `lowered`: the step already lowered for this target (`lower_for`), to skip lowering again.

    `budget`: the device memory the plan must fit in (default `memory_budget(target)`: JAX's
    usable share of the device); `host_link_Bps`, `h2d_link_Bps`, `kernel_floor_us` replace
    the target's numbers in the estimate (`overlap.plan.estimate.roofline_for`), as do
    `calibration` (`overlap.plan.calibrate.Calibration`: measured kernel times and link) and
    `command_buffers` (None: from XLA_FLAGS, else XLA's default)."""
    import jax

    from overlap.hlo.program import memory_analysis_dict, memory_timeline, offload_inventory
    from overlap.plan.estimate import estimate_for, plan_streams

    budget = budget or memory_budget(target)

    dev = target_devices(target, topology)[0]
    args = (_placed(state, dev), _placed(batch, dev))
    log: list[str] = []
    notes: list[str] = []
    try:
        kinds = {m.kind for m in dev.addressable_memories()}
    except Exception:  # noqa: BLE001 - a plugin without the memories API
        kinds = set()
    # What the caller asked for (the placed copies may have lost the kind already).
    host_leaves = [x for x in jax.tree.leaves((state, batch))
                   if getattr(getattr(x, "sharding", None), "memory_kind", None)
                   in ("pinned_host", "unpinned_host")]
    unseen = sum(int(x.size) * x.dtype.itemsize for x in host_leaves) if (
        host_leaves and "pinned_host" not in kinds) else 0
    if unseen:
        # Measured with jax 0.10.2: the CUDA compile-only device lists no memories, so jax lowers
        # without the `mhlo.memory_kind` annotation and XLA:GPU places those arguments in device
        # memory. On a real GPU they would be host arguments.
        notes.append(
            f"{len(host_leaves)} argument(s) ({unseen} bytes) were given memory kind pinned_host, "
            f"but {target.name}'s compile-only device exposes no host memory, so the compiler saw "
            "them as device arguments: argument_size_in_bytes includes them and "
            "host_argument_size_in_bytes does not (on the real device they live in host memory)")
    t0 = time.perf_counter()
    manifest: dict[str, Any] = {
        "kind": "plan", "label": None,
        "target": {"name": target.name, "description": target.description,
                   "platform": target.platform, "topology": topology or target.topology,
                   "device": str(dev), "device_memory_bytes": target.device_memory_bytes},
        "policy": policy_info or {"name": policy}, "workload": workload,
        "versions": versions(), "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "note": f"compiled for {target.name}, not run",
        "notes": notes, "pinned_host_arguments_unseen_bytes": unseen,
    }
    try:
        with quiet_native_stderr(log):
            if lowered is None:
                lowered = jitted.lower(*args)
            # One compile, with a dump: the dump gives the HloProto with buffer assignment and
            # the heap-simulator traces (compiled.as_text() has neither); dump options do not
            # change the optimized program, so this one compile serves both (half the time of
            # compiling twice, which matters when `overlap advise` compiles dozens of policies).
            with tempfile.TemporaryDirectory(prefix="overlap-plan-") as d:
                compiled = lowered.compile(compiler_options={
                    "xla_dump_to": d, "xla_dump_hlo_as_proto": True,
                    "xla_dump_hlo_as_text": False})
                pbs = sorted(Path(d).glob("*after_optimizations.hlo.pb"),
                             key=lambda p: p.stat().st_size)
                proto = pbs[-1].read_bytes() if pbs else b""
    except Exception as e:  # noqa: BLE001 - compiler errors are findings, not crashes
        msg = " ".join(str(e).split())[:2000] or type(e).__name__
        status = "does_not_fit" if _OOM_RE.search(msg) else "compile_error"
        manifest.update(status=status, error=msg, compile_s=round(time.perf_counter() - t0, 3))
        return Plan(policy, target.name, status, manifest, error=msg)
    compile_s = time.perf_counter() - t0
    text = compiled.as_text()
    mem = memory_analysis_dict(compiled) or {}
    if unseen and (mem.get("host_argument_size_in_bytes") or 0) >= unseen:
        # The step itself moved its state with memory spaces (`jax.memory.Space.Host`), and
        # that annotation reached XLA:GPU: the compiler did see host arguments. No caveat.
        notes[:] = [n for n in notes if "exposes no host memory" not in n]
        manifest["pinned_host_arguments_unseen_bytes"] = 0
    inv = offload_inventory(text)
    # Which XLA:GPU stream each async op runs on: from the compiled HloProto's instruction
    # order (the text's schedule order cannot tell), or a calibration run of this same program.
    streams, streams_source = plan_streams(text, proto, target, calibration=calibration)
    est = estimate_for(text, target, host_link_Bps=host_link_Bps, h2d_link_Bps=h2d_link_Bps,
                       kernel_floor_us=kernel_floor_us, calibration=calibration,
                       command_buffers=command_buffers, streams=streams,
                       streams_source=streams_source)
    heap = None
    timeline = None
    if proto:
        try:
            tl = memory_timeline(proto)
            heap = {"peak_bytes": int(tl.peak_bytes), "module": _module_name(text)}
            df = tl.frame
            col = next((c for c in ("live_bytes", "bytes") if c in df.columns), None)
            if col is not None:
                timeline = [int(v) for v in df[col].to_numpy()]
        except Exception as e:  # noqa: BLE001 - the timeline is extra; the plan stands
            heap = {"error": f"{type(e).__name__}: {e}"}
    from overlap.analysis.memory import memory_analysis_peak

    peak = memory_analysis_peak(mem)
    manifest.update(
        status="ok", compile_s=round(compile_s, 3), module=_module_name(text),
        # The fingerprint a capture of this step records (module + input shapes and dtypes):
        # what joins this plan's prediction to a measured run (overlap.analysis.plan_join).
        program=_program_fingerprint(_module_name(text), state, batch),
        memory_analysis=mem,
        device_peak_bytes=peak,
        # Against the usable budget (JAX's share of the device), named beside the verdict.
        fits=None if peak is None else peak <= budget.bytes,
        memory_budget=budget.to_dict(),
        offload_inventory=inv.to_dict(), heap_simulator=heap, estimate=est,
        calibration=calibration.to_dict() if calibration is not None else None,
        program_memory_points=len(timeline) if timeline else 0,
        # Ops XLA moved to host compute and the pinned host peak against the cap in force in
        # this process's environment (overlap.analysis.host_memory; issue 33 items 3, 4).
        host=_host_facts(text, proto, target.platform),
    )
    plan = Plan(policy, target.name, "ok", manifest, hlo_text=text, hlo_proto=proto)
    plan.manifest["_timeline"] = timeline
    return plan


def _host_facts(text: str, proto: bytes, platform: str) -> dict[str, Any]:
    """`overlap.analysis.host_memory.host_facts` of the compiled program; the cap from this
    process's XLA_PJRT_GPU_HOST_MEMORY_LIMIT_GB (what a run started here would get)."""
    from overlap.analysis.host_memory import CAP_ENV, host_facts

    try:
        return host_facts(text, proto or None, platform, {CAP_ENV: os.environ.get(CAP_ENV)},
                          where="the planning process's environment")
    except Exception as e:  # noqa: BLE001 - an extra; the plan stands without it
        return {"error": f"{type(e).__name__}: {e}"}


def _program_fingerprint(module: str, state: Any, batch: Any) -> dict[str, Any]:
    """Module name and input fingerprint, computed as `overlap.capture` computes a run's."""
    from overlap.capture.api import _fingerprint

    fp = _fingerprint(module, state, batch)
    return {"module": fp["module"], "inputs": fp["inputs"]}


def lower_for(jitted, state, batch, target: Target, *, topology: str | None = None) -> Any:
    """`jitted` lowered for one compile-only device of `target`, with the placement
    `compile_one` uses (pass it back as `lowered=`). Raises what the lowering raises."""
    dev = target_devices(target, topology)[0]
    with quiet_native_stderr():
        return jitted.lower(_placed(state, dev), _placed(batch, dev))


def write_plan(plan: Plan, out: str | os.PathLike, label: str) -> Path:
    """Write one plan run directory `out/label` (atomically; never over an existing run)."""
    from overlap.runs import rundir

    final = Path(out) / label
    if final.exists():
        raise rundir.RunExistsError(final)
    partial = rundir.partial_dir_for(final)  # created, empty
    try:
        m = dict(plan.manifest)
        timeline = m.pop("_timeline", None)
        m["label"] = label
        if plan.hlo_text:
            (partial / "hlo").mkdir()
            name = m.get("module") or "module"
            (partial / "hlo" / f"{name}.after_optimizations.hlo.txt").write_text(plan.hlo_text)
            if plan.hlo_proto:
                (partial / "hlo" / f"{name}.after_optimizations.hlo.pb").write_bytes(plan.hlo_proto)
        if timeline:
            (partial / "program_memory.json").write_text(json.dumps(
                {"axis": "program order (heap-simulator events)", "live_bytes": timeline}))
        path = rundir.write_plan_run(partial, final, m)
    except BaseException:
        rundir.discard_partial(partial)
        raise
    plan.path = path
    return path


def plan_step(step_fn: Callable, state: Any, batch: Any, *, target: str | Target,
              policies: Iterable[Any] | None = None, out: str | os.PathLike | None = None,
              topology: str | None = None, host_link_Bps: float | None = None,
              label_prefix: str = "", budget: MemoryBudget | None = None,
              kernel_floor_us: float | None = None,
              h2d_link_Bps: float | None = None) -> list[Plan]:
    """Compile a user's step for `target`, once per policy; write plan runs under `out`.

    `state`/`batch`: pytrees of arrays or `jax.ShapeDtypeStruct`s (e.g. from `jax.eval_shape`);
    only shapes, dtypes and memory kinds are used. Without `policies`, `step_fn(state, batch)`
    is compiled as given. With `policies` (names such as "nothing_saveable", "offload:x", or
    `overlap.capture.policies.Policy` objects), `step_fn` is a factory: `step_fn(policy)`
    returns the step for that policy (apply it with `policy.wrap(layer_fn)`).
    `budget` (`overlap.plan.targets.memory_budget`), `host_link_Bps`, `h2d_link_Bps` and
    `kernel_floor_us`: as in `compile_one`.
    """
    import jax

    from overlap.capture.policies import get_policy

    tgt = target if isinstance(target, Target) else get_target(target)
    state, batch = _abstract(state), _abstract(batch)
    plans = []
    items = list(policies) if policies is not None else [None]
    for pol in items:
        if pol is None:
            fn, name, info = step_fn, "as given", {"name": "as given"}
        else:
            p = get_policy(pol)
            fn, name, info = step_fn(p), p.name, _policy_info(p)
        jitted = fn if hasattr(fn, "lower") else jax.jit(fn)
        plan = compile_one(jitted, state, batch, tgt, topology=topology,
                           host_link_Bps=host_link_Bps, policy=name, policy_info=info,
                           budget=budget, kernel_floor_us=kernel_floor_us,
                           h2d_link_Bps=h2d_link_Bps)
        if out is not None:
            write_plan(plan, out, _safe_label(f"{label_prefix}{tgt.name}-{name}"))
        plans.append(plan)
    return plans


def _abstract(tree):
    """Arrays -> ShapeDtypeStructs; each leaf keeps its sharding (and so its memory kind)."""
    import jax

    def one(a):
        if isinstance(a, jax.ShapeDtypeStruct):
            return a
        return jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=getattr(a, "sharding", None))

    return jax.tree.map(one, tree)


def _policy_info(p) -> dict:
    d = p.to_dict() if hasattr(p, "to_dict") else {"name": getattr(p, "name", str(p))}
    return d


def _safe_label(s: str) -> str:
    return re.sub(r"[^\w.\-]+", "_", s).strip("._") or "plan"


def workload_abstract(spec: str, policy: Any) -> tuple[Any, Any, Any, dict]:
    """(workload, abstract state, abstract batch, manifest info) of `spec` under `policy`,
    built with `jax.eval_shape`: no parameter is materialised on this machine."""
    import jax

    from overlap.capture.workloads import load_workload

    holder: dict[str, Any] = {}

    def build():
        w = load_workload(spec, policy)
        holder["w"] = w
        return w.init_state, w.batch

    state, batch = jax.eval_shape(build)
    w = holder["w"]
    if getattr(w, "state_memory_kind", None):
        # eval_shape drops shardings; give the state back its memory kind (the device is
        # any: the plan places it on the target's device with the same kind).
        kind = jax.sharding.SingleDeviceSharding(jax.devices("cpu")[0],
                                                 memory_kind=w.state_memory_kind)
        state = jax.tree.map(
            lambda x, k=kind: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=k), state)
    # `device_notes` are about this machine's device (e.g. XLA:CPU compiling copies away),
    # not about the target the plan compiles for.
    info = {"name": w.name, "size": w.size, "description": w.description,
            "notes": list(getattr(w, "notes", []) or [])}
    return w, state, batch, info


def plan_workload(spec: str, policies: list[str], target: str | Target, *,
                  out: str | os.PathLike | None = None, topology: str | None = None,
                  host_link_Bps: float | None = None, budget: MemoryBudget | None = None,
                  kernel_floor_us: float | None = None,
                  h2d_link_Bps: float | None = None, calibration: Any = None,
                  command_buffers: bool | None = None) -> list[Plan]:
    """Plan a built-in (or `module:function`) workload under each policy.

    The workload is built abstractly (`jax.eval_shape`), so no parameter is materialised on
    this machine: sizes far beyond its memory plan fine.
    """
    from overlap.capture.policies import get_policy
    from overlap.capture.workloads import parse_spec

    tgt = target if isinstance(target, Target) else get_target(target)
    _, wname, size = parse_spec(spec)
    # Every name is resolved before the first compile: a typo in the last policy must not
    # stop the run after minutes of compiling (nor leave some plans written and some not).
    resolved = [get_policy(pol) for pol in policies]
    if out is not None:  # ...and no existing run may stop it after compiling either
        from overlap.runs import rundir

        for p in resolved:
            final = Path(out) / _safe_label(f"{tgt.name}-{wname}-{p.name}")
            if final.exists():
                raise rundir.RunExistsError(final)
    plans = []
    for p in resolved:
        w, state, batch, info = workload_abstract(spec, p)
        plan = compile_one(w.step_fn, state, batch, tgt, topology=topology,
                           host_link_Bps=host_link_Bps, policy=p.name,
                           policy_info=_policy_info(p), workload=info, budget=budget,
                           kernel_floor_us=kernel_floor_us, h2d_link_Bps=h2d_link_Bps,
                           calibration=calibration, command_buffers=command_buffers)
        if out is not None:
            write_plan(plan, out, _safe_label(f"{tgt.name}-{wname}-{p.name}"))
        plans.append(plan)
    return plans
