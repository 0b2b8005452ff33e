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
from overlap.arrays import factorize
from overlap.trace.tables import concat, take


def analyze_host_file(f: str | os.PathLike, hidden_threshold: float, exposed_threshold: float,
                      top: int, keep_all: bool) -> dict[str, Any]:
    """The map step for one host file: `{"part": ..., "table": ..., ...}` (picklable).

    `table` is the per-transfer table as columns (`overlap.analysis.overlap.
    transfer_columns`); no DataFrame is built here. With `keep_all` (one host file) the
    host's whole `Trace` comes back as `trace`. Without it (several host files), `tables`
    (the read part, as `Columns`) keeps only the events the views draw: compute, transfers
    and allocator events inside the host's worst step (see `_inside`, `_kept_memory`), and
    `table` only the kept transfers' rows.
    """
    from overlap.trace.reader import gc_paused

    with gc_paused():  # the analysis allocates per op and per step too (see `gc_paused`)
        return _analyze_host_file(Path(f), hidden_threshold, exposed_threshold, top, keep_all)


def _analyze_host_file(f: Path, hidden_threshold: float, exposed_threshold: float, top: int,
                       keep_all: bool) -> dict[str, Any]:
    from overlap.trace.reader import combine_parts, read_host_file

    tables = read_host_file(f)
    trace = combine_parts([tables], [f])
    # The read part is let go (one host file) or takes the sorted tables (several) before the
    # analysis, not after it: where the sort had to reorder (several streams or lines), the
    # unsorted copy is freed before the analysis' temporaries join the sorted one. Only
    # `Trace.columns` is read here: no DataFrame is built on either path.
    if keep_all:
        # One host file: its trace is the capture's trace, handed back as it is.
        del tables
        part, table = analysis.host_part_and_table(
            trace, hidden_threshold=hidden_threshold, exposed_threshold=exposed_threshold,
            top=top)
        return {"part": part, "table": table, "module_time_ps": None, "trace": trace}
    transfers, compute = trace.columns("transfers"), trace.columns("compute")
    tables["transfers"], tables["compute"] = transfers, compute
    part, table = analysis.host_part_and_table(
        trace, hidden_threshold=hidden_threshold, exposed_threshold=exposed_threshold, top=top)
    out: dict[str, Any] = {"part": part, "module_time_ps": _module_time(compute)}
    lo, hi = _worst_window(part["steps"])
    keep_t = _inside(transfers, "start_ps", "end_ps", lo, hi)
    # the kept rows of both, in the same (transfers') order
    out["table"] = take(table, keep_t)
    tables["transfers"] = take(transfers, keep_t)
    tables["compute"] = take(compute, _inside(compute, "start_ps", "end_ps", lo, hi))
    tables["memory"] = _kept_memory(trace.columns("memory"), lo, hi)
    out["tables"] = tables
    return out


def _worst_window(steps: list[dict[str, Any]]) -> tuple[int, int]:
    """The window of the step with the most exposed wall time (ties: the earliest), the rule
    `overlap.report.rundata.default_step` uses to pick the step it draws; empty without steps."""
    if not steps:
        return 0, 0
    worst = max(steps, key=lambda s: (s["exposed_wall_ps"], -s["start_ps"]))
    return int(worst["start_ps"]), int(worst["end_ps"])


def _inside(t: dict[str, np.ndarray], start: str, end: str, lo: int, hi: int) -> np.ndarray:
    s = np.asarray(t[start], np.int64)
    e = np.asarray(t[end], np.int64)
    return ((e > lo) | (s >= lo)) & (s < hi) if hi > lo else np.zeros(len(s), bool)


def _name_codes(values: np.ndarray) -> np.ndarray:
    """Group codes of an object column read as names: `fillna("").astype(str)` (a missing
    name and "" are one group; values equal as text are one group)."""
    codes, uniq = factorize(values)
    text = np.empty(len(uniq) + 1, object)
    text[:] = [*(str(u) for u in uniq.tolist()), ""]  # code -1 (missing) reads the last
    tc, _ = factorize(text)
    return tc[codes]


def _kept_memory(mem: dict[str, np.ndarray], lo: int, hi: int) -> dict[str, np.ndarray]:
    """Allocator events in the window, plus each allocator's peak-in-use row (the first of
    its largest `peak_bytes_in_use`, as `idxmax` picks), so that the allocator peak
    (`overlap.analysis.memory.peak_memory`) stays exact."""
    t = np.asarray(mem["time_ps"], np.int64)
    if not len(t):
        return mem
    keep = (t >= lo) & (t < hi) if hi > lo else np.zeros(len(t), bool)
    if "peak_bytes_in_use" in mem:
        peak = np.asarray(mem["peak_bytes_in_use"], np.int64)
        dc = _name_codes(np.asarray(mem["device"], dtype=object))
        ac = _name_codes(np.asarray(mem["allocator"], dtype=object))
        key = dc * (int(ac.max()) + 1) + ac
        order = np.lexsort((-peak, key))  # stable: the earliest row of each largest peak
        ks = key[order]
        first = np.r_[True, ks[1:] != ks[:-1]]
        keep[order[first]] = True
    return take(mem, keep)


def _module_time(compute: dict[str, np.ndarray]) -> dict[str, int]:
    """Compute time per HLO module (what `executed_module` ranks), before compute is cut;
    modules in name order."""
    mod = compute.get("hlo_module")
    if mod is None or not len(mod):
        return {}
    dur = np.maximum(np.asarray(compute["end_ps"], np.int64)
                     - np.asarray(compute["start_ps"], np.int64), 0)
    codes, names = factorize(np.asarray(mod, dtype=object), sort=True)
    ok = codes >= 0
    total = np.zeros(len(names), np.int64)
    np.add.at(total, codes[ok], dur[ok])
    return {str(k): int(v) for k, v in zip(names.tolist(), total.tolist())
            if isinstance(k, str) and k}


def read_and_analyze(path: str | os.PathLike, session: str | None = None, *,
                     jobs: int | None = 1,
                     scheduler: str | None = None,
                     hidden_threshold: float = analysis.DEFAULT_HIDDEN_THRESHOLD,
                     exposed_threshold: float = analysis.DEFAULT_EXPOSED_THRESHOLD,
                     top: int = analysis.DEFAULT_TOP):
    """`(trace, result)` for the capture at `path`, one host file per map task.

    `jobs` > 1 runs the map in that many spawned worker processes (None: as many as
    `default_jobs` gives for the files: none for a small capture); `scheduler` (a Dask
    distributed address) runs it on that cluster instead. The result is the same either way.
    """
    from overlap.trace.distributed import default_jobs, map_hosts, split_readable
    from overlap.trace.reader import _find_files, _sort_by_device_start, combine_parts

    analysis._check_thresholds(hidden_threshold, exposed_threshold)
    files = [Path(f) for f in _find_files(path, session)]
    single = len(files) == 1
    if jobs is None:
        jobs = default_jobs(files)
    fn = functools.partial(analyze_host_file, hidden_threshold=hidden_threshold,
                           exposed_threshold=exposed_threshold, top=top, keep_all=single)
    # Serial (jobs 1), worker processes or Dask: one host's events at a time per worker, the
    # parts accumulate; a damaged host file comes back as its InputError, the others are used.
    outs, readable, unreadable = split_readable(
        map_hosts(files, fn, jobs=jobs, scheduler=scheduler), files)
    # One host file: the worker's trace is the capture's (`_analyze_host_file`).
    trace = outs[0]["trace"] if single else combine_parts([o["tables"] for o in outs], readable)
    trace.unreadable = unreadable
    result = analysis.reduce_parts([o["part"] for o in outs], top=top)
    analysis.note_unreadable(result, unreadable, len(files))
    if not single:
        trace.compute_scope = COMPUTE_SCOPE.format(hosts=len(files))
        # in the order one read of all files gives, as combine_parts sorts the transfers;
        # columns, as `transfer_columns` gives them (a DataFrame of them loaded pandas for a
        # table only the HTML page and the dashboard read: ~0.15 s and ~40 MiB of every
        # report of a pod, issue 32)
        rows = _sort_by_device_start(concat([o["table"] for o in outs]))
        trace.analysed_transfers = (rows, (hidden_threshold, exposed_threshold))
        times: dict[str, int] = {}
        for o in outs:
            for k, v in (o["module_time_ps"] or {}).items():
                times[k] = times.get(k, 0) + v
        trace.module_time_ps = times
    return trace, result


COMPUTE_SCOPE = (
    "{hosts} host files: the figures draw the events of each host's worst step only (compute, "
    "transfers, allocator events); every number was computed from all events, host by host")
