"""Predicted against measured: the estimate of a captured program beside what the capture shows.

Which op each measured copy is: `overlap.analysis.copy_join` (every copy joined or counted,
with a reason, in an unjoined group).

Measured, per copy op, over the copies joined to it (:func:`measured_ops`): `count`, `bytes`,
`span_ps` and `hidden_ps` summed (span and hidden as `overlap.analysis.overlap` defines them
per transfer); a row's `duration_ps` = mean span per copy, `hidden_fraction` = hidden / span,
bandwidth = bytes / span (per copy, waiting behind other copies included where the capture's
span includes it). Per step (:func:`per_step` with `runs`): capture sums over the program runs
the capture holds (:func:`program_runs`: joined copies / copies one run makes).

One definition of a copy's span on both sides (:data:`SPAN_DEFINITION`, :func:`as_captured`):
the predicted span and hidden time of a copy are taken from the estimate's own timeline
(`overlap.hlo.schedule.predicted_timeline`) over the same window the capture measures: on GPU
the bytes moving (CUPTI's memcpy activity: link start to completion), on TPU the start op's
issue to the done op's end (the later of the transfer's completion and the schedule reaching
its done). The estimate's own issue-to-complete time stays beside it as `issue_to_complete_ps`.

Measured host link, per direction (:func:`link_throughput`): bytes moved / time at least one
copy of that direction was in flight, per (host, device), summed over devices. This is the
rate the link served copies at while busy, the number the estimate's link model takes
(`overlap plan --host-bandwidth`): with copies queued behind each other, per-copy bandwidth is
lower than the link's by the queueing. Blind spot: where a span outlasts the bytes moving (TPU:
a done reached after the transfer completed), busy time includes that tail and the rate reads
low (TPU v6e sample: 27.4 GB/s D2H where a lone copy on the TPU's own clock moves at 29.4).

Predicted, per op: the estimate's row for the same op of the same program
(`overlap.hlo.schedule`). Ratios are predicted / measured. Nothing here is a measurement of the
prediction: the view labels every predicted number.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from overlap.analysis.grouping import is_none, pair_codes
from overlap.arrays import factorize


def link_throughput(transfers: Any, program_id: int | None = None) -> dict[str, dict[str, Any]]:
    """Per direction: bytes, busy time (union of in-flight intervals per host and device, in
    ps) and bytes / busy (`link_Bps`); also bytes / summed duration (`per_copy_Bps`: each
    copy's `duration_ps`, the chip's clock where the capture has it). Transfers of
    other programs are left out when `program_id` is given.

    `transfers`: the transfers table's columns (`Trace.columns("transfers")`: a missing
    program id or chip-clock duration is None), read with numpy: `report --predict` loaded
    pandas for this and its device kinds (~0.25 s and ~40 MiB of its process, issue 32)."""
    from overlap.analysis.intervals import merge_grouped

    n = len(np.asarray(transfers["start_ps"]))
    keep = np.ones(n, bool)
    if program_id is not None:
        # (each distinct id compared once, as a float as the nullable column was: a missing
        # id matches nothing)
        codes, ids = factorize(np.asarray(transfers["program_id"], object))
        match = np.array([float(p) == float(program_id) for p in ids.tolist()] + [False], bool)
        keep = match[codes]  # (-1, a missing id: the False after them)
    direction = np.asarray(transfers["direction"], object)
    out: dict[str, dict[str, Any]] = {}
    for d in ("D2H", "H2D"):
        at = np.flatnonzero(keep & (direction == d))
        if not at.size:
            continue
        start = np.asarray(transfers["start_ps"], np.int64)[at]
        end = np.maximum(np.asarray(transfers["end_ps"], np.int64)[at], start)
        # the union of the copies' intervals per (host, device) (`merge_grouped`; a missing
        # host or device a value of its own), as a float as it always was (exact: integers)
        group = pair_codes(np.asarray(transfers["host"], object)[at],
                           np.asarray(transfers["device"], object)[at])[0]
        _, us, ue = merge_grouped(group, start, end)
        busy = float((ue - us).sum())
        nbytes = int(np.asarray(transfers["bytes"], np.int64)[at].sum())
        # per copy: the duration every bandwidth of the report divides by (the chip's own clock
        # where a TPU capture gives it: overlap.trace.tpu.copy_durations); the busy union
        # stays on the timeline the overlap is measured on
        dev = np.asarray(transfers["device_span_ps"], object)[at]
        known = ~is_none(dev)
        clock = np.where(known, dev, 0).astype(np.int64)
        span = int(np.where(known, clock, end - start).sum())
        out[d] = {"copies": int(len(start)), "bytes": nbytes, "busy_ps": int(busy),
                  "link_Bps": nbytes / busy * 1e12 if busy else None,
                  "per_copy_Bps": nbytes / span * 1e12 if span else None}
    return out


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


def measured_ops(table: dict[str, np.ndarray], pid: np.ndarray, op: np.ndarray,
                 program_id: Any) -> dict[str, dict[str, int]]:
    """Per op of program `program_id`: the joined copies' `count`, `bytes`, `span_ps`,
    `hidden_ps` (sums over the capture; `table`: `overlap.analysis.overlap.transfer_columns`,
    `pid`/`op`: `overlap.analysis.copy_join.join_copies` of the same rows)."""
    mine = np.flatnonzero((pid == program_id) & ~is_none(op)) if len(op) else \
        np.zeros(0, np.int64)
    out: dict[str, dict[str, int]] = {}
    if not mine.size:
        return out
    names = op[mine]
    codes, uniq = factorize(names)
    for col, key in (("bytes", "bytes"), ("span_ps", "span_ps"), ("hidden_ps", "hidden_ps")):
        sums = np.bincount(codes, weights=np.asarray(table[col], np.int64)[mine].astype(float),
                           minlength=len(uniq))
        for j, name in enumerate(uniq.tolist()):
            out.setdefault(name, {})[key] = int(round(sums[j]))
    counts = np.bincount(codes, minlength=len(uniq))
    for j, name in enumerate(uniq.tolist()):
        out[name]["count"] = int(counts[j])
    return out


def _overlap_len(lo: int, hi: int, ivs: list[tuple[int, int]]) -> int:
    return sum(max(0, min(b, hi) - max(a, lo)) for a, b in ivs if b > lo and a < hi)


def as_captured(timeline: list[dict[str, Any]], backend: str) -> dict[str, dict[str, int]]:
    """Per op of a predicted timeline (`overlap.hlo.schedule.predicted_timeline`): its span and
    hidden time on the capture's definition (:data:`SPAN_DEFINITION`), one execution."""
    tpu = backend == "tpu"
    out: dict[str, dict[str, int]] = {}
    for comp in timeline:
        ivs = [(int(a), int(b)) for a, b in comp.get("compute") or []]
        for c in comp.get("copies") or []:
            if tpu:
                lo, hi = int(c["issue_ps"]), max(int(c["end_ps"]), int(c["done_ps"]))
            else:
                lo, hi = int(c["begin_ps"]), int(c["end_ps"])
            hi = max(hi, lo)
            hidden = min(hi - lo, _overlap_len(lo, hi, ivs))
            out[c["op"]] = {"span_ps": hi - lo, "hidden_ps": hidden}
    return out


SPAN_DEFINITION = {
    "gpu": "a copy's span is its CUPTI memcpy activity (the bytes moving), on both sides: "
           "predicted = from the copy's start on the link to its completion (queueing behind "
           "other copies not included, as CUPTI does not see it)",
    "tpu": "a copy's span is from its start op's issue to its done op's end, on both sides: "
           "predicted = issue to the later of the transfer's completion and the schedule "
           "reaching its done (a done reached late holds the span open after the bytes moved)",
}


def per_step(ops: dict[str, dict[str, int]], executions: dict[str, int],
             directions: dict[str, str], runs: float | None = None) -> dict[str, Any]:
    """Per direction and "all": `transfers`, `span_ps`, `hidden_ps`, `exposed_ps` per step
    (sums over ops of one execution times `executions`, or, with `runs`, capture sums divided
    by the program runs), `hidden_fraction` (hidden / span, None without span)."""
    out: dict[str, Any] = {}
    for d in ("D2H", "H2D", "all"):
        sel = [k for k in ops if k in directions and (d == "all" or directions[k] == d)]
        if runs:
            n = sum(ops[k].get("count", 0) for k in sel) / runs
            span = sum(ops[k]["span_ps"] for k in sel) / runs
            hid = sum(ops[k]["hidden_ps"] for k in sel) / runs
        else:
            n = sum(executions.get(k, 1) for k in sel)
            span = sum(ops[k]["span_ps"] * executions.get(k, 1) for k in sel)
            hid = sum(ops[k]["hidden_ps"] * executions.get(k, 1) for k in sel)
        out[d] = {"transfers": n, "span_ps": int(round(span)), "hidden_ps": int(round(hid)),
                  "exposed_ps": int(round(span - hid)),
                  "hidden_fraction": (hid / span) if span else None}
    return out


def program_runs(measured: dict[str, dict[str, int]], executions: dict[str, int]) -> float | None:
    """How many runs of the program the capture holds, counted from its copies: joined copies
    over the copies one run makes (the ops' executions per run), over the ops the capture
    joined. None without joined copies."""
    per_run = sum(executions.get(k, 0) for k in measured)
    got = sum(m["count"] for m in measured.values())
    return got / per_run if per_run and got else None


def join(measured: dict[str, dict[str, int]], estimate: dict, *,
         captured: dict[str, dict[str, int]] | None = None,
         estimate_at_measured: dict | None = None,
         captured_at_measured: dict[str, dict[str, int]] | None = None
         ) -> list[dict[str, Any]]:
    """One row per copy op of the estimate: measured (`measured_ops`) beside predicted. The
    predicted `duration_ps` / `hidden_fraction` are on the capture's span definition
    (`captured`, from :func:`as_captured`) where given, else the estimate's issue-to-complete;
    `issue_to_complete_ps` is the estimate's own. `*_at_measured`: the same program predicted at
    the measured link bandwidth."""
    again = {r["op"]: r for r in (estimate_at_measured or {}).get("ops") or []}
    captured = captured or {}
    captured_at_measured = captured_at_measured or {}
    rows = []
    for p in estimate.get("ops") or []:  # (null: none, as an older plan's)
        m = measured.get(p["op"])
        mrow = None
        if m and m.get("count"):
            mrow = {"count": m["count"], "duration_ps": m["span_ps"] / m["count"],
                    "hidden_fraction": (m["hidden_ps"] / m["span_ps"]) if m["span_ps"] else None,
                    "bandwidth_Bps": m["bytes"] / m["span_ps"] * 1e12 if m["span_ps"] else None,
                    "bytes_per_copy": m["bytes"] / m["count"]}
        c = captured.get(p["op"])
        dur = c["span_ps"] if c else p["duration_ps"]
        hid = (c["hidden_ps"] / c["span_ps"] if c["span_ps"] else 1.0) if c else \
            p["hidden_fraction"]
        prow = {"duration_ps": dur, "hidden_fraction": hid,
                "issue_to_complete_ps": p["duration_ps"],
                "transfer_ps": p["transfer_ps"], "queued_ps": p["queued_ps"],
                "stall_ps": p["stall_ps"], "executions": p["executions"],
                "layout_bytes": p["layout_bytes"]}
        if p["op"] in again:
            a = again[p["op"]]
            ca = captured_at_measured.get(p["op"])
            prow["at_measured_link"] = {
                "duration_ps": ca["span_ps"] if ca else a["duration_ps"],
                "hidden_fraction": ((ca["hidden_ps"] / ca["span_ps"] if ca["span_ps"] else 1.0)
                                    if ca else a["hidden_fraction"])}
        rows.append({
            "op": p["op"], "direction": p["direction"], "bytes": p["bytes"],
            "measured": mrow, "predicted": prow,
            "duration_ratio": _ratio(dur, mrow["duration_ps"] if mrow else None),
        })
    return rows
