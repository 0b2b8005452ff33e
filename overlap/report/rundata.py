"""What the views keep of a run: the analysis result plus compact columnar arrays (`RunData`),
and the per-run facts the HTML report and the dashboard both show (steps, policy, workload,
unprofiled step time). Pure: no file I/O, no cache (the dashboard's `data.py` adds those).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from overlap.analysis import overlap as analysis


@dataclass
class RunData:
    """What the dashboard keeps of a run: the result and compact columnar arrays.

    `compute` arrays: host, device, stream, start_ps, end_ps. `transfers`: the analysis's
    per-transfer table (host, device, direction, stream, start/end/span/hidden/exposed ps,
    overlap_ratio, bytes, bandwidth_Bps, hlo_op). `memory`: allocator events (time_ps,
    bytes_allocated, device, allocator). `program_memory`: program-order live bytes from the
    HLO (`index`, `bytes`) when the capture carries HLO protos and `overlap.hlo.program` is
    available.
    """

    result: dict[str, Any]
    backend: str
    synthetic: bool
    compute: dict[str, np.ndarray]
    transfers: dict[str, np.ndarray]
    memory: dict[str, np.ndarray]
    program_memory: dict[str, np.ndarray] | None
    device_names: list[str]
    manifest: dict[str, Any] = field(default_factory=dict)


def _program_memory(trace, manifest: dict[str, Any] | None = None
                    ) -> tuple[dict[str, np.ndarray] | None, dict[str, Any]]:
    """Program-order live bytes (heap simulator) of the program that ran in the profiled steps
    (`overlap.analysis.memory.executed_program`: run.json's program id, else the op events'),
    not of whichever compile of that name is newest; and what was found (`module`,
    `program_id`, `name`, `how`: why there is no curve when there is none)."""
    from overlap.analysis.memory import executed_program
    from overlap.hlo.program import live_bytes

    ran = executed_program(trace, manifest)
    info = {k: ran[k] for k in ("module", "program_id", "name", "how")}
    if ran["proto"] is None:
        return None, info
    try:  # (the heap simulator's live bytes per event: `memory_timeline` without its frame)
        y = np.asarray(live_bytes(ran["proto"]), dtype=np.int64)
    except Exception as e:  # noqa: BLE001 - one unparseable module must not hide the run
        return None, {**info, "how": f"{info['name']}: no heap-simulator trace ({e})"[:300]}
    if not y.size:
        return None, {**info, "how": f"{info['name']}: empty heap-simulator trace"}
    return {"index": np.arange(y.size, dtype=np.int64), "bytes": y}, info


def run_data(trace, result: dict[str, Any], manifest: dict[str, Any] | None = None) -> RunData:
    """Compact RunData from a reader Trace and its analysis result (pure; no I/O)."""
    from overlap.analysis.memory import peak_memory

    pm, program = _program_memory(trace, manifest)
    result = {**result, "peak_memory": peak_memory(manifest, trace), "program": program}
    if getattr(trace, "compute_scope", "all") != "all":
        result["compute_scope"] = trace.compute_scope  # only the worst steps' compute kept
    th = result.get("thresholds", {})
    hidden = th.get("hidden", analysis.DEFAULT_HIDDEN_THRESHOLD)
    exposed = th.get("exposed", analysis.DEFAULT_EXPOSED_THRESHOLD)
    pre = getattr(trace, "analysed_transfers", None)
    if pre is not None and pre[1] == (hidden, exposed):
        # A multi-host read kept only the worst steps' compute; the table was computed per
        # host from all of it (overlap.analysis.pod).
        table = pre[0]
    else:  # (its columns: a DataFrame of them loaded pandas for the HTML page, issue 32)
        table, _ = analysis.transfer_columns(trace, hidden_threshold=hidden,
                                             exposed_threshold=exposed)
    # The reader's own column arrays (`Trace.columns`; the views only read them): building
    # `trace.compute`, a DataFrame of every compute event (836k rows on the 1M files), to copy
    # five columns out of it put ~49 MiB on the dashboard server's peak (issue 32). A one-value
    # column stays the reader's read-only one-element view (`arrays.repeated`).
    co = trace.columns("compute")
    compute = {
        "host": np.asarray(co["host"], dtype=object),
        "device": np.asarray(co["device"], dtype=object),
        "stream": np.asarray(co["stream"], dtype=np.int64),
        "start_ps": np.asarray(co["start_ps"], dtype=np.int64),
        "end_ps": np.asarray(co["end_ps"], dtype=np.int64),
    }
    transfers = {c: np.asarray(table[c]) for c in (
        "host", "device", "direction", "start_ps", "end_ps", "span_ps", "hidden_ps",
        "exposed_ps", "overlap_ratio", "bytes", "bandwidth_Bps", "hlo_op")}
    # transfer_table keeps the reader's row order, so the stream column lines up.
    transfers["stream"] = np.asarray(trace.columns("transfers")["stream"], dtype=np.int64)
    mem = trace.columns("memory")
    memory = {
        "time_ps": np.asarray(mem["time_ps"], dtype=np.int64),
        "bytes_allocated": np.asarray(mem["bytes_allocated"], dtype=np.int64),
        "device": np.asarray(mem["device"], dtype=object),
        "allocator": np.asarray(mem["allocator"], dtype=object),
    }
    names = sorted({str(n) for n in trace.columns("devices")["name"].tolist()
                    if n is not None and n})
    return RunData(result=result, backend=trace.backend, synthetic=bool(trace.synthetic),
                   compute=compute, transfers=transfers, memory=memory,
                   program_memory=pm, device_names=names,
                   manifest=manifest or {})


def manifest_policy(m: dict[str, Any]) -> tuple[str, str]:
    """(policy name, category) from a run.json, whose `policy` is a dict written by
    overlap.capture.api (older or hand-written manifests may hold a bare name)."""
    pol = m.get("policy")
    if isinstance(pol, dict):
        return str(pol.get("name") or ""), str(pol.get("category") or "")
    return str(pol or ""), str(m.get("category") or "")


def manifest_workload(m: dict[str, Any]) -> str:
    """`name:size` of a run.json's workload (a dict from overlap.capture.api, or a bare string)."""
    wl = m.get("workload")
    if isinstance(wl, dict):
        name, size = wl.get("name") or "", wl.get("size")
        return f"{name}:{size}" if size else str(name)
    return str(wl or "")


# The step dropdown lists every step up to this many; beyond it, a spread of them and the rest
# found by typing (a browser spends ~0.1 s per 1,000 options: 0.6 s on a run of 7,353 steps).
STEP_OPTIONS_LIMIT = 300


def _step_option(s: dict[str, Any], many_hosts: bool) -> dict[str, Any]:
    return {"label": f"step {s['step']} ({s['duration_ps'] / 1e9:.3f} ms)"
            + (f" on {s['host']}" if many_hosts else ""),
            "value": f"{s['host']}|{s['step']}"}


def step_options(data: RunData, search: str | None = None, keep: str | None = None,
                 limit: int = STEP_OPTIONS_LIMIT) -> list[dict[str, Any]]:
    """Dropdown options for the steps of a run: value `host|step`, in the run's step order.

    Every step where the run has at most `limit`. Beyond that, at most `limit` of them: with
    `search` (what the user typed), the steps whose label contains it; without, the step the
    view opens on (`default_step`), the steps with the most exposed wall time, the first and
    last, and steps evenly spaced between. `keep` (the value now selected) is always listed,
    so the dropdown never goes blank under a selection."""
    steps = data.result.get("steps", [])
    many_hosts = len(data.result.get("hosts", [])) > 1
    opts = [_step_option(s, many_hosts) for s in steps]
    if len(opts) <= limit:
        return opts
    if search:
        want = search.strip().lower()
        pick = [i for i, o in enumerate(opts) if want in o["label"].lower()][:limit]
    else:
        n = len(steps)
        chosen: dict[int, None] = {}  # insertion-ordered set
        d = default_step(data)
        if d is not None:
            chosen.update((i, None) for i, s in enumerate(steps)
                          if (s["host"], int(s["step"])) == d)
        chosen.update({0: None, n - 1: None})
        worst = sorted(range(n), key=lambda i: (-int(steps[i]["exposed_wall_ps"]), i))
        chosen.update((i, None) for i in worst[:limit // 3])
        spread = limit - len(chosen)
        chosen.update((i * (n - 1) // max(spread - 1, 1), None) for i in range(spread))
        pick = sorted(chosen)[:limit]
    if keep is not None and all(opts[i]["value"] != keep for i in pick):
        pick += [i for i, o in enumerate(opts) if o["value"] == keep]
    return [opts[i] for i in sorted(set(pick))]


def default_step(data: RunData) -> tuple[str, int] | None:
    """The step a view opens on: the median-duration step (the lower median; ties: the
    earliest), so the first picture is a typical step, not the compile-warm first one; the
    step the tables' median step time describes. A multi-host read that kept only the worst
    step's compute (`result["compute_scope"]`, overlap.analysis.pod) opens on that step, the
    only one drawn in full. None without steps."""
    steps = data.result.get("steps", [])
    if not steps:
        return None
    if data.result.get("compute_scope"):
        pick = max(steps, key=lambda s: (s["exposed_wall_ps"], -s["start_ps"]))
    else:
        by = sorted(steps, key=lambda s: (int(s["duration_ps"]), int(s["start_ps"])))
        pick = by[(len(by) - 1) // 2]
    return pick["host"], int(pick["step"])


def parse_step(value: Any, data: RunData) -> tuple[str, int] | None:
    """A `host|step` dropdown value, checked against the run's steps (else the default)."""
    if isinstance(value, str) and "|" in value:
        host, _, step = value.rpartition("|")
        for s in data.result.get("steps", []):
            if s["host"] == host and str(s["step"]) == step:
                return host, int(s["step"])
    return default_step(data)


