"""When the program needed each copy: its first user, from the compiled HLO, found in the trace.

`overlap.analysis.causes` says a copy is exposed because the device waited (`device_waits`)
from the trace alone: compute resumed as copies ended. Where the capture's program is at hand
(a run directory's `hlo/<module>.hlo.txt` or the capture's `Hlo Proto`, read by the caller:
`overlap.analysis.names.programs_of`), this module names what waited, per copy:

* ``instruction``: the copy's instruction, by the rules of `overlap.hlo.trace_ops.
  trace_op_instructions` (the same name, or the async wrapper calling `X_computation.N` for
  the trace's `X.N`: the rules `overlap.analysis.copy_join` joins `report --predict` by).
* ``done``: its `-done` (`copy-done`, `fusion-done`, `async-done`): the user of the start.
* ``first user``: the instructions that run a kernel in the capture (their name is the
  `hlo_op` of compute events of the program: same module, and same program id where the
  kernel carries one) and read the done's value, through ops that only
  pass a value on (bitcast, get-tuple-element, a tuple that is not a computation's result,
  reshape, copy, transpose, optimization-barrier, when they run no kernel themselves), or that
  name the done as a control predecessor (XLA orders the kernels that must follow a copy so:
  the scan's D2H has no reader on the device, its done's control successors wait for it).
* ``first_use_ps``: the start of the first such kernel on the copy's device (same host,
  device and program) at or after the copy's start. Where a user op runs exactly as many
  times on the device as the copy, the i-th copy is paired with the i-th kernel of the op (a
  prefetch issued an iteration ahead is used by the next iteration's kernel, not by the
  kernel right after it); else the first kernel of the op at or after the copy's start.

Per copy with a first use (times in integer picoseconds; `start`/`end` the copy's, CUPTI's):

* ``before_use_ps = first_use - start``: how long before its first use the copy started.
* ``needed_ps = end - start``: how long it needed (its span).
* ``ready_ps``: the compute the device still had before the first use,
  `ready_at - start` where `ready_at` is the end of the device's last compute before the first
  use (at least the copy's start): when the user could have run had the copy been done.
* ``stall_ps = max(0, min(end, first_use) - ready_at)``: the device idle before the user while
  the copy flew. (The first use of a copy it really needs starts after the copy ended, so
  `end - first_use` is never positive there; what the device lost is the idle before it.)
* ``needed_Bps = bytes / ready_ps``: the bandwidth at which the copy would have ended when the
  user could have run; none where `ready_ps` is 0 (no compute between the copy's start and its
  use: only an earlier issue hides it).
* ``used_before_end``: the first use started before the copy ended (the user did not wait for
  the whole copy: a pairing the trace contradicts, or a user that reads only part of it).

Unknown, with the reason, where: the copy names no program or its program is not at hand ("no
HLO"), the op maps to no single instruction (a command buffer's `command_buffer_N`: its
kernels carry the graph's name, not an instruction's), no `-done` is found, the done's value
reaches no kernel of the capture (it is carried out of a loop or read only by other copies),
or no kernel of a user ran on the device after the copy started.

Blind spots: CUPTI records when a copy ran, not when it was issued, so `before_use_ps` counts
from its start; a user kernel on another stream may overlap other compute (`ready_at` is then
the user's start and the stall 0); users reached through while loops or calls are not
followed.

Vectorised per distinct (program, copy op, user op): a few numpy searches over that op's
kernels, never a Python loop per copy or per kernel.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from overlap.analysis.grouping import Columns, copy_pairs, equal_to, group_codes, is_none
from overlap.analysis.intervals import merged_groups
from overlap.arrays import factorize, filled, repeated, sorted_unique  # (not np.unique: numpy.ma)

if TYPE_CHECKING:  # imported where a program is at hand (~3 ms of start-up otherwise)
    from overlap.hlo import trace_ops

_DONE = ("copy-done", "fusion-done", "async-done", "send-done", "recv-done")
_PASS = ("bitcast", "bitcast-convert", "get-tuple-element", "tuple", "reshape", "copy",
         "transpose", "optimization-barrier")
_MAX_DEPTH = 8
NO_HLO = "no HLO"


def users_index(program: trace_ops.Program) -> dict[str, list[str]]:
    """Per instruction, the instructions that read it or name it as a control predecessor."""
    out: dict[str, list[str]] = {}
    for ins in program.instrs.values():
        for o in dict.fromkeys(ins.operands + ins.predecessors()):
            out.setdefault(o, []).append(ins.name)
    return out


def first_users(program: trace_ops.Program, start: str, kernel_ops: set[str],
                users: dict[str, list[str]] | None = None
                ) -> tuple[str | None, list[str], str | None]:
    """(done, user instructions that run kernels, why none) of the copy instruction `start`
    (module docstring)."""
    users = users_index(program) if users is None else users
    ins = program.instrs.get(start)
    if ins is None:
        return None, [], f"{start} is not an instruction of {program.name}"
    if ins.opcode.endswith("-done"):
        done: str | None = start  # a synchronous wrapper's thunk: the op is its own done
    else:
        done = next((u for u in users.get(start, ())
                     if program.instrs[u].opcode in _DONE), None)
    if done is None:
        return None, [], f"no -done reads {start}"
    found: list[str] = []
    stopped: set[str] = set()
    seen = {done}
    todo = [done]
    for _ in range(_MAX_DEPTH):
        nxt = []
        for v in todo:
            for u in users.get(v, ()):
                if u in seen:
                    continue
                seen.add(u)
                ui = program.instrs[u]
                if u in kernel_ops:
                    found.append(u)
                elif ui.opcode == "tuple" and program.roots.get(ui.computation) == u:
                    stopped.add("carried out of its computation")
                elif ui.opcode == "tuple":
                    # only the elements that are `v`: their get-tuple-element readers
                    at = {i for i, o in enumerate(ui.operands) if o == v}
                    nxt += [g for g in users.get(u, ())
                            if program.instrs[g].opcode == "get-tuple-element"
                            and program.instrs[g].tuple_index in at and g not in seen]
                    seen.update(nxt)
                elif ui.opcode in _PASS:
                    nxt.append(u)
                else:
                    stopped.add(f"read by {ui.opcode}")
        todo = nxt
    if not found:
        why = ", ".join(sorted(stopped)) or "no reader"
        return done, [], f"{done}'s value reaches no kernel of the capture ({why})"
    return done, sorted(found), None


def copy_first_use(trace, programs: dict[tuple[Any, Any], trace_ops.Program] | None
                   ) -> Columns:
    """Per transfer (the rows of `trace.columns("transfers")`): `instruction`, `done`,
    `first_user` (None where unknown), `first_use_ps` and `ready_at_ps` (-1 where unknown),
    and `why` (the reason where unknown, else None)."""
    tr = trace.columns("transfers")
    n = len(tr["start_ps"])
    if not n:
        return _untold(n, filled(n, None))
    # Copies whose program is not at hand (or that name none) say so per distinct (module,
    # program), not per copy op: a capture without HLO (36k distinct copy ops in the
    # many-ops TPU shape) took a Python step per op, and the kernels' columns are not needed
    # at all where no copy has its program (issue 32).
    reasons = _without_program(trace, tr, n, programs or {})
    live = np.flatnonzero(is_none(reasons))
    if not len(live):
        # no copy's first use can be told: each other column one value, read-only
        # (`arrays.repeated`: five 36k-row columns of the many-ops capture not filled)
        return _untold(n, reasons, repeated)
    out = _untold(n, reasons)
    from overlap.hlo import trace_ops

    co = trace.columns("compute")
    (tg, cg), _ = group_codes(tr, co)
    tg, cg = np.asarray(tg, np.int64), np.asarray(cg, np.int64)
    start = np.asarray(tr["start_ps"], np.int64)
    cs = np.asarray(co["start_ps"], np.int64)
    ce = np.maximum(np.asarray(co["end_ps"], np.int64), cs)
    m = len(cs)
    t_mod = _column(tr, "hlo_module", n)
    t_op = _column(tr, "hlo_op", n)
    # program ids coded over transfers and kernels at once, so a copy's and a kernel's compare
    pid_code, pids = factorize(np.concatenate([_column(tr, "program_id", n),
                                               _column(co, "program_id", m)]))
    t_pc, c_pc = pid_code[:n], pid_code[n:]
    c_opcode, c_ops = factorize(_column(co, "hlo_op", m))
    op_index = {v: k for k, v in enumerate(c_ops.tolist())}
    # modules likewise (CUPTI kernels of jax 0.11 carry the module, not the program id)
    mcode, mods = factorize(np.concatenate([t_mod, _column(co, "hlo_module", m)]))
    mod_code, c_mc = mcode[:n], mcode[n:]
    top_code, tops = factorize(t_op)
    # one code per distinct (module, program, op) of the copies: few
    codes = factorize((mod_code + 1) * (len(pids) + 1) * (len(tops) + 1)
                      + (t_pc + 1) * (len(tops) + 1) + (top_code + 1))[0]
    users_of: dict[Any, dict[str, list[str]]] = {}
    kernels_of: dict[Any, set[str]] = {}
    order = live[np.argsort(codes[live], kind="stable")]  # copies with their program
    bounds = np.flatnonzero(np.diff(codes[order])) + 1
    for rows in np.split(order, bounds):
        i = int(rows[0])
        module = mods[mod_code[i]]
        pid = pids[t_pc[i]] if t_pc[i] >= 0 else None
        op = tops[top_code[i]]
        key = (module, pid)
        prog = (programs or {})[key]
        instrs, rule = trace_ops.trace_op_instructions(prog, str(op))
        if not instrs or len(instrs) != 1:
            out["why"][rows] = (
                f"{op} is a command buffer: its kernels carry the graph's name, not an "
                "instruction's" if rule == trace_ops.COMMAND_BUFFER else
                f"{op} maps to {len(instrs)} instructions" if instrs else
                f"{op} maps to no instruction of {prog.name}")
            continue
        # an HloProto names the fusion inside the async wrapper (`wrapped_dynamic-slice` in
        # the computation an `async-start` calls): its done is the wrapper's
        start_ins = trace_ops.outermost_async(prog, instrs[0])
        out["instruction"][rows] = start_ins
        # the program's kernels: same module, same program id where the kernel has one
        same = (c_mc == mod_code[i]) & ((c_pc < 0) | (c_pc == t_pc[i]))
        if key not in users_of:
            users_of[key] = users_index(prog)
            kernels_of[key] = {str(c_ops[k]) for k in sorted_unique(c_opcode[same]).tolist()
                               if k >= 0}
        done, users, why = first_users(prog, start_ins, kernels_of[key], users_of[key])
        out["done"][rows] = done
        if why is not None:
            out["why"][rows] = why
            continue
        best = np.full(len(rows), np.iinfo(np.int64).max, np.int64)
        who = np.full(len(rows), None, object)
        for u in users:  # the done's kernel users: one or a few
            sel = np.flatnonzero((c_opcode == op_index[u]) & same)
            t = _paired(tg[rows], start[rows], cg[sel], cs[sel])
            better = (t >= 0) & (t < best)
            best[better], who[better] = t[better], u
        found = ~is_none(who)
        out["first_user"][rows[found]] = who[found]
        out["first_use_ps"][rows[found]] = best[found]
        out["why"][rows[~found]] = ("no kernel of its users ran on the device after the copy "
                                    "started")
    _ready(out, tg, start, cg, cs, ce)
    return out


def _untold(n: int, why: np.ndarray, fill: Any = filled) -> dict[str, Any]:
    """`copy_first_use`'s columns for `n` copies, no first use told yet (None, -1), and `why`.
    `fill`: `arrays.filled` (columns the caller writes into) or `arrays.repeated`."""
    return {"instruction": fill(n, None), "done": fill(n, None), "first_user": fill(n, None),
            "first_use_ps": fill(n, -1, np.int64), "ready_at_ps": fill(n, -1, np.int64),
            "why": why}


def _without_program(trace, tr: Columns, n: int, programs: dict) -> np.ndarray:
    """Per transfer (`tr`: the trace's transfers): why its first use cannot be told from a
    program (the copy names no module or no op; its (module, program id) is not a key of
    `programs`), None where its program is at hand. One Python step per distinct (module,
    program id), numbered once per trace (`grouping.copy_pairs`)."""
    pair, pairs = copy_pairs(trace)
    unnamed = f"{NO_HLO}: the copy names no program"
    why_pair = filled(len(pairs), None)
    for j, (module, pid) in enumerate(pairs):
        if module is None:
            why_pair[j] = unnamed
        elif programs.get((module, pid)) is None:
            why_pair[j] = f"{NO_HLO}: program {module}({pid}) is not at hand"
    # a copy that names no op (`Trace.columns`: missing is None; told by address, where
    # numbering 36k distinct ops, even as kept codes, cost ~0.5 ms)
    no_op = is_none(_column(tr, "hlo_op", n))
    if len(pairs) == 1 and why_pair[0] is not None and not no_op.any():
        return repeated(n, why_pair[0])  # one reason for every copy (read-only: none live)
    why = why_pair[pair]
    why[no_op] = unnamed
    return why


def _column(t: Columns, name: str, n: int) -> np.ndarray:
    v = t.get(name)
    return np.full(n, None, object) if v is None else np.asarray(v, object)


def _paired(qg: np.ndarray, qs: np.ndarray, kg: np.ndarray, ks: np.ndarray) -> np.ndarray:
    """Per copy (device `qg`, start `qs`): the start of its use among the kernels (`kg`, `ks`)
    of one user op, -1 where none: the i-th kernel of the device for the i-th copy where both
    counts agree and the pairing never puts a use before its copy, else the first kernel at or
    after the copy's start."""
    out = np.full(len(qs), -1, np.int64)
    if not len(ks):
        return out
    ko = np.lexsort((ks, kg))
    kg, ks = kg[ko], ks[ko]
    qo = np.lexsort((qs, qg))
    for g in sorted_unique(qg).tolist():  # devices: few
        q = qo[qg[qo] == g]
        lo, hi = np.searchsorted(kg, g, "left"), np.searchsorted(kg, g, "right")
        kk = ks[lo:hi]
        if not len(kk):
            continue
        if len(kk) == len(q) and bool((kk >= qs[q]).all()):
            out[q] = kk
            continue
        j = np.searchsorted(kk, qs[q], "left")
        ok = j < len(kk)
        out[q[ok]] = kk[j[ok]]
    return out


def _ready(out: dict[str, Any], tg, start, cg, cs, ce) -> None:
    """`ready_at_ps`: the end of the device's last compute before the first use, at least the
    copy's start (the first use itself and compute starting with it excluded)."""
    have = np.flatnonzero(out["first_use_ps"] >= 0)
    if not len(have):
        return
    comp = merged_groups(cg, cs, ce)
    u = out["first_use_ps"][have]
    g = tg[have]
    # merged intervals of the device starting strictly before the first use
    key_order = np.lexsort((comp.s, comp.g))
    mg, ms, me = comp.g[key_order], comp.s[key_order], comp.e[key_order]
    pos = np.zeros(len(have), np.int64)
    for d in sorted_unique(g).tolist():  # devices: few
        sel = g == d
        lo = np.searchsorted(mg, d, "left")
        pos[sel] = lo + np.searchsorted(ms[lo:np.searchsorted(mg, d, "right")], u[sel],
                                        "left") - 1
        pos[sel] = np.where(pos[sel] >= lo, pos[sel], -1)
    last = np.where(pos >= 0, np.minimum(me[np.maximum(pos, 0)], u), -1) if len(me) else \
        np.full(len(have), -1, np.int64)
    out["ready_at_ps"][have] = np.maximum(last, start[have])


# ---------------------------------------------------------------------------------------------
# Per copy numbers and the device_waits evidence


def per_copy(fu: Columns, start: np.ndarray, end: np.ndarray, nbytes: np.ndarray | None
             ) -> Columns:
    """The numbers of the module docstring per copy (-1 / NaN where no first use); the
    bandwidth (`needed_Bps`) only where `nbytes` is given (`_top_records`' few copies: over
    every copy its float temporaries were ~4 arrays of the copies at once, the first-use
    step's peak on long captures: +10 MiB at 320k copies).

    Each column is made in its own array (the masked rows set after), not `np.where` of a
    difference: one fresh copy-sized array per column, not two or three. Where no copy has
    a first use (no program at hand), the columns other than `needed_ps` are one value each
    (`arrays.repeated`, read-only), as `copy_first_use`'s own: 320k copies' five filled
    columns and their temporaries (12.5 MiB) were the report's last rise in memory."""
    u, r = np.asarray(fu["first_use_ps"], np.int64), np.asarray(fu["ready_at_ps"], np.int64)
    ok = u >= 0
    needed = end - start
    if not ok.any():
        n = len(ok)
        out: Columns = {"known": ok, "before_use_ps": repeated(n, -1, np.int64),
                        "needed_ps": needed, "ready_ps": repeated(n, -1, np.int64),
                        "stall_ps": repeated(n, 0, np.int64),
                        "used_before_end": repeated(n, False, bool)}
        if nbytes is not None:
            out["needed_Bps"] = repeated(n, np.nan, np.float64)
        return out
    unknown = ~ok
    ready = r - start
    ready[unknown] = -1
    before = u - start
    before[unknown] = -1
    stall = np.minimum(end, u)
    stall -= r
    np.maximum(stall, 0, out=stall)
    stall[unknown] = 0
    used = u < end
    used &= ok
    out = {"known": ok, "before_use_ps": before, "needed_ps": needed, "ready_ps": ready,
           "stall_ps": stall, "used_before_end": used}
    if nbytes is not None:
        with np.errstate(divide="ignore", invalid="ignore"):
            out["needed_Bps"] = np.where(ok & (ready > 0),
                                         nbytes * 1e12 / np.where(ready > 0, ready, 1), np.nan)
    return out


_OPS = 5  # op rows in one direction's evidence


def add_hlo_evidence(trace, result: dict[str, Any],
                     programs: dict[tuple[Any, Any], trace_ops.Program] | None) -> None:
    """Put the first-use facts of the copies whose exposed time is `device_waits` into that
    cause's evidence (`evidence["hlo"]`, its sentence in `evidence["hlo"]["text"]`) per direction of
    `result` (`overlap.analysis.overlap.analyze` of the same trace), and each `top_exposed`
    record's `first_use`. Changes no exposed time and no cause: the causes' sums stay exact.
    `programs`: (module, program id) -> program, as `overlap.analysis.names.programs_of` reads
    them (None or empty: every copy says "no HLO")."""
    from overlap.analysis import causes
    from overlap.analysis.overlap import transfer_columns

    th = result.get("thresholds") or {}
    kw = {k: th[v] for k, v in (("hidden_threshold", "hidden"), ("exposed_threshold", "exposed"))
          if v in th}
    table, _ = transfer_columns(trace, **kw)
    extra = causes.transfer_causes(trace, table)
    fu = copy_first_use(trace, programs)
    start = np.asarray(table["start_ps"], np.int64)
    end = np.asarray(table["end_ps"], np.int64)
    # every copy's numbers where some direction has device waits (no bandwidth: read of the
    # ops' sums, `direction_facts`); the `top_exposed` records' their own (`_top_records`)
    pc: Columns | None = None
    for d, b in (result.get("by_direction") or {}).items():
        row = next((c for c in b.get("exposure_causes") or ()
                    if c["cause"] == causes.DEVICE_WAITS), None)
        if row is None:
            continue
        if pc is None:
            pc = per_copy(fu, start, end, None)
            direction = np.asarray(table["direction"], object)
            waits = np.asarray(extra["cause_device_waits_ps"], np.int64) > 0
        m = waits & equal_to(direction, d)
        ev = row["evidence"]
        ev["hlo"] = direction_facts(fu, pc, table, m)
    del pc
    _top_records(result, table, fu)


def direction_facts(fu: Columns, pc: Columns, table: Columns, m: np.ndarray) -> dict[str, Any]:
    """The `hlo` evidence of the copies `m` (module docstring): sums over those with a first
    use, the reasons of the rest, and the ops with the most stall."""
    known = m & pc["known"]
    nbytes = np.asarray(table["bytes"], np.int64)
    ready = pc["ready_ps"]
    pos = known & (ready > 0)
    out: dict[str, Any] = {
        "copies": int(m.sum()), "with_first_use": int(known.sum()),
        "before_use_ps": int(pc["before_use_ps"][known].sum()),
        "needed_ps": int(pc["needed_ps"][known].sum()),
        "ready_ps": int(ready[known].sum()), "stall_ps": int(pc["stall_ps"][known].sum()),
        "needed_bandwidth_Bps": (float(nbytes[pos].sum() * 1e12 / ready[pos].sum())
                                 if pos.any() else None),
        "no_ready": int((known & (ready == 0)).sum()),
        "used_before_end": int(pc["used_before_end"][m].sum()),
        "unknown": {}, "ops": []}
    why = np.asarray(fu["why"], object)
    rest = m & ~pc["known"]
    if rest.any():
        codes, whys = factorize(why[rest])
        counts = np.bincount(codes, minlength=len(whys))
        out["unknown"] = {str(w): int(c) for w, c in sorted(zip(whys.tolist(), counts.tolist()),
                                                            key=lambda wc: -wc[1])}
    hlo_op = np.asarray(table["hlo_op"], object)
    for op in sorted(set(hlo_op[known].tolist()), key=str):  # ops of the direction: few
        k = known & (hlo_op == op)
        i = int(np.flatnonzero(k)[0])
        r = ready[k]
        rp = r > 0
        out["ops"].append({
            "hlo_op": op, "instruction": fu["instruction"][i], "done": fu["done"][i],
            "first_users": sorted(set(np.asarray(fu["first_user"], object)[k].tolist())),
            "copies": int(k.sum()), "bytes": int(nbytes[k].sum()),
            "before_use_ps": int(np.median(pc["before_use_ps"][k])),
            "needed_ps": int(np.median(pc["needed_ps"][k])),
            "ready_ps": int(np.median(r)), "stall_ps": int(pc["stall_ps"][k].sum()),
            "needed_Bps": float(nbytes[k][rp].sum() * 1e12 / r[rp].sum()) if rp.any() else None,
            "statistic": "median per copy (stall: sum)"})
    out["ops"].sort(key=lambda o: (-o["stall_ps"], str(o["hlo_op"])))
    out["ops"] = out["ops"][:_OPS]
    out["text"] = _text(out)
    return out


def _text(h: dict[str, Any]) -> str:
    from overlap.analysis.units import format_ps

    if not h["with_first_use"]:
        why = "; ".join(f"{n} {w}" for w, n in h["unknown"].items()) or "no copies"
        return f"first use unknown ({why})"
    parts = [f"{h['with_first_use']} of {h['copies']} copies' first users found"]
    for o in h["ops"][:2]:
        parts.append(
            f"{o['hlo_op']} ({o['instruction']} -> {o['done']} -> {', '.join(o['first_users'])})"
            f" started {format_ps(o['before_use_ps'])} before its first use and needed "
            f"{format_ps(o['needed_ps'])}; the device had {format_ps(o['ready_ps'])} of compute "
            f"before it (median), stalled {format_ps(o['stall_ps'])}"
            + (f"; {o['needed_Bps'] / 1e9:.1f} GB/s would have hidden it"
               if o["needed_Bps"] is not None else "; only an earlier issue hides it"))
    if h["stall_ps"] == 0:
        parts.append("none of their first users waited for them (the device idled for "
                     "something else)")
    if h["unknown"]:
        parts.append("unknown: " + "; ".join(f"{n} {w}" for w, n in h["unknown"].items()))
    return "; ".join(parts)


def _top_records(result: dict[str, Any], table: Columns, fu: Columns) -> None:
    """Each `top_exposed` record's `first_use` (matched by host, device, direction, start
    and span: a record is one transfer): `per_copy` of the matched copies alone (the same
    numbers as of every copy: `per_copy` is one copy at a time)."""
    recs = (result.get("top_exposed") or {}).get("records") or []
    if not recs:
        return
    start = np.asarray(table["start_ps"], np.int64)
    end = np.asarray(table["end_ps"], np.int64)
    matched = _matched(recs, table, start, end)
    if not matched:
        return
    at = [i for _, i in matched]
    c: Columns = per_copy(  # (one call for all the matched copies)
        {k: fu[k][at] for k in ("first_use_ps", "ready_at_ps")}, start[at], end[at],
        np.asarray(table["bytes"], np.int64)[at])
    for j, (r, i) in enumerate(matched):
        if not c["known"][j]:
            r["first_use"] = {"unknown": fu["why"][i]}
            continue
        nb = c["needed_Bps"][j]
        r["first_use"] = {"instruction": fu["instruction"][i], "done": fu["done"][i],
                          "first_user": fu["first_user"][i],
                          "first_use_ps": int(fu["first_use_ps"][i]),
                          "before_use_ps": int(c["before_use_ps"][j]),
                          "needed_ps": int(c["needed_ps"][j]),
                          "ready_ps": int(c["ready_ps"][j]),
                          "stall_ps": int(c["stall_ps"][j]),
                          "needed_Bps": None if nb != nb else float(nb),
                          "used_before_end": bool(c["used_before_end"][j])}


_RECORD_KEYS = ("host", "device", "direction")


def _matched(recs: list[dict], table: Columns, start: np.ndarray, end: np.ndarray
             ) -> list[tuple[dict, int]]:
    """(record, the first copy's row with its start, span, host, device and direction) of
    each record that has one. (The spans of the rows starting at a record's start only: a
    span per copy was 8 MB on a million copies' peak.)"""
    cols = [np.asarray(table[k], object) for k in _RECORD_KEYS]
    out = []
    for r, hits in zip(recs, _rows_starting_at(start, [r.get("start_ps", -1) for r in recs])):
        want = tuple(r.get(k) for k in _RECORD_KEYS)
        if all(v is None or type(v) is str for v in want):
            # the rows' texts compared at once (10k copies starting together: a Python
            # comparison of each was most of this step); a text or None compares alike
            # elementwise and in a tuple
            ok = end[hits] - start[hits] == r.get("span_ps", -1)
            for col, v in zip(cols, want):
                ok &= col[hits] == v
            cand = hits[ok].tolist()
        else:
            cand = [i for i in hits.tolist() if end[i] - start[i] == r.get("span_ps", -1)
                    and tuple(col[i] for col in cols) == want]
        if cand:
            out.append((r, cand[0]))
    return out


def _rows_starting_at(start: np.ndarray, at: list[Any]) -> list[np.ndarray]:
    """Per value of `at` (a record's `start_ps`): the rows of `start` equal to it, in row
    order (`np.flatnonzero(start == v)`). Where `start` is sorted (the reader's transfers
    are, per host and device, as a one-device capture's table is), two binary searches per
    value instead of a comparison of every row (10 records x 36k copies: ~0.4 ms)."""
    if len(start) > 64 and bool((start[1:] >= start[:-1]).all()):
        out = []
        for v in at:
            if type(v) is not int or not -2**63 <= v < 2**63:
                out.append(np.flatnonzero(start == v))  # (as below: what == says)
                continue
            lo, hi = np.searchsorted(start, v, "left"), np.searchsorted(start, v, "right")
            out.append(np.arange(lo, hi))
        return out
    return [np.flatnonzero(start == v) for v in at]

