"""The heap simulator's view of a compiled program's memory, and its memory analysis.

Memory timeline (:func:`memory_timeline`)
    The heap-simulator view xprof's memory viewer draws: among the buffer assignment's
    heap-simulator traces pick the one with the most events on buffers of the chosen color
    (0 = device memory, 5 = host), replay its ALLOC / FREE / SHARE_WITH events in program
    order with xprof's reference counting (a SHARE_WITH group's bytes count once, from the first
    ALLOC until its last member is freed), and report live bytes after each event, the peak and
    the buffers live at the peak. Sizes are logical-buffer sizes (no padding, no fragmentation),
    so the peak is at most the temp allocation's size: ``memory_analysis().temp_size_in_bytes``
    is the heap *after* placement, including fragmentation and alignment. Parameters and outputs
    live in their own allocations and appear only if the chosen trace covers them.

Memory analysis (:func:`memory_analysis_dict`, :func:`buffer_assignment_sizes`)
    ``compiled.memory_analysis()`` as plain ints, and the same sizes from an HloProto's buffer
    assignment (arguments, outputs, aliases, temp), for captures without a compiled object.

Split from `overlap.hlo.program` (issue 32 round 13: the 1000-line limit), which re-exports
every name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from overlap.hlo.records import Record

# (protobuf, `overlap.trace.protos`, is imported only where upb parses a proto the scanner's
# reader does not answer for, `overlap.trace.programs.hlo_message`: ~20 ms of a report)

if TYPE_CHECKING:  # pandas (~0.3 s to import) only where a memory timeline is built
    import pandas as pd


class MemoryTimeline(Record):
    _fields = ("frame", "peak_bytes", "peak_index", "peak_buffers", "trace_index", "color")

    def __init__(self, frame: pd.DataFrame, peak_bytes: int, peak_index: int,
                 peak_buffers: list[tuple[str, int]], trace_index: int, color: int) -> None:
        self.frame = frame  # index = event order; instruction_name, live_bytes
        # peak_index: the event at which live bytes first reach the peak; peak_buffers:
        # (defining instruction[shape index], bytes), largest first
        self.peak_bytes, self.peak_index, self.peak_buffers = peak_bytes, peak_index, peak_buffers
        self.trace_index, self.color = trace_index, color  # the heap-simulator trace replayed

    def to_dict(self, top: int = 10) -> dict:
        return {"peak_bytes": self.peak_bytes, "peak_index": self.peak_index,
                "peak_instruction": (self.frame["instruction_name"].iat[self.peak_index]
                                     if len(self.frame) else None),
                "peak_buffers": [list(b) for b in self.peak_buffers[:top]],
                "trace_index": self.trace_index, "color": self.color, "events": len(self.frame)}


def memory_timeline(hlo_proto: bytes | Any, color: int = 0, top: int = 20) -> MemoryTimeline:
    """Replay the heap-simulator trace of `color` (see the module docstring)."""
    import pandas as pd

    instr, live, peak, peak_index, peak_buffers, best = _replay(hlo_proto, color, top)
    frame = pd.DataFrame({"instruction_name": instr, "live_bytes": live})
    return MemoryTimeline(frame, peak, peak_index, peak_buffers, best, color)


def live_bytes(hlo_proto: bytes | Any, color: int = 0) -> np.ndarray:
    """`memory_timeline`'s live bytes after each event (its frame's `live_bytes`), without the
    frame: no pandas for the HTML page's program-memory curve (issue 32). Same ValueError."""
    return _replay(hlo_proto, color, 0)[1]


def memory_peak(hlo_proto: bytes | Any, color: int = 0, top: int = 20
                ) -> tuple[int, list[tuple[str, int]]]:
    """`memory_timeline`'s (peak_bytes, peak_buffers) without its frame: no pandas (~0.3 s
    and ~15 MiB of a report that reads only the peak, issue 32). Same ValueError."""
    _, _, peak, _, peak_buffers, _ = _replay(hlo_proto, color, top)
    return peak, peak_buffers


def _replay(hlo_proto: bytes | Any, color: int, top: int
            ) -> tuple[list[str], np.ndarray, int, int, list[tuple[str, int]], int]:
    """(instruction per event, live bytes per event, peak, peak index, peak buffers, trace
    replayed) of `memory_timeline`."""
    from overlap.trace.programs import hlo_message

    # (bytes read by the scanner where it answers, as upb reads them: `hlo_message`)
    proto = (hlo_message(bytes(hlo_proto), buffers=True)
             if isinstance(hlo_proto, (bytes, bytearray)) else hlo_proto)
    ba = proto.buffer_assignment
    lb = ba.logical_buffers
    ids = np.fromiter((b.id for b in lb), np.int64, len(lb))
    if len(ids) == 0 or not ba.heap_simulator_traces:
        raise ValueError("HloProto has no buffer assignment / heap-simulator traces "
                         "(memory_analysis().serialized_buffer_assignment_proto lacks them; "
                         "use a profile's Hlo Proto or hlo_proto_from_jitted)")
    # Dense lookup tables indexed by buffer id: ids are small non-negative ints.
    n = int(ids.max()) + 1
    size = np.zeros(n, np.int64)
    size[ids] = np.fromiter((b.size for b in lb), np.int64, len(lb))
    col = np.full(n, -1, np.int64)
    col[ids] = np.fromiter((b.color for b in lb), np.int64, len(lb))
    # Newer XLA fills only defined_at.instruction_id; resolve names through the module.
    id_to_name = {i.id: i.name for c in proto.hlo_module.computations for i in c.instructions}
    names = {b.id: (b.defined_at.instruction_name
                    or id_to_name.get(b.defined_at.instruction_id, "?"))
             + ("{" + ",".join(map(str, b.defined_at.shape_index)) + "}"
                if b.defined_at.shape_index else "")
             for b in lb}

    best, best_n = -1, -1
    for t, tr in enumerate(ba.heap_simulator_traces):
        buf = np.fromiter((e.buffer_id for e in tr.events), np.int64, len(tr.events))
        cnt = int(np.count_nonzero(col[buf[(buf >= 0) & (buf < n)]] == color)) if len(buf) else 0
        if cnt > best_n:
            best, best_n = t, cnt
    if best_n <= 0:
        raise ValueError(f"no heap-simulator trace has buffers of color {color}")
    tr = ba.heap_simulator_traces[best]
    m = len(tr.events)
    kind = np.fromiter((e.kind for e in tr.events), np.int64, m)
    buf = np.fromiter((e.buffer_id for e in tr.events), np.int64, m)
    canon_of = np.fromiter((e.share_with_canonical_id for e in tr.events), np.int64, m)
    instr = [e.instruction_name for e in tr.events]

    # xprof's reference counting (hlo_proto_to_memory_visualization_utils.cc): the loop is
    # inherently sequential (each delta depends on the group's refcount); it only emits integer
    # deltas, everything after is numpy.
    delta = np.zeros(m, np.int64)
    group_of_event = np.full(m, -1, np.int64)
    canonical: dict[int, int] = {}
    refs: dict[int, int] = {}
    for i in range(m):
        b = int(buf[i])
        k = kind[i]
        if k == 0:  # ALLOC
            canonical[b] = b
            refs[b] = 1
            delta[i] = size[b]
            group_of_event[i] = b
        elif k == 2:  # SHARE_WITH
            c = canonical.get(int(canon_of[i]), int(canon_of[i]))
            canonical[b] = c
            refs[c] = refs.get(c, 0) + 1
            if refs[c] == 1:  # the canonical buffer was already freed: bytes come back
                delta[i] = size[c]
                group_of_event[i] = c
        else:  # FREE
            c = canonical.get(b, b)
            refs[c] = refs.get(c, 1) - 1
            if refs[c] == 0:
                delta[i] = -size[c]
                group_of_event[i] = c
    live = np.cumsum(delta)
    peak_index = int(np.argmax(live)) if m else 0
    peak = int(live[peak_index]) if m else 0
    # Buffers live at the peak: groups whose deltas up to the peak sum to a positive size.
    upto = group_of_event[:peak_index + 1]
    mask = upto >= 0
    net = np.zeros(n, np.int64)
    np.add.at(net, upto[mask], delta[:peak_index + 1][mask])
    live_ids = np.nonzero(net > 0)[0]
    order = live_ids[np.argsort(-net[live_ids], kind="stable")][:top]
    peak_buffers = [(names.get(int(b), str(b)), int(net[b])) for b in order]
    return instr, live, peak, peak_index, peak_buffers, best


def memory_analysis_dict(compiled) -> dict[str, int] | None:
    """``compiled.memory_analysis()`` as plain ints (None when the backend gives none)."""
    try:
        ma = compiled.memory_analysis()
    except Exception:
        return None
    if ma is None:
        return None
    fields = ("generated_code_size_in_bytes", "argument_size_in_bytes", "output_size_in_bytes",
              "alias_size_in_bytes", "temp_size_in_bytes", "peak_memory_in_bytes",
              "host_generated_code_size_in_bytes", "host_argument_size_in_bytes",
              "host_output_size_in_bytes", "host_alias_size_in_bytes", "host_temp_size_in_bytes")
    return {f: int(getattr(ma, f)) for f in fields if hasattr(ma, f)}


def buffer_assignment_sizes(hlo_proto: bytes | Any, color: int = 0) -> dict[str, int] | None:
    """`memory_analysis`-style sizes from an HloProto's buffer assignment (device memory,
    `color` 0): arguments (entry parameters), outputs (maybe-live-out), aliases (both: donated
    buffers), temp (every other allocation but constants and thread-local ones). A capture
    carries this proto for every program, so a capture without a manifest still gets the same
    definition of peak memory. None when the proto has no buffer assignment or does not parse."""
    if isinstance(hlo_proto, (bytes, bytearray)):
        from google.protobuf.message import DecodeError

        from overlap.trace.protos import HloProto

        try:
            hlo_proto = HloProto.FromString(bytes(hlo_proto))
        except DecodeError:  # a damaged proto in a capture: no sizes to give, not a crash
            return None
    allocs = list(hlo_proto.buffer_assignment.buffer_allocations)
    if not allocs:
        return None
    arg = out = alias = temp = 0
    for a in allocs:
        if a.color != color or a.is_thread_local or a.is_constant:
            continue
        if a.is_entry_computation_parameter:
            arg += a.size
            if a.maybe_live_out:
                alias += a.size
        elif a.maybe_live_out:
            out += a.size
        else:
            temp += a.size
    # A donated parameter is also an output: count it once, as memory_analysis does.
    return {"argument_size_in_bytes": arg, "output_size_in_bytes": out + alias,
            "alias_size_in_bytes": alias, "temp_size_in_bytes": temp}
