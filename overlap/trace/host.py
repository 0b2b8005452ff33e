"""The host plane: step windows, allocator events and XLA:CPU compute (see
`overlap.trace.reader`)."""

from __future__ import annotations

import re

import numpy as np

from overlap.trace import vendors
from overlap.trace.gpu import _clean_column
from overlap.trace.names import MEMORY_EVENT_KINDS
from overlap.trace.wire import (
    Cols,
    LineEvents,
    Plane,
    as_id,
    as_int,
    map_unique,
    per_mid,
    stat_column,
    stat_keys,
)

# Host event stats read besides _HOST_WANTED (the decoder keeps only these; see _GPU_STATS).
_HOST_ALSO = ("program_id", "correlation_id", "memcpy_details")
_HOST_WANTED = ("_r", "step_num", "hlo_op", "hlo_module", "device_ordinal", "allocator_name",
                "bytes_allocated", "bytes_reserved", "peak_bytes_in_use", "requested_bytes",
                "allocation_bytes", "index_on_host")


def _read_host_plane(P: Plane, host, line_base_ps, co: Cols, st, mem: Cols,
                     hip_calls: Cols | None = None) -> bool:
    """Steps, allocator events and XLA:CPU compute from the host plane."""
    wanted = P.ids(*_HOST_WANTED)
    mem_mids = {k: MEMORY_EVENT_KINDS[md.name] for k, md in P.meta.items()
                if md.name in MEMORY_EVENT_KINDS}
    # Python-tracer frames ("$file.py:12 fn") are most of a host plane and never steps/compute.
    skip = {k for k, md in P.meta.items() if md.name.startswith("$")
            or md.name.startswith("end: ") or md.name.startswith("ThreadpoolListener::")}
    if not (P.stat_ids.get("_r") or P.stat_ids.get("hlo_op")):
        # No event can carry `_r` or `hlo_op` (nor can metadata: same stat ids), so only
        # memory events can give a row.
        skip |= {k for k in P.meta.keys() if k not in mem_mids}
    meta_nonempty = {k for k in P.meta.keys() if k not in skip and P.meta_stats(k)}
    # ROCm: HIP copy/memset calls say the direction and size of the copy kernels they issue
    # (vendors.rocm_transfers); their stats must be decoded, whatever else the plane holds.
    hip_mids = vendors.hip_api_mids(P) if hip_calls is not None else {}
    skip -= set(hip_mids)
    saw_compute = False
    step_rows = []
    for line in P.plane.lines:
        if not line.n_events:
            continue
        ev = LineEvents(line, line_base_ps(line), skip_mids=skip,
                        wanted=stat_keys(P, _HOST_WANTED + _HOST_ALSO))
        if not ev.n:
            continue
        mids = ev.mids
        if hip_mids and hip_calls is not None:
            vendors.collect_hip_calls(P, ev, hip_mids, hip_calls)
        cand = ~np.isin(mids, list(skip)) if skip else np.ones(ev.n, bool)
        # The old per-event rule: the merged (wanted event stats + metadata stats) dict is
        # non-empty.
        ok = cand & (ev.has_stat(wanted) | np.isin(mids, list(meta_nonempty)))
        if not ok.any():
            continue
        is_mem = ok & np.isin(mids, list(mem_mids))
        idx = np.flatnonzero(is_mem)
        if idx.size:
            col = {c: stat_column(P, ev, idx, c) for c in (
                "allocator_name", "index_on_host", "bytes_allocated", "bytes_reserved",
                "peak_bytes_in_use", "requested_bytes", "allocation_bytes")}
            alloc = []
            for a, ioh in zip(col["allocator_name"].tolist(), col["index_on_host"].tolist()):
                if a is None and ioh is not None:
                    a = f"index_on_host:{ioh}"
                alloc.append(a)
            mem.add(len(idx), host=host, time_ps=ev.starts[idx],
                    allocator=np.array(alloc + [None], object)[:-1],
                    device=map_unique(np.array(alloc + [None], object)[:-1], _allocator_device),
                    kind=per_mid(mids[idx], mem_mids.get),
                    **{c: map_unique(col[c], lambda v: as_int(v) or 0).astype(np.int64)
                       for c in ("bytes_allocated", "bytes_reserved", "peak_bytes_in_use",
                                 "requested_bytes", "allocation_bytes")})
        rest = np.flatnonzero(ok & ~is_mem)
        if not rest.size:
            continue
        r_vals = stat_column(P, ev, rest, "_r")
        is_step = np.array([bool(v) for v in r_vals.tolist()], bool)
        sidx = rest[is_step]
        if sidx.size:
            nums = stat_column(P, ev, sidx, "step_num").tolist()
            names = per_mid(mids[sidx], P.name).tolist()
            for i, num, name in zip(sidx.tolist(), nums, names):
                start = int(ev.starts[i])
                step_rows.append((start, start + int(ev.durs[i]), as_int(num), name))
        cidx = rest[~is_step]
        if cidx.size:
            hlo = stat_column(P, ev, cidx, "hlo_op")
            # `"hlo_op" in s`: present, even with an empty value
            present = np.zeros(len(cidx), bool)
            hsids = P.stat_ids.get("hlo_op")
            if hsids:
                present |= ev.has_stat(hsids)[cidx]
            present |= per_mid(mids[cidx], lambda m: "hlo_op" in P.meta_stats(m)).astype(bool)
            cidx, hlo = cidx[present], hlo[present]
            if cidx.size:
                saw_compute = True
                ords = stat_column(P, ev, cidx, "device_ordinal").tolist()
                co.add(len(cidx), _cpu=True, host=host,
                       device=np.array([f"CPU:{as_int(o) or 0}" for o in ords], object),
                       start_ps=ev.starts[cidx], end_ps=ev.starts[cidx] + ev.durs[cidx],
                       name=per_mid(mids[cidx], P.name), hlo_op=_clean_column(hlo),
                       hlo_module=stat_column(P, ev, cidx, "hlo_module"),
                       program_id=map_unique(stat_column(P, ev, cidx, "program_id"), as_id),
                       stream=line.id, line=line.name)
        del ev, mids, cand, ok, is_mem, idx, rest  # before the next line's arrays exist
    step_rows.sort(key=lambda r: (r[0], r[1], r[2] if r[2] is not None else -1, r[3]))
    for k, (start, end, num, name) in enumerate(step_rows):
        st["host"].append(host)
        st["step"].append(num if num is not None else k)
        st["name"].append(name)
        st["start_ps"].append(start)
        st["end_ps"].append(end)
    return saw_compute


_ALLOCATOR_RE = re.compile(r"^GPU_(\d+)_bfc$")


def _allocator_device(name: str | None) -> str | None:
    """PjRt GPU names device allocators `GPU_<ordinal>_bfc`; the host staging one is not a
    device."""
    if not name or not isinstance(name, str):
        return None
    m = _ALLOCATOR_RE.match(name)
    return f"GPU:{m.group(1)}" if m else None
