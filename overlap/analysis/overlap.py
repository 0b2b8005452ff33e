"""How much of each device<->host transfer hides behind compute.

`analyze(trace)` turns the reader's tables into one JSON-serializable dict that every renderer
(terminal, JSON, JUnit, Markdown), the CI gate (`overlap.report.gate`) and the dashboard consume.
`verdict(result)` condenses it into one sentence. All times are integer picoseconds on the
capture's per-host clock; nothing here converts units (renderers do).

Metrics (per transfer, then aggregated):

* A transfer occupies `[start_ps, end_ps)`; `span_ps = end_ps - start_ps`. On GPU that is the
  `MemcpyD2H`/`MemcpyH2D` activity on its stream; on TPU the host-memory async op's start
  (`copy-start`, `dynamic-update-slice-start`, `dynamic-slice-start`) begin to its done's end
  (the `Async XLA Ops` span when the capture has that line).
* Compute coverage of a device is the union of all its compute intervals: every stream of a
  GPU, the `XLA Ops` and `Sparse Core Ops` lines of a TPU chip (async start/done ops excluded,
  as in xprof's `async_overlap`). Overlapping kernels on two streams count once.
* `hidden_ps = |[start, end) ∩ coverage|`, `exposed_ps = span_ps - hidden_ps`,
  `overlap_ratio = hidden_ps / span_ps`. A transfer is *hidden* at ratio >= `hidden_threshold`
  (default 0.9), *exposed* at <= `exposed_threshold` (0.1), else *partial*.
* Zero-length transfers (`span_ps == 0`; CUPTI does emit them for tiny copies) have no ratio.
  They are counted in `summary.transfers`, `summary.zero_length` and in bytes, but in no class
  and add nothing to span/hidden/exposed, so `hidden + partial + exposed + zero_length ==
  transfers`. (xprof skips such windows the same way.)
* Aggregates are duration-weighted: `sum(hidden_ps) / sum(span_ps)` over the group (overall,
  per direction, per device, per HLO op, per step), so one long exposed copy outweighs many
  tiny hidden ones, as it does in step time.
* Steps are the windows of the `steps` table (`jax.profiler.StepTraceAnnotation`). A transfer
  belongs to the step that contains its *start* (its own hidden/exposed time is not clipped);
  transfers starting outside every step are counted in `step_summary.unassigned_transfers`.
  `exposed_wall_ps` of a step is the wall time, inside the step window, during which the device
  has at least one transfer in flight and no compute: `|(∪ transfers ∩ window) \\ coverage|`.
  Unlike summed `exposed_ps` it does not double-count concurrent copies. With several devices on
  a host it is the worst device's value (SPMD steps wait for the slowest device);
  `exposed_frac = exposed_wall_ps / duration_ps`.
* `duration_ps`: how long a copy took. TPU, where the capture gives the chip's own clock:
  `device_span_ps` (`overlap.trace.tpu`); else `span_ps`. The TPU host-aligned timeline shifts
  events by up to hundreds of ms (a 5 GiB v6e copy: 0.14 ms there, 182 ms on the chip); hidden
  time stays on it (steps and the other planes are). A note names copies without that clock.
* Achieved bandwidth is `bytes / duration` in bytes per second, per transfer and per group
  (`sum(bytes) / sum(duration_ps)`: the mean rate while a copy is in flight; concurrent copies
  share the link, so it is not link utilisation).
* Pageable host memory: a GPU copy to or from pageable memory is staged synchronously by the
  driver and cannot overlap compute; `summary.pageable_share` is the share of bytes that went
  that way, and `notes` says so when it is non-zero.
* Why copies are exposed (`exposure_causes` of each `by_direction` entry, `exposure_causes`
  of op, device and step rows, `cause` of `top_exposed` records): every exposed picosecond of
  a transfer gets one cause, defined with its evidence and blind spots in
  `overlap.analysis.causes`; per direction the causes' `exposed_ps` sum to its `exposed_ps`.
* `dropped_events` (`count`, `by_reason`): events the reader dropped because their times are
  impossible (negative offsets or durations, times beyond 26 days). They are in no number
  here; a note says so, and a verdict they may explain (no device events, no compute) says so
  too.
* `replaced_strings` (`count`): string fields of the capture (names, string stats) whose bytes
  were not valid UTF-8 and were read with U+FFFD in place of each invalid sequence
  (overlap.trace.wire's rule for damaged bytes; the same with either decoder). Their events
  are in the numbers; a rule that matches on such a name may miss it. A note says so when it
  is non-zero.
* `unreadable_hosts` (`path`, `problem` each): host files of the session that could not be
  read; every number covers the other hosts, and a note and the verdict name the first.

Blind spots:

* "Covered" only means the device was busy with *some* compute at the same time. A transfer
  overlapped by a kernel that waits for it is counted hidden; whether the copy is on the
  critical path needs dependency information the trace does not have.
* Compute on other devices or on the host never hides a transfer; copies never hide copies.
* Bandwidth contention (a copy slowing a kernel down) is invisible: a hidden copy that
  lengthens the kernel beneath it still counts as hidden.
* GPU copy spans are CUPTI activity times; a copy queued behind another on the same stream
  starts late, and the wait before it is not part of its span.
* Hosts are never merged: every interval operation runs per (host, device) on that host's clock.

Vectorisation: intervals are merged with a sort and a running maximum, and coverage of any
`[lo, hi)` is answered with prefix sums plus `np.searchsorted`, so the cost is
O((compute + transfers) log n) with no Python loop per event.

Tables: the analysis reads the trace through `Trace.columns` and keeps every table of its own
(per transfer, per group, the top rows) as a dict of numpy arrays, grouped and numbered by
`overlap.analysis.grouping` in the orders pandas' `groupby`/`factorize` give. It never imports
pandas (`overlap report` on one capture does not load it: ~0.3 s and ~43 MiB); only the public
`transfer_table` builds a DataFrame, for the views that draw each transfer.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from overlap.analysis import causes as exposure
from overlap.analysis import memo
from overlap.analysis.group_records import (  # the class labels are defined there too
    EXPOSED,
    GROUP_KEYS,
    HIDDEN,
    PARTIAL,
    bucket,
    group_transfers,
    known_sizes,
    most_exposed_ops,
    records_of,
    regroup,
    top_transfer_records,
    top_transfer_rows,
)
from overlap.analysis.grouping import Columns, equal_to, frame_of, is_none
from overlap.analysis.hosts import straggler_view
from overlap.analysis.intervals import (
    Coverage,
    GroupCoverages,
    covered_grouped,
    merge_grouped,
    merge_intervals,
    subtract_grouped,
    subtract_intervals,
)
from overlap.analysis.step_rows import joined_blocks, step_rows
from overlap.analysis.step_rows import step_summary as summarize_steps
from overlap.analysis.units import format_ps
from overlap.arrays import factorize, is_repeated, labels_at, repeated
from overlap.trace.tables import concat, missing_mask, n_rows, take
from overlap.trace.tpu import clock_counts, copy_durations

if TYPE_CHECKING:
    import pandas as pd

# The interval primitives (intervals.py) and format_ps (units.py) are part of this module's
# interface too: callers import them from here.
__all__ = ["Coverage", "covered_grouped", "merge_grouped", "merge_intervals", "subtract_grouped",
           "subtract_intervals", "format_ps", "analyze", "verdict", "transfer_table", "host_part",
           "reduce_parts"]

SCHEMA_VERSION = 1

# defined beside no heavy import, for the command line's --help (see thresholds.py)
from overlap.analysis.thresholds import (  # noqa: E402
    DEFAULT_EXPOSED_THRESHOLD,
    DEFAULT_HIDDEN_THRESHOLD,
    DEFAULT_TOP,
)

STATUS_OK = "OK"
STATUS_NO_TRANSFERS = "NO_TRANSFERS"
STATUS_NO_DEVICE_EVENTS = "NO_DEVICE_EVENTS"
# No transfer measured, and device events the reader's rules cannot read: "no transfers" would
# be a guess (overlap.trace.vendors lists the shapes). With measured transfers the status stays
# OK and `transfer_status` says what is missing.
STATUS_CANNOT_TELL = "CANNOT_TELL"
TRANSFERS_COMPLETE = "complete"
TRANSFERS_CANNOT_TELL = "cannot_tell"

DIRECTIONS = ("D2H", "H2D")
UNKNOWN_OP = "(unknown)"  # transfers whose hlo_op the capture did not record
# A copy the runtime made outside every compiled program (`jax.device_put` of host arrays,
# `jax.device_get`, a pinned staging buffer). Evidence, all of: an NVIDIA device (read from
# its CUPTI plane, not inferred), the CUPTI memcpy event carries no `hlo_op`, `hlo_module` nor
# `program_id`, while the same device's kernels do carry `hlo_module` (XLA annotated the
# programs this capture ran, so an unannotated copy ran outside them). On the real H100
# capture `user-pageable/io` the host side agrees: each copy's CUPTI API call (same
# correlation_id) runs on a `pjrt_async_work_runner` thread inside PJRT's
# `CopyRawHostToDevice`/`CopyRawDeviceToHost`, not in a program's thunk (not read here).
# Elsewhere (TPU, ROCm copies correlated from HIP calls, a TensorFlow capture without XLA
# annotations) a missing op stays UNKNOWN_OP: nothing says where the copy came from.
OUTSIDE_PROGRAM_OP = "(outside any program: device_put/device_get)"

CPU_REASON = (
    "CPU capture: XLA:CPU compiles host offload away (host and device memory are the same), so "
    "a CPU trace never has device<->host transfers. Analyze a GPU or TPU capture, or see what "
    "the real GPU/TPU compilers plan for this step without the hardware: overlap plan."
)
NO_TRANSFERS_REASON = (
    "The capture has device compute but no device<->host transfers: host offload is not "
    "happening in the captured steps (check the offload policy / memory kinds, and that the "
    "profile covers steps that offload)."
)
NO_DEVICE_EVENTS_REASON = (
    "The capture has no device compute and no device<->host transfers: no /device:GPU or "
    "/device:TPU events and no XLA:CPU ops were recorded (host planes only: did the device "
    "tracer run, and was the profiler started after the device backend?)."
)
CANNOT_TELL_REASON = (
    "Cannot tell whether this capture has device<->host transfers: it holds device events "
    "outside the rules overlap reads ({what}). No transfer was measured; that is not the same "
    "as none happening."
)
UNKNOWN_BYTES_NOTE = (
    "{n} transfer(s) of unknown size (the capture records no byte count for them, e.g. ROCm "
    "host API calls with size:0): they are counted and timed, their bytes are not in any byte "
    "total or bandwidth."
)
PAGEABLE_NOTE = (
    "{share} of transferred bytes went through pageable host memory: the driver stages pageable "
    "copies synchronously, so they cannot overlap compute. Use pinned host memory "
    "(memory_kind='pinned_host')."
)
NO_COMPUTE_NOTE = "No device compute was recorded, so every transfer counts as exposed."
# Events the reader dropped because their times are impossible (overlap.trace.wire: negative
# offsets or durations, times beyond 26 days). They are in no number of the result; where they
# may be why a verdict says what it says, the verdict says so.
DROPPED_NOTE = ("{n} event(s) dropped as invalid ({why}): they are in no number of this "
                "report")
DROPPED_VERDICT = (" {n} event(s) were dropped as invalid ({why}): the missing device "
                   "events may be among them.")
# String fields read with invalid UTF-8 replaced (overlap.trace.wire); see `replaced_strings`.
REPLACED_NOTE = ("{n} string field(s) of the capture were not valid UTF-8 and were read with "
                 "U+FFFD in place of the invalid bytes: a name or stat among them may not "
                 "match a rule")
NO_STEPS_NOTE = (
    "No step annotations: per-step exposed time is unavailable. Wrap each training step in "
    "jax.profiler.StepTraceAnnotation('train', step_num=i)."
)


# ---------------------------------------------------------------------------------------------
# Interval primitives (overlap.analysis.intervals)

def classify(ratio: np.ndarray, hidden_threshold: float, exposed_threshold: float) -> np.ndarray:
    """Class labels for ratios; NaN (zero-length transfer) gets the empty label ''.

    Every row holds one of four shared label objects (a label per row built from a numpy
    string column was a new Python string each: 3 MB per 50k transfers)."""
    ratio = np.asarray(ratio, dtype=float)
    code = np.select([np.isnan(ratio), ratio >= hidden_threshold, ratio <= exposed_threshold],
                     [0, 1, 2], 3)
    return labels_at(_CLASS_LABELS, code)  # (one class: a `repeated` column)


_CLASS_LABELS = np.array(["", HIDDEN, EXPOSED, PARTIAL], dtype=object)


# ---------------------------------------------------------------------------------------------
# Per-transfer table


def _host_kind_pageable(tr: Columns) -> np.ndarray:
    src = np.asarray(tr["src_kind"], dtype=object)
    dst = np.asarray(tr["dst_kind"], dtype=object)
    # (a memory kind column holds a few shared strs: each compared once, `equal_to`)
    return equal_to(src, "pageable") | equal_to(dst, "pageable")


def _bytes_known(tr: pd.DataFrame) -> np.ndarray:
    """Per transfer of a transfers DataFrame: does the capture record its size?
    (`bytes_known`; tables built before the column existed know every size.)"""
    if "bytes_known" not in tr.columns:
        return np.ones(len(tr), bool)
    return tr["bytes_known"].fillna(True).to_numpy(dtype=bool)


def transfer_table(trace, *, hidden_threshold: float = DEFAULT_HIDDEN_THRESHOLD,
                   exposed_threshold: float = DEFAULT_EXPOSED_THRESHOLD,
                   ) -> tuple[pd.DataFrame, dict[tuple[str, str], tuple[Coverage, Coverage]]]:
    """Per-transfer metrics, and per (host, device) the compute and exposed-time coverages.

    Returns `(table, coverages)`. `table` has one row per transfer with `host, device,
    direction, start_ps, end_ps, span_ps, hidden_ps, exposed_ps, overlap_ratio (NaN when
    span is 0), class, bytes, bandwidth_Bps, pageable, hlo_op, bytes_known`.
    `coverages[(host, device)]` is `(compute, exposed)`: the device's compute union and the
    wall-clock set where a transfer is in flight with no compute (for per-step exposed wall
    time). The same numbers as `transfer_columns`, as a DataFrame.
    """
    cols, coverages = transfer_columns(trace, hidden_threshold=hidden_threshold,
                                       exposed_threshold=exposed_threshold)
    return frame_of(cols), coverages


@memo.per_trace("transfer_columns", lambda v: ({**v[0]}, v[1]))
def transfer_columns(trace, *, hidden_threshold: float = DEFAULT_HIDDEN_THRESHOLD,
                     exposed_threshold: float = DEFAULT_EXPOSED_THRESHOLD,
                     ) -> tuple[Columns, Mapping[tuple[str, str], tuple[Coverage, Coverage]]]:
    """`transfer_table`, its table as a dict of numpy arrays (no pandas)."""
    tr = trace.columns("transfers")
    start = np.asarray(tr["start_ps"], dtype=np.int64)
    n = len(start)
    end = np.asarray(tr["end_ps"], dtype=np.int64)
    if not (end >= start).all():  # (else the trace's own column: 8 MB a million copies)
        end = np.maximum(end, start)
    span = end - start
    hidden = np.zeros(n, np.int64)
    coverages: Mapping[tuple[str, str], tuple[Coverage, Coverage]] = {}
    if n:
        # Every device at once (the grouped primitives equal the per-device ones); the
        # codes and merged compute made once per trace (the causes search them again)
        (tcode, _), keys, comp = exposure.compute_groups(trace)
        tcode = tcode.astype(np.int64, copy=False)  # (one device: a read-only view)
        mg, ms, me = comp.g, comp.s, comp.e
        # (no compute on any device: nothing hidden, a read-only one-value column, not 8 MB
        # of zeros a million copies)
        hidden = comp.covered(tcode, start, end) if len(ms) else repeated(n, 0, np.int64)
        # the wall-clock set with a copy in flight and no compute: the uncovered parts of the
        # copies' union are those of the copies with exposed time (a covered copy adds
        # none), so only they are merged and cut (none where every copy hides: 2.6 ms of
        # the many-ops capture's 36k copies)
        exposed = span > hidden
        xg, xs, xe = comp.subtract_from(*merge_grouped(tcode, start, end)) if exposed.all() \
            else comp.subtract_from(*merge_grouped(tcode[exposed], start[exposed], end[exposed]))
        groups = np.arange(len(keys) + 1)
        cb, xb = np.searchsorted(mg, groups), np.searchsorted(xg, groups)
        # (per device with copies, made when asked: `GroupCoverages`)
        coverages = GroupCoverages(
            keys, np.flatnonzero(np.bincount(tcode, minlength=len(keys))).tolist(), ms, me,
            cb, xs, xe, xb)
    # ratio = hidden / span and bw = bytes * 1e12 / duration, NaN where not defined: each
    # divided in place where defined (the same float64 quotients as dividing every row, with
    # three 36k-row temporaries fewer each: fresh pages cost as much as the arithmetic)
    ratio = np.empty(n)
    has_span = span > 0
    np.divide(hidden, span, out=ratio, where=has_span)
    ratio[~has_span] = np.nan
    nbytes = np.asarray(tr["bytes"], dtype=np.int64)
    known = known_sizes(tr, n)
    duration, _ = copy_durations(tr, span)
    bw = np.multiply(nbytes, 1e12)
    rated = (duration > 0) & known
    np.divide(bw, duration, out=bw, where=rated)
    bw[~rated] = np.nan
    hlo = missing_op_labels(trace, tr)
    table = {
        "host": np.asarray(tr["host"], dtype=object),
        "device": np.asarray(tr["device"], dtype=object),
        "direction": np.asarray(tr["direction"], dtype=object),
        "start_ps": start, "end_ps": end, "span_ps": span, "hidden_ps": hidden,
        "exposed_ps": span - hidden, "overlap_ratio": ratio,
        "class": classify(ratio, hidden_threshold, exposed_threshold),
        "bytes": nbytes, "bandwidth_Bps": bw, "pageable": _host_kind_pageable(tr),
        "hlo_op": hlo, "bytes_known": known, "duration_ps": duration,
    }
    return table, coverages


def missing_op_labels(trace, tr: Columns) -> np.ndarray:
    """The transfers' `hlo_op`, a missing one named `OUTSIDE_PROGRAM_OP` where the evidence
    says so (see there), else `UNKNOWN_OP`. `tr` is `trace.columns("transfers")`."""
    hlo = np.asarray(tr["hlo_op"], dtype=object)
    missing = is_none(hlo)  # `Trace.columns`: missing is None
    if not missing.any():
        return hlo
    cand = missing & is_none(np.asarray(tr["hlo_module"], dtype=object)) & is_none(
        np.asarray(tr["program_id"], dtype=object))
    outside = np.zeros(0, np.intp)  # the candidates named OUTSIDE_PROGRAM_OP
    if cand.any():
        co = trace.columns("compute")
        annotated = ~is_none(np.asarray(co["hlo_module"], dtype=object))
        vendors = {h: (f or {}).get("vendors") or {} for h, f in (trace.capture or {}).items()}
        idx = np.flatnonzero(cand)
        # per distinct (host, device) of the candidates (a handful), never per event
        ch = np.asarray(co["host"], dtype=object)
        cd = np.asarray(co["device"], dtype=object)
        parts = []
        for h, on_host in _value_rows(np.asarray(tr["host"], dtype=object), idx):
            for d, rows in _value_rows(np.asarray(tr["device"], dtype=object), on_host):
                if vendors.get(h, {}).get(d) != "NVIDIA":
                    continue
                if (annotated & (ch == h) & (cd == d)).any():
                    parts.append(rows)
        if parts:
            outside = np.concatenate(parts)
    # (the label itself at each missing row: `np.where` made a str per row of it, 63 MiB of a
    # million copies without an op; every row one label: that label, `repeated`)
    if missing.all() and len(outside) in (0, len(hlo)):
        return repeated(len(hlo), OUTSIDE_PROGRAM_OP if len(outside) else UNKNOWN_OP)
    out = hlo.copy()
    out[missing] = UNKNOWN_OP
    out[outside] = OUTSIDE_PROGRAM_OP
    return out


def _value_rows(col: np.ndarray, rows: np.ndarray) -> list[tuple[Any, np.ndarray]]:
    """(value, the rows of `rows` holding it) per distinct value of `col[rows]`. A column of
    one value (`arrays.repeated`: a file's host, a line's device) is that value at every row,
    not factorized and compared a row at a time (a million copies: ~60 ms)."""
    if is_repeated(col):
        return [(col[0], rows)]
    vals = col[rows]
    return [(v, rows[vals == v]) for v in set(factorize(vals)[1].tolist())]


# ---------------------------------------------------------------------------------------------

def _status(backend: str, compute_events: int, n_transfers: int) -> tuple[str, str]:
    if n_transfers:
        return STATUS_OK, "Transfers found and measured."
    if backend == "cpu":
        return STATUS_NO_TRANSFERS, CPU_REASON
    if compute_events:
        return STATUS_NO_TRANSFERS, NO_TRANSFERS_REASON
    return STATUS_NO_DEVICE_EVENTS, NO_DEVICE_EVENTS_REASON


def _pct(share: float) -> str:
    """Percent, floored so that 99.6% never reads as 100% (and 0.4% not as 0% unless zero)."""
    if share >= 1.0:
        return "100%"
    if share <= 0.0:
        return "0%"
    p = math.floor(share * 100)
    return f"{p}%" if p >= 1 else "<1%"


def _check_thresholds(hidden_threshold: float, exposed_threshold: float) -> None:
    if not 0.0 <= exposed_threshold < hidden_threshold <= 1.0:
        raise ValueError(
            "thresholds must satisfy 0 <= exposed < hidden <= 1, got "
            f"exposed={exposed_threshold}, hidden={hidden_threshold}")


def analyze(trace, *, hidden_threshold: float = DEFAULT_HIDDEN_THRESHOLD,
            exposed_threshold: float = DEFAULT_EXPOSED_THRESHOLD,
            top: int = DEFAULT_TOP) -> dict[str, Any]:
    """Measure transfer/compute overlap in `trace` (an `overlap.trace.reader.Trace`).

    Args:
      trace: tables from `overlap.read_trace`.
      hidden_threshold: ratio at or above which a transfer is `hidden`.
      exposed_threshold: ratio at or below which a transfer is `exposed`.
      top: rows kept in `top_exposed` and `by_hlo_op` (truncation is flagged, never silent).

    Returns:
      A JSON-serializable dict; see the module docstring for the metrics and
      `RESULT_KEYS` for the top-level keys.

    Raises:
      ValueError: if not `0 <= exposed_threshold < hidden_threshold <= 1`.
    """
    part = host_part(trace, hidden_threshold=hidden_threshold,
                     exposed_threshold=exposed_threshold, top=top)
    result = reduce_parts([part], top=top)
    unreadable = list(getattr(trace, "unreadable", None) or [])
    note_unreadable(result, unreadable, len(trace.sources) + len(unreadable))
    return result


def host_part(trace, *, hidden_threshold: float = DEFAULT_HIDDEN_THRESHOLD,
              exposed_threshold: float = DEFAULT_EXPOSED_THRESHOLD,
              top: int = DEFAULT_TOP) -> dict[str, Any]:
    """The map step: everything `reduce_parts` needs from one host's trace (or several).

    Every interval operation (coverage, hidden time, per-step exposed wall time) runs per
    (host, device) on that host's clock, so it happens here, where the host's compute events
    are. What leaves is compact: transfer sums per (host, device, direction, HLO op), the
    `top` most exposed transfers, one row per step and a few counts; no event of any kind.
    """
    return host_part_and_table(trace, hidden_threshold=hidden_threshold,
                               exposed_threshold=exposed_threshold, top=top)[0]


def host_part_and_table(trace, *, hidden_threshold: float, exposed_threshold: float,
                        top: int) -> tuple[dict[str, Any], Columns]:
    """`host_part`, and the per-transfer table it was built from (`transfer_columns`: a dict
    of numpy arrays; `frame_of` makes it `transfer_table`'s DataFrame)."""
    _check_thresholds(hidden_threshold, exposed_threshold)
    table, coverages = transfer_columns(trace, hidden_threshold=hidden_threshold,
                                        exposed_threshold=exposed_threshold)
    extra = exposure.transfer_causes(trace, table)
    table.update({k: extra[k] for k in exposure.TABLE_COLUMNS})
    rows, unassigned = step_rows(trace, table, coverages)  # overlap.analysis.step_rows
    # `pos` keeps this part's row order, which the reducer needs to break ties as one sort
    # over all hosts would.
    keep = top_rows(table["exposed_ps"], table["start_ps"], top)
    worst = {**take(table, keep), "pos": keep}
    return {
        "groups": group_transfers(table, list(GROUP_KEYS)), "top": worst, "top_n": top,
        "steps": rows, "unassigned": unassigned,
        "backend": trace.backend, "synthetic": bool(trace.synthetic),
        "sources": [str(s) for s in trace.sources],
        "capture_hosts": sorted(trace.capture or ()),
        "compute_events": int(trace.rows("compute")),
        "thresholds": (hidden_threshold, exposed_threshold),
        "dropped": _dropped_by_reason(trace),
        "replaced": sum(int(f.get("strings_replaced") or 0)
                        for f in (getattr(trace, "capture", None) or {}).values()),
        "causes": exposure.part_stats(table, extra),
        "clock": clock_counts(trace.columns("transfers"), table),
        **_vendor_facts(trace),
    }, table


def top_rows(exposed: np.ndarray, start: np.ndarray, k: int) -> np.ndarray:
    """The first `k` rows of `np.lexsort((start, -exposed))` (most exposed first, then the
    earliest, then the first written), without sorting every row: the rows more exposed than
    the k-th most, and of those exactly as exposed, the earliest (selected the same way),
    sorted. Why: a million copies' full sort took ~0.1 s and 16 MB for the ten rows a report
    shows."""
    exposed, start = np.asarray(exposed), np.asarray(start)
    n = len(exposed)
    if k <= 0:
        return np.zeros(0, np.intp)
    if k >= n or n <= 4096:
        return np.lexsort((start, -exposed))[:k]
    every = exposed.min() == exposed.max()  # (every row as exposed: no copy of them)
    t = exposed[0] if every else np.partition(exposed, n - k)[n - k]  # the k-th largest
    gt = np.zeros(0, np.intp) if every else np.flatnonzero(exposed > t)  # (fewer than k)
    eq = None if every else np.flatnonzero(exposed == t)  # (None: every row)
    r = k - len(gt)
    se = start if eq is None else start[eq]
    if len(se) > r:  # of the rows exposed as much: the r earliest, then first written
        if bool((se[1:] >= se[:-1]).all()):  # (in time order, as a reader writes copies)
            eq = np.arange(r) if eq is None else eq[:r]
        else:
            eq = np.arange(n) if eq is None else eq
            st = np.partition(se, r - 1)[r - 1]
            lo = eq[se < st]  # (fewer than r)
            eq = np.concatenate([lo, eq[se == st][:r - len(lo)]])
    assert eq is not None  # (every row tied: r = k < n of them, chosen above)
    rows = np.sort(np.concatenate([gt, eq]))
    return rows[np.lexsort((start[rows], -exposed[rows]))]


def _vendor_facts(trace) -> dict[str, Any]:
    """Per host: device vendors and the device shapes the reader could not read
    (`overlap.trace.vendors`), from the capture facts."""
    vendors: dict[str, dict[str, str]] = {}
    unknowns: list[dict[str, Any]] = []
    platforms: dict[str, str] = {}
    for host, facts in sorted((trace.capture or {}).items()):
        if facts.get("vendors"):
            vendors[host] = dict(facts["vendors"])
        # (the reader's entries start with their host: kept as they are, not copied; 100k
        # of them were 17.5 MiB more on the report's peak)
        unknowns += [u if next(iter(u), None) == "host" and u["host"] == host
                     else {"host": host, **u} for u in facts.get("transfer_unknowns") or ()]
        names = vendor_names({host: facts.get("vendors") or {}})
        if names:  # a host without device planes (a pod's coordinator) is no other platform
            platforms[host] = f"{facts.get('backend') or trace.backend} ({', '.join(names)})"
    return {"vendors": vendors, "unknowns": unknowns, "platforms": platforms}


def vendor_names(per_host: dict[str, dict[str, str]]) -> list[str]:
    """The distinct vendors of a result's devices (`result["vendors"]`), inferred ones last."""
    names = {v for devs in per_host.values() for v in devs.values() if v}
    return sorted(names, key=lambda v: ("inferred" in v, v))


def _dropped_by_reason(trace) -> dict[str, int]:
    """Events the reader dropped as invalid, per reason, over the trace's hosts."""
    out: dict[str, int] = {}
    for facts in (getattr(trace, "capture", None) or {}).values():
        reasons = facts.get("events_dropped_reasons") or {}
        n = int(facts.get("events_dropped_invalid") or 0)
        for k, v in reasons.items():
            out[k] = out.get(k, 0) + int(v)
        rest = n - sum(int(v) for v in reasons.values())
        if rest > 0:  # a reader that counted without reasons
            out["invalid time"] = out.get("invalid time", 0) + rest
    return out


def _dropped_text(by_reason: dict[str, int]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in sorted(by_reason.items()))


def note_unreadable(result: dict[str, Any], unreadable: list[dict[str, str]],
                    files: int) -> None:
    """Mark `result` as covering only the readable host files of a capture: the damaged ones
    are listed (`unreadable_hosts`), named in a note and in the verdict."""
    result["unreadable_hosts"] = list(unreadable)
    if not unreadable:
        return
    first = unreadable[0]
    # The file's name only: the verdict is shown in the dashboard, which keeps the server's
    # directory layout to itself; `unreadable_hosts` and the CLI's error line have the path.
    text = (f"{len(unreadable)} of {files} host file(s) unreadable and left out (first: "
            f"{os.path.basename(first['path'])}: {first['problem']}); the numbers cover the "
            f"other {files - len(unreadable)}")
    result.setdefault("notes", []).insert(0, text)
    result["verdict"] = f"{result['verdict']} [{text}]"



def reduce_parts(parts: list[dict[str, Any]], *, top: int = DEFAULT_TOP) -> dict[str, Any]:
    """The reduce step: one result from the parts of disjoint hosts (`host_part`).

    Exact: the same numbers as `analyze` on one trace holding all the hosts, because every
    cross-host number is a sum or count over the parts' groups, a maximum over step rows, or a
    merge of per-part top lists (a global top `top` is inside the union of per-part tops).
    """
    if not parts:
        raise ValueError("reduce_parts needs at least one part")
    thresholds = {p["thresholds"] for p in parts}
    if len(thresholds) != 1:
        raise ValueError(f"parts analysed with different thresholds: {sorted(thresholds)}")
    if any(p["top_n"] < top for p in parts):
        raise ValueError(f"parts kept fewer than top={top} transfers")
    hidden_threshold, exposed_threshold = thresholds.pop()
    # one part (one host file): its groups as they are, not a copy of each column (nothing
    # here writes to them)
    groups = dict(parts[0]["groups"]) if len(parts) == 1 else concat(
        [p["groups"] for p in parts])
    from overlap.trace.reader import combined_backend

    backend = combined_backend([p["backend"] for p in parts])
    compute_events = sum(p["compute_events"] for p in parts)
    # stable by host (each host's steps keep their order); intact StepRows keep their columns
    step_rows, step_blocks = joined_blocks([p["steps"] for p in parts])
    capture_hosts = sorted({h for p in parts for h in p["capture_hosts"]})
    n = int(groups["count"].sum())
    unknowns = [u for p in parts for u in p.get("unknowns", ())]
    vendors = {h: d for p in parts for h, d in p.get("vendors", {}).items()}
    platforms = {h: v for p in parts for h, v in p.get("platforms", {}).items()}
    # Host files of different backends or vendors are not one multi-host capture (files put
    # side by side in one directory): named, and no host is compared with another.
    mixed = sorted(set(platforms.values())) if len(set(platforms.values())) > 1 else None
    status, reason = _status(backend, compute_events, n)
    if not n and unknowns:
        status, reason = STATUS_CANNOT_TELL, CANNOT_TELL_REASON.format(
            what="; ".join(u["reason"] for u in unknowns[:3])
            + (f"; +{len(unknowns) - 3} more" if len(unknowns) > 3 else ""))
    span = int(groups["span_ps"].sum())
    hidden = int(groups["hidden_ps"].sum())
    nbytes = int(groups["bytes"].sum())
    pageable_bytes = int(groups["pageable_bytes"].sum())

    summary = {"transfers": n, **bucket(n, nbytes, span, hidden,
                                         int(groups["unknown_bytes"].sum()) if n else 0,
                                         int(groups["duration_ps"].sum()))}
    del summary["count"]
    summary.update({c: int(groups[c].sum()) for c in (HIDDEN, PARTIAL, EXPOSED)})
    summary["zero_length"] = int(groups["zero_length"].sum())
    summary["pageable_transfers"] = int(groups["pageable_transfers"].sum())
    summary["pageable_bytes"] = pageable_bytes
    summary["pageable_share"] = pageable_bytes / nbytes if nbytes else 0.0
    # The (host, device) and (host, direction) groups from the (host, device, direction)
    # sums: one pass over the transfer groups (one row per op: 36k on the many-ops capture),
    # not two. The same sums (int64 sums in any grouping), the same keys in the same order
    # (sorted), each group's first row's key values (the coarse groups in order of first
    # appearance: a group's first coarse row holds its first row's keys).
    coarse = regroup(groups, ["host", "device", "direction"], sort=False)
    device_groups = regroup(coarse, ["host", "device"])  # a missing key is a key (dropna=False)
    summary["devices"] = n_rows(device_groups) if n else 0

    by_direction = {}
    cause_stats = exposure.merge_stats([p.get("causes") or {} for p in parts])
    # per direction: sums of the (host, direction) groups' sums (a few rows)
    host_dir = regroup(coarse, ["host", "direction"])
    gdir = np.asarray(host_dir["direction"], dtype=object)
    sums = {c: np.asarray(host_dir[c], np.int64) for c in (
        "count", "bytes", "span_ps", "hidden_ps", "unknown_bytes", "duration_ps", HIDDEN,
        PARTIAL, EXPOSED, *exposure.CAUSE_COLUMNS)}
    for d in DIRECTIONS:
        m = gdir == d
        sub = {c: int(v[m].sum()) for c, v in sums.items()}
        b = bucket(sub["count"], sub["bytes"], sub["span_ps"], sub["hidden_ps"],
                    sub["unknown_bytes"], sub["duration_ps"])
        b.update({c: sub[c] for c in (HIDDEN, PARTIAL, EXPOSED)})
        b["exposure_causes"] = exposure.exposure_causes(
            {c: sub[k] for c, k in zip(exposure.CAUSES, exposure.CAUSE_COLUMNS)},
            b["exposed_ps"], cause_stats.get(d, {}))
        by_direction[d] = b

    by_device = records_of(device_groups, ["host", "device"])
    by_host_direction = records_of(host_dir, ["host", "direction"])

    top_rows = top_transfer_records(top_transfer_rows(parts, top))  # at most `top` rows
    top_exposed = {"records": top_rows, "truncated": len(top_rows) < n, "total_records": n,
                   "returned_records": len(top_rows)}

    steps = step_rows
    # (the blocks `joined_blocks` found intact: nothing changed the rows since)
    step_summary = summarize_steps(steps, sum(p["unassigned"] for p in parts), step_blocks)

    dropped: dict[str, int] = {}
    for p in parts:
        for k, v in (p.get("dropped") or {}).items():
            dropped[k] = dropped.get(k, 0) + v
    n_dropped = sum(dropped.values())
    if n_dropped and status == STATUS_NO_DEVICE_EVENTS:
        reason += DROPPED_VERDICT.format(n=n_dropped, why=_dropped_text(dropped))
    notes = []
    if n_dropped:
        notes.append(DROPPED_NOTE.format(n=n_dropped, why=_dropped_text(dropped)))
    n_replaced = sum(int(p.get("replaced") or 0) for p in parts)
    if n_replaced:
        notes.append(REPLACED_NOTE.format(n=n_replaced))
    if pageable_bytes:
        notes.append(PAGEABLE_NOTE.format(share=_pct(summary["pageable_share"])))
    if summary["unknown_bytes"]:
        notes.append(UNKNOWN_BYTES_NOTE.format(n=summary["unknown_bytes"]))
    if mixed:
        notes.append("These files are not one capture: their hosts run different platforms ("
                     + "; ".join(f"{h}: {v}" for h, v in sorted(platforms.items()))
                     + "). The totals add up unrelated runs; read each file on its own (overlap "
                     "compare DIR treats each as its own run).")
    if n and unknowns:
        notes.append("Cannot tell for part of the capture: " + "; ".join(
            (f"{u['host']} {u['device']}: " if u.get("device") else f"{u['host']}: ")
            + u["reason"] for u in unknowns[:5])
            + (f" (+{len(unknowns) - 5} more)" if len(unknowns) > 5 else ""))
    if n and not compute_events:
        notes.append(NO_COMPUTE_NOTE + (f" {n_dropped} invalid event(s) were dropped: device "
                                        "compute may be among them." if n_dropped else ""))
    if n and not steps:
        notes.append(NO_STEPS_NOTE)
    elif n and step_summary["unassigned_transfers"]:
        notes.append(f"{step_summary['unassigned_transfers']} transfer(s) started outside every "
                     "step window; they count in the totals but in no step.")
    clock = {k: sum(int((p.get("clock") or {}).get(k, 0)) for p in parts)
             for k in ("device", "host_aligned")}
    summary["durations"] = {"tpu_device_clock": clock["device"],
                            "tpu_host_aligned": clock["host_aligned"]}
    if clock["host_aligned"]:
        notes.append(f"{clock['host_aligned']} TPU transfer(s) carry no device clock "
                     "(device_offset_ps/device_duration_ps): their durations and bandwidth are "
                     "on the host-aligned timeline, whose alignment can stretch or squeeze a "
                     "copy by hundreds of ms.")
    if summary["zero_length"]:
        notes.append(f"{summary['zero_length']} zero-length transfer(s): counted, but in no "
                     "hidden/partial/exposed class.")

    result: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "status": status, "reason": reason,
        "backend": backend, "synthetic": any(p["synthetic"] for p in parts),
        "vendors": vendors,
        "mixed_platforms": mixed,
        # "complete" when every device event was read by a rule, else "cannot_tell" with the
        # shapes that were not (a check fails on it unless --allow-unknown).
        "transfer_status": {
            "status": TRANSFERS_CANNOT_TELL if unknowns else TRANSFERS_COMPLETE,
            "unknown": unknowns,
        },
        "sources": [s for p in parts for s in p["sources"]],
        # A trace built without capture metadata (capture={}) names its hosts by its transfers.
        "hosts": capture_hosts or sorted(
            set(groups["host"][~missing_mask(groups["host"])].tolist())),
        "summary": summary,
        "by_direction": by_direction,
        "by_device": by_device,
        "by_host_direction": by_host_direction,
        # (one part: its groups' keys are distinct; parts of one host name may repeat them)
        "by_hlo_op": most_exposed_ops(groups, top, one_device=len(parts) == 1
                                       and n_rows(device_groups) == 1),
        "steps": steps,
        "step_summary": step_summary,
        "top_exposed": top_exposed,
        "thresholds": {"hidden": hidden_threshold, "exposed": exposed_threshold, "top": top},
        "method": {
            "coverage": "union of compute ops on the same (host, device), all streams/lines",
            "step_assignment": "a transfer belongs to the step containing its start",
            "exposed_wall": "worst device's in-flight-without-compute time inside the step",
        },
        "notes": notes,
        # See DROPPED_NOTE; `count` is the sum of `by_reason`.
        "dropped_events": {"count": n_dropped, "by_reason": dropped},
        "replaced_strings": {"count": n_replaced},  # see REPLACED_NOTE
        "unreadable_hosts": [],  # see note_unreadable
    }
    result["verdict"] = verdict(result)
    if n_dropped and n and not compute_events:
        # Every transfer counts as exposed because no compute survived: say why that may be.
        result["verdict"] += (f"; {n_dropped} invalid event(s) dropped "
                              f"({_dropped_text(dropped)}): device compute may be among them")
    result["stragglers"] = None if mixed else straggler_view(result)
    return result


RESULT_KEYS = (
    "schema_version", "status", "reason", "backend", "synthetic", "vendors", "mixed_platforms",
    "transfer_status",
    "sources", "hosts", "summary",
    "by_direction", "by_device", "by_host_direction", "by_hlo_op", "steps", "step_summary",
    "top_exposed", "thresholds", "method", "notes", "verdict", "stragglers", "dropped_events",
    "unreadable_hosts", "replaced_strings",
)


# ---------------------------------------------------------------------------------------------
# Verdict


def verdict(result: dict[str, Any]) -> str:
    """One sentence: e.g. `D2H 97% hidden, H2D 71% hidden: 3.1 ms exposed per step (worst 4 ms),
    mostly copy-start.12`."""
    if result["status"] != STATUS_OK:
        return f"{result['status']}: {result['reason']}"
    parts = []
    for d in DIRECTIONS:
        b = result["by_direction"][d]
        if b["count"]:
            ratio = b["overlap_ratio"]
            parts.append(f"{d} {_pct(ratio) if ratio is not None else 'n/a'} hidden")
    head = ", ".join(parts) or "no timed transfers"
    s = result["summary"]
    ss = result["step_summary"]
    if ss["count"] and not ss["max_exposed_wall_ps"]:
        tail = "nothing exposed in any step"
    elif ss["count"]:
        tail = (f"{format_ps(ss['mean_exposed_wall_ps'])} exposed per step "
                f"(worst {format_ps(ss['max_exposed_wall_ps'])}")
        if ss["max_exposed_frac"] is not None:
            tail += f", {_pct(ss['max_exposed_frac'])} of that step"
        tail += ")"
    elif not s["exposed_ps"]:
        tail = "nothing exposed"
    else:
        tail = f"{format_ps(s['exposed_ps'])} exposed in total"
    ops = result["by_hlo_op"]["records"]
    if s["exposed_ps"] > 0 and ops and ops[0]["exposed_ps"] > 0:
        top = ops[0]
        share = top["exposed_ps"] / s["exposed_ps"]
        # "mostly" only when one op really dominates; otherwise just name the largest.
        tail += f", {'mostly' if share > 0.5 else 'largest'} {top['hlo_op']} ({_pct(share)})"
    text = f"{head}: {tail}"
    if result.get("mixed_platforms"):
        text = (f"NOT ONE CAPTURE (hosts of {', '.join(result['mixed_platforms'])}): " + text)
    ts = result.get("transfer_status") or {}
    if ts.get("status") == TRANSFERS_CANNOT_TELL:
        k = sum(u.get("events") or 0 for u in ts.get("unknown", ()))
        text += f"; CANNOT TELL for {k} device event(s) outside the rules"
    if s.get("unknown_bytes"):
        text += f"; {s['unknown_bytes']} transfer(s) of unknown size"
    if s["pageable_bytes"]:
        text += f"; {_pct(s['pageable_share'])} of bytes via pageable host memory"
    return text
