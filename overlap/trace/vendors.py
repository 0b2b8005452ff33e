"""GPU vendors beyond CUPTI's shapes: AMD ROCm copies, and device planes overlap cannot read.

The reader (`overlap.trace.reader`) applies the CUPTI rules to every `/device:GPU:N` plane; this
module holds what it adds on top (see docs/xspace.md, "AMD ROCm", for the evidence):

* ROCm copies. JAX on ROCm (XLA's rocm_collector, roctracer / rocprofiler-sdk) records a
  host<->device copy as a `__amd_rocclr_copyBuffer*` *kernel* on a device stream (with
  `kernel_details`, so a CUPTI reading calls it compute) and, on `/host:CPU`, the HIP API call
  that issued it (`hipMemcpyHtoDAsync`, `hipMemcpyDtoHAsync`, `hipMemcpyDtoDAsync`, ...), both
  carrying the same `correlation_id`. The API name says the direction; its `memcpy_details`
  (`kind:Unknown size:N dest:D async:A`) the size, where `size` is not 0 (the MI300X capture
  writes `size:0` for every call: the collector leaves it unset). The kernel gives the device
  span. So: a copy kernel correlated with an H2D/D2H call is a transfer (bytes unknown where
  the call says `size:0`); with a D2D/P2P/H2H call it is a device copy (neither a transfer nor
  compute); `__amd_rocclr_fillBuffer*` kernels (memsets, from `hipMemset*`) are neither.
* "Cannot tell". A device event shape outside the rules gives an entry in the host's
  `transfer_unknowns` (device, reason, events) instead of silence, so no reading of such a
  capture says "no transfers" with confidence: a copy kernel whose direction the capture does
  not say (no correlated call, or a call such as `hipMemcpyAsync` whose direction is an
  argument the capture does not keep), a host copy call with no device copy event, a kernel
  named like a memcpy outside the ROCm runtime's, an event on a stream line that is neither a
  kernel nor a copy the rules know, a stream kind outside the CUPTI/ROCm tracers' lists, a
  `device_vendor` other than NVIDIA or AMD, or a `/device:` plane of another kind with events.
* Vendor. `device_vendor` (a plane stat XLA writes on GPU planes: "Nvidia", "AMD"); planes
  without it (older CUPTI captures such as the V100 one) are NVIDIA unless the host made HIP
  calls; TPU planes are Google's. Inferred names say so.

Blind spots: copies the HIP runtime makes with the SDMA engines instead of a blit kernel leave
no device event here, so their calls become "cannot tell" rather than transfers; a
`size:0` copy really of 0 bytes reads as unknown size.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from overlap.arrays import factorize
from overlap.trace.wire import (
    Cols,
    as_id,
    as_int,
    map_stat,
    map_unique,
    object_array,
    per_mid,
    stat_column,
    unique_inverse,
)

# ROCm runtime blit kernels (ROCclr's blit manager): copies and fills, never program compute.
ROCM_COPY_KERNEL = "__amd_rocclr_copy"
ROCM_FILL_KERNEL = "__amd_rocclr_fill"
# Kernels of other runtimes named like copies: we cannot tell what they move.
_COPY_LIKE_RE = re.compile(r"memcpy", re.IGNORECASE)

# HIP API direction tokens (hipMemcpyHtoDAsync, hipMemcpyDtoH, hipMemcpyPeerAsync, ...).
_HIP_DIRECTIONS = (("HtoD", "H2D"), ("DtoH", "D2H"), ("DtoD", "D2D"), ("HtoH", "H2H"),
                   ("Peer", "P2P"))
HOST_DIRECTIONS = ("D2H", "H2D")

# Device events that are neither kernels nor host transfers, by name (CUPTI and ROCm tracers'
# event type names; `CopyDeviceToDevice` is older roctracer's D2D copy on a MemcpyOther stream).
_NOT_HOST_COPY_RE = re.compile(
    r"^(?:MemcpyD2D|MemcpyP2P|MemcpyOther|CopyDeviceToDevice|Memset.*|MemoryAlloc|MemoryFree|"
    r"MemoryResidency.*|HostRegister|HostUnregister|Synchronization|Overhead.*)$")
# Stream kinds the CUPTI and ROCm collectors write in `Stream #N(kind,...)` line names.
KNOWN_STREAM_KINDS = frozenset({
    "Kernel", "Compute", "MemcpyH2D", "MemcpyD2H", "MemcpyD2D", "MemcpyP2P", "MemcpyOther",
    "MemoryAlloc", "MemoryFree", "Memset", "Overhead", "MemoryResidency", "HostRegister",
    "HostUnregister", "CudaGraph", "Synchronization", "Generic", "Unsupported",
    "ThreadMarkerRange", "ThreadMarkerStart", "ThreadMarkerEnd"})
_STREAM_RE = re.compile(r"^Stream #-?\d+(?:\((?P<kinds>[^()]*)\))?$")

KNOWN_VENDORS = {"nvidia": "NVIDIA", "amd": "AMD", "google": "Google"}


class GpuSide:
    """What the GPU rules set aside while the reader walks a file's GPU lines."""

    def __init__(self) -> None:
        self.blits = Cols()  # ROCm runtime copy/fill kernels
        self.copy_like = Cols()  # other kernels named like copies (still compute)
        self.other = Cols()  # stream events that are neither kernels nor CUPTI memcpys


def runtime_kernel_kind(name: str) -> str | None:
    """"copy" / "fill" for the ROCm runtime's blit kernels, "copy-like" for other kernels named
    like a memcpy, else None (a kernel: compute)."""
    if name.startswith(ROCM_COPY_KERNEL):
        return "copy"
    if name.startswith(ROCM_FILL_KERNEL):
        return "fill"
    if _COPY_LIKE_RE.search(name):
        return "copy-like"
    return None


def split_kernels(P, ev, idx: np.ndarray, device, stream, line_name,
                  side: GpuSide | None) -> tuple[np.ndarray, np.ndarray]:
    """Of the kernel events `idx` of one line: set the ROCm blit kernels aside (they are copies
    and memsets, not compute). Returns (kernel events left, their names)."""
    # names and kinds once per distinct kernel (a few hundred over a million launches)
    uniq, inv = unique_inverse(ev.mids[idx])
    u_names = object_array([P.name(u) for u in uniq.tolist()])
    if side is None:
        return idx, u_names[inv]
    u_kind = [runtime_kernel_kind(n) for n in u_names.tolist()]
    blit = np.array([k in ("copy", "fill") for k in u_kind], bool)[inv]
    if blit.any():
        b, binv = idx[blit], inv[blit]
        side.blits.add(len(b), device=_pick(device, b), start_ps=ev.starts[b],
                       end_ps=ev.starts[b] + ev.durs[b], name=u_names[binv],
                       kind=object_array(u_kind)[binv],
                       correlation_id=map_stat(P, ev, b, "correlation_id", as_id),
                       stream=_pick(stream, b), line=_pick(line_name, b),
                       hlo_op=stat_column(P, ev, b, "hlo_op"),
                       hlo_module=stat_column(P, ev, b, "hlo_module"),
                       program_id=map_stat(P, ev, b, "program_id", as_id))
    like = np.array([k == "copy-like" for k in u_kind], bool)[inv]
    if like.any():
        c = idx[like]
        side.copy_like.add(len(c), device=_pick(device, c), name=u_names[inv[like]])
    keep = ~blit
    return idx[keep], u_names[inv[keep]]


def note_other_events(P, ev, idx: np.ndarray, device, line_name, side: GpuSide | None) -> None:
    """Events of one line that are neither kernels nor CUPTI memcpys, on stream lines only
    (derived lines such as `TensorFlow Ops` or `Steps` hold no device work of their own)."""
    if side is None or not idx.size:
        return
    if isinstance(line_name, np.ndarray):
        # once per distinct line name: a merged segment holds many events of few lines
        codes, names = factorize(line_name[idx])
        ok = np.array([_is_stream_line(n) for n in names.tolist()] + [False], bool)
        idx = idx[ok[codes]]
        if not idx.size:
            return
    elif not _is_stream_line(line_name):
        return
    side.other.add(len(idx), device=_pick(device, idx), line=_pick(line_name, idx),
                   name=per_mid(ev.mids[idx], P.name))


def _is_stream_line(name: Any) -> bool:
    return isinstance(name, str) and name.startswith(("Stream #", "Memcpy"))


def _pick(v, idx):
    return v[idx] if isinstance(v, np.ndarray) else v


# ---------------------------------------------------------------------------------------------
# HIP API calls on the host plane


def hip_api_kind(name: str) -> tuple[str, str | None] | None:
    """("copy", direction or None) for hipMemcpy* calls, ("fill", None) for hipMemset*, else
    None. The direction is in the name (hipMemcpyHtoDAsync) or nowhere the capture keeps
    (hipMemcpyAsync takes it as an argument, and `memcpy_details` says `kind:Unknown`)."""
    if name.startswith("hipMemset"):
        return ("fill", None)
    if not name.startswith("hipMemcpy"):
        return None
    for token, direction in _HIP_DIRECTIONS:
        if token in name:
            return ("copy", direction)
    return ("copy", None)


def hip_api_mids(P) -> dict[int, str]:
    """Metadata ids of a host plane's HIP copy/memset calls -> their names (empty off ROCm)."""
    return {k: md.name for k, md in P.meta.items() if hip_api_kind(md.name) is not None}


def collect_hip_calls(P, ev, mids: dict[int, str], calls: Cols) -> None:
    """The HIP copy/memset calls among one host line's events `ev`."""
    idx = np.flatnonzero(np.isin(ev.mids, list(mids)))
    if not idx.size:
        return
    calls.add(len(idx), api=per_mid(ev.mids[idx], mids.get),
              correlation_id=map_stat(P, ev, idx, "correlation_id", as_id),
              size=map_stat(P, ev, idx, "memcpy_details", _details_size),
              hlo_op=stat_column(P, ev, idx, "hlo_op"),
              hlo_module=stat_column(P, ev, idx, "hlo_module"),
              program_id=map_stat(P, ev, idx, "program_id", as_id))


def _details_size(text: Any) -> int | None:
    """`size:N` of a ROCm `memcpy_details` when N > 0 (0 is what the collector writes when it
    did not record the size), else None (unknown)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if not isinstance(text, str):
        return None
    for tok in text.split():
        key, sep, val = tok.partition(":")
        if sep and key == "size":
            n = as_int(val)
            return n if n is not None and 0 < n < (1 << 53) else None
    return None


def _cols_frame(c: Cols, names: tuple[str, ...]) -> Any:
    """A DataFrame of object columns `names` from `c`'s chunks (ROCm copies and the shapes
    the rules cannot read: rare, and grouped with pandas; imported only where there are)."""
    import pandas as pd

    rows = c.rows({k: "object" for k in names})
    n = max((len(v) for v in rows.values()), default=0)
    return pd.DataFrame({k: pd.Series(rows[k] if len(rows[k]) else [None] * n, dtype=object)
                         for k in names})


_BLIT_COLS = ("device", "start_ps", "end_ps", "name", "kind", "correlation_id", "stream",
              "line", "hlo_op", "hlo_module", "program_id")
_CALL_COLS = ("api", "correlation_id", "size", "hlo_op", "hlo_module", "program_id")


def rocm_transfers(side: GpuSide, calls: Cols, host: str, tr: Cols) -> list[dict[str, Any]]:
    """Transfers from ROCm copy kernels and their correlated HIP calls (added to `tr`); returns
    the "cannot tell" entries for copies whose direction or device span the capture lacks."""
    if not side.blits.chunks and not calls.chunks:
        return []  # no ROCm copy kernel or HIP call (CUDA, TPU): pandas is not needed
    import pandas as pd

    blits = _cols_frame(side.blits, _BLIT_COLS)
    api = _cols_frame(calls, _CALL_COLS)
    unknown: list[dict[str, Any]] = []
    if api.empty and blits.empty:
        return unknown
    api = api[api["correlation_id"].notna()].drop_duplicates("correlation_id")
    kinds = [hip_api_kind(str(a)) or ("other", None) for a in api["api"].tolist()]
    api = api.assign(call=[k[0] for k in kinds],
                     direction=np.array([k[1] for k in kinds], dtype=object))
    copies = blits[blits["kind"] == "copy"]
    m = copies.merge(api, how="left", on="correlation_id", suffixes=("", "_api"))
    to_host = m["direction"].isin(list(HOST_DIRECTIONS)).to_numpy(bool)
    t = m[to_host]
    if len(t):
        size = t["size"].to_numpy(object)
        known = np.array([s is not None and not pd.isna(s) for s in size.tolist()], bool)
        direction = t["direction"].to_numpy(object)
        hlo = t["hlo_op"].where(t["hlo_op"].notna(), t["hlo_op_api"]).to_numpy(object)
        module = t["hlo_module"].where(t["hlo_module"].notna(), t["hlo_module_api"])
        pid = t["program_id"].where(t["program_id"].notna(), t["program_id_api"])
        tr.add(len(t), host=host, device=t["device"].to_numpy(object), direction=direction,
               start_ps=t["start_ps"].to_numpy(np.int64), end_ps=t["end_ps"].to_numpy(np.int64),
               bytes=np.where(known, size, 0).astype(np.int64), bytes_known=known,
               src_kind=np.where(direction == "H2D", "host", "device").astype(object),
               dst_kind=np.where(direction == "D2H", "host", "device").astype(object),
               **{"async": True}, stream=t["stream"].to_numpy(np.int64),
               line=t["line"].to_numpy(object),
               hlo_op=map_unique(hlo, _last_hlo_op), hlo_module=module.to_numpy(object),
               program_id=pid.to_numpy(object))
    # Copy kernels whose direction the capture does not say.
    no_call = m["call"].isna().to_numpy(bool)
    no_dir = (~no_call) & m["direction"].isna().to_numpy(bool)
    for mask, why in ((no_call, "with no correlated hipMemcpy* call"),
                      (no_dir, "from calls that do not name a direction")):
        sub = m[mask]
        for (dev, name), g in sub.groupby(["device", "name"], sort=True):
            apis = sorted({str(a) for a in g["api"].dropna().tolist()})
            unknown.append({"device": dev, "events": int(len(g)), "reason": (
                f"{len(g)} {name} copy kernel(s) {why}"
                + (f" ({', '.join(apis)})" if apis else "")
                + ": direction unknown")})
    # Host copy calls with no device copy: no span to measure.
    seen = set(blits["correlation_id"].dropna().tolist())
    lost = api[(api["call"] == "copy") & api["direction"].isin(list(HOST_DIRECTIONS))
               & ~api["correlation_id"].isin(seen)]
    for name, g in lost.groupby("api", sort=True):
        unknown.append({"device": None, "events": int(len(g)), "reason": (
            f"{len(g)} {name!s} call(s) with no device copy event correlated: "
            "no device span to measure")})
    return unknown


def _last_hlo_op(v: Any) -> str | None:
    if v is None or (isinstance(v, float) and np.isnan(v)) or v == "":
        return None
    v = str(v)
    return v.rsplit("::", 1)[-1]


# ---------------------------------------------------------------------------------------------
# Shapes we cannot read


def plane_vendor(raw: Any, *, tpu: bool = False, hip_calls: bool = False) -> str:
    """The vendor to name for a device plane (see the module docstring)."""
    if tpu:
        return "Google"
    if raw is not None and str(raw).strip():
        return KNOWN_VENDORS.get(str(raw).strip().lower(), str(raw).strip())
    return "AMD (inferred)" if hip_calls else "NVIDIA (inferred)"


def is_known_vendor(vendor: str) -> bool:
    return vendor.split(" ")[0] in KNOWN_VENDORS.values()


def shape_unknowns(side: GpuSide, plane_vendors: dict[str, tuple[str, int]],
                   other_planes: list[tuple[str, int]]) -> list[dict[str, Any]]:
    """"Cannot tell" entries for device shapes outside the rules: unknown vendors (of planes
    with events), stream events that are neither kernels nor known copies, unknown stream
    kinds, kernels named like copies, other `/device:` planes with events."""
    out: list[dict[str, Any]] = []
    for pdev, (vendor, n) in sorted(plane_vendors.items()):
        if n and not is_known_vendor(vendor):
            out.append({"device": pdev, "events": n, "reason": (
                f"device_vendor {vendor!r}: overlap reads NVIDIA (CUPTI) and AMD (ROCm) GPU "
                "planes only")})
    if side.other.chunks:
        other = _cols_frame(side.other, ("device", "line", "name"))
        for (dev, line, name), g in other.groupby(["device", "line", "name"], sort=True):
            m = _STREAM_RE.match(str(line))
            kinds = [k.strip() for k in (m["kinds"] or "").split(",") if k.strip()] if m else []
            odd = [k for k in kinds if k not in KNOWN_STREAM_KINDS]
            if odd:
                why = f"stream kind(s) {', '.join(odd)} that overlap does not read"
            elif _NOT_HOST_COPY_RE.match(str(name)):
                continue  # a device copy or memset: neither a transfer nor compute
            else:
                why = "neither a kernel nor a copy overlap reads"
            out.append({"device": dev, "events": int(len(g)), "reason": (
                f"{len(g)} {name!r} event(s) on {line}: {why}")})
    if side.copy_like.chunks:
        like = _cols_frame(side.copy_like, ("device", "name"))
        for (dev, name), g in like.groupby(["device", "name"], sort=True):
            out.append({"device": dev, "events": int(len(g)), "reason": (
                f"{len(g)} kernel(s) named like a copy ({str(name)[:80]}): whether they move "
                "host data cannot be told (counted as compute)")})
    for plane, n in other_planes:
        if n:
            out.append({"device": plane, "events": n, "reason": (
                f"device plane {plane!r} with {n} events: not a GPU or TPU plane overlap reads")})
    return out
