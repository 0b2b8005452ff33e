"""Read and analyse a capture host by host: map each host file to a compact part, then reduce.

A TPU pod or a multi-node GPU job writes one `.xplane.pb` per host per session (64 hosts at
100-500 MB each). `read_and_analyze` never holds more than one host's events per worker:

* **map** (`analyze_host_file`, one call per host file, in `jobs` spawned processes, on a Dask
  cluster, or in this process): read the file (`overlap.trace.reader.read_host_file`), run every
  interval operation of the analysis on it (`overlap.analysis.overlap.host_part`: coverage,
  hidden time, per-step exposed wall time, all per (host, device) on that host's clock) and
  return a compact part: transfer sums per (host, device, direction, HLO op), the `top` most
  exposed transfers, one row per step. Of the host's events only those the report's figures
  draw travel back: compute, transfers and allocator events inside the host's worst step (the
  step the HTML timeline shows), each allocator's peak row, per-module compute time, and the
  small tables (devices, lines, HLO modules, capture facts).
* **reduce** (`overlap.analysis.overlap.reduce_parts`, here): sums and counts over the groups,
  maxima over step rows, a merge of the top lists. Exact: the result equals
  `analyze(read_trace(all files))` number for number (`tests/analysis/test_pod.py` checks this
  on every capture shape it builds).

With one host file the same code runs with one part and every event is kept, so a single-host
report is unchanged. Memory: a worker peaks at about the reader's factor times its host file;
the parent holds per host a few groups, `top` rows, one row per step and one step's events, not
the capture's total: 64 hosts x 110 MB (7 GB) read with a 656 MiB parent and 639 MiB workers
(numbers in `benchmarks/README.md`, "Pods").

Blind spot: with several host files the returned `Trace`'s event tables cover only the worst
steps (`Trace.compute_scope` says so, and the HTML report repeats it), so figures drawn from it
for another step, or a transfer-gate offender list outside those steps, would be incomplete.
`read_trace` still returns every event of every host for callers that want them (the dashboard,
`inspect`).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

import numpy as np

from overlap.analysis import overlap as analysis


def analyze_host_file(f: str | os.PathLike, hidden_threshold: float, exposed_threshold: float,
                      top: int, keep_all: bool) -> dict[str, Any]:
    """The map step for one host file: `{"tables": ..., "part": ..., ...}` (picklable).

    With `keep_all` False (several host files), the tables keep only the events the views
    draw: compute, transfers and allocator events inside the host's worst step (see `_keep`).
    """
    from overlap.trace.reader import gc_paused

    with gc_paused():  # the analysis allocates per op and per step too (see `gc_paused`)
        return _analyze_host_file(Path(f), hidden_threshold, exposed_threshold, top, keep_all)


def _analyze_host_file(f: Path, hidden_threshold: float, exposed_threshold: float, top: int,
                       keep_all: bool) -> dict[str, Any]:
    from overlap.trace.reader import combine_parts, read_host_file

    tables = read_host_file(f)
    trace = combine_parts([tables], [f])
    # The sorted tables replace the read ones now, not after the analysis: where the sort
    # had to reorder (several streams or lines), the unsorted copy is freed before the
    # analysis' temporaries join the sorted one.
    tables["transfers"], tables["compute"] = trace.transfers, trace.compute
    part, table = analysis.host_part_and_table(
        trace, hidden_threshold=hidden_threshold, exposed_threshold=exposed_threshold, top=top)
    out = {"part": part, "table": table, "module_time_ps": None}
    if not keep_all:
        out["module_time_ps"] = _module_time(trace.compute)
        lo, hi = _worst_window(part["steps"])
        keep_t = _inside(trace.transfers, "start_ps", "end_ps", lo, hi)
        out["table"] = table[keep_t].reset_index(drop=True)  # same row order as transfers
        tables["transfers"] = trace.transfers[keep_t].reset_index(drop=True)
        tables["compute"] = trace.compute[_inside(trace.compute, "start_ps", "end_ps", lo, hi)
                                          ].reset_index(drop=True)
        tables["memory"] = _kept_memory(tables["memory"], lo, hi)
    out["tables"] = tables
    return out


def _worst_window(steps: list[dict[str, Any]]) -> tuple[int, int]:
    """The window of the step with the most exposed wall time (ties: the earliest), the rule
    `overlap.report.rundata.default_step` uses to pick the step it draws; empty without steps."""
    if not steps:
        return 0, 0
    worst = max(steps, key=lambda s: (s["exposed_wall_ps"], -s["start_ps"]))
    return int(worst["start_ps"]), int(worst["end_ps"])


def _inside(df, start: str, end: str, lo: int, hi: int) -> np.ndarray:
    s = df[start].to_numpy(np.int64)
    e = df[end].to_numpy(np.int64)
    return ((e > lo) | (s >= lo)) & (s < hi) if hi > lo else np.zeros(len(df), bool)


def _kept_memory(mem, lo: int, hi: int):
    """Allocator events in the window, plus each allocator's peak-in-use row, so that the
    allocator peak (`overlap.analysis.memory.peak_memory`) stays exact."""
    if not len(mem):
        return mem
    t = mem["time_ps"].to_numpy(np.int64)
    keep = (t >= lo) & (t < hi) if hi > lo else np.zeros(len(mem), bool)
    if "peak_bytes_in_use" in mem:
        peak = mem["peak_bytes_in_use"]
        keys = [mem["device"].astype(object).fillna("").astype(str),
                mem["allocator"].astype(object).fillna("").astype(str)]
        best = peak.groupby(keys, sort=False).idxmax().dropna()
        keep[mem.index.get_indexer(best.to_numpy())] = True
    return mem[keep].reset_index(drop=True)


def _module_time(compute) -> dict[str, int]:
    """Compute time per HLO module (what `executed_module` ranks), before compute is cut."""
    if not len(compute) or "hlo_module" not in compute:
        return {}
    dur = (compute["end_ps"] - compute["start_ps"]).clip(lower=0)
    mod = compute["hlo_module"].astype(object)
    by = dur.groupby(mod.where(mod.notna(), None), dropna=True).sum()
    return {str(k): int(v) for k, v in by.items() if isinstance(k, str) and k}


def read_and_analyze(path: str | os.PathLike, session: str | None = None, *, jobs: int = 1,
                     scheduler: str | None = None,
                     hidden_threshold: float = analysis.DEFAULT_HIDDEN_THRESHOLD,
                     exposed_threshold: float = analysis.DEFAULT_EXPOSED_THRESHOLD,
                     top: int = analysis.DEFAULT_TOP):
    """`(trace, result)` for the capture at `path`, one host file per map task.

    `jobs` > 1 runs the map in that many spawned worker processes; `scheduler` (a Dask
    distributed address) runs it on that cluster instead. The result is the same either way.
    """
    import pandas as pd

    from overlap.trace.distributed import map_hosts, split_readable
    from overlap.trace.reader import _find_files, _sort_by_device_start, combine_parts

    analysis._check_thresholds(hidden_threshold, exposed_threshold)
    files = [Path(f) for f in _find_files(path, session)]
    single = len(files) == 1
    fn = functools.partial(analyze_host_file, hidden_threshold=hidden_threshold,
                           exposed_threshold=exposed_threshold, top=top, keep_all=single)
    # Serial (jobs 1), worker processes or Dask: one host's events at a time per worker, the
    # parts accumulate; a damaged host file comes back as its InputError, the others are used.
    outs, readable, unreadable = split_readable(
        map_hosts(files, fn, jobs=jobs, scheduler=scheduler), files)
    trace = combine_parts([o["tables"] for o in outs], readable)
    trace.unreadable = unreadable
    result = analysis.reduce_parts([o["part"] for o in outs], top=top)
    analysis.note_unreadable(result, unreadable, len(files))
    if not single:
        trace.compute_scope = COMPUTE_SCOPE.format(hosts=len(files))
        # in the order one read of all files gives, as combine_parts sorts the transfers
        rows = pd.concat([o["table"] for o in outs], ignore_index=True)
        trace.analysed_transfers = (_sort_by_device_start(rows),
                                    (hidden_threshold, exposed_threshold))
        times: dict[str, int] = {}
        for o in outs:
            for k, v in (o["module_time_ps"] or {}).items():
                times[k] = times.get(k, 0) + v
        trace.module_time_ps = times
    return trace, result


COMPUTE_SCOPE = (
    "{hosts} host files: the figures draw the events of each host's worst step only (compute, "
    "transfers, allocator events); every number was computed from all events, host by host")
