"""Read and analyse a capture host by host: map each host file to a compact part, then reduce.

A TPU pod or a multi-node GPU job writes one `.xplane.pb` per host per session (64 hosts at
100-500 MB each). `read_and_analyze` never holds more than one host's events per worker:

* **map** (`analyze_host_file`, one call per host file, in `jobs` spawned processes, on a Dask
  cluster, or in this process): read the file (`overlap.trace.reader.read_host_file`), run every
  interval operation of the analysis on it (`overlap.analysis.overlap.host_part`: coverage,
  hidden time, per-step exposed wall time, all per (host, device) on that host's clock), and
  return the part plus the host's small tables. The host's compute events, by far its largest
  table, stay in the worker except those inside its worst step (the one the HTML report's step
  timeline draws).
* **reduce** (`overlap.analysis.overlap.reduce_parts`, here): sums, counts, maxima and sorts of
  per-transfer and per-step rows. Exact: the result equals `analyze(read_trace(all files))`
  number for number (tests check this on every capture shape they have).

With one host file the same code runs with one part and every compute event is kept, so a
single-host report is unchanged. Memory: a worker peaks at about the reader's factor times its
host file (see `benchmarks/README.md`); the parent holds the parts (one row per transfer and per
step, allocator events, HLO modules) and the worst steps' compute, not the capture's total.

Blind spot: with several host files the returned `Trace.compute` covers only those worst-step
windows (`Trace.compute_scope` says so); anything drawn from it for another step would be
incomplete, which is why `overlap report --html` draws the worst step. `read_trace` still
returns every event of every host for callers that want them (the dashboard, `inspect`).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

import numpy as np

from overlap.analysis import overlap as analysis


def analyze_host_file(f: str | os.PathLike, hidden_threshold: float, exposed_threshold: float,
                      keep_compute: bool) -> dict[str, Any]:
    """The map step for one host file: `{"tables": ..., "part": ...}` (picklable)."""
    from overlap.trace.reader import combine_parts, read_host_file

    f = Path(f)
    tables = read_host_file(f)
    trace = combine_parts([tables], [f])
    part = analysis.host_part(trace, hidden_threshold=hidden_threshold,
                              exposed_threshold=exposed_threshold)
    # combine_parts sorted compute; the worst-step cut (or the whole) is taken from that order.
    tables["compute"] = trace.compute if keep_compute else _worst_step_compute(
        trace.compute, part["steps"])
    tables["transfers"] = trace.transfers
    return {"tables": tables, "part": part}


def _worst_step_compute(compute, steps: list[dict[str, Any]]):
    """Compute events overlapping the step with the most exposed wall time (ties: earliest),
    the rule `overlap.report.rundata.default_step` uses to pick the step it draws."""
    if not steps:
        return compute.iloc[:0]
    worst = max(steps, key=lambda s: (s["exposed_wall_ps"], -s["start_ps"]))
    s = compute["start_ps"].to_numpy(np.int64)
    e = compute["end_ps"].to_numpy(np.int64)
    keep = (e > worst["start_ps"]) & (s < worst["end_ps"])
    return compute[keep].reset_index(drop=True)


def read_and_analyze(path: str | os.PathLike, session: str | None = None, *, jobs: int = 1,
                     scheduler: str | None = None,
                     hidden_threshold: float = analysis.DEFAULT_HIDDEN_THRESHOLD,
                     exposed_threshold: float = analysis.DEFAULT_EXPOSED_THRESHOLD,
                     top: int = analysis.DEFAULT_TOP):
    """`(trace, result)` for the capture at `path`, one host file per map task.

    `jobs` > 1 runs the map in that many spawned worker processes; `scheduler` (a Dask
    distributed address) runs it on that cluster instead. The result is the same either way.
    """
    from overlap.trace.distributed import map_hosts_dask, map_hosts_local
    from overlap.trace.reader import _find_files, combine_parts

    analysis._check_thresholds(hidden_threshold, exposed_threshold)
    files = [Path(f) for f in _find_files(path, session)]
    single = len(files) == 1
    fn = functools.partial(analyze_host_file, hidden_threshold=hidden_threshold,
                           exposed_threshold=exposed_threshold, keep_compute=single)
    if scheduler:
        outs = map_hosts_dask(files, scheduler, fn)
    elif jobs > 1 and len(files) > 1:
        outs = map_hosts_local(files, jobs, fn)
    else:
        outs = []
        for f in files:  # serial: one host's events at a time, the parts accumulate
            outs.append(fn(str(f)))
    trace = combine_parts([o["tables"] for o in outs], files)
    if not single:
        trace.compute_scope = (
            f"{len(files)} host files: compute events kept only inside each host's worst step "
            "(every event was analysed, host by host)")
    parts = [o["part"] for o in outs]
    result = analysis.reduce_parts(parts, top=top)
    if not single:
        trace.analysed_transfers = (analysis._sorted_table([p["table"] for p in parts]),
                                    (hidden_threshold, exposed_threshold))
    return trace, result
