"""Server-side reduction of a run's event tables to what a figure can draw.

The browser never sees raw event tables. Every function here takes columnar arrays (integer
picoseconds) and returns a small table whose size is bounded by a cap, whatever the size of the
capture:

* `step_timeline`: one step's lanes (compute per device stream, D2H and H2D per stream), each
  lane clipped to the step window and, when it has more intervals than its share of the cap,
  merged across gaps shorter than `window / cap` (so at most about `cap` segments survive and
  short idle gaps disappear first). Exposed parts of transfers (`transfer lane - device compute
  union`) are computed on the clipped intervals, then capped the same way.
* `overlap_histogram`: per-transfer overlap ratios binned per direction (counts and span).
* `step_transfers`: the transfers that start in a step, strided down to a cap for scatter plots.
* `downsample_minmax`: a step curve (memory in use) reduced to the min and max of each bucket,
  so peaks survive downsampling.

Everything is vectorised numpy: Python loops run per lane or per device, never per event.
Times stay integer picoseconds here; figures convert to ms for display. The tables are dicts
of equally long numpy arrays (`rows` counts them), not DataFrames: `overlap report --html`
loaded pandas for them alone (~0.25 s and ~40 MiB of its process, issue 32).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from overlap.analysis.grouping import is_none
from overlap.analysis.overlap import merge_intervals, subtract_intervals
from overlap.arrays import filled, sorted_unique
from overlap.trace.tables import concat

DIRECTIONS = ("D2H", "H2D")
DEFAULT_TIMELINE_CAP = 4000  # bars drawn in one timeline, over all lanes
MIN_LANE_CAP = 100
# Points of one step's bandwidth scatter. Why 2500, not 5000 as before (round 36): plotly.js
# draws each point as its own SVG element, ~55-85 us apiece in headless Chromium, and a step
# of 100k-1M copies drew 5000 of them (~0.35 s of the dashboard's open after the click, which
# took 2.0-2.4 s); 2500 are still two a pixel column across the figure, and every real capture
# here shows all of its transfers (the corpus' steps hold at most 80; the public v6e capture,
# without steps, 2400 in its whole-capture view).
DEFAULT_POINT_CAP = 2500
DEFAULT_MEMORY_BUCKETS = 1000

SEGMENT_COLUMNS = ("lane", "kind", "start_ps", "end_ps", "count", "hlo_op", "ratio", "bytes",
                   "exposed_ps")

# A table here: column name -> numpy array, every column as long as the others (the reader's
# `overlap.trace.tables` helpers count, take and join them: `n_rows`, `take`, `concat`).
Table = dict[str, np.ndarray]


@dataclass
class Timeline:
    """One step's drawable segments. `segments` columns: SEGMENT_COLUMNS.

    `kind` is `compute`, `D2H`, `H2D` or `exposed`; `count` is how many events a segment stands
    for (1 unless merged); `hlo_op`/`ratio`/`bytes`/`exposed_ps` describe a single transfer and
    are empty for merged or compute segments. `merged_lanes` names lanes that were capped.
    """

    host: str
    step: int
    start_ps: int
    end_ps: int
    lanes: list[str]
    segments: Table
    merged_lanes: list[str] = field(default_factory=list)
    events_in_window: int = 0


def merge_with_tolerance(starts: np.ndarray, ends: np.ndarray, tol: int,
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Union of intervals sorted by start, also bridging gaps of at most `tol` ps.

    Returns `(starts, ends, counts)`: counts is how many input intervals each output covers.
    With `tol = window // cap` the outputs are separated by gaps > tol, so a window holds at
    most `cap + 1` of them.
    """
    n = starts.size
    if n == 0:
        z = np.zeros(0, np.int64)
        return z, z, z
    reach = np.maximum.accumulate(ends)
    new = np.empty(n, dtype=bool)
    new[0] = True
    np.greater(starts[1:], reach[:-1] + tol, out=new[1:])
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, n - 1)
    return starts[first], reach[last], np.diff(np.append(first, n))


def _clip(starts: np.ndarray, ends: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    return np.maximum(starts, lo), np.minimum(ends, hi)


def _lane_frame(lane: str, kind: str, s: np.ndarray, e: np.ndarray, count: np.ndarray,
                **extra) -> Table:
    n = s.size
    data = {"lane": filled(n, lane), "kind": filled(n, kind),
            "start_ps": s.astype(np.int64), "end_ps": e.astype(np.int64),
            "count": count.astype(np.int64)}
    data["hlo_op"] = np.asarray(extra.get("hlo_op", np.full(n, None, dtype=object)), object)
    data["ratio"] = np.asarray(extra.get("ratio", np.full(n, np.nan)), np.float64)
    data["bytes"] = np.asarray(extra.get("bytes", np.zeros(n, np.int64)), np.int64)
    data["exposed_ps"] = np.asarray(extra.get("exposed_ps", np.zeros(n, np.int64)), np.int64)
    return data


def _capped(s: np.ndarray, e: np.ndarray, cap: int, window: int):
    """Sorted intervals, merged (touching or within window/cap) only when there are too many."""
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    if s.size <= cap:
        return s, e, np.ones(s.size, np.int64), order, False
    tol = max(window // max(cap, 1), 1)
    ms, me, counts = merge_with_tolerance(s, e, tol)
    return ms, me, counts, None, True


def step_timeline(data, host: str, step: int, *, cap: int = DEFAULT_TIMELINE_CAP) -> Timeline:
    """Lanes and segments of step `step` on `host` (see the module docstring).

    `data` is a `dashboard.data.RunData` (columnar compute/transfer arrays and the result).
    Raises KeyError when the step does not exist.
    """
    row = next((r for r in data.result.get("steps", [])
                if r["host"] == host and int(r["step"]) == int(step)), None)
    if row is None:
        raise KeyError(f"no step {step} on host {host!r}")
    lo, hi = int(row["start_ps"]), int(row["end_ps"])
    window = max(hi - lo, 1)

    c, t = data.compute, data.transfers
    cmask = (c["host"] == host) & (c["start_ps"] < hi) & (c["end_ps"] > lo)
    tmask = (t["host"] == host) & (t["start_ps"] < hi) & (t["end_ps"] > lo)
    cidx, tidx = np.flatnonzero(cmask), np.flatnonzero(tmask)
    # the window's device, direction and stream columns taken once: each take of an object
    # column is a reference count per row (a 1M-copy capture's whole-capture view took them
    # ~8 times; its figures 0.29 -> 0.26 s)
    cdev, tdev, tdir = c["device"][cidx], t["device"][tidx], t["direction"][tidx]
    cstream, tstream = c["stream"][cidx], t["stream"][tidx]
    devices = sorted(set(cdev) | set(tdev))
    # each device's rows, as positions in the window's columns (ascending)
    c_at, t_at = _device_rows(cdev, devices), _device_rows(tdev, devices)

    # Lanes: per device, compute streams then D2H then H2D streams. Budget split evenly.
    lane_keys: list[list[tuple[str, int]]] = []  # per device, its lanes' (kind, stream)
    for ci, ti in zip(c_at, t_at):
        keys = [("compute", int(s)) for s in sorted_unique(cstream[ci])]
        td, ts = tdir[ti], tstream[ti]
        for d in DIRECTIONS:
            keys += [(d, int(s)) for s in sorted_unique(ts[td == d])]
        lane_keys.append(keys)
    lane_cap = max(MIN_LANE_CAP, cap // max(sum(map(len, lane_keys)), 1))

    frames, merged_lanes, lanes = [], [], []
    for dev, ci, ti, keys in zip(devices, c_at, t_at, lane_keys):  # one per device
        dc = cidx[ci]
        cs, ce = _clip(c["start_ps"][dc], c["end_ps"][dc], lo, hi)
        cover = merge_intervals(cs, ce)  # all streams: what hides a transfer
        for i, (d_kind, d_stream) in enumerate(keys):
            # GPU stream ids are small; XLA:CPU "streams" are thread-id hashes (-6249150751...)
            # that mean nothing to a reader: number those lanes instead.
            label = f"stream {d_stream}" if 0 <= d_stream < 1_000_000 else \
                f"thread {sum(1 for k, _ in keys[:i] if k == d_kind) + 1}"
            name = f"{dev} {d_kind} {label}"
            lanes.append(name)
            if d_kind == "compute":
                sel = cidx[ci[cstream[ci] == d_stream]]
                s, e = _clip(c["start_ps"][sel], c["end_ps"][sel], lo, hi)
                ms, me, cnt, _, merged = _capped(s, e, lane_cap, window)
                frames.append(_lane_frame(name, "compute", ms, me, cnt))
            else:
                sel = tidx[ti[(tdir[ti] == d_kind) & (tstream[ti] == d_stream)]]
                s, e = _clip(t["start_ps"][sel], t["end_ps"][sel], lo, hi)
                ms, me, cnt, order, merged = _capped(s, e, lane_cap, window)
                if merged:
                    frames.append(_lane_frame(name, d_kind, ms, me, cnt))
                else:
                    rows = sel[order]
                    frames.append(_lane_frame(
                        name, d_kind, ms, me, cnt, hlo_op=t["hlo_op"][rows],
                        ratio=t["overlap_ratio"][rows], bytes=t["bytes"][rows],
                        exposed_ps=t["exposed_ps"][rows]))
                # Exposed = in flight on this lane while the device runs no compute at all.
                xs, xe = subtract_intervals(*merge_intervals(s, e), *cover)
                xs, xe, xc, _, xmerged = _capped(xs, xe, lane_cap, window)
                frames.append(_lane_frame(name, "exposed", xs, xe, xc))
                merged = merged or xmerged
            if merged:
                merged_lanes.append(name)
    segments = (concat(frames) if frames
                else _lane_frame("", "compute", *(np.zeros(0, np.int64),) * 3))
    return Timeline(host=host, step=int(step), start_ps=lo, end_ps=hi, lanes=lanes,
                    segments=segments, merged_lanes=merged_lanes,
                    events_in_window=int(cidx.size + tidx.size))


_FEW_DEVICES = 16  # devices whose rows `_device_rows` finds by a mask each (a host has 1-16)


def _device_rows(col: np.ndarray, devices: list) -> list[np.ndarray]:
    """Per device of `devices` (the distinct values of `col`, in order), the positions of
    its rows in `col`, ascending: a mask each where they are few, else one stable sort of
    their numbers. Why: a mask per device over every row was devices x rows (a capture of
    4,000 TPU chips: 3.3 s of the server before a step's figures were sent)."""
    if len(devices) <= _FEW_DEVICES:
        return [np.flatnonzero(col == dev) for dev in devices]
    num = {dev: i for i, dev in enumerate(devices)}
    code = np.fromiter(map(num.__getitem__, col.tolist()), np.intp, len(col))
    order = np.argsort(code, kind="stable")
    return np.split(order, np.cumsum(np.bincount(code, minlength=len(devices)))[:-1])


def overlap_histogram(transfers: dict[str, np.ndarray], bins: int = 10) -> Table:
    """Per direction, transfers per overlap-ratio bin (`[0, 0.1), ... [0.9, 1.0]`).

    Columns: direction, bin_lo, bin_hi, count, span_ps, exposed_ps. Zero-length transfers
    (ratio NaN) are left out, as in the analysis.
    """
    edges = np.linspace(0.0, 1.0, bins + 1)
    out = []
    for d in DIRECTIONS:
        m = (transfers["direction"] == d) & ~np.isnan(transfers["overlap_ratio"])
        r = transfers["overlap_ratio"][m]
        # np.histogram puts 1.0 in the last bin, which is what "hidden" needs.
        idx = np.clip(np.searchsorted(edges, r, side="right") - 1, 0, bins - 1)
        count = np.bincount(idx, minlength=bins)
        span = np.zeros(bins, np.int64)
        np.add.at(span, idx, transfers["span_ps"][m])
        exposed = np.zeros(bins, np.int64)
        np.add.at(exposed, idx, transfers["exposed_ps"][m])
        out.append({"direction": filled(bins, d), "bin_lo": edges[:-1], "bin_hi": edges[1:],
                    "count": count.astype(np.int64), "span_ps": span, "exposed_ps": exposed})
    return concat(out)


def step_transfers(data, host: str, step: int, *, cap: int = DEFAULT_POINT_CAP,
                   ) -> tuple[Table, int]:
    """Transfers starting inside the step, as points (start, bandwidth, ratio...), at most cap.

    Returns `(points, total)`; when `total > cap` every k-th transfer is kept (k = ceil(total /
    cap)), which keeps the time distribution and says so through `total`.
    """
    row = next(r for r in data.result.get("steps", [])
               if r["host"] == host and int(r["step"]) == int(step))
    lo, hi = int(row["start_ps"]), int(row["end_ps"])
    t = data.transfers
    idx = np.flatnonzero((t["host"] == host) & (t["start_ps"] >= lo) & (t["start_ps"] < hi))
    total = int(idx.size)
    if total > cap:
        idx = idx[:: -(-total // cap)]
    pts = {
        "device": t["device"][idx], "direction": t["direction"][idx],
        "start_ps": t["start_ps"][idx] - lo, "span_ps": t["span_ps"][idx],
        "bytes": t["bytes"][idx], "bandwidth_Bps": t["bandwidth_Bps"][idx],
        "overlap_ratio": t["overlap_ratio"][idx], "exposed_ps": t["exposed_ps"][idx],
        "hlo_op": t["hlo_op"][idx]}
    return pts, total


def downsample_minmax(x: np.ndarray, y: np.ndarray, buckets: int = DEFAULT_MEMORY_BUCKETS,
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Reduce a curve sorted by x to <= 2 * buckets points: each bucket's min and its max.

    Buckets split the x range evenly; the two points keep their own x and their time order,
    so the drawn line still reaches every peak and trough of the original.
    """
    x = np.asarray(x)
    y = np.asarray(y)
    n = x.size
    if n <= 2 * buckets:
        return x, y
    lo, hi = x[0], x[-1]
    width = max((hi - lo) / buckets, 1e-12)
    b = np.minimum(((x - lo) / width).astype(np.int64), buckets - 1)
    # Within each bucket, the positions of the min and max y: sort by (bucket, y) once.
    order = np.lexsort((y, b))
    bs = b[order]
    first = np.flatnonzero(np.r_[True, bs[1:] != bs[:-1]])
    last = np.r_[first[1:] - 1, n - 1]
    keep = sorted_unique(np.concatenate([order[first], order[last]]))  # sorted = time order
    return x[keep], y[keep]


def memory_curves(memory: dict[str, np.ndarray], buckets: int = DEFAULT_MEMORY_BUCKETS,
                  ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per device (or allocator): downsampled `(time_ps, bytes_in_use)` from allocator events."""
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    if memory["time_ps"].size == 0:
        return out
    # (a device that is missing: None, or NaN where a caller's frame gave the column; by
    # address and one comparison in C, no Python step per allocator event)
    dev = np.asarray(memory["device"], object)
    keys = np.where(is_none(dev) | (dev != dev), memory["allocator"], dev)
    for key in sorted(set(keys.tolist()), key=str):  # one iteration per device
        m = keys == key
        x, y = memory["time_ps"][m], memory["bytes_allocated"][m]
        order = np.argsort(x, kind="stable")
        out[str(key)] = downsample_minmax(x[order], y[order], buckets)
    return out
