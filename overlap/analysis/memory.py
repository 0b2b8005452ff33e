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


def peak_memory_bytes(data) -> tuple[int | None, str]:
    """Peak device memory and where it came from: allocator events, HLO program order, or the
    manifest's compile-time memory analysis."""
    if data.memory["bytes_allocated"].size:
        return int(data.memory["bytes_allocated"].max()), "allocator"
    if data.program_memory is not None and data.program_memory["bytes"].size:
        return int(data.program_memory["bytes"].max()), "hlo"
    ma = data.manifest.get("memory_analysis")
    if isinstance(ma, dict):
        peak = find_number(ma, ("peak_memory_in_bytes", "peak_bytes"))
        if peak is None:
            peak = memory_analysis_peak(ma)
        if peak is not None:
            return int(peak), "compile"
    return None, ""


