"""Which stream each async op of an XLA:GPU program runs on, and the streams as FIFO queues.

XLA:GPU runs every async op (`async-start` and its sugared forms `fusion-start`, ... and
`copy-start`) on one of a few *execution streams* beside the compute stream, and which one is
decided when the program is compiled (XLA's `ExecutionStreamAssignment`): the call graph is
walked breadth first from the entry computation; in each computation, its async ops in the
order the computation lists its instructions take execution streams 1, 2, ..., N, 1, 2, ...
(one counter for the whole module, N = 4 by default); computations called from non-embedded
sites (`while` body and condition, `call`, `conditional`) are walked after, in the order they
are called. At run time each execution stream is one CUDA stream, borrowed from a pool per
run (which CUDA stream gets which id changes from run to run; which ops share one does not).

Checked on the real H100/H200 corpus (`benchmarks/accuracy.py`, `tests/hlo/test_streams.py`):
on every program with async ops, the ops that shared a CUDA stream in each run are exactly
the ops this rule gives one id, host copies (MemcpyD2H/H2D) and the device-side dynamic-slice
copies (MemcpyD2D) alike, with the instruction order of the capture's HloProto (XLA's own
post order, as serialized). The printed HLO text is in schedule order, which is not that order,
and rebuilding XLA's order from the text (a depth-first post order from the ROOT) gave other
groups on every program of the corpus: without the HloProto the streams are not told, and the
estimate says so (each async op then on a stream of its own, `overlap.hlo.schedule`).

Why it matters: a stream is a FIFO. An op queued on a stream starts only when everything
issued before it on that stream is complete, so a device-side weight slice (a few tens of us)
that shares a stream with a 1.4 ms host copy waits for the copy, and the compute stream waits
at that slice's done (`transformer qkv_proj_offloaded`: 2.4 ms idle per layer). :class:`Streams`
is that queueing, with the host link inside it (`overlap.hlo.schedule` walks it).
"""

from __future__ import annotations

import re
from collections import deque
from typing import Any

PS_PER_S = 10**12

# XLA:GPU's default number of execution streams for async ops
# (ExecutionStreamAssignmentOptions::number_of_execution_streams).
XLA_GPU_EXECUTION_STREAMS = 4

# `*-start` opcodes that are not async-starts (their own collective streams, or no stream).
_NOT_ASYNC = {"all-reduce-start", "all-gather-start", "collective-permute-start",
              "collective-broadcast-start", "send", "recv"}
_CALLEE_RES = (re.compile(r"\bbody=%?([\w.\-]+)"), re.compile(r"\bcondition=%?([\w.\-]+)"))
_TO_APPLY_RE = re.compile(r"\bto_apply=%?([\w.\-]+)")
_BRANCHES_RE = re.compile(r"\bbranch_computations=\{([^}]*)\}")
_TF_RE = re.compile(r"\b(?:true|false)_computation=%?([\w.\-]+)")


def is_async_start(opcode: str) -> bool:
    """Does XLA:GPU give this instruction an execution stream of its own (an async-start in
    any printed form, or a copy-start)?"""
    return opcode == "async-start" or opcode == "copy-start" or (
        opcode.endswith("-start") and opcode not in _NOT_ASYNC)


def _callees(ins: Any) -> list[str]:
    """Computations an instruction calls from a non-embedded site, in XLA's order (a while's
    body before its condition)."""
    op = ins.opcode
    if op == "while":
        return [m.group(1) for r in _CALLEE_RES if (m := r.search(ins.attrs))]
    if op == "call":
        return _TO_APPLY_RE.findall(ins.attrs)
    if op == "conditional":
        m = _BRANCHES_RE.search(ins.attrs)
        if m:
            return [c.strip().lstrip("%") for c in m.group(1).split(",") if c.strip()]
        return _TF_RE.findall(ins.attrs)
    return []


def execution_streams(comps: dict[str, list[Any]], entry: str | None,
                      order: dict[str, list[str]] | None = None,
                      n: int = XLA_GPU_EXECUTION_STREAMS) -> dict[str, int]:
    """Execution stream id (1..n) of every async-start reachable from `entry`, by XLA's rule
    (module docstring). `order`: each computation's instruction names in XLA's list order (the
    HloProto's, :func:`proto_order`); {} when it is not given or does not name every
    instruction of a computation walked (the text's schedule order is not XLA's list order,
    and the ids depend on it)."""
    out: dict[str, int] = {}
    if entry not in comps or n <= 0:
        return out
    nxt = 1
    queue = deque([entry])
    seen = {entry}
    while queue:
        name = queue.popleft()
        instrs = comps.get(name, [])
        by_name = {i.name: i for i in instrs}
        names = [k for k in (order or {}).get(name, []) if k in by_name]
        if len(names) != len(by_name):  # not XLA's order: the streams cannot be told
            return {}
        for k in names:
            ins = by_name[k]
            if is_async_start(ins.opcode):
                out[ins.name] = nxt
                nxt = nxt % n + 1
            for c in _callees(ins):
                if c in comps and c not in seen:
                    seen.add(c)
                    queue.append(c)
    return out


def proto_order(hlo_proto: bytes | Any) -> dict[str, list[str]]:
    """Each computation's instruction names in the order a serialized HloProto (or HloProto /
    HloModuleProto message) lists them: XLA's own order, as `execution_streams` takes it."""
    from overlap.trace.programs import hlo_message

    # (bytes read by the scanner where it answers, as upb reads them: no protobuf import in a
    # `report --predict`, whose printer runs in its own process)
    msg = hlo_message(bytes(hlo_proto)) if isinstance(hlo_proto, (bytes, bytearray)) \
        else hlo_proto
    module = msg.hlo_module if hasattr(msg, "hlo_module") else msg
    return {c.name: [i.name for i in c.instructions] for c in module.computations}


class Streams:
    """The async streams and the host link, advanced in time as the schedule walk reaches ops.

    Every async op sits on one stream (`stream` key; ops without a key each get a stream of their
    own, which is the model without queueing). A stream runs its ops one at a time in issue
    order: an op starts when it is ready (issued, plus setup) and the op before it on its stream
    is complete. A host copy that starts joins its direction's queue on the link (one per
    direction on a duplex link, one for both on a half-duplex one); each queue moves its head
    copy at the direction's rate, or at `share` of it while the other direction also moves. A
    device-side op (a device-to-device slice) takes its own time once started.

    Ready times arrive in non-decreasing order (the walk's clock) and an op's end is asked for
    only at its done, where the compute stream then waits for it; nothing added later starts
    before the time already reached, so advancing the state event by event is exact."""

    def __init__(self, bw: dict[str, float], share: float, duplex: bool):
        self.bw, self.share, self.duplex = bw, share, duplex
        self.now = 0.0
        # link queue -> copies moving or waiting (the head moves)
        self.links: dict[str, list[str]] = {k: [] for k in ("D2H", "H2D", "link")}
        self.left: dict[str, float] = {}           # bytes left of a copy on the link
        self.dirs: dict[str, str] = {}
        self.streams: dict[Any, deque[str]] = {}   # stream -> ops issued, not complete
        self.stream_of: dict[str, Any] = {}
        self.ready: dict[str, float] = {}
        self.dur: dict[str, float] = {}            # device ops: their time once started
        self.started: dict[str, float] = {}
        self.begin: dict[str, float] = {}          # host copies: when they start moving
        self.end: dict[str, float] = {}
        self._own = 0

    # -- the link -------------------------------------------------------------------------
    def _rates(self) -> dict[str, float]:
        """Rate (bytes/ps) of each copy moving now: the head of each link queue."""
        heads = [q[0] for q in self.links.values() if q]
        if not heads:
            return {}
        both = self.duplex and len(heads) > 1  # duplex: one queue per direction
        f = (self.share if both else 1.0) / PS_PER_S
        return {h: self.bw[self.dirs[h]] * f for h in heads}

    def _start(self, name: str) -> None:
        """Op `name` reached the head of its stream and is ready: it starts now."""
        self.started[name] = self.now
        if name in self.dur:
            return
        q = self.links.setdefault(self.dirs[name] if self.duplex else "link", [])
        q.append(name)
        if len(q) == 1:
            self.begin[name] = self.now

    def _complete(self, name: str) -> None:
        self.end[name] = self.now
        q = self.streams[self.stream_of[name]]
        if q and q[0] == name:
            q.popleft()
            if q and self.ready[q[0]] <= self.now:
                self._start(q[0])

    def _next_event(self) -> float | None:
        """Time from now to the next event (a copy or device op completing, or a queued op's
        ready time passing while it heads its idle stream); None when nothing is pending. A
        time from now, not a clock reading: at the bisection's extreme bandwidths a copy moves
        in less than the clock's float resolution, and a duration still sees it."""
        best: float | None = None
        for h, r in self._rates().items():
            dt = self.left[h] / r if r > 0 else float("inf")
            best = dt if best is None else min(best, dt)
        for q in self.streams.values():
            if not q:
                continue
            h = q[0]
            if h in self.started:
                if h in self.dur:
                    dt = max(0.0, self.started[h] + self.dur[h] - self.now)
                    best = dt if best is None else min(best, dt)
            else:
                dt = max(0.0, self.ready[h] - self.now)
                best = dt if best is None else min(best, dt)
        return best

    def _step(self, until: float | None) -> bool:
        """Advance to the next event (or `until`, if sooner); False when nothing is pending."""
        dt = self._next_event()
        if dt is None:
            return False
        if until is not None and self.now + dt > until:
            dt = max(0.0, until - self.now)
        rates = self._rates()
        for h, r in rates.items():
            # the copy that sets dt ends exactly here (no float remainder left to move)
            self.left[h] = 0.0 if r * dt >= self.left[h] * (1 - 1e-12) else \
                self.left[h] - r * dt
        self.now += dt
        eps = 1e-9 * max(1.0, abs(self.now))
        for q in list(self.links.values()):
            # A copy is complete once its bytes are moved (sub-byte float error is nothing).
            while q and self.left[q[0]] <= 1e-3:
                done = q.pop(0)
                if q:
                    self.begin[q[0]] = self.now
                self._complete(done)
        for sq in list(self.streams.values()):
            if not sq:
                continue
            h = sq[0]
            if h in self.started and h in self.dur and \
                    self.started[h] + self.dur[h] <= self.now + eps:
                self._complete(h)
            elif h not in self.started and self.ready[h] <= self.now + eps:
                self._start(h)
        return True

    def advance(self, to: float) -> None:
        while self.now < to and self._step(to):
            pass
        self.now = max(self.now, to)

    # -- the walk's side ------------------------------------------------------------------
    def add(self, name: str, ready: float, *, stream: Any = None, direction: str = "",
            nbytes: float = 0.0, device_ps: float | None = None) -> None:
        """Op `name` issued, ready at `ready`: a host copy of `nbytes` in `direction`, or (with
        `device_ps`) a device-side op of that duration; `stream`: its stream (None: one of its
        own)."""
        self.advance(ready)
        if stream is None:
            self._own += 1
            stream = ("own", self._own)
        self.stream_of[name], self.ready[name] = stream, float(ready)
        if device_ps is not None:
            self.dur[name] = max(0.0, float(device_ps))
        else:
            self.dirs[name], self.left[name] = direction, max(0.0, float(nbytes))
        q = self.streams.setdefault(stream, deque())
        q.append(name)
        if len(q) == 1:
            self._start(name)
        if (device_ps is not None and device_ps <= 0) or (device_ps is None and nbytes <= 0):
            self._settle()

    def _settle(self) -> None:
        """Complete what completes at this very time (empty copies, zero-time ops)."""
        while True:
            n = len(self.end) + len(self.started)
            self._step(self.now)
            if len(self.end) + len(self.started) == n:
                return

    def finish(self, name: str) -> tuple[int, int]:
        """(begin, end) of op `name` (a copy's begin: when it starts moving), advancing until
        it is complete."""
        while name not in self.end and self._step(None):
            pass
        end = self.end.get(name, self.now)
        begin = self.begin.get(name, self.started.get(name, end))
        return int(round(begin)), int(round(end))
