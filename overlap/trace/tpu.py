"""TPU device planes: host transfers (async copy ops across host memory space) and compute
ops (see `overlap.trace.reader` for the rules and their evidence)."""

from __future__ import annotations

from collections import defaultdict, deque

import numpy as np

from overlap.trace.hlotext import (
    _SEND_RECV_RE,
    _START_DONE_RE,
    array_bytes,
    async_boundaries_by_bytes,
    host_transfer_directions,
    instruction_names,
    is_host_async_start,
)
from overlap.trace.names import TPU_ASYNC_LINE, TPU_OPS_LINES
from overlap.trace.programs import ProgramCopies, program_key
from overlap.trace.wire import Cols, LineEvents, Plane, as_id, as_int, map_unique

_COPY_FACTS = ("hlo_module", "program_id", "raw_bytes_accessed", "bytes_accessed")


def _read_tpu_plane(P: Plane, device, host, line_base_ps, tr: Cols, co: Cols,
                    programs=lambda: None) -> None:
    by_name = {line.name: line for line in P.plane.lines}
    async_line = by_name.get(TPU_ASYNC_LINE)
    op_lines = [by_name[n] for n in sorted(TPU_OPS_LINES) if n in by_name]
    a_ids = P.ids("_a")

    def instrs(uniq: np.ndarray) -> list[str]:
        """Instruction names of distinct metadata ids: the display name, else parsed from the
        HLO text."""
        out = P.names(uniq, display=True)
        bare = [i for i, s in enumerate(out) if not s]
        if bare:
            for i, name in zip(bare, instruction_names(P.names(uniq[bare]))):
                out[i] = name
        return out

    def boundaries(uniq: np.ndarray) -> np.ndarray:
        """Per distinct id: 1 if its instruction is an async boundary, 0 if not, -1 unknown
        yet. Decided on the display names' bytes where the plane has a `MetaTable`: an id
        with a display name is its instruction name."""
        got = P.name_bytes(uniq, display=True)
        if got is None:
            return np.full(len(uniq), -1, np.int8)
        return async_boundaries_by_bytes(*got)

    # Without an Async XLA Ops line, copies are paired from the boundary ops' names.
    pairing = async_line is None or not async_line.n_events
    starts_done: list[tuple[int, int, int, str]] = []  # (start, end, mid, instr)
    for line in op_lines:
        if not line.n_events:
            continue
        ev = LineEvents(line, line_base_ps(line), wanted=a_ids)
        mids = ev.mids
        keep = ~ev.has_stat(a_ids) if a_ids else np.ones(ev.n, bool)
        uniq, inv = np.unique(mids, return_inverse=True)  # once per distinct op
        b_u = boundaries(uniq)
        # names only where needed: compute ops, ops not decided yet, boundaries to pair
        need = np.flatnonzero((b_u != 1) | pairing)
        u_names = np.full(len(uniq), None, object)
        u_names[need] = instrs(uniq[need])
        sd, sr = _START_DONE_RE.match, _SEND_RECV_RE.match  # is_async_boundary, inlined
        und = np.flatnonzero(b_u == -1)
        b_u[und] = [bool(sd(n) or sr(n)) for n in u_names[und].tolist()]
        names = u_names[inv]
        bnd = b_u.astype(bool)[inv]
        if line.name == "XLA Ops":
            b = np.flatnonzero(keep & bnd)
            starts_done.extend(zip(ev.starts[b].tolist(), (ev.starts[b] + ev.durs[b]).tolist(),
                                   mids[b].tolist(), names[b].tolist()))
        idx = np.flatnonzero(keep & ~bnd)
        co.add(len(idx), host=host, device=device, start_ps=ev.starts[idx],
               end_ps=ev.starts[idx] + ev.durs[idx], name=names[idx], hlo_op=names[idx],
               hlo_module=_meta_column(P, mids[idx], "hlo_module"),
               program_id=_meta_ids(P, mids[idx], "program_id"),
               stream=line.id, line=line.name)

    def add_transfers(starts, ends, facts, line):
        n = len(facts)
        if not n:
            return
        direction = np.array([f[0] for f in facts], object)
        tr.add(n, host=host, device=device, direction=direction,
               start_ps=np.asarray(starts, np.int64), end_ps=np.asarray(ends, np.int64),
               bytes=np.array([f[1] for f in facts], np.int64),
               src_kind=np.where(direction == "H2D", "host", "device").astype(object),
               dst_kind=np.where(direction == "D2H", "host", "device").astype(object),
               **{"async": True}, stream=line.id, line=line.name,
               hlo_op=np.array([f[2] for f in facts], object),
               hlo_module=np.array([f[3] for f in facts] + [None], object)[:-1],
               program_id=np.array([f[4] for f in facts] + [None], object)[:-1])

    if async_line is not None and async_line.n_events:
        # Only metadata (names, metadata stats) decides here: no event stat is ever read.
        ev = LineEvents(async_line, line_base_ps(async_line), skip_mids=P.meta_keys(),
                        wanted=())

        uniq, inv = np.unique(ev.mids, return_inverse=True)  # once per distinct op
        mids = uniq.tolist()
        texts = P.names(uniq)
        copies = [i for i, t in enumerate(texts) if is_host_async_start(t)]
        facts_u: list[tuple | None] = [None] * len(mids)
        for i, f in zip(copies, _copy_facts(P, [mids[i] for i in copies],
                                            [texts[i] for i in copies], programs())):
            facts_u[i] = f
        facts = np.array(facts_u + [None], object)[:-1][inv]
        sel = np.flatnonzero(np.array([f is not None for f in facts.tolist()], bool))
        add_transfers(ev.starts[sel], ev.starts[sel] + ev.durs[sel], facts[sel].tolist(),
                      async_line)
        return

    # No Async XLA Ops line: pair each copy-start with the next copy-done of the same key, in
    # order of begin time. Tie-break (explicit, not left to the rest of the tuple): at one
    # picosecond a start comes before a done, so a done can close the start issued at that
    # instant. Real XLA:TPU v6e (sample_traces/tpu-v6e-offload, TPU:1-3) has a zero-length
    # copy-start.5 that begins at the same picosecond as its 172 ms copy-done.5; taking the
    # done first (xprof sorts on begin time only) leaves it without a start and shifts every
    # later pair of that op (598 of 600 pairs).
    boundary_ops = []  # (begin, 0 start / 1 done, end, metadata id, key)
    for start, end, mid, ins in starts_done:
        m = _START_DONE_RE.match(ins)
        if not m or not (m["base"].endswith("copy") or m["base"] in _HOST_SLICE_OPS):
            continue
        boundary_ops.append((start, 0 if m["role"] == "start" else 1, end, mid,
                             m["base"] + (m["n"] or "")))
    boundary_ops.sort(key=lambda b: (b[0], b[1], b[2], b[3]))
    open_starts: dict[str, deque] = defaultdict(deque)
    pairs = []  # (copy-start's start, copy-done's end, copy-start's metadata id)
    for start, role, end, mid, key in boundary_ops:
        if role == 0:
            open_starts[key].append((start, mid))
        elif open_starts[key]:
            s0, smid = open_starts[key].popleft()
            pairs.append((s0, end, smid))
    smids = sorted({m for _, _, m in pairs})
    texts = P.names(smids)
    to_host = [i for i, t in enumerate(texts) if is_host_async_start(t)]
    facts_of = dict(zip([smids[i] for i in to_host],
                        _copy_facts(P, [smids[i] for i in to_host],
                                    [texts[i] for i in to_host], programs())))
    kept = [(s0, end, facts_of[m]) for s0, end, m in pairs if facts_of.get(m) is not None]
    add_transfers([k[0] for k in kept], [k[1] for k in kept], [k[2] for k in kept],
                  by_name.get("XLA Ops"))


_HOST_SLICE_OPS = ("dynamic-slice", "dynamic-update-slice")


def _meta_column(P: Plane, mids: np.ndarray, name: str) -> np.ndarray:
    """Per event, its metadata's stat `name` (None where absent), once per distinct id."""
    uniq, inv = np.unique(mids, return_inverse=True)
    return P.meta_columns(uniq, (name,))[name][inv]


def _meta_ids(P: Plane, mids: np.ndarray, name: str) -> np.ndarray:
    """Per event, its metadata's identifier stat `name` (`as_id`; None where absent), converted
    once per distinct metadata id, not once per event."""
    uniq, inv = np.unique(mids, return_inverse=True)
    vals = P.meta_columns(uniq, (name,))[name].tolist()
    return np.array([as_id(v) for v in vals] + [None], object)[:-1][inv]


def _copy_facts(P: Plane, mids: list[int], texts: list[str],
                programs: ProgramCopies | None = None) -> list[tuple | None]:
    """Per host async start op's metadata id (with its HLO text: copy-start or
    dynamic-(update-)slice-start): (direction, bytes, instruction, hlo_module, program_id), or
    None where the text names no host memory side. Both TPU
    paths (`Async XLA Ops` spans and copy-start/copy-done pairs) use it, once per distinct op;
    program ids are converted once per distinct value. Where `programs` holds the op's program
    (its HLO proto), a copy-start's direction and bytes come from there (`overlap.trace.
    programs`: the same rule on the instruction's shape, once per program); the text decides
    the rest."""
    got: list[tuple[str | None, int | None] | None] = [None] * len(mids)
    if programs and mids:
        pids_all = map_unique(P.meta_columns(mids, ("program_id",))["program_id"],
                              as_id).tolist()
        got = [programs.facts(pid, ins) for pid, ins in zip(pids_all, instruction_names(texts))]
    rest = [i for i, d in enumerate(got) if d is None]
    if rest:
        for i, d in zip(rest, host_transfer_directions([texts[i] for i in rest])):
            got[i] = d
    cand, dirs = [], []
    for i, g in enumerate(got):
        if g is not None and g[0] is not None:
            cand.append(i)
            dirs.append(g)
    out: list[tuple | None] = [None] * len(mids)
    if not cand:
        return out
    col = P.meta_columns([mids[i] for i in cand], _COPY_FACTS)
    module, raw, acc = (col[k].tolist() for k in ("hlo_module", "raw_bytes_accessed",
                                                  "bytes_accessed"))
    pids = map_unique(col["program_id"], as_id).tolist()
    instrs = instruction_names([texts[i] for i in cand])
    for j, i in enumerate(cand):
        direction, nbytes = dirs[j]
        if nbytes is None:
            nbytes = as_int(raw[j]) or as_int(acc[j]) or 0
        out[i] = (direction, nbytes, instrs[j], module[j], pids[j])
    return out


# TPU copy facts from the capture's HLO protos where it carries them (tests compare with the
# text rule by turning this off).
_PROGRAM_FACTS = True


def _program_copies(plane) -> ProgramCopies:
    """Program id -> its serialized HloProto, from the `/host:metadata` plane's entries (keyed
    by program id; the proto in their `Hlo Proto` stat)."""
    P = Plane(plane)
    wanted = P.ids("Hlo Proto")
    protos = {}
    if wanted:
        for k, md in plane.event_metadata.items():
            proto = P.stats(md.stats, wanted).get("Hlo Proto")
            if isinstance(proto, bytes) and proto:
                protos[program_key(k)] = proto
    return ProgramCopies(protos, array_bytes)
