"""How deep a program's computations call each other, as the estimate's schedule walk follows
them (`overlap.hlo.schedule._Simulator.cost`: a while's body, a call's or a conditional's
callees, one level deeper each). Apart from `schedule` to keep that module within its size
(tests/test_architecture.py).

`nesting(comps)`: the longest chain of such calls from any computation (0: none calls
another), None where a computation reaches itself. Where it is at most the walk's cut, a
computation's walk is the same whatever depth it starts at (the estimate's bisection then
walks one computation, not the whole program). Blind spot: callees named by other attributes
(fusions' `calls=`, which the walk costs as one kernel, not as a computation) are not calls
here, as they are not there."""

from __future__ import annotations

import re
from typing import Any

from overlap.hlo.program import _BODY_RE

# The computation(s) an instruction calls by `calls=` or `to_apply=` (the walk's `call` and
# `conditional`; the roofline's fused computations)
CALLS_ONE_RE = re.compile(r"\b(?:calls|to_apply)=%?([\w.\-]+)")


def nesting(comps: dict[str, list[Any]]) -> int | None:
    """The most calls deep a walk from any computation of `comps` goes, None where one
    reaches itself (module docstring)."""
    edges: dict[str, list[str]] = {}
    for name, instrs in comps.items():
        out = edges[name] = []
        for ins in instrs:
            if ins.opcode == "while":
                bm = _BODY_RE.search(ins.attrs)
                if bm:
                    out.append(bm.group(1))
            elif ins.opcode in ("call", "conditional"):
                out.extend(CALLS_ONE_RE.findall(ins.attrs))
    longest: dict[str, int] = {}
    for top in edges:
        # (a walk with a stack, not recursion: computations nest as deep as a program says)
        stack: list[tuple[str, int]] = [(top, 0)]
        on_path: set[str] = set()
        while stack:
            name, i = stack.pop()
            if name in longest and i == 0:
                continue
            callees = edges.get(name, [])
            if i == 0:
                on_path.add(name)
            if i < len(callees):
                stack.append((name, i + 1))
                c = callees[i]
                if c in on_path:
                    return None
                if c not in longest:
                    stack.append((c, 0))
                continue
            on_path.discard(name)
            longest[name] = max((1 + longest.get(c, 0) for c in callees), default=0)
    return max(longest.values(), default=0)
