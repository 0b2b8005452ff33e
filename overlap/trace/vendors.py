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
from itertools import repeat
from typing import Any

import numpy as np

from overlap.arrays import (
    at_rows,
    factorize,
    filled,
    is_repeated,
    now,
    positions,
    repeated,
    sorted_unique,
)
from overlap.trace import wire
from overlap.trace.hlotext import LazyPattern  # compiled on first use: start-up
from overlap.trace.lines import PAREN, STREAM, LineBlock, NameCodes, RowNames
from overlap.trace.names import STREAM_LINE_PREFIXES
from overlap.trace.statcols import meta_values, stat_codes
from overlap.trace.strcodes import str_codes
from overlap.trace.tables import MEMORY_KINDS, missing_mask
from overlap.trace.values import (
    _K_REF,
    _K_STR,
    _stat_objects,
    ids_of,
    narrow_codes,
    unique_inverse,
)
from overlap.trace.wire import (
    Coded,
    Cols,
    PlaneGroup,
    as_id,
    as_int,
    map_stat,
    map_unique,
    object_array,
    per_mid,
    stat_column,
    unique_inverse_at,
)

# ROCm runtime blit kernels (ROCclr's blit manager): copies and fills, never program compute.
ROCM_COPY_KERNEL = "__amd_rocclr_copy"
ROCM_FILL_KERNEL = "__amd_rocclr_fill"
# Kernels of other runtimes named like copies: we cannot tell what they move.
_COPY_LIKE_RE = LazyPattern(r"memcpy", re.IGNORECASE)
# The CUDA driver's own copy kernels (`memcpy128`, `memcpy32_post`, ...): what a memcpy node of
# a CUDA graph runs when both ends are device memory. See `graph_device_copies`.
_CUDA_GRAPH_COPY_RE = LazyPattern(r"^memcpy\d+(?:_(?:pre|post))?$")

# HIP API direction tokens (hipMemcpyHtoDAsync, hipMemcpyDtoH, hipMemcpyPeerAsync, ...).
_HIP_DIRECTIONS = (("HtoD", "H2D"), ("DtoH", "D2H"), ("DtoD", "D2D"), ("HtoH", "H2H"),
                   ("Peer", "P2P"))
HOST_DIRECTIONS = ("D2H", "H2D")

# Device events that are neither kernels nor host transfers, by name (CUPTI and ROCm tracers'
# event type names; `CopyDeviceToDevice` is older roctracer's D2D copy on a MemcpyOther stream).
_NOT_HOST_COPY_RE = LazyPattern(
    r"^(?:MemcpyD2D|MemcpyP2P|MemcpyOther|CopyDeviceToDevice|Memset.*|MemoryAlloc|MemoryFree|"
    r"MemoryResidency.*|HostRegister|HostUnregister|Synchronization|Overhead.*)$")
# Stream kinds the CUPTI and ROCm collectors write in `Stream #N(kind,...)` line names.
KNOWN_STREAM_KINDS = frozenset({
    "Kernel", "Compute", "MemcpyH2D", "MemcpyD2H", "MemcpyD2D", "MemcpyP2P", "MemcpyOther",
    "MemoryAlloc", "MemoryFree", "Memset", "Overhead", "MemoryResidency", "HostRegister",
    "HostUnregister", "CudaGraph", "Synchronization", "Generic", "Unsupported",
    "ThreadMarkerRange", "ThreadMarkerStart", "ThreadMarkerEnd"})
_STREAM_RE = LazyPattern(r"^Stream #-?\d+(?:\((?P<kinds>[^()]*)\))?$")
_STREAM_HEAD = LazyPattern(r"Stream #-?\d+")  # (`_STREAM_RE` up to its kinds list)

KNOWN_VENDORS = {"nvidia": "NVIDIA", "amd": "AMD", "google": "Google"}


class GpuSide:
    """What the GPU rules set aside while the reader walks a file's GPU lines."""

    def __init__(self) -> None:
        self.blits = Cols()  # ROCm runtime copy/fill kernels
        self.copy_like = Cols()  # other kernels named like copies (still compute)
        self.graph_copies = Cols()  # CUDA graph device-to-device copy kernels (still compute)
        self.other = Cols()  # stream events that are neither kernels nor CUPTI memcpys
        # the line names whose codes `other`'s `lcode` column holds (None: nothing set aside
        # yet; False: some events without, from another parse or from upb's lines)
        self.coded: NameCodes | None | bool = None

    def codes_of(self, block: LineBlock | None) -> NameCodes | None:
        """`block`'s coded line names, where every event set aside so far was coded by them."""
        got = None if block is None else block.coded
        if got is None or self.coded is False or (self.coded is not None
                                                  and self.coded is not got):
            return None
        return got

    def add_other(self, n: int, coded: NameCodes | None, lcode: Any, line: Any,
                  **cols: Any) -> None:
        """Events for `other`: their lines' codes in `coded` (`codes_of`; no line names
        kept: they are the codes' names, a million one-event lines), or None and their
        `line` names (the events set aside before get theirs back from their codes)."""
        if not n:
            return
        if lcode is None:
            if isinstance(self.coded, NameCodes):
                chunks = [c for _, c in self.other.chunks]
                got = self.coded.text_arrays([c.pop("lcode") for c in chunks])
                for c, texts in zip(chunks, got):
                    c["line"] = texts
            self.coded = False
            self.other.add(n, line=line, **cols)
        else:
            self.coded = coded
            self.other.add(n, lcode=lcode, **cols)


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
                  side: GpuSide | None) -> tuple[np.ndarray, Coded, np.ndarray]:
    """Of the kernel events `idx` of one line: set the ROCm blit kernels aside (they are copies
    and memsets, not compute). Returns (kernel events left, their names as a `Coded` column
    for `Cols.add`, the distinct metadata ids of `idx` that the names' codes number)."""
    # names and kinds once per distinct kernel (a few hundred over a million launches)
    uniq, inv = unique_inverse_at(ev.mids, idx)  # (no million-row copy of the ids)
    # (a group's names from its table at once; a plane's few through upb, no table built)
    u_names = object_array(P.names(uniq) if isinstance(P, PlaneGroup)
                           else [P.name(u) for u in uniq.tolist()])
    if side is None:
        return idx, Coded(inv, u_names), uniq
    u_kind = [runtime_kernel_kind(n) for n in u_names.tolist()]
    # per distinct kernel first: most lines have no runtime copy, fill or copy-like kernel,
    # and then no per-kernel mask (two gathers of a million kernels' codes)
    u_blit = np.array([k in ("copy", "fill") for k in u_kind], bool)
    blit = u_blit[inv] if u_blit.any() else np.zeros(1, bool)
    if blit.any():
        b, binv = idx[blit], inv[blit]
        side.blits.add(len(b), device=at_rows(device, b), start_ps=ev.starts[b],
                       end_ps=ev.starts[b] + ev.durs[b], name=u_names[binv],
                       kind=object_array(u_kind)[binv],
                       **correlation_ids(P, ev, b),
                       stream=at_rows(stream, b), line=at_rows(line_name, b),
                       hlo_op=stat_column(P, ev, b, "hlo_op"),
                       hlo_module=stat_column(P, ev, b, "hlo_module"),
                       program_id=map_stat(P, ev, b, "program_id", as_id))
    u_like = np.array([k == "copy-like" for k in u_kind], bool)
    like = u_like[inv] if u_like.any() else np.zeros(1, bool)
    if like.any():
        c, cinv = idx[like], inv[like]
        graph = graph_device_copies(P, ev, c, cinv, u_names)
        if graph.any():
            side.graph_copies.add(int(graph.sum()), device=at_rows(device, c[graph]),
                                  name=u_names[cinv[graph]])
        c, cinv = c[~graph], cinv[~graph]
        if len(c):
            side.copy_like.add(len(c), device=at_rows(device, c), name=u_names[cinv])
    if not blit.any():  # (the usual: no copy of a million kernels' indices)
        return idx, Coded(inv, u_names), uniq
    keep = ~blit
    return idx[keep], Coded(inv[keep], u_names), uniq


def graph_device_copies(P, ev, idx: np.ndarray, codes: np.ndarray,
                        names: np.ndarray) -> np.ndarray:
    """Per copy-like kernel `idx` (named `names[codes]`): is it a device-to-device copy of a
    CUDA graph?

    XLA:GPU's command buffers (its default; `--xla_gpu_enable_command_buffer=`) run a program's
    copies as memcpy nodes of a CUDA graph. CUPTI records a graph's host<->device memcpy node as
    a `MemcpyD2H`/`MemcpyH2D` activity carrying `cuda_graph_id`, like any copy-engine copy;
    a node copying device memory to device memory the driver may run as one of its own kernels,
    `memcpy128`, `memcpy32_post`, ..., recorded as a kernel of the graph. Evidence (the H100
    corpus, shared/captures/SOURCES.md): the same program with command buffers off has 760 + 170
    `MemcpyD2D` copies, with them on 760 `memcpy128` + 170 `memcpy32_post` kernels and no
    `MemcpyD2D`, while its 120 + 120 host copies stay `MemcpyD2H`/`MemcpyH2D` records with
    `cuda_graph_id`. So a kernel with exactly such a name *and* a `cuda_graph_id` stat is a
    device copy: not a transfer, not "cannot tell". It stays device work (compute) as any
    kernel on the SMs does. A copy-like kernel outside a graph, or named otherwise, is still one
    whose direction the capture cannot tell."""
    # once per distinct name, not per launch
    shaped = np.array([bool(_CUDA_GRAPH_COPY_RE.match(str(n))) for n in names.tolist()],
                      bool)[codes]
    if not shaped.any():
        return shaped
    graph_id = stat_column(P, ev, idx[shaped], "cuda_graph_id")
    shaped[np.flatnonzero(shaped)] = ~missing_mask(graph_id)
    return shaped


def note_other_events(P, ev, idx: np.ndarray, device, line_name, side: GpuSide | None,
                      lines_of: tuple[RowNames, np.ndarray, LineBlock, np.ndarray] | None = None,
                      line_at: tuple[LineBlock, int] | None = None) -> None:
    """Events of one line that are neither kernels nor CUPTI memcpys, on stream lines only
    (derived lines such as `TensorFlow Ops` or `Steps` hold no device work of their own).
    `lines_of`: (line names, per event its line's index among them, their block, per line
    its row there), given where `line_name` is per event (a merged segment); `line_at`: the
    block and row of a line read alone. Where the block's names are coded (`codes_of`), a
    line's test is its name's mark and the events keep their lines' codes (`lcode`): no
    Python string is hashed or tested per line (a million one-event lines)."""
    if side is None or not idx.size:
        return
    lcode: Any = None
    coded = None
    if lines_of is not None:
        # once per line, by its index (a merged segment holds many events of few lines): no
        # hashing of the events' names (a segment of 64k one-event lines: a factorize of 64k
        # distinct strings)
        names, of, block, brows = lines_of
        # (the segment's line indices: a small range, numbered by a table, not sorted and
        # searched: ~10 ms of binary searches a million one-event lines)
        rows, pos = unique_inverse(of[idx])
        coded = side.codes_of(block)
        if coded is not None:
            lc = coded.codes[brows[rows]]
            ok = (coded.marks[lc] & STREAM).astype(bool)
        else:
            ok = _stream_lines([names[r] for r in rows.tolist()])
        keep = ok[pos]
        idx = idx[keep]
        if not idx.size:
            return
        if coded is not None:
            lcode = lc[pos[keep]]
    elif not _is_stream_line(line_name):
        return
    elif line_at is not None and (coded := side.codes_of(line_at[0])) is not None:
        # (int32, as a segment's; one value for the line's events: a view, no row each)
        lcode = repeated(len(idx), coded.codes[line_at[1]], np.int32)
    side.add_other(len(idx), coded, lcode,
                   None if lcode is not None else at_rows(now(line_name), idx),
                   device=at_rows(device, idx),
                   name=per_mid(ev.mids, P.name, P.names if isinstance(P, PlaneGroup)
                                or getattr(P.plane, "meta_stripped", False) else None, at=idx,
                                coded=True))


def _is_stream_line(name: Any) -> bool:
    return isinstance(name, str) and name.startswith(STREAM_LINE_PREFIXES)


def _stream_lines(names: list) -> np.ndarray:
    """`_is_stream_line` of each name, in C (`map`) where all are `str` (a line's name is:
    ~0.3 us a line one by one, a million one-event lines)."""
    try:
        return np.fromiter(map(str.startswith, names, repeat(STREAM_LINE_PREFIXES)), bool,
                           len(names))
    except TypeError:  # (a name that is no str)
        return np.fromiter(map(_is_stream_line, names), bool, len(names))


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


def hip_api_mids(names: dict[int, str]) -> dict[int, str]:
    """Of a host plane's metadata names (id -> name), the HIP copy/memset calls' (empty off
    ROCm). (A HIP call's name starts "hip": the test spares a call per name on CUDA/TPU
    hosts.)"""
    return {k: n for k, n in names.items() if n.startswith("hip") and hip_api_kind(n) is not None}


def collect_hip_calls(P, ev, mids: dict[int, str], calls: Cols) -> None:
    """The HIP copy/memset calls among one host line's events `ev`."""
    idx = np.flatnonzero(np.isin(ev.mids, list(mids)))
    if not idx.size:
        return
    calls.add(len(idx), api=per_mid(ev.mids, mids.get, at=idx), **correlation_ids(P, ev, idx),
              size=hip_sizes(P, ev, idx),
              hlo_op=stat_column(P, ev, idx, "hlo_op"),
              hlo_module=stat_column(P, ev, idx, "hlo_module"),
              program_id=map_stat(P, ev, idx, "program_id", as_id))


def correlation_ids(P, ev, idx: np.ndarray) -> dict[str, np.ndarray]:
    """The `correlation_id` of each event `idx` (its own, else its metadata's, as
    `stat_codes` reads it) as the columns `correlation_id` (uint64: `as_id` of the value, 0
    where that is None) and `has_correlation_id` (whether it is not None), for `Cols.add`.
    Why typed: a ROCm capture's copy kernels and HIP calls each carry their own id, only
    ever matched to each other (`rocm_transfers`); 200k Python ints and their object
    columns were ~10 MiB held until the join."""
    codes, vals = stat_codes(P, ev, idx, "correlation_id")
    ids = ids_of(vals) if len(codes) else np.zeros(0, object)
    ok = ~np.equal(ids, None)  # type: ignore[call-overload]
    out = np.zeros(len(ids), np.uint64)
    if ok.any():
        out[ok] = ids[ok].astype(np.uint64)  # (in [0, 2**64): `as_id`'s)
    return {"correlation_id": out[codes] if len(codes) else out,
            "has_correlation_id": ok[codes] if len(codes) else ok}


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


def _details_sizes(values: np.ndarray) -> np.ndarray:
    """`_details_size` of each value of an object column, as int64 (0 where it is None): by
    the scanner (`memcpy_details` with the first `size` token's, as `_details_size` reads
    it) where it answers (plain ASCII text, a size of plain digits), else by
    `_details_size`. Why: ROCm's copies each carry their own details (a byte count each),
    and 100k of them were 100k calls of `_details_size` (~0.25 s of a 0.55 s report)."""
    vals = values.tolist()
    fast = getattr(wire.SCANNER, "memcpy_details", None)
    if fast is None or len(vals) < 64:
        return _sizes_of(vals)
    got = fast(vals, True, True)
    out, odd = _answered_sizes(got[0], got[5])
    if odd.size:
        out[odd] = _sizes_of([vals[j] for j in odd.tolist()])
    return out


def _sizes_of(values: list) -> np.ndarray:
    """`_details_size` of each value, as int64 (0: None; a size is never 0)."""
    return np.fromiter((_details_size(v) or 0 for v in values), np.int64, len(values))


def _answered_sizes(size: np.ndarray, ok: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(The scanner's sizes (`memcpy_details(..., first_size=True)` or `_at`'s) where it
    answered (`ok`), 0 where the size it read is not above 0 (`_details_size`'s None) or
    where it did not answer; the values it did not answer, for the caller's
    `_details_size`)."""
    return (np.where((ok != 0) & (size > 0), size, 0).astype(np.int64),
            np.flatnonzero(ok == 0))


def hip_sizes(P, ev, idx: np.ndarray) -> np.ndarray:
    """`_details_size` of each HIP call `idx`'s `memcpy_details` (its own, else its
    metadata's, as `stat_codes` reads it), as int64 (0: unknown). Where the scanner interned
    the line's details (`host`: a `listed` set), each distinct value is read where its
    bytes lie (`_scan.memcpy_details_at`: text in the file, refs in their undecoded stat
    names), as CUPTI's copies' details are (`gpu._details_facts`); only a value it does not
    answer becomes an object. Why: a ROCm capture writes each call's details as its own ref
    (a byte count each), and 100k calls decoded 100k names to `str` to read a number from
    each: ~9 MiB on the read's peak."""
    sids = P.stat_ids.get("memcpy_details")
    got = ev.interned(sids) if sids else None
    fast = getattr(wire.SCANNER, "memcpy_details_at", None)
    if got is None or fast is None or not len(idx):
        codes, vals = stat_codes(P, ev, idx, "memcpy_details")
        return _details_sizes(vals)[codes] if len(codes) else np.zeros(0, np.int64)
    spans = getattr(P.stat_names, "spans", None)  # (refs' names undecoded)
    named = spans() if spans is not None else None
    c, t = got[0][idx], got[1]
    names, pos, ns, ne = named if named is not None else (None, None, None, None)
    res = fast(ev.buf, t["kind"], t["ival"], t["vpos"], _K_STR, _K_REF, names, pos, ns, ne,
               True)
    sizes, odd = _answered_sizes(res[0], res[5])
    del res
    if odd.size:  # (values the bytes do not answer: as objects, as before)
        sizes[odd] = _sizes_of(_stat_objects(
            ev.buf, {k: t[k][odd] for k in ("kind", "ival", "vpos")}, P.stat_names).tolist())
    del got, t
    ev.forget(sids)  # (read here only)
    missing = np.flatnonzero(c < 0)
    if missing.size:  # (the metadata's details, once per metadata id: `stat_codes`)
        inv, mv = meta_values(P, ev.mids[idx[missing]], "memcpy_details")
        c = c.astype(np.int64)
        c[missing] = len(sizes) + inv
        sizes = np.concatenate([sizes, _details_sizes(mv)])
    return sizes[c]


def _cols_rows(c: Cols, names: tuple[str, ...], more: dict[str, str] | None = None
               ) -> dict[str, np.ndarray]:
    """Object columns `names` of `c`'s chunks (None where a chunk left one out), and the
    columns `more` (name -> dtype) as `Cols.rows` gives them."""
    more = more or {}
    rows = c.rows({k: "object" for k in names} | more)
    n = max((len(rows[k]) for k in names), default=0)
    return {k: rows[k] if len(rows[k]) else np.zeros(0, more[k]) if k in more
            else filled(n, None) for k in [*names, *more]}


def _groups(*keys: np.ndarray) -> list[tuple[tuple, np.ndarray]]:
    """`DataFrame.groupby(keys, sort=True)` of object columns, without pandas: (key values,
    the group's rows in order) per group, by ascending key; rows with a missing key are in
    no group."""
    if not len(keys[0]):
        return []
    codes, uniqs = zip(*(factorize(k) for k in keys))
    return _code_groups(codes, uniqs)


def _code_groups(codes, uniqs) -> list[tuple[tuple, np.ndarray]]:
    """`_groups` of columns given as codes (-1: missing) into their distinct values: (the
    values, the group's rows in order) per group, by ascending values."""
    vals, rows, starts, ends, order = _code_runs(codes, uniqs)
    s, e = starts.tolist(), ends.tolist()
    return [(vals[i], rows[s[i]:e[i]]) for i in order]


def _code_runs(codes, uniqs) -> tuple[list[tuple], np.ndarray, np.ndarray, np.ndarray,
                                      list[int]]:
    """`_code_groups` as runs: (per group its values, every grouped row with each group's
    rows together and in order, per group its [start, end) among them, the groups in
    ascending order of their values). The values are read a column at a time, not a group
    at a time (a capture of 100k small planes: a group per device)."""
    n = len(codes[0])
    if n > 1 and all(is_repeated(c) for c in codes):
        # one value per column (a line of a million unread events read a piece at a time):
        # one combination, every row in one group or none; no key or mask per row
        vals, rows, starts, ends, order = _code_runs([c[:1] for c in codes], uniqs)
        if len(rows):
            rows, ends = positions(n), np.array([n], ends.dtype)
        return vals, rows, starts, ends, order
    ok = np.logical_and.reduce([c >= 0 for c in codes])
    span = 1
    for u in uniqs:
        span *= len(u) + 1
    # (the narrowest key that holds every combination: int16's stable sort is a radix sort)
    key: np.ndarray = np.zeros(n, np.int16 if span < 1 << 15 else np.int32 if span < 1 << 31
                               else np.int64)
    for c, u in zip(codes, uniqs):
        key = key * (len(u) + 1) + c  # a few hundred distinct names at most: no overflow
    # Every row grouped (a million unread events of one name): no index of the rows and no
    # gather of their keys before the sort, and no sort where the keys are in order already
    # (one group: the rows as they are); 16-24 MB less at this step's peak.
    if not ok.all():
        rows = np.flatnonzero(ok)
        rows = rows[np.argsort(key[rows], kind="stable")]
        ks = key[rows]
    elif n < 2 or bool((key[1:] >= key[:-1]).all()):
        rows, ks = positions(n), key
    else:
        rows = np.argsort(key, kind="stable")
        ks = key[rows]
    starts = np.flatnonzero(np.r_[True, ks[1:] != ks[:-1]]) if len(rows) else rows
    ends = np.append(starts[1:], len(rows))
    heads = rows[starts]
    # (`list` of each column: its elements as indexing gives them, objects or numpy scalars)
    vals = list(zip(*[list(u[c[heads]]) for c, u in zip(codes, uniqs)]))
    return vals, rows, starts, ends, sorted(range(len(vals)), key=vals.__getitem__)


def _among(values: np.ndarray, options: tuple[str, ...]) -> np.ndarray:
    """Per element of an object array: equal to one of `options` (`Series.isin`)."""
    out = np.zeros(len(values), bool)
    for o in options:
        out |= np.equal(values, o)
    return out


def _fill_missing(values: np.ndarray, other: np.ndarray) -> np.ndarray:
    """`values` where not missing, else `other` (`Series.where(notna, other)`)."""
    miss = missing_mask(values)
    if not miss.any():
        return values
    out = values.copy()
    out[miss] = other[miss]
    return out


_BLIT_COLS = ("device", "name", "kind", "stream", "line", "hlo_op", "hlo_module", "program_id")
_IDS = {"correlation_id": "uint64", "has_correlation_id": "bool"}  # (`correlation_ids`)
_BLIT_TYPED = {"start_ps": "int64", "end_ps": "int64", **_IDS}  # (times: ints as made)
_CALL_COLS = ("api", "hlo_op", "hlo_module", "program_id")
_CALL_TYPED = {"size": "int64", **_IDS}  # (`hip_sizes`: 0 unknown)


def rocm_transfers(side: GpuSide, calls: Cols, host: str, tr: Cols) -> list[dict[str, Any]]:
    """Transfers from ROCm copy kernels and their correlated HIP calls (added to `tr`); returns
    the "cannot tell" entries for copies whose direction or device span the capture lacks.

    A copy kernel's call is the first HIP call of its `correlation_id` (a left join on it);
    columns of whole arrays, ids matched by one sort of both sides' (`_id_codes`)."""
    unknown: list[dict[str, Any]] = []
    if not side.blits.chunks and not calls.chunks:
        return unknown
    blits = _cols_rows(side.blits, _BLIT_COLS, _BLIT_TYPED)
    api = _cols_rows(calls, _CALL_COLS, _CALL_TYPED)
    na = len(api["api"])
    kinds = map_unique(api["api"], lambda a: hip_api_kind(str(a)) or ("other", None))
    # one more entry, None: what index -1 (no call) reads
    call = object_array([k[0] for k in kinds.tolist()] + [None])
    direction = object_array([k[1] for k in kinds.tolist()] + [None])
    # Per distinct correlation id, the first call that carries it (the calls kept).
    copy = np.flatnonzero(np.equal(blits["kind"], "copy"))
    ids, n_ids = _id_codes(*(np.concatenate([api[k], blits[k]]) for k in _IDS))
    a_ids, b_ids = ids[:na], ids[na:]
    first = np.full(n_ids + 1, -1, np.intp)  # by id; the last entry (id -1) stays -1
    has = np.flatnonzero(a_ids >= 0)
    u, at = np.unique(a_ids[has], return_index=True)
    first[u] = has[at]
    kept = np.sort(first[first >= 0])
    match = first[b_ids[copy]]  # per copy kernel: its call, or -1
    matched = match >= 0
    m_dir = direction[match]
    to_host = _among(m_dir, HOST_DIRECTIONS)
    if to_host.any():
        b, a = copy[to_host], match[to_host]
        size = api["size"][a]
        known = size > 0  # (`_details_size`'s None is 0: a size is never 0)
        d = m_dir[to_host]
        hlo = _fill_missing(blits["hlo_op"][b], api["hlo_op"][a])
        tr.add(len(b), host=host, device=blits["device"][b], direction=d,
               start_ps=blits["start_ps"][b], end_ps=blits["end_ps"][b],
               bytes=size, bytes_known=known,
               src_kind=MEMORY_KINDS[np.equal(d, "H2D").view(np.int8)],
               dst_kind=MEMORY_KINDS[np.equal(d, "D2H").view(np.int8)],
               **{"async": True}, stream=blits["stream"][b].astype(np.int64),
               line=blits["line"][b], hlo_op=map_unique(hlo, _last_hlo_op),
               hlo_module=_fill_missing(blits["hlo_module"][b], api["hlo_module"][a]),
               program_id=_fill_missing(blits["program_id"][b], api["program_id"][a]))
    # Copy kernels whose direction the capture does not say.
    no_dir = matched & np.equal(m_dir, None)  # type: ignore[call-overload]
    for mask, why in ((~matched, "with no correlated hipMemcpy* call"),
                      (no_dir, "from calls that do not name a direction")):
        sub, sub_call = copy[mask], match[mask]
        for (dev, name), rows in _groups(blits["device"][sub], blits["name"][sub]):
            names = api["api"][sub_call[rows][sub_call[rows] >= 0]]
            apis = sorted({str(x) for x in names[~missing_mask(names)].tolist()})
            unknown.append({"device": dev, "events": len(rows), "reason": (
                f"{len(rows)} {name} copy kernel(s) {why}"
                + (f" ({', '.join(apis)})" if apis else "")
                + ": direction unknown")})
    # Host copy calls with no device copy: no span to measure.
    seen = np.zeros(len(first), bool)
    seen[b_ids[b_ids >= 0]] = True
    lost = kept[_among(call[kept], ("copy",)) & _among(direction[kept], HOST_DIRECTIONS)
                & ~seen[a_ids[kept]]]
    for (name,), rows in _groups(api["api"][lost]):
        unknown.append({"device": None, "events": len(rows), "reason": (
            f"{len(rows)} {name!s} call(s) with no device copy event correlated: "
            "no device span to measure")})
    return unknown


def _id_codes(ids: np.ndarray, ok: np.ndarray) -> tuple[np.ndarray, int]:
    """(per id (uint64, `correlation_ids`'), a code: equal ids one code, -1 where it has none
    (`ok` False); how many codes), by a sort of the ids: the join only matches codes."""
    u, inv = np.unique(np.where(ok, ids, np.uint64(0)), return_inverse=True)
    codes = inv.reshape(-1).astype(np.int64)
    codes[~ok] = -1
    return codes, len(u)


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


def _stream_why(line: Any) -> str | None:
    """Why a stream line's unread events are "cannot tell" by its kinds alone (`Stream
    #N(kinds)` with a kind outside the tracers' lists), else None."""
    m = _STREAM_RE.match(str(line))
    kinds = [k.strip() for k in (m["kinds"] or "").split(",") if k.strip()] if m else []
    odd = [k for k in kinds if k not in KNOWN_STREAM_KINDS]
    return f"stream kind(s) {', '.join(odd)} that overlap does not read" if odd else None


_UNREAD = "neither a kernel nor a copy overlap reads"


def _other_event_unknowns(other: dict[str, np.ndarray], coded: NameCodes | None = None,
                          host: str | None = None) -> list[dict[str, Any]]:
    """One entry per (device, event name, reason) of the stream events no rule read, with how
    many lines hold them (the first named). Not one per line: a capture of a million one-event
    lines made a million entries (0.9 KiB a line, fuzz round 3), the reason is the same.
    A line's reason is read once per distinct kinds list, not per line.

    On integer codes (device, name, line, reason) rather than object columns: the groups and
    their order are `_groups`' of the device, name and reason columns, but no object column
    per event is made, filtered or factorized again (a million one-event lines: +183 MiB at
    this step, its read's peak). `coded`: the line names whose codes `other["lcode"]` holds
    (`GpuSide.coded`): the lines' codes and kinds keys are read from them, not from the
    line names (a million one-event lines: ~0.2 s of hashing and testing strings).

    Equal reasons are one text (100k one-line planes wrote the same reason 100k times,
    12 MiB on the report's peak); `host`: each entry starts with it (see `_Entries`)."""
    if coded is not None:
        lcode = other["lcode"]
        n_codes, kinds, texts = _coded_kinds_keys(lcode, coded)
    else:
        lcode, lines = _line_codes(other["line"])
        kinds, first = _kinds_keys(lines)
        n_codes, texts = len(lines), [None if i is None else lines[i] for i in first]
    reasons: dict[str, int] = {_UNREAD: 0}  # reason -> code
    why = []  # per kinds key, its reason's code (-1: none, a plain stream)
    for text in texts:
        w = None if text is None else _stream_why(text)
        why.append(-1 if w is None else reasons.setdefault(w, len(reasons)))
    # per event (lcode -1, no line, reads the trailing -1: no reason, plain); the per-line
    # arrays dropped at once (a million lines: 8 MB each, at this step's peak)
    # (codes as narrow as their values allow: three int64 codes a row were 24 MB of a million
    # unread events' 55 MB here, and the grouping key one more)
    table = np.append(narrow_codes(np.array(why, np.int64), len(reasons))[kinds], -1)
    del kinds
    ncode, names = _narrow_factorize(other["name"])
    dcode, devices = _narrow_factorize(other["device"])
    # no odd kind: a device copy or memset by name is neither transfer nor compute
    skip = np.array([bool(_NOT_HOST_COPY_RE.match(str(n))) for n in names.tolist()]
                    + [False], bool)
    wcode = _reason_codes(table, lcode, ncode, skip)
    vals, rows, starts, ends, order = _code_runs(
        (dcode, ncode, wcode), (devices, names, object_array(list(reasons))))
    # per group, its events and distinct lines (no line, -1, one of them), for all at once
    sizes = ends - starts
    n_lines = _lines_per_group(lcode, rows, starts, ends, n_codes + 1)
    heads = rows[starts]
    firsts = coded.texts(lcode[heads]) if coded is not None else other["line"][heads]
    sizes = sizes.tolist()
    entries: list[dict[str, Any]] = []
    made: dict[tuple, str] = {}  # (what a reason's text is made of) -> the text
    for i in order:
        dev, name, reason = vals[i]
        line, k, n = firsts[i], n_lines[i], sizes[i]
        # (the types too: an np.str_ equals its str, but its repr differs)
        key = (n, type(name), name, k, type(line), line, reason)
        text = made.get(key)
        if text is None:
            where = f"on {line}" if k == 1 else f"on {k} lines ({line}, ...)"
            text = made[key] = f"{n} {name!r} event(s) {where}: {reason}"
        # (`_Entries.add`'s two shapes, written here: a call per entry was ~30 ms of 100k)
        entries.append({"device": dev, "events": n, "reason": text} if host is None else
                       {"host": host, "device": dev, "events": n, "reason": text})
    return entries


class _Entries:
    """"Cannot tell" entries ({device, events, reason}) as they are made; with `host` (not
    None) each starts with {"host": host}, the shape the analysis' result gives them
    (`analysis.overlap._vendor_facts` then keeps these dicts, not a copy of each beside
    them: 100k entries were 17.5 MiB twice on the report's peak)."""

    __slots__ = ("host", "entries")

    def __init__(self, host: str | None) -> None:
        self.host = host
        self.entries: list[dict[str, Any]] = []

    def add(self, device: Any, events: int, reason: str) -> None:
        self.entries.append({"device": device, "events": events, "reason": reason}
                            if self.host is None else
                            {"host": self.host, "device": device, "events": events,
                             "reason": reason})


def _reason_codes(table: np.ndarray, lcode: np.ndarray, ncode: np.ndarray,
                  skip: np.ndarray) -> np.ndarray:
    """Per event, its reason's code: its line's (`table[lcode]`: -1 for a plain stream, and
    for lcode -1, no line), a plain stream's `_UNREAD` (0), and -1 (in no group) where it is
    plain and its name is one to skip (`skip[ncode]`). One value repeated where the line and
    the name are (a line of a million unread events read a piece at a time: no row each)."""
    if is_repeated(lcode) and is_repeated(ncode):
        w = int(table[lcode[0]])
        if w < 0:
            w = -1 if skip[ncode[0]] else 0
        return repeated(len(lcode), w, table.dtype)
    wcode = table[lcode]
    plain = wcode < 0
    wcode[plain] = 0  # (`_UNREAD`)
    wcode[plain & skip[ncode]] = -1  # (in no group)
    return wcode


def _narrow_factorize(column: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`factorize` of an object column, its codes as narrow as they go (`narrow_codes`); a
    `repeated` column's (one device, one event name: a million unread events) one code
    repeated, with no int64 code per row made first (8 MB each at this step's peak)."""
    if is_repeated(column):
        code, uniq = factorize(column[:1])
        return repeated(len(column), code[0], np.int8), uniq
    codes, uniq = factorize(column)
    return narrow_codes(codes, len(uniq)), uniq


def _lines_per_group(lcode: np.ndarray, rows: np.ndarray, starts: np.ndarray,
                     ends: np.ndarray, span: int) -> list[int]:
    """Per group (the rows `rows[starts[i]:ends[i]]`, each row's line code `lcode[row] + 1`
    in [0, span)), how many distinct lines it holds. A table of (group, line) pairs marked a
    block of rows at a time, where it is not larger than the rows; else the pairs sorted (a
    million rows of one group: 30 MB of int64 pairs and their sort, where the table is
    1 MB). The rows' codes are gathered a block at a time in the first way (a million rows:
    their codes and an index's platform ints, 16 MB on this step's peak)."""
    ng = len(starts)
    if is_repeated(lcode):  # (one line for every row: a line of unread events read alone)
        return [1] * ng
    if ng * span > 8 * len(rows) + (1 << 20):
        pairs = sorted_unique(np.repeat(np.arange(ng), ends - starts) * span + lcode[rows] + 1)
        return np.bincount(pairs // span, minlength=ng).tolist()
    seen = np.zeros(ng * span, bool)
    for b in range(0, len(rows), _BLOCK):
        at = rows[b:b + _BLOCK]
        g = np.searchsorted(ends, np.arange(b, b + len(at)), side="right")
        seen[g * span + lcode[at] + 1] = True
    return seen.reshape(ng, span).sum(axis=1).tolist()


_BLOCK = 1 << 16  # rows at a time (`_lines_per_group`)


def _kinds_keys(lines: np.ndarray) -> tuple[np.ndarray, list[int | None]]:
    """A line's reason (`_stream_why`) reads its kinds list alone: `Stream #7(Compute,Memset)`
    and `Stream #9(Compute,Memset)` share one (a million lines, a handful of kinds lists).
    Per line (`str` of each) the code of its key, and per key the first line that has it,
    whose reason is the key's (None: a key no line has). The key: 0 for a line without `(`
    (no kinds list: no reason), else whether the text before the first `(` is a stream's
    (`Stream #<n>`) and the text from it on: all `_STREAM_RE` reads. Lines without a `(` are
    keyed without a Python step each (one scan of the texts in C, `map`): a million one-event
    lines cost ~0.3 s one by one."""
    texts = lines.tolist()
    try:
        paren = np.fromiter(map(str.find, texts, repeat("(")), np.int64, len(texts))
    except TypeError:  # (a line name that is no str: read as its str, as `_stream_why` does)
        texts = list(map(str, texts))
        paren = np.fromiter(map(str.find, texts, repeat("(")), np.int64, len(texts))
    code = np.zeros(len(texts), np.int64)
    firsts: dict[int, int] = {}
    if (plain := np.flatnonzero(paren < 0)).size:
        firsts[0] = int(plain[0])
    with_kinds = np.flatnonzero(paren >= 0).tolist()
    if with_kinds:
        keys: dict[tuple[bool, str], int] = {}
        got = []
        for i, p in zip(with_kinds, paren[with_kinds].tolist()):
            text = texts[i]
            k = keys.setdefault((_STREAM_HEAD.fullmatch(text[:p]) is not None, text[p:]),
                                len(keys) + 1)
            got.append(k)
            firsts.setdefault(k, i)
        code[with_kinds] = got
    return code, [firsts.get(k) for k in range(max(firsts, default=-1) + 1)]


def _coded_kinds_keys(lcode: np.ndarray, coded: NameCodes
                      ) -> tuple[int, np.ndarray, list[str | None]]:
    """`_kinds_keys` of the lines a column of line codes (`lcode`, into `coded`) holds: (how
    many codes, per code its key, per key the text of a line that has it (None: none, or key
    0: no kinds list)). A line whose name's mark says it holds no `(` is key 0
    without a look at its text; the others (a handful of kinds lists) are read as
    `_kinds_keys` reads them."""
    n = len(coded)
    present = np.zeros(n, bool)
    present[lcode] = True
    kinds = np.zeros(n, np.int32)  # (a handful of keys: int32, half a million lines' bytes)
    texts: list[str | None] = [None]
    with_kinds = np.flatnonzero(present & (coded.marks & PAREN).astype(bool))
    if with_kinds.size:
        got = coded.texts(with_kinds)
        keys, first = _kinds_keys(object_array(got))
        kinds[with_kinds] = keys
        texts += [None if i is None else got[i] for i in first[1:]]  # (all hold a `(`)
    return n, kinds, texts


def _line_codes(line: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`factorize` of the events' line names, by the scanner's table where every one is a
    `str` (no dict entry and Python int per distinct line: a million one-event lines); not
    kept for a later coding (`str_codes(keep=False)`: a column coded once)."""
    got = str_codes(line, False, copy=False, keep=False)
    return got if got is not None else factorize(line)


def shape_unknowns(side: GpuSide, plane_vendors: dict[str, tuple[str, int]],
                   other_planes: list[tuple[str, int]],
                   host: str | None = None) -> list[dict[str, Any]]:
    """"Cannot tell" entries for device shapes outside the rules: unknown vendors (of planes
    with events), stream events that are neither kernels nor known copies, unknown stream
    kinds, kernels named like copies, other `/device:` planes with events; each starting
    with `host` where it is given (`_Entries`)."""
    out = _Entries(host)
    # (each distinct vendor asked once; the devices walked in order only where one is odd:
    # 100k small planes)
    odd = {v for v in {v for v, n in plane_vendors.values() if n} if not is_known_vendor(v)}
    for pdev, (vendor, n) in sorted(plane_vendors.items()) if odd else ():
        if n and vendor in odd:
            out.add(pdev, n, f"device_vendor {vendor!r}: overlap reads NVIDIA (CUPTI) and "
                    "AMD (ROCm) GPU planes only")
    if side.other.chunks:
        coded = side.coded if isinstance(side.coded, NameCodes) else None
        out.entries += _other_event_unknowns(
            _cols_rows(side.other, ("device", "name"), {"lcode": "int32"}) if coded
            else _cols_rows(side.other, ("device", "line", "name")), coded, out.host)
    if side.copy_like.chunks:
        like = _cols_rows(side.copy_like, ("device", "name"))
        for (dev, name), g in _groups(like["device"], like["name"]):
            out.add(dev, int(len(g)), f"{len(g)} kernel(s) named like a copy "
                    f"({str(name)[:80]}): whether they move host data cannot be told "
                    "(counted as compute)")
    for plane, n in other_planes:
        if n:
            out.add(plane, n, f"device plane {plane!r} with {n} events: not a GPU or TPU "
                    "plane overlap reads")
    return out.entries
