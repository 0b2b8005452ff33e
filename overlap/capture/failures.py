"""A step that did not complete is a finding, written as a run: what was asked and why it failed.

`overlap capture` sweeps several policies; one that does not fit the device must not cost the
others, nor leave no trace of having been tried. :func:`write_failed_run` writes the policy's run
directory with ``run.json`` only (no capture: nothing ran to the end) and a ``status``:

* ``does_not_fit``: the runtime or the compiler ran out of memory building, compiling or running
  the step (:func:`out_of_memory`: the error says ``RESOURCE_EXHAUSTED`` or "out of memory", the
  words XLA's allocators and compilers use on GPU, TPU and CPU, or Python's MemoryError);
* ``failed``: any other error the step raised (a runtime error, an exception in the user's
  step function).

``failure`` says where (``phase``: building the state, compiling, warm-up/timed steps,
profiling), the exception's type, ``allocation_bytes`` (the one allocation that failed, parsed
from the message where it names one, e.g. "Out of memory while trying to allocate 133.27GiB";
None where it does not) and ``device_memory`` (``bytes`` and where that number comes from: the
device allocator's ``bytes_limit`` on GPU/TPU; on CPU, whose device memory is the host's, the
process's address-space limit when one is set, else the host's physical memory). The compiled
step's ``memory_analysis`` is kept when compiling succeeded (what XLA said the step needs).
"""

from __future__ import annotations

import os
import re
import resource
import time
from pathlib import Path
from typing import Any

from overlap.runs import rundir

STATUS_DOES_NOT_FIT = "does_not_fit"
STATUS_FAILED = "failed"

# The same words overlap.plan.compile reads in a compiler's refusal (XLA:GPU's BFC allocator
# "Out of memory while trying to allocate", XLA:CPU "Out of memory allocating", XLA:TPU "Ran out
# of memory in memory space hbm", the RESOURCE_EXHAUSTED status code they all carry).
_OOM_RE = re.compile(r"RESOURCE_EXHAUSTED|[Oo]ut of memory|exceeds the memory|Ran out of memory")
_ALLOC_RE = re.compile(r"allocat\w*\s+([0-9]+(?:\.[0-9]+)?)\s*(bytes|B|KiB|MiB|GiB|TiB|KB|MB|GB|TB)"
                       r"(?![A-Za-z])")
_UNIT = {"bytes": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
         "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}


def out_of_memory(exc: BaseException) -> bool:
    """Whether `exc` says the step ran out of memory (module docstring)."""
    return isinstance(exc, MemoryError) or bool(_OOM_RE.search(str(exc)))


def error_text(exc: BaseException) -> str:
    """The error on one line, at most 2,000 characters (XLA's messages run to pages)."""
    return (" ".join(str(exc).split()) or type(exc).__name__)[:2000]


def allocation_bytes(message: str) -> int | None:
    """The size of the allocation the message says failed, in bytes; None if it names none."""
    m = _ALLOC_RE.search(message)
    if not m:
        return None
    return int(round(float(m.group(1)) * _UNIT[m.group(2)]))


def device_memory() -> dict[str, Any]:
    """The first device's memory in bytes and where the number comes from (module docstring)."""
    import jax

    dev = jax.devices()[0]
    try:
        stats = dev.memory_stats() or {}
    except Exception:  # noqa: BLE001 - a backend without allocator statistics
        stats = {}
    if isinstance(stats.get("bytes_limit"), int):
        return {"bytes": int(stats["bytes_limit"]),
                "source": f"{dev.platform} allocator bytes_limit (memory_stats)"}
    if dev.platform == "cpu":
        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft != resource.RLIM_INFINITY:
            return {"bytes": int(soft), "source": "cpu: the process's address-space limit "
                                                  "(RLIMIT_AS)"}
        try:
            phys = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError):
            phys = None
        return {"bytes": phys, "source": "cpu: the host's physical memory"}
    return {"bytes": None, "source": f"{dev.platform}: the device does not say"}


def write_failed_run(out: str | os.PathLike, exc: BaseException, phase: str, *,
                     label: str | None = None, workload: Any = None, policy: Any = None,
                     steps: int | None = None, warmup: int | None = None,
                     compiled: Any = None, extra: dict | None = None) -> Path:
    """Write run directory `out` for a step that raised `exc` during `phase`; returns it.

    The run has ``run.json`` only, with ``status`` ``does_not_fit`` or ``failed`` (module
    docstring). Raises :class:`overlap.runs.rundir.RunExistsError` if `out` exists."""
    from overlap.capture.api import _meta, environment

    final = Path(out)
    msg = error_text(exc)
    status = STATUS_DOES_NOT_FIT if out_of_memory(exc) else STATUS_FAILED
    manifest: dict[str, Any] = {
        "label": label or final.name, "mode": "profile_steps", "status": status, "error": msg,
        "failure": {"phase": phase, "exception": type(exc).__name__,
                    "allocation_bytes": allocation_bytes(msg), "device_memory": {}},
        "steps": steps, "warmup": warmup, "step_ns": None, "step_ns_profiled": None,
        "created_unix_ns": time.time_ns(),
        "note": "the step did not complete: this run has no capture",
    }
    try:
        wl, pol = _meta(workload, policy)
        manifest.update(workload=wl, policy=pol)
        manifest["failure"]["device_memory"] = device_memory()
        if compiled is not None:
            from overlap.hlo.program import memory_analysis_dict

            manifest["memory_analysis"] = memory_analysis_dict(compiled)
        manifest.update(environment())
    except Exception as e:  # noqa: BLE001 - the finding is written even if its context is not
        manifest["incomplete"] = f"context could not be recorded ({type(e).__name__}: {e})"
    partial = rundir.partial_dir_for(final)
    try:
        return rundir.write_failed_run(partial, final, {**manifest, **(extra or {})})
    except BaseException:
        rundir.discard_partial(partial)
        raise


def summary_line(run: Path, manifest: dict) -> str:
    """One line saying what happened to a failed run's step (for `overlap capture`)."""
    f = manifest.get("failure") or {}
    dm = f.get("device_memory") or {}
    what = ("does not fit" if manifest.get("status") == STATUS_DOES_NOT_FIT
            else "failed")
    size = []
    if f.get("allocation_bytes") is not None:
        size.append(f"an allocation of {_gib(f['allocation_bytes'])} failed")
    if dm.get("bytes") is not None:
        size.append(f"device memory {_gib(dm['bytes'])} ({dm.get('source')})")
    return (f"{manifest.get('label') or run.name}: {what} while {f.get('phase', 'running')}"
            + (f": {', '.join(size)}" if size else "")
            + f" [{short_error(str(manifest.get('error') or ''))}]; written to {run} "
            f"with status {manifest.get('status')}")


def short_error(err: str, n: int = 240) -> str:
    """An error for one line: its start (the status code) and its innermost cause. XLA carries
    a failed host callback's whole Python traceback in its message: only the exception it ends
    with is kept (run.json has all of it)."""
    head, sep, tail = err.partition("Traceback (most recent call last):")
    if sep:
        last = list(re.finditer(r"\b[A-Z]\w*(?:Error|Exception)\b", tail))
        err = f"{head.strip()} {tail[last[-1].start():].strip() if last else ''}".strip()
    return err if len(err) <= n else f"{err[:n // 2]} ... {err[-n // 2:]}"


def _gib(n: int) -> str:
    return f"{n / (1 << 30):.2f} GiB"
