"""Predicted against measured: the estimate of a captured program beside what the capture shows.

Measured, per copy op (the capture's HLO op name, e.g. `copy-start.2`), from the overlap
result's `by_hlo_op` rows: `duration_ps` = mean in-flight time per copy (span / count),
`hidden_fraction` = hidden / span (compute on the same device covering the copy), bandwidth =
bytes / span (per copy, waiting behind other copies included).

Measured host link, per direction (:func:`link_throughput`): bytes moved / time at least one
copy of that direction was in flight, per (host, device), summed over devices. This is the
rate the link served copies at while busy, the number the estimate's link model takes
(`overlap plan --host-bandwidth`): with copies queued behind each other, per-copy bandwidth is
lower than the link's by the queueing.

Predicted, per op: the estimate's row for the same op of the same program
(`overlap.hlo.schedule`): duration (issue to completion), hidden fraction, time alone on the
link. Ratios are predicted / measured. Nothing here is a measurement of the prediction: the
view labels every predicted number.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd


def link_throughput(transfers: pd.DataFrame,
                    program_id: int | None = None) -> dict[str, dict[str, Any]]:
    """Per direction: bytes, busy time (union of in-flight intervals per host and device, in
    ps) and bytes / busy (`link_Bps`); also bytes / summed span (`per_copy_Bps`). Transfers of
    other programs are left out when `program_id` is given."""
    t = transfers
    if program_id is not None and "program_id" in t.columns:
        t = t[t["program_id"].astype("Float64") == float(program_id)]
    out: dict[str, dict[str, Any]] = {}
    for d in ("D2H", "H2D"):
        sub = t[t["direction"] == d]
        if sub.empty:
            continue
        sub = sub.sort_values(["host", "device", "start_ps"], kind="stable")
        start = sub["start_ps"].to_numpy(np.int64)
        end = np.maximum(sub["end_ps"].to_numpy(np.int64), start)
        key = pd.factorize(sub["host"].astype(str) + "\x00" + sub["device"].astype(str))[0]
        # Union length in one pass: each interval adds how far it extends the running end of
        # its (host, device) group.
        reach = pd.Series(end).groupby(key).cummax().to_numpy(np.int64)
        prev = pd.Series(reach).groupby(key).shift(1).to_numpy(dtype=float)
        prev = np.where(np.isnan(prev), -np.inf, prev)
        busy = float(np.clip(reach - np.maximum(start, prev), 0, None).sum())
        nbytes = int(sub["bytes"].sum())
        span = int((end - start).sum())
        out[d] = {"copies": int(len(sub)), "bytes": nbytes, "busy_ps": int(busy),
                  "link_Bps": nbytes / busy * 1e12 if busy else None,
                  "per_copy_Bps": nbytes / span * 1e12 if span else None}
    return out


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


def join(result: dict, estimate: dict, *, estimate_at_measured: dict | None = None
         ) -> list[dict[str, Any]]:
    """One row per copy op of the estimate: measured (from `result['by_hlo_op']`) beside
    predicted (from `estimate['ops']`, and `estimate_at_measured` when given: the same program
    predicted at the measured link bandwidth)."""
    measured = {r["hlo_op"]: r for r in (result.get("by_hlo_op") or {}).get("records", [])}
    again = {r["op"]: r for r in (estimate_at_measured or {}).get("ops", [])}
    rows = []
    for p in estimate.get("ops", []):
        m = measured.get(p["op"])
        mrow = None
        if m and m.get("count"):
            span = m["span_ps"] / m["count"]
            mrow = {"count": m["count"], "duration_ps": span,
                    "hidden_fraction": (m["hidden_ps"] / m["span_ps"]) if m["span_ps"] else None,
                    "bandwidth_Bps": m.get("bandwidth_Bps"),
                    "bytes_per_copy": m["bytes"] / m["count"]}
        prow = {"duration_ps": p["duration_ps"], "hidden_fraction": p["hidden_fraction"],
                "transfer_ps": p["transfer_ps"], "queued_ps": p["queued_ps"],
                "stall_ps": p["stall_ps"], "executions": p["executions"],
                "layout_bytes": p["layout_bytes"]}
        if p["op"] in again:
            a = again[p["op"]]
            prow["at_measured_link"] = {"duration_ps": a["duration_ps"],
                                        "hidden_fraction": a["hidden_fraction"]}
        rows.append({
            "op": p["op"], "direction": p["direction"], "bytes": p["bytes"],
            "measured": mrow, "predicted": prow,
            "duration_ratio": _ratio(p["duration_ps"], mrow["duration_ps"] if mrow else None),
        })
    return rows
