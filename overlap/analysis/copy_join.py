"""Which HLO op of the captured program each measured host copy is (`report --predict`'s join).

A capture names a copy's op as the runtime knows it, which is not always the instruction name
the compiled program prints. The rules, per copy (in this order; the first that applies):

* **same name**: the trace's `hlo_op` is an instruction of the program that moves bytes to or
  from host memory (the offload inventory, `overlap.hlo.program.offload_inventory`): TPU
  `copy-start.3`, XLA:GPU `copy-start.43.0`.
* **async wrapper** (XLA:GPU host dynamic-slice / dynamic-update-slice): the program prints
  `%dynamic-slice-start.2.0 = ... fusion-start(...), calls=%wrapped_dynamic-slice_computation.1`
  and the GPU runs the wrapped fusion under its own name, the called computation's without
  `_computation`: the trace says `wrapped_dynamic-slice.1`.
* **command buffer** (XLA:GPU `--xla_gpu_enable_command_buffer`, on by default): copies inside
  a CUDA graph carry the graph's name, `command_buffer_N`, not an instruction's. The kernels
  that ran under that name (the capture's compute events with the same `hlo_op`) are named
  after the program's instructions (`loop_add_fusion.2` runs as `loop_add_fusion_2`); the
  computation holding host copies of the copy's direction that names the most of them is the
  one the graph runs. Its host copies of that direction, in schedule order, are the graph's
  copies in time order, over and over (one graph execution runs each once): the i-th copy of
  the graph on a device is op `i mod k` of those k ops, checked against each op's bytes.

A copy none of these place is *unjoined*, counted per (op as the trace names it, direction)
with one reason: no HLO op of the name in its program, no program (a `jax.device_put` outside
a compiled program has no op), the capture carries no HloProto of its program, a command buffer
whose kernels name no computation with host copies (or two equally), or copies that do not
line up with the graph's ops (count not a multiple of k, bytes that differ). Every copy is
either joined or counted in exactly one unjoined group: joined + unjoined = transfers.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from overlap.analysis.grouping import is_none
from overlap.arrays import factorize, sorted_unique

_CB_RE = re.compile(r"^command_buffer_\d+$")
_CALLS_RE = re.compile(r"\bcalls=%?([\w.\-]+)")
_SANITIZE_RE = re.compile(r"[^A-Za-z0-9_]")
_WRAPPED_SUFFIX_RE = re.compile(r"_computation(\.\d+)?$")


def kernel_name(instruction: str) -> str:
    """The name XLA:GPU gives the kernel of an instruction (every character other than a letter,
    digit or `_` becomes `_`: `loop_add_fusion.2` -> `loop_add_fusion_2`)."""
    return _SANITIZE_RE.sub("_", instruction)


def wrapped_name(called: str) -> str | None:
    """`wrapped_dynamic-slice_computation.1` -> `wrapped_dynamic-slice.1` (the trace's name of
    an async-wrapped fusion); None when `called` is not such a computation."""
    if not _WRAPPED_SUFFIX_RE.search(called):
        return None
    return _WRAPPED_SUFFIX_RE.sub(lambda m: m.group(1) or "", called)


class ProgramOps:
    """One program's host copies as the capture can name them (see the module docstring)."""

    def __init__(self, hlo_text: str):
        from overlap.hlo.program import offload_inventory, parsed

        comps = parsed(hlo_text, uncommented=True).comps  # (once within `parses_kept`)
        inv = offload_inventory(hlo_text)
        order = {(c, i.name): j for c, instrs in comps.items() for j, i in enumerate(instrs)}
        self.ops = {o.name: o for o in inv.ops}
        self.alias: dict[str, str] = {}  # trace name -> op name (async wrappers)
        by_name = {i.name: i for instrs in comps.values() for i in instrs}
        for o in inv.ops:
            ins = by_name.get(o.name)
            m = _CALLS_RE.search(ins.attrs) if ins is not None and o.is_async else None
            w = wrapped_name(m.group(1)) if m else None
            if w and w not in self.ops:
                self.alias[w] = o.name
        # per computation with host copies: its instructions' kernel names and, per direction,
        # its copies in schedule order (for command buffers)
        self.kernels: dict[str, set[str]] = {}
        self.by_comp: dict[tuple[str, str], list[Any]] = {}
        for o in sorted(inv.ops, key=lambda o: (o.computation, order.get((o.computation, o.name),
                                                                         0))):
            self.by_comp.setdefault((o.computation, o.direction), []).append(o)
            if o.computation not in self.kernels:
                self.kernels[o.computation] = {kernel_name(i.name)
                                               for i in comps.get(o.computation, [])}

    def op_of(self, trace_name: str) -> str | None:
        """The op a trace name is (same name or async wrapper), else None."""
        if trace_name in self.ops:
            return trace_name
        return self.alias.get(trace_name)

    def graph_computation(self, kernels: set[str], direction: str) -> tuple[str | None, str]:
        """(computation, "") of the command buffer that ran `kernels` and holds `direction`
        copies, or (None, why not)."""
        cands = [(len(kernels & self.kernels.get(c, set())), c)
                 for (c, d) in self.by_comp if d == direction]
        cands = sorted((n, c) for n, c in cands if n)
        if not cands:
            return None, (f"a command buffer whose kernels name no computation holding {direction} "
                          "host copies")
        if len(cands) > 1 and cands[-1][0] == cands[-2][0]:
            return None, (f"a command buffer whose kernels name {cands[-1][1]} and "
                          f"{cands[-2][1]} equally")
        return cands[-1][1], ""


def _groups(*cols: np.ndarray) -> np.ndarray:
    """One code per distinct combination of the columns (objects compared by value)."""
    code = np.zeros(len(cols[0]), np.int64)
    for c in cols:
        k, uniq = factorize(np.asarray(c, object))
        code = code * (len(uniq) + 1) + (k + 1)
        code = factorize(code)[0]  # renumbered densely: no overflow however many columns
    return code


def join_copies(tr: dict[str, np.ndarray], co: dict[str, np.ndarray],
                programs: dict[int, ProgramOps], missing: dict[int, str] | None = None
                ) -> tuple[np.ndarray, np.ndarray, list[dict[str, Any]]]:
    """Per transfer of `tr` (the trace's `transfers` columns): its program id (None where none)
    and the name of the op it is in that program (None where unjoined), and the unjoined groups:
    `{"hlo_op", "direction", "program_id", "count", "bytes", "reason"}` each.

    `co`: the trace's `compute` columns (the kernels of command buffers). `programs`: the
    program ids whose HLO is at hand; `missing`: program id -> why its HLO is not."""
    missing = missing or {}
    n = len(tr["start_ps"])
    trace_op = np.array(["" if v is None else str(v) for v in tr["hlo_op"].tolist()], object)
    # program ids are uint64 on TPU: Python ints in an object column, None where absent
    pid = np.array([None if v is None else int(v) for v in tr["program_id"].tolist()], object)
    direction = np.asarray(tr["direction"], object)
    nbytes = np.asarray(tr["bytes"], np.int64)
    op = np.full(n, None, object)
    reason = np.full(n, None, object)
    # name rules, once per distinct (program, trace name)
    codes = _groups(pid, trace_op)
    by_code = np.argsort(codes, kind="stable")
    bounds = np.flatnonzero(np.diff(codes[by_code])) + 1
    for rows in np.split(by_code, bounds) if n else []:
        p, t = pid[rows[0]], str(trace_op[rows[0]])
        sel = rows
        if not t or t == "(unknown)":
            reason[sel] = ("the trace names no HLO op (a transfer outside a compiled program's "
                           "ops: jax.device_put / device_get, pageable staging)")
            continue
        if p is None:
            reason[sel] = "the trace names no program for it"
            continue
        prog = programs.get(p)
        if prog is None:
            reason[sel] = missing.get(p, f"program {p}: the capture carries no HloProto for it")
            continue
        name = prog.op_of(t)
        if name is not None:
            op[sel] = name
            continue
        if not _CB_RE.match(t):
            reason[sel] = f"no host copy of that name in program {p}"
            continue
        _join_graph(prog, t, p, sel, tr, co, direction, nbytes, op, reason)
    left = np.flatnonzero(is_none(op))
    groups: list[dict[str, Any]] = []
    if left.size:
        codes = _groups(trace_op[left], direction[left], pid[left], reason[left])
        for g in sorted_unique(codes).tolist():
            rows = left[codes == g]
            i = int(rows[0])
            groups.append({"hlo_op": trace_op[i] or "(unknown)", "direction": direction[i],
                           "program_id": pid[i],
                           "count": int(rows.size), "bytes": int(nbytes[rows].sum()),
                           "reason": str(reason[i])})
        groups.sort(key=lambda g: (-g["count"], g["hlo_op"], g["direction"]))
    return pid, op, groups


def _join_graph(prog: ProgramOps, name: str, p: Any, sel: np.ndarray, tr, co,
                direction: np.ndarray, nbytes: np.ndarray, op: np.ndarray,
                reason: np.ndarray) -> None:
    """Copies of command buffer `name` (row indices `sel`) to the ops of the computation it runs."""
    c_op = np.asarray(co["hlo_op"], object)
    c_pid = co.get("program_id")
    in_cb = c_op == name
    if c_pid is not None:  # the same graph name in another program is another graph
        cp = np.array([v is None or int(v) == p for v in np.asarray(c_pid, object)[in_cb]
                       .tolist()], bool).reshape(-1)
        kern = set(np.asarray(co["name"], object)[in_cb][cp].tolist())
    else:
        kern = set(np.asarray(co["name"], object)[in_cb].tolist())
    host = np.asarray(tr["host"], object)
    dev = np.asarray(tr["device"], object)
    start = np.asarray(tr["start_ps"], np.int64)
    for d in ("D2H", "H2D"):
        rows_d = sel[direction[sel] == d]
        if not rows_d.size:
            continue
        comp, why = prog.graph_computation(kern, d)
        if comp is None:
            reason[rows_d] = why
            continue
        ops = prog.by_comp[(comp, d)]
        k = len(ops)
        want = np.array([o.bytes for o in ops], np.int64)
        codes = _groups(host[rows_d], dev[rows_d])
        for g in sorted_unique(codes).tolist():
            rows = rows_d[codes == g]
            rows = rows[np.argsort(start[rows], kind="stable")]
            if rows.size % k:
                reason[rows] = (f"{rows.size} copies on {dev[rows[0]]} is not a whole number of "
                                f"runs of the {k} {d} copies of {comp}")
                continue
            pos = np.arange(rows.size) % k
            if not bool((nbytes[rows] == want[pos]).all()):
                reason[rows] = (f"copies in time order do not have the bytes of the {k} {d} "
                                f"copies of {comp} in schedule order")
                continue
            op[rows] = np.array([o.name for o in ops], object)[pos]


def stream_check(tr: dict[str, np.ndarray], op: np.ndarray, pid: np.ndarray, program_id: Any,
                 executions: dict[str, int], rule: dict[str, Any]) -> dict[str, Any]:
    """The streams the joined copies of one program ran on, against `rule` (op -> the stream id
    XLA's assignment gives it, `overlap.hlo.streams.execution_streams`).

    A run of the program is told by counting: the i-th copy of op X on a device belongs to run
    i // (X's executions per run). Within one (device, run), ops with one rule id must share a
    CUDA stream (the trace's line id) and ops with different ids must not; which CUDA stream
    an id gets may change between runs (XLA borrows them from a pool per run). Returns
    `{"runs": n, "ops": k, "agree": bool, "mismatch": [str, ...] (at most 3)}`; `runs` 0 where
    no joined copy has a stream or a rule id."""
    sel = np.flatnonzero((pid == program_id) & ~is_none(op)) if len(op) else np.zeros(0, int)
    stream = np.asarray(tr.get("stream", np.full(len(op), None, object)), object)
    dev = np.asarray(tr["device"], object)
    start = np.asarray(tr["start_ps"], np.int64)
    groups: dict[tuple[Any, int], dict[Any, set[Any]]] = {}  # (device, run) -> stream -> ids
    by_id: dict[tuple[Any, int], dict[Any, set[Any]]] = {}  # (device, run) -> id -> streams
    seen: set[str] = set()
    for name in sorted(set(op[sel].tolist())):
        rows = sel[op[sel] == name]
        per_run = max(1, int(executions.get(name, 1)))
        if name not in rule:
            continue
        for d in sorted(set(dev[rows].tolist()), key=str):
            r = rows[dev[rows] == d]
            r = r[np.argsort(start[r], kind="stable")]
            for i, row in enumerate(r.tolist()):
                s = stream[row]
                if s is None:
                    continue
                key = (d, i // per_run)
                groups.setdefault(key, {}).setdefault(s, set()).add(rule[name])
                by_id.setdefault(key, {}).setdefault(rule[name], set()).add(s)
                seen.add(name)
    bad = []
    for key in sorted(groups, key=str):
        for s, ids in groups[key].items():
            if len(ids) > 1:
                bad.append(f"run {key[1]} on {key[0]}: stream {s} ran ops of ids "
                           f"{sorted(map(str, ids))}")
        for i, ss in by_id[key].items():
            if len(ss) > 1:
                bad.append(f"run {key[1]} on {key[0]}: ops of id {i} ran on streams "
                           f"{sorted(map(str, ss))}")
    return {"runs": len(groups), "ops": len(seen), "agree": not bad, "mismatch": bad[:3]}
