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

import pandas as pd


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


def executed_module(trace) -> str | None:
    """The program that ran in the profiled steps: the HLO module with the most device (or
    XLA:CPU) compute time in the capture. Helper programs compiled alongside (RNG seeding,
    `jit__normal`, broadcasts) run before profiling or take no time, so they never win."""
    times = getattr(trace, "module_time_ps", None)
    if times:
        return max(sorted(times), key=lambda k: times[k])
    co = getattr(trace, "compute", None)
    if co is None or not len(co) or "hlo_module" not in co:
        return None
    dur = (co["end_ps"] - co["start_ps"]).clip(lower=0)
    by = dur.groupby(co["hlo_module"].astype(object).where(co["hlo_module"].notna(), None),
                     dropna=True).sum()
    by = by[[isinstance(k, str) and bool(k) for k in by.index]]
    return str(by.idxmax()) if len(by) else None


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
    co = getattr(trace, "compute", None)
    if co is None or not len(co) or "program_id" not in co or "hlo_module" not in co:
        return None
    sel = co[(co["hlo_module"] == module).fillna(False).to_numpy(dtype=bool)
             & co["program_id"].notna().to_numpy(dtype=bool)]
    if not len(sel):
        return None
    dur = (sel["end_ps"] - sel["start_ps"]).clip(lower=0)
    by = dur.groupby(sel["program_id"].astype("int64")).sum()
    return int(max(sorted(by.index), key=lambda k: by[k]))


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
    mods = getattr(trace, "modules", None) if trace is not None else None
    if mods is None or not len(mods):
        out["how"] = f"the capture carries no HLO protos for {module}"
        return out
    names = mods["name"].astype(str)
    sel = mods[((names == module) | names.str.startswith(module + "(")).to_numpy(dtype=bool)
               & mods["hlo_proto"].map(bool).to_numpy(dtype=bool)]
    if pid is not None:
        ids = sel["program_id"].astype("float64")
        exact = sel[(ids == float(pid)).to_numpy(dtype=bool)
                    | (sel["name"].astype(str) == f"{module}({pid})").to_numpy(dtype=bool)]
        if len(exact):
            row = exact.iloc[0]
            out.update(name=str(row["name"]), proto=bytes(row["hlo_proto"]), how=how)
        else:
            out["how"] = f"the capture carries no HLO proto for {module}({pid}), the program " \
                         "that ran"
        return out
    if len(sel) == 1:
        row = sel.iloc[0]
        out.update(name=str(row["name"]), proto=bytes(row["hlo_proto"]),
                   program_id=None if pd.isna(row["program_id"]) else int(row["program_id"]),
                   how=f"the only program named {module} in the capture")
    elif len(sel) > 1:
        out["how"] = (f"cannot tell which of {len(sel)} programs named {module} ran "
                      f"({', '.join(sorted(sel['name'].astype(str)))}): neither run.json nor "
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
    from overlap.hlo.program import buffer_assignment_sizes, memory_timeline

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
            others["heap simulator temp peak (program order)"] = int(
                memory_timeline(proto).peak_bytes)
        except Exception:  # noqa: BLE001 - an extra figure; the headline stands without it
            pass
    mem = getattr(trace, "memory", None) if trace is not None else None
    if mem is not None and len(mem) and "peak_bytes_in_use" in mem:
        others["allocator peak in use (trace)"] = int(mem["peak_bytes_in_use"].max())
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
