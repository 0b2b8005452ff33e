"""Peak device memory: the one module that defines it for every view.

Definitions (each number a user sees names its source next to it):

* `memory_analysis`: temp + arguments + outputs - aliases from XLA's
  `compiled.memory_analysis()` (donated buffers counted once). What the JAX memory tutorial and
  xprof's memory viewer report. Blind spot: compile-time, so fragmentation and buffers outside
  the program (other programs' live arrays) are not in it.
* `heap simulator`: the peak of live temp buffers over the program order of the step's HLO
  (buffer assignment replayed). Leaves parameters and outputs out: it is the temp share only.
* `allocator`: the BFC allocator's bytes in use from the capture's memory events (GPU only);
  what actually ran, including other programs' buffers and fragmentation.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def find_number(d: dict[str, Any], keys: tuple[str, ...]) -> float | None:
    """First numeric value under any of `keys`, at the top level or one level down."""
    for k in keys:
        v = d.get(k)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return float(v)
    for v in d.values():
        if isinstance(v, dict):
            found = find_number(v, keys)
            if found is not None:
                return found
    return None


def memory_analysis_peak(mem: dict[str, Any]) -> int | None:
    """Device bytes a program holds at once by `compiled.memory_analysis()`: temp + arguments +
    outputs - aliases (donated buffers counted once); None when none of the sizes is known."""
    parts = [mem.get(k) for k in ("temp_size_in_bytes", "argument_size_in_bytes",
                                  "output_size_in_bytes")]
    if all(p is None for p in parts):
        return None
    return int(sum(p or 0 for p in parts) - (mem.get("alias_size_in_bytes") or 0))


def _table(trace, name: str) -> dict[str, np.ndarray] | None:
    """Table `name` of `trace` as numpy columns (`Trace.columns`: no pandas for the reader's
    tables), or None where it has none. Other objects holding a DataFrame (a caller's stand-in
    with a `compute` attribute) are converted."""
    from overlap.trace.tables import TABLES, Trace, frame_columns

    if isinstance(trace, Trace):
        return trace.columns(name)
    df = getattr(trace, name, None)
    if df is None or isinstance(df, dict):  # (a dict of columns already)
        return df
    return frame_columns(df, TABLES[name])


def _sums_by(keys: np.ndarray, dur: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct non-missing keys, exact int64 sum of `dur` per key): a groupby-sum. Summed
    per run of equal neighbours first (a module's kernels are one long run: 1M rows, ~2 ms)."""
    from overlap.arrays import factorize, run_starts

    starts = run_starts(keys) if len(keys) and keys.dtype == object else None
    if starts is not None and len(starts) < len(keys):
        dur = np.add.reduceat(dur, starts) if len(starts) else dur[:0]
        keys = keys[starts]
    codes, uniq = factorize(keys)
    ok = codes >= 0
    sums = np.zeros(len(uniq), np.int64)
    np.add.at(sums, codes[ok], dur[ok])
    return uniq, sums


_BLOCK = 1 << 16  # rows per block: the transient arrays of a 1M-row table stay ~2 MB


def _compute_time(co: dict[str, np.ndarray], by: str, where: tuple[str, str] | None = None
                  ) -> dict[Any, int]:
    """Compute time (end - start, negative as 0) per non-missing value of column `by`, over
    the rows whose column `where[0]` equals `where[1]` (and whose `by` is not missing), a
    block of rows at a time: exact int64 sums, keys matched as a dict (and pandas) does."""
    from overlap.arrays import factorize

    out: dict[Any, int] = {}
    n = len(co["start_ps"])
    for a in range(0, n, _BLOCK):
        b = min(a + _BLOCK, n)
        keys = co[by][a:b]
        dur = np.clip(co["end_ps"][a:b] - co["start_ps"][a:b], 0, None)
        if where is not None:
            codes, uniq = factorize(co[where[0]][a:b])
            want = [i for i, k in enumerate(uniq.tolist())
                    if isinstance(k, str) and k == where[1]]
            if not want:
                continue
            rows = np.flatnonzero(codes == want[0])
            # every row of the block (one module): its slices as they are, not a gather of
            # 64k objects per block (~7 ms of the GPU 1M file's million kernels)
            if len(rows) < b - a:
                keys, dur = keys[rows], dur[rows]
        uniq, sums = _sums_by(keys, dur)
        for k, v in zip(uniq.tolist(), sums.tolist()):
            out[k] = out.get(k, 0) + v
    return out


def executed_module(trace) -> str | None:
    """The program that ran in the profiled steps: the HLO module with the most device (or
    XLA:CPU) compute time in the capture. Helper programs compiled alongside (RNG seeding,
    `jit__normal`, broadcasts) run before profiling or take no time, so they never win."""
    times = getattr(trace, "module_time_ps", None)
    if times:
        return max(sorted(times), key=lambda k: times[k])
    co = _table(trace, "compute")
    if co is None or not len(co.get("start_ps", ())) or "hlo_module" not in co:
        return None
    by = {k: v for k, v in _compute_time(co, "hlo_module").items() if isinstance(k, str) and k}
    # names in order, the first of the largest: as pandas' sorted groupby and idxmax
    return max(sorted(by), key=lambda k: by[k]) if by else None


def _manifest_program_id(manifest: dict | None) -> int | None:
    """The program id `overlap capture` recorded for the step it compiled (run.json's
    `program.program_id`, the HloModuleProto id, which is the `(<id>)` in the capture's module
    names), else None."""
    prog = (manifest or {}).get("program")
    pid = prog.get("program_id") if isinstance(prog, dict) else None
    return pid if isinstance(pid, int) and not isinstance(pid, bool) and pid >= 0 else None


def _ran_program_id(trace, module: str) -> int | None:
    """The compile of `module` whose events took the most compute time in the capture (each
    XLA op event carries its `program_id`), else None."""
    co = _table(trace, "compute")
    if co is None or not len(co.get("start_ps", ())) or "program_id" not in co \
            or "hlo_module" not in co:
        return None
    times = _compute_time(co, "program_id", ("hlo_module", module))
    if not times:
        return None
    # ids as int64, as before (an id of 2**63 or more reads negative: a known quirk kept
    # here so that answers stay as they were; see issue 32's notes)
    by: dict[int, int] = {}
    for k, v in times.items():
        k = int(k)
        k = k - (1 << 64) if k >= 1 << 63 else k
        by[k] = by.get(k, 0) + int(v)
    return int(max(sorted(by), key=lambda k: by[k]))


def executed_program(trace, manifest: dict | None = None) -> dict[str, Any]:
    """The compiled program that ran in the profiled steps, and its HloProto when the capture
    carries it. A sweep compiles every policy's step (all named like `jit_train_step`) before
    profiling, so each capture holds several programs of that name; the one a run executed is:

    1. run.json's `program.program_id` (recorded by `overlap capture` from the compiled step);
    2. else the compile whose XLA op events took the most time in the capture (`program_id`;
       the reader keeps it on XLA:CPU and TPU ops, not per GPU kernel);
    3. else the only program of that name in the capture.

    Otherwise it cannot tell, and says so. Returns `{"module", "program_id", "name" (the
    capture's `<module>(<id>)`), "proto" (bytes or None), "how" (a sentence)}`."""
    m = manifest or {}
    prog: dict[str, Any] = m["program"] if isinstance(m.get("program"), dict) else {}
    module = (prog.get("module") if isinstance(prog.get("module"), str) else None) \
        or (m.get("module") if isinstance(m.get("module"), str) else None) \
        or (executed_module(trace) if trace is not None else None)
    out: dict[str, Any] = {"module": module, "program_id": None, "name": None, "proto": None,
                           "how": "no module ran in this capture"}
    if module is None:
        return out
    pid = _manifest_program_id(m)
    how = "program id recorded in run.json"
    if pid is None and trace is not None:
        pid = _ran_program_id(trace, module)
        how = "program id of the capture's XLA op events"
    out["program_id"] = pid
    mods = _table(trace, "modules") if trace is not None else None
    n = len(mods.get("name", ())) if mods is not None else 0
    if not n:
        out["how"] = f"the capture carries no HLO protos for {module}"
        return out
    assert mods is not None
    rows = [(str(nm), pr, ident) for nm, pr, ident in zip(
        mods["name"].tolist(), mods["hlo_proto"].tolist(), mods["program_id"].tolist())]
    sel = [r for r in rows if (r[0] == module or r[0].startswith(module + "(")) and bool(r[1])]
    if pid is not None:
        exact = [r for r in sel if (r[2] is not None and float(r[2]) == float(pid))
                 or r[0] == f"{module}({pid})"]
        if exact:
            out.update(name=exact[0][0], proto=bytes(exact[0][1]), how=how)
        else:
            out["how"] = f"the capture carries no HLO proto for {module}({pid}), the program " \
                         "that ran"
        return out
    if len(sel) == 1:
        nm, pr, ident = sel[0]
        out.update(name=nm, proto=bytes(pr), program_id=None if ident is None else int(ident),
                   how=f"the only program named {module} in the capture")
    elif len(sel) > 1:
        out["how"] = (f"cannot tell which of {len(sel)} programs named {module} ran "
                      f"({', '.join(sorted(r[0] for r in sel))}): neither run.json nor "
                      "the capture's op events name its program id")
    else:
        out["how"] = f"the capture carries no HLO proto for {module}"
    return out


def module_proto(trace, module: str | None, program_id: int | None = None) -> bytes | None:
    """The HloProto the capture carries for `module`: the compile `program_id` when given,
    else the only one of that name (None when several: `executed_program` says why)."""
    if module is None:
        return None
    fake = {"program": {"module": module, "program_id": program_id}}
    return executed_program(trace, fake)["proto"]


HEADLINE = "memory_analysis (temp + arguments + outputs - aliases)"


def peak_memory(manifest: dict | None, trace=None) -> dict[str, Any]:
    """THE peak device memory of a run, with its source; every view calls this.

    Ranking (the first that exists wins, the same everywhere):

    1. the manifest's `memory_analysis` of the step program (what `compiled.memory_analysis()`
       said at capture time): temp + arguments + outputs - aliases;
    2. the same formula from the buffer assignment of the HloProto the capture carries for the
       module that ran (`executed_module`): for a plain `jax.profiler` logdir;
    3. the allocator's peak bytes in use from the capture's memory events (GPU);
    4. unknown.

    Returns `{"bytes", "source", "module", "others"}`; `others` holds the other definitions
    where known (the heap-simulator temp peak, the allocator peak) for views that show them on
    demand.
    """
    from overlap.hlo.program import buffer_assignment_sizes, memory_peak

    manifest = manifest or {}
    others: dict[str, int] = {}
    ran = executed_program(trace, manifest) if trace is not None else None
    module = ran["module"] if ran else None
    proto = ran["proto"] if ran else None
    heap = manifest.get("heap_simulator")
    if isinstance(heap, dict) and ran is not None and ran["name"] and heap.get("module") \
            and heap.get("module") != ran["name"]:
        heap = None  # recorded from another policy's compile (captures before program ids)
    if isinstance(heap, dict) and isinstance(heap.get("peak_bytes"), int):
        others["heap simulator temp peak (program order)"] = heap["peak_bytes"]
    elif proto is not None:
        try:
            others["heap simulator temp peak (program order)"] = int(memory_peak(proto)[0])
        except Exception:  # noqa: BLE001 - an extra figure; the headline stands without it
            pass
    if trace is not None and trace.rows("memory"):
        # (the table's columns, not its DataFrame: `overlap compare` loaded pandas for this one
        # number, ~0.15 s and ~40 MiB of each process, issue 32)
        others["allocator peak in use (trace)"] = int(
            trace.columns("memory")["peak_bytes_in_use"].max())
    ma = manifest.get("memory_analysis")
    peak = memory_analysis_peak(ma) if isinstance(ma, dict) and ma else None
    if peak is not None:
        return {"bytes": peak, "source": HEADLINE, "module": manifest.get("module") or module,
                "others": others}
    if proto is not None:
        sizes = buffer_assignment_sizes(proto)
        if sizes:
            return {"bytes": memory_analysis_peak(sizes),
                    "source": HEADLINE.replace("memory_analysis", "buffer assignment") +
                    f" of {module} in the capture", "module": module, "others": others}
    alloc = others.get("allocator peak in use (trace)")
    if alloc is not None:
        return {"bytes": alloc, "source": "allocator peak in use (trace)", "module": module,
                "others": {k: v for k, v in others.items() if not k.startswith("allocator")}}
    return {"bytes": None, "source": "unknown (no memory analysis, HLO or allocator events)",
            "module": module, "others": others}


def peak_memory_bytes(data) -> tuple[int | None, str]:
    """(bytes, source) of a loaded run (`RunData`): the `peak_memory` computed at load."""
    pm = (getattr(data, "result", None) or {}).get("peak_memory") or {}
    if pm.get("bytes") is not None:
        return int(pm["bytes"]), str(pm.get("source", ""))
    plan = (data.result or {}).get("plan") or {}
    if plan.get("device_peak_bytes") is not None:
        return int(plan["device_peak_bytes"]), HEADLINE + " (compiled plan)"
    return None, str(pm.get("source", "unknown"))
