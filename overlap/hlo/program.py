"""What the compiled program moves to and from host memory, and how device memory evolves.

Pure functions over compiled HLO text (``compiled.as_text()``) or serialized ``xla.HloProto``.

Offload inventory (:func:`offload_inventory`)
    Every instruction that moves data between device memory and host memory space ``S(5)``
    (``stream_executor::MemoryType::kHost``), by direction:

    * ``copy-start`` (async copy; XLA:GPU's ``HostMemoryTransferAsyncifier`` output): its shape
      is the tuple ``(dest, src, u32[] context)``; ``S(5)`` on ``dest`` is D2H, on ``src`` H2D.
      Bytes = size of ``dest``.
    * a plain ``copy`` whose result or operand is in ``S(5)`` (not asyncified: synchronous).
    * ``dynamic-update-slice`` into an ``S(5)`` buffer (D2H; bytes = the update operand) and
      ``dynamic-slice`` out of one (H2D; bytes = the result), whether bare, fused, or wrapped in
      ``async-start`` / ``dynamic-(update-)slice-start``. This is how a ``lax.scan`` offloads one
      layer's residual per iteration into a stacked host buffer.

    ``count``/``bytes`` are per *static* instruction. ``executed_count``/``executed_bytes``
    multiply each instruction by the trip counts of the while loops around it (``scan`` lowers to
    ``while``), read from ``backend_config={..."known_trip_count":{"n":"10"}}`` (XLA:GPU, XLA:CPU)
    or, where the compiler does not print it (XLA:TPU's optimized modules), derived from the
    loop's induction variable: constant init, ``add`` of a constant step in the body, compare
    against a constant bound in the condition (:func:`derived_trip_count`). When neither works,
    the multiplier is taken as 1 and ``trip_counts_known`` is False: the executed figures are
    then lower bounds. XLA:GPU wraps a dynamic-(update-)slice to or from ``S(5)`` in an async
    ``fusion-start``/``fusion-done`` pair; it is counted once, at the ``fusion-start``, as async.
    Both figures are per execution of the program (one training step when the step is one
    jitted function).

    Blind spots: XLA:CPU compiles offload away, so CPU programs show none; transfers the
    runtime does outside the program (``device_put`` of arguments between steps) are not HLO
    and are not counted; HloProto input has no backend_config in our schema, so trip counts
    from a proto are always unknown (use the text when you can).

Memory timeline (:func:`memory_timeline`, :func:`memory_peak`)
    The heap-simulator replay of a program's buffer assignment: `overlap.hlo.heap` (re-exported
    here, where it was written).

Getting an HloProto with buffer assignment (jax 0.10.2, verified on XLA:CPU)
    * A profile already carries one per module: the ``/host:metadata`` plane has an event
      metadata per module named ``"<module>(<program_id>)"`` with stat ``"Hlo Proto"`` (bytes),
      including heap-simulator traces. :func:`hlo_protos_from_xspace` extracts them.
    * Without running: :func:`hlo_proto_from_jitted` compiles once more with
      ``compiler_options={"xla_dump_to": tmp, "xla_dump_hlo_as_proto": True}`` and reads the
      ``*after_optimizations.hlo.pb`` dump (an ``HloProto`` with buffer assignment and traces).
    * Not sufficient: ``compiled.memory_analysis().serialized_buffer_assignment_proto`` has
      buffers and allocations but **no** heap-simulator traces; ``compiled.runtime_executable()
      .hlo_modules()[0].as_serialized_hlo_module_proto()`` is the module without buffer assignment.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from overlap.hlo.heap import MemoryTimeline as MemoryTimeline
from overlap.hlo.heap import buffer_assignment_sizes as buffer_assignment_sizes
from overlap.hlo.heap import live_bytes as live_bytes
from overlap.hlo.heap import memory_analysis_dict as memory_analysis_dict
from overlap.hlo.heap import memory_peak as memory_peak
from overlap.hlo.heap import memory_timeline as memory_timeline
from overlap.hlo.records import Record
from overlap.hlo.shapes import _BITS as _BITS
from overlap.hlo.shapes import _ENUM_BITS as _ENUM_BITS
from overlap.hlo.shapes import HOST_MEMORY_SPACE as HOST_MEMORY_SPACE
from overlap.hlo.shapes import ArrayShape as ArrayShape
from overlap.hlo.shapes import _bytes as _bytes
from overlap.hlo.shapes import _flatten as _flatten
from overlap.hlo.shapes import _layout_bytes as _layout_bytes
from overlap.hlo.shapes import _matching as _matching
from overlap.hlo.shapes import _on_host as _on_host
from overlap.hlo.shapes import _split_top as _split_top
from overlap.hlo.shapes import parse_shape as parse_shape
from overlap.trace.hlotext import LazyPattern, text_lines

# (protobuf, `overlap.trace.protos`, is imported where a proto is parsed: programs read from a
# run directory's HLO text never load it, ~10 ms of a report's start-up)

# (patterns compiled where first used: a capture's HloProto needs few of them, ~1 ms at import)
_TRIP_RE = LazyPattern(r'"known_trip_count"\s*:\s*\{\s*"n"\s*:\s*"?(\d+)')
# (each word first, the `\b` before it as a look-behind after it: a leading `\b` left the engine
# no first character to scan for, so it tried the pattern at each character of a call's
# attributes; the same matches, found in half the time: ~20 -> ~10 ms over a 28k-instruction
# program's 2.9k calls. `\b` before a word's first letter is "no word character before it".)
_CALL_KINDS = ("body", "condition", "calls", "to_apply", "true_computation",
               "false_computation", "async_execution_thread_computation")
_CALLS_RE = LazyPattern("(" + "|".join(rf"{w}(?<!\w{w})" for w in _CALL_KINDS)
                        + r")=%?([\w.\-]+)")
_BRANCHES_RE = LazyPattern(r"branch_computations=\{([^}]*)\}")
# Words each of `_CALLS_RE`'s matches holds ("true_computation=" and the others end in
# "_computation="): where none is in an instruction's attributes there is nothing to find,
# and a substring test costs a tenth of the pattern's search over an instruction's metadata
_CALL_WORDS = ("calls=", "to_apply=", "body=", "condition=", "_computation=")
_COMMENT_RE = LazyPattern(r"/\*.*?\*/")
_HEADER_RE = LazyPattern(r"^(ENTRY\s+)?%?([\w.\-]+)\s*(\(.*)?\{\s*$")


def calls_in(attrs: str) -> list[tuple[str, str]]:
    """`_CALLS_RE.findall(attrs)`: (kind, computation) per call, in order."""
    for w in _CALL_WORDS:
        if w in attrs:
            return _CALLS_RE.findall(attrs)
    return []


# ---- HLO text -> instructions ---------------------------------------------------------------

# An array shape that `parse_shape` reads without fail (a dtype, plain dimensions, any
# layout): the parser keeps such a shape's text and reads it when first asked for.
_PLAIN = r"[a-z][a-z0-9]*\[[\d,]*\](?:\{[^}]*\})?"
_PLAIN_ARRAY_RE = LazyPattern(_PLAIN + r"\Z")
# and a tuple of such shapes, one level deep
_PLAIN_TUPLE_RE = LazyPattern(r"\(\s*(?:(?:" + _PLAIN + r")\s*,\s*)*(?:" + _PLAIN + r")?\s*\)\Z")


def _operand_shape(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return parse_shape(text)
    except ValueError:
        return None


class _Instr(Record):
    """A parsed instruction. Its `shape` and `operand_shapes` are read from their text when
    first asked for (issue 32): most readers of a program look at a few instructions' shapes
    (`offload_inventory`: host-copy candidates and their operands), and reading every shape
    was ~40% of parsing a module, and most of its memory (~2 MiB of the real H100 transformer
    program's 3,638 instructions). Until then `_shape` holds the shape's text (a read shape
    is never a `str`) and `_operand_shapes` the operands' texts as a tuple (read ones are a
    list).

    Slots, no `__dict__` (round 32): a 6 MB unrolled program's ~28k records each held a
    56-byte object and an 88-byte array of its dict's values (CPython 3.11); slotted, one
    96-byte block (4.0 -> 2.7 MB at the parse's peak)."""

    __slots__ = ("name", "computation", "opcode", "operands", "attrs", "root", "_shape",
                 "_operand_shapes")
    _fields = ("name", "computation", "shape", "opcode", "operands", "operand_shapes", "attrs",
               "root")
    _shape: Any  # (a str: its text, unread)
    _operand_shapes: list[Any] | tuple[str | None, ...]  # (a tuple: their texts, unread)

    def __init__(self, name: str, computation: str, shape: Any, opcode: str,
                 operands: list[str], operand_shapes: list[Any], attrs: str,
                 root: bool = False) -> None:
        self.name, self.computation, self._shape, self.opcode = name, computation, shape, opcode
        self.operands = operands  # operand names
        # inline shapes where printed, else None (a tuple: texts, `operand_shapes`)
        self._operand_shapes = operand_shapes
        self.attrs, self.root = attrs, root  # root: the computation's ROOT (its result)

    @property
    def shape(self) -> Any:
        v = self._shape
        if type(v) is str:  # (its text: a plain one, never fails, `_PLAIN`)
            v = self._shape = parse_shape(v)
        return v

    @shape.setter
    def shape(self, value: Any) -> None:
        self._shape = value

    @property
    def operand_shapes(self) -> list[Any]:
        v = self._operand_shapes
        if isinstance(v, list):
            return v
        # (their texts: each read, None where one does not parse)
        got = self._operand_shapes = [_operand_shape(t) for t in v]
        return got

    @operand_shapes.setter
    def operand_shapes(self, value: list[Any]) -> None:
        self._operand_shapes = value


_TOKEN_RE = LazyPattern(r"\S+")
_OPCODE_RE = LazyPattern(r"\s*([\w\-.]+)\(")

# An instruction line as XLA prints most of them (all but 677 of the corpus' 46,852), read by
# one match (`_parse_plain`): a name, a plain array shape (a layout of no bracket or brace,
# only closed, unnested parentheses: `S(5)`, `T(8,128)`) or a tuple of them (and of such
# tuples, `_NESTED`), the opcode, and
# operands each such a shape and a name, or a name alone, separated by ", ". The general
# reader's steps give such a line the same parts; any other line goes the general way.
_LAYOUT = r"\{[^{}\[\]()\s]*(?:\([^{}\[\]()\s]*\)[^{}\[\]()\s]*)*\}"
_ARRAY = r"[a-z][a-z0-9]*\[[\d,]*\](?:" + _LAYOUT + r")?"


def _listed(item: str) -> str:
    """A pattern of `item`s separated by ", " up to a ")" (none, one or more), with one copy
    of `item`: the line's pattern compiles in ~1.1 ms, not ~2 (each process compiles it)."""
    return r"(?:" + item + r"(?:, (?=[^)])|(?=\))))*"


_TUPLE = r"\(" + _listed(_ARRAY) + r"\)"
# A result may also be a tuple of arrays and such tuples: XLA's async ops, `((operands),
# result, u32[])` (a `fusion-start` writing a layer's residual into a host buffer; read the
# general way, each such line took ~0.1 ms, its nested shape read at once).
_NESTED = r"\(" + _listed(r"(?:" + _ARRAY + r"|" + _TUPLE + r")") + r"\)"
_NESTED_RE = LazyPattern(_NESTED)
_NAME = r"[^\s,()\[\]{}]+"
_PLAIN_LINE_RE = LazyPattern(
    r"(?:(ROOT )|(?!ROOT ))%?(\S+) = (" + _ARRAY + r"|" + _NESTED + r") ([\w\-.]+)\("
    r"(" + _listed(r"(?:(?:" + _ARRAY + r"|" + _TUPLE + r") )?" + _NAME) + r")\)(.*)")
# one operand of such a line's list: (its shape or None, its name)
_PLAIN_OPERAND_RE = LazyPattern(r"(?:(" + _ARRAY + r"|" + _TUPLE + r") )?(" + _NAME + r")")


def _parse_plain(m: Any, computation: str, seen: dict[Any, Any] | None = None) -> _Instr:
    """`_parse_general` of a line `_PLAIN_LINE_RE` matched (its match `m`): the same record,
    read off the match's groups (a module of 1,819 instructions, the real H100 transformer
    program: ~13 -> ~8 ms, the general reader's bracket scans in Python left out).

    `seen` (one per module): an opcode or a shape's text met before is that one object, and
    the operands' shapes where none is printed one shared tuple of Nones per length (their
    texts: `_Instr.operand_shapes` makes each its own list when read). Equal values either
    way; a 6 MB unrolled program's ~28k instructions held each its own, 6 MB of the
    report's peak. Operand names are not made their instructions' own text: 1.9 MB less of
    that program, for 3-4% more of its report's instructions (a lookup per name and
    operand; round 31)."""
    root, name, shape, opcode, operand_txt, attrs = m.groups()
    op_texts: tuple[str | None, ...]
    if not operand_txt:
        operands, op_texts = [], ()
    elif "(" not in operand_txt:  # (no tuple and no layout with parentheses: ", " parts)
        parts = operand_txt.split(", ")
        if operand_txt.count(" ") == len(parts) - 1:
            # no space but the separators': names alone, no shape (XLA:GPU's text prints
            # its operands so; one comprehension, not three)
            operands = [nm.lstrip("%") for nm in parts]
            op_texts = (None,) * len(parts)
        else:
            split = [op.rpartition(" ") for op in parts]
            operands = [nm.lstrip("%") for _, _, nm in split]
            op_texts = tuple([sh if sp else None for sh, sp, _ in split])
    else:
        ms = [om.groups() for om in _PLAIN_OPERAND_RE.finditer(operand_txt)]
        operands = [nm.lstrip("%") for _, nm in ms]
        op_texts = tuple([sh for sh, _ in ms])
    if seen is not None:
        once = seen.setdefault
        shape, opcode = once(shape, shape), once(opcode, opcode)
        if not any(op_texts):
            op_texts = once(len(op_texts), op_texts)
    ins = _Instr.__new__(_Instr)  # (slots set one by one: no call of `__init__` a line)
    ins._shape = shape  # (a plain array shape or tuple of them: read on first use)
    ins._operand_shapes = op_texts
    ins.name = name.lstrip("%")
    ins.computation = computation
    ins.opcode = opcode
    ins.operands = operands
    ins.attrs = attrs
    ins.root = root is not None
    return ins


def _parse_general(line: str, computation: str) -> _Instr | None:
    body = line.strip()
    root = body.startswith("ROOT ")
    if root:
        body = body[5:]
    name, eq, rest = body.partition(" = ")
    if not eq:
        return None
    rest = rest.lstrip()
    if rest.startswith("("):
        end = _matching(rest, 0)
        shape_txt, rest = rest[:end + 1], rest[end + 1:]
    else:
        m = _TOKEN_RE.match(rest)
        if m is None:
            return None
        shape_txt, rest = m.group(0), rest[m.end():]
    m = _OPCODE_RE.match(rest)
    if not m:
        return None
    opcode = m.group(1)
    open_at = m.end() - 1
    close = _matching(rest, open_at)
    operand_txt, attrs = rest[open_at + 1:close], rest[close + 1:]
    operands, op_texts = [], []
    for op in _split_top(operand_txt):
        parts = op.rsplit(None, 1)
        operands.append(parts[-1].lstrip("%"))
        op_texts.append(parts[0] if len(parts) == 2 else None)
    # shapes read on first use (`_Instr.shape`); one that may not parse is read now: an
    # instruction whose result shape does not parse is left out, as it always was
    ins = _Instr.__new__(_Instr)
    if _PLAIN_ARRAY_RE.match(shape_txt) or (shape_txt[:1] == "(" and (
            _PLAIN_TUPLE_RE.match(shape_txt) or _NESTED_RE.fullmatch(shape_txt))):
        ins._shape = shape_txt
    else:
        try:
            ins._shape = parse_shape(shape_txt)
        except ValueError:
            return None
    ins._operand_shapes = tuple(op_texts)
    ins.name, ins.computation, ins.opcode = name.strip().lstrip("%"), computation, opcode
    ins.operands, ins.attrs, ins.root = operands, attrs, root
    return ins


def _parse_module(text: str | Iterable[str]) -> tuple[dict[str, list[_Instr]], str | None]:
    """A module's computations (name -> its instructions in order) and its entry's name,
    from its text or its lines (`ParsedHlo.of_lines`)."""
    comps: dict[str, list[_Instr]] = {}
    entry = None
    current = None
    into: list[_Instr] = []  # (the current computation's list)
    # (the plain form's match and reader looked up once, not per line; a line that is no
    # plain one is read the general way)
    fullmatch, plain = _PLAIN_LINE_RE.fullmatch, _parse_plain
    seen: dict[Any, Any] = {}  # (texts met before, and lists of Nones: `_parse_plain`)
    # (a piece at a time: not every line held at once)
    for line in text_lines(text) if isinstance(text, str) else text:
        # Long tuples carry /*index=N*/ comments between elements; they are not part of shapes.
        # (the pattern only where a comment can begin: 38 of the real H100 program's 2,496
        # lines have one)
        s = (_COMMENT_RE.sub("", line) if "/*" in line else line).strip()
        if not s or s.startswith(("HloModule", "//", "#")):
            continue
        if current is None:
            m = _HEADER_RE.match(s)
            if m:
                current = m.group(2)
                into = comps[current] = []
                if m.group(1):
                    entry = current
            continue
        if s == "}":
            current = None
            continue
        try:
            m = fullmatch(s)
            ins = plain(m, current, seen) if m is not None else _parse_general(s, current)
        except ValueError:  # a line we cannot parse is not a transfer we can count; keep going
            ins = None
        if ins is not None:
            into.append(ins)
    return comps, entry


_INDEX_RE = LazyPattern(r"\bindex=(\d+)")
_DIRECTION_RE = LazyPattern(r"\bdirection=(\w+)")
_COND_RE = LazyPattern(r"\bcondition=%?([\w.\-]+)")
_BODY_RE = LazyPattern(r"\bbody=%?([\w.\-]+)")
_PASS_THROUGH = ("copy", "convert", "bitcast")


def _int_constant(ins: _Instr | None, by_name: dict[str, _Instr], depth: int = 0) -> int | None:
    """The value of a scalar integer constant, looking through copies and converts."""
    while ins is not None and ins.opcode in _PASS_THROUGH and ins.operands and depth < 8:
        ins, depth = by_name.get(ins.operands[0]), depth + 1
    if ins is None or ins.opcode != "constant" or not ins.operands:
        return None
    try:
        return int(ins.operands[0])
    except ValueError:
        return None


def _tuple_index_of_param(ins: _Instr | None, by_name: dict[str, _Instr]) -> int | None:
    """k when `ins` is get-tuple-element(parameter, index=k), through copies."""
    depth = 0
    while ins is not None and ins.opcode in _PASS_THROUGH and ins.operands and depth < 8:
        ins, depth = by_name.get(ins.operands[0]), depth + 1
    if ins is None or ins.opcode != "get-tuple-element" or not ins.operands:
        return None
    src = by_name.get(ins.operands[0])
    m = _INDEX_RE.search(ins.attrs)
    if src is None or src.opcode != "parameter" or not m:
        return None
    return int(m.group(1))


def derived_trip_count(while_ins: _Instr, comps: dict[str, list[_Instr]],
                       by_name: dict[str, _Instr]) -> int | None:
    """A while loop's trip count from its induction variable, when the compiler did not print
    `known_trip_count` (XLA:TPU's optimized modules do not).

    Recognises the counted loop `lax.scan`/`fori_loop` lower to: the condition's ROOT is
    `compare(get-tuple-element(param, index=k), constant C)` (either operand order), the init
    tuple's element k is a constant, and the body's ROOT tuple sets element k to
    `add(get-tuple-element(param, index=k), constant s)`. Anything else -> None (unknown).
    """
    cm, bm = _COND_RE.search(while_ins.attrs), _BODY_RE.search(while_ins.attrs)
    if not cm or not bm or not while_ins.operands:
        return None
    cond = next((i for i in comps.get(cm.group(1), []) if i.root), None)
    body = next((i for i in comps.get(bm.group(1), []) if i.root), None)
    if cond is None or body is None or cond.opcode != "compare" or len(cond.operands) != 2:
        return None
    dm = _DIRECTION_RE.search(cond.attrs)
    if not dm:
        return None
    direction = dm.group(1)
    a, b = (by_name.get(o) for o in cond.operands)
    k, bound = _tuple_index_of_param(a, by_name), _int_constant(b, by_name)
    if k is None or bound is None:  # `C > i` is `i < C`
        k, bound = _tuple_index_of_param(b, by_name), _int_constant(a, by_name)
        direction = {"GT": "LT", "GE": "LE", "LT": "GT", "LE": "GE"}.get(direction, direction)
    if k is None or bound is None:
        return None
    init_tuple = by_name.get(while_ins.operands[0])
    if init_tuple is None or init_tuple.opcode != "tuple" or k >= len(init_tuple.operands):
        return None
    start = _int_constant(by_name.get(init_tuple.operands[k]), by_name)
    if start is None or body.opcode != "tuple" or k >= len(body.operands):
        return None
    upd = by_name.get(body.operands[k])
    if upd is None or upd.opcode != "add" or len(upd.operands) != 2:
        return None
    x, y = (by_name.get(o) for o in upd.operands)
    step = _int_constant(y, by_name) if _tuple_index_of_param(x, by_name) == k else (
        _int_constant(x, by_name) if _tuple_index_of_param(y, by_name) == k else None)
    if not step:
        return None
    if direction == "LT" and step > 0:
        return max(0, -(-(bound - start) // step))
    if direction == "LE" and step > 0:
        return max(0, (bound - start) // step + 1)
    if direction == "GT" and step < 0:
        return max(0, -(-(start - bound) // -step))
    if direction == "GE" and step < 0:
        return max(0, (start - bound) // -step + 1)
    if direction == "NE" and (bound - start) % step == 0 and (bound - start) // step >= 0:
        return (bound - start) // step
    return None


def _multipliers(comps: dict[str, list[_Instr]], entry: str | None,
                 calls: list[Sequence[tuple[str, str]]] | None = None,
                 by_name: dict[str, _Instr] | None = None
                 ) -> tuple[dict[str, int], dict[str, bool]]:
    """Executions of each computation per program run, and whether every loop count was known.

    A while body runs `known_trip_count` times per execution of its caller; other calls
    (fusions, async wrappers, to_apply, branches) run at most once per caller execution —
    conditional branches are counted as taken, an upper bound. `calls`: `calls_in` of each
    instruction in `comps`' order where the caller has them (`ParsedHlo.calls`); `by_name`:
    the instructions by name, where the caller has made them."""
    # caller -> (callee, n, known)
    edges: dict[str, list[tuple[str, int, bool]]] = defaultdict(list)
    if by_name is None:
        by_name = {i.name: i for instrs in comps.values() for i in instrs}
    found = iter(calls) if calls is not None else None
    for cname, instrs in comps.items():
        for ins in instrs:
            a = ins.attrs
            # (each pattern searched only where its literal words are in the attributes)
            trip = _TRIP_RE.search(a) if '"known_trip_count"' in a else None
            n = int(trip.group(1)) if trip else None
            if n is None and ins.opcode == "while":
                n = derived_trip_count(ins, comps, by_name)
            for kind, callee in calls_in(a) if found is None else next(found):
                if ins.opcode == "while" and kind == "body":
                    edges[cname].append((callee, 1 if n is None else n, n is not None))
                else:
                    edges[cname].append((callee, 1, True))
            for group in _BRANCHES_RE.findall(a) if "branch_computations=" in a else ():
                for callee in group.split(","):
                    edges[cname].append((callee.strip().lstrip("%"), 1, True))
    mult: dict[str, int] = {}
    known: dict[str, bool] = {}
    called = {e[0] for es in edges.values() for e in es}
    roots = [entry] if entry in comps else [c for c in comps if c not in called]

    def visit(c: str, m: int, k: bool, depth: int = 0):
        if depth > 64:  # HLO call graphs are DAGs; this only guards malformed input
            return
        mult[c] = mult.get(c, 0) + m
        known[c] = known.get(c, True) and k
        for callee, n, kn in edges.get(c, ()):
            visit(callee, m * n, k and kn, depth + 1)

    for r in roots:
        visit(r, 1, True)
    return mult, known


# ---- Offload inventory ----------------------------------------------------------------------


class OffloadOp(Record):
    _fields = ("name", "computation", "opcode", "direction", "bytes", "executions",
               "trip_count_known", "is_async", "shape", "layout_bytes")

    def __init__(self, name: str, computation: str, opcode: str, direction: str, bytes: int,
                 executions: int, trip_count_known: bool, is_async: bool, shape: str,
                 layout_bytes: int = 0) -> None:
        self.name, self.computation = name, computation
        # copy-start | copy | dynamic-update-slice | dynamic-slice (+ "-start" if async)
        self.opcode = opcode
        self.direction = direction  # "D2H" | "H2D"
        self.bytes = bytes  # per execution of the instruction
        # per execution of the program (trip-count product; 1 if unknown)
        self.executions, self.trip_count_known = executions, trip_count_known
        self.is_async, self.shape = is_async, shape
        # Bytes in the layout the compiler chose (tile padding included: what the DMA moves on
        # TPU); equal to `bytes` for untiled layouts and for HloProto input (no layout read).
        self.layout_bytes = layout_bytes

    def as_dict(self) -> dict[str, Any]:  # (`dataclasses.asdict`'s: str, int, bool values)
        return {f: getattr(self, f) for f in self._fields}


class OffloadInventory(Record):
    _fields = ("ops",)

    def __init__(self, ops: list[OffloadOp]) -> None:
        self.ops = ops

    def summary(self, direction: str) -> dict[str, int]:
        sel = [o for o in self.ops if o.direction == direction]
        return {"count": len(sel), "bytes": sum(o.bytes for o in sel),
                "executed_count": sum(o.executions for o in sel),
                "executed_bytes": sum(o.bytes * o.executions for o in sel)}

    @property
    def in_loops(self) -> bool:
        return any(o.executions != 1 or not o.trip_count_known for o in self.ops)

    @property
    def trip_counts_known(self) -> bool:
        return all(o.trip_count_known for o in self.ops)

    def to_dict(self) -> dict:
        return {
            "D2H": self.summary("D2H"), "H2D": self.summary("H2D"),
            "in_loops": self.in_loops, "trip_counts_known": self.trip_counts_known,
            "note": ("count/bytes are per static instruction; executed_* multiply by loop trip "
                     "counts, per program execution"
                     + ("" if self.trip_counts_known else "; some trip counts unknown: executed_* "
                        "are lower bounds")),
            "ops": [o.as_dict() for o in self.ops],
        }


# Async wrappers around a whole computation: XLA:TPU's `async-start`, and XLA:GPU's
# `fusion-start`/`fusion-done` pair that wraps a dynamic-(update-)slice into or out of S(5)
# (named `dynamic-update-slice-start.N` / `dynamic-slice-start.N` in the optimized module).
_WRAPPERS = ("async-start", "fusion-start")


def _classify(ins: _Instr, by_name: dict[str, _Instr], comps: dict[str, list[_Instr]]):
    """(opcode, direction, bytes, is_async, layout bytes) if `ins` moves data across S(5), else
    None. Layout bytes include the tile padding of the layout the compiler chose (what a DMA
    moves on TPU); bytes are the logical array's."""
    op = ins.opcode

    def operand_shape(i):
        if i < len(ins.operand_shapes) and ins.operand_shapes[i] is not None:
            return ins.operand_shapes[i]
        src = by_name.get(ins.operands[i]) if i < len(ins.operands) else None
        return src.shape if src else None

    if op == "copy-start":
        parts = ins.shape if isinstance(ins.shape, list) else [ins.shape]
        if len(parts) < 2:
            return None
        dest, src = parts[0], parts[1]
        if _on_host(dest) and not _on_host(src):
            return op, "D2H", _bytes(dest), True, _layout_bytes(dest)
        if _on_host(src) and not _on_host(dest):
            return op, "H2D", _bytes(dest), True, _layout_bytes(dest)
        return None
    if op == "copy":
        src = operand_shape(0)
        if src is None:
            return None
        if _on_host(ins.shape) and not _on_host(src):
            return op, "D2H", _bytes(ins.shape), False, _layout_bytes(ins.shape)
        if _on_host(src) and not _on_host(ins.shape):
            return op, "H2D", _bytes(ins.shape), False, _layout_bytes(ins.shape)
        return None
    base, is_async = op, False
    if op.endswith("-start") and op[:-6] in ("dynamic-slice", "dynamic-update-slice"):
        base, is_async = op[:-6], True
    elif op in _WRAPPERS:
        m = re.search(r"calls=%?([\w.\-]+)", ins.attrs)
        wrapped = comps.get(m.group(1), []) if m else []
        inner = next((i for i in wrapped if i.root), wrapped[-1] if wrapped else None)
        inner_by_name = {i.name: i for i in wrapped}
        depth = 0  # XLA:GPU's wrapped dynamic-slice computation ends in a copy of the slice
        while inner is not None and inner.opcode in _PASS_THROUGH and inner.operands and depth < 8:
            inner, depth = inner_by_name.get(inner.operands[0]), depth + 1
        if inner is None or inner.opcode not in ("dynamic-slice", "dynamic-update-slice"):
            return None
        # The wrapped computation's parameters carry no memory space; the wrapper's own shape
        # `((operands...), result, context)` does.
        if isinstance(ins.shape, list) and len(ins.shape) >= 2:
            operands, result = ins.shape[0], ins.shape[1]
            operands = operands if isinstance(operands, list) else [operands]
            if inner.opcode == "dynamic-update-slice" and len(operands) > 1:
                if _on_host(result) and not _on_host(operands[1]):
                    return (inner.opcode + "-start", "D2H", _bytes(operands[1]), True,
                            _layout_bytes(operands[1]))
                return None
            if inner.opcode == "dynamic-slice" and operands:
                if _on_host(operands[0]) and not _on_host(result):
                    return (inner.opcode + "-start", "H2D", _bytes(result), True,
                            _layout_bytes(result))
                return None
        c = _classify(inner, by_name, comps)
        return (inner.opcode + "-start", c[1], c[2], True, c[4]) if c else None
    if base == "dynamic-update-slice":
        # result aliases operand 0 (the big buffer); the update (operand 1) is what moves.
        result = ins.shape[1] if is_async and isinstance(ins.shape, list) else ins.shape
        upd = operand_shape(1)
        if _on_host(result) and upd is not None and not _on_host(upd):
            return op, "D2H", _bytes(upd), is_async, _layout_bytes(upd)
        return None
    if base == "dynamic-slice":
        result = ins.shape[1] if is_async and isinstance(ins.shape, list) else ins.shape
        src = operand_shape(0)
        if src is not None and _on_host(src) and not _on_host(result):
            return op, "H2D", _bytes(result), is_async, _layout_bytes(result)
        return None
    return None


class ParsedHlo:
    """An HLO text and its `_parse_module` result, parsed once for the readers of one
    program's text: `overlap.analysis.names` builds its `trace_ops.Program` and its offload
    inventory from one parse (issue 32: each parsed the text, ~20 ms of a run directory's
    report on the real H100 transformer captures). Read only."""

    __slots__ = ("text", "comps", "entry", "_calls", "_by_name", "_inventory", "roofline")

    def __init__(self, text: str) -> None:
        self.text: str | None = text
        self.comps, self.entry = _parse_module(text)
        self._calls: list[Sequence[tuple[str, str]]] | None = None
        self._by_name: dict[str, Any] | None = None
        self._inventory: OffloadInventory | None = None  # (`offload_inventory`, found once)
        # per compute model, instruction name -> its roofline time (`schedule._kernel_ps`),
        # found once for the estimates of this parse (a prediction makes four of a program)
        self.roofline: dict[tuple, dict[str, int]] = {}

    @classmethod
    def of_lines(cls, lines: Iterable[str]) -> ParsedHlo:
        """The parse of a module's lines as they come (a file read a piece at a time:
        `overlap.trace.hlotext.file_pieces`), holding no text (`text` is None): a 6 MB
        program's text read whole stood beside its parse at a report's peak."""
        self = cls.__new__(cls)
        self.text = None
        self.comps, self.entry = _parse_module(lines)
        self._calls = self._by_name = self._inventory = None
        self.roofline = {}
        return self

    def by_name(self) -> dict[str, _Instr]:
        """Name -> instruction (a name given twice: its last, at its first's place), made
        once: the inventory reads it, and a program made while letting the parse go takes it
        over (`take_by_name`: a second dict of as many names was ~1.3 MB of a 6 MB unrolled
        program's report, at its peak)."""
        if self._by_name is None:
            self._by_name = {i.name: i for instrs in self.comps.values() for i in instrs}
        return self._by_name

    def take_by_name(self) -> dict[str, Any] | None:
        """`by_name()`'s dict where it was made, handed over and no longer the parse's (its
        values are for the taker to replace), else None."""
        out, self._by_name = self._by_name, None
        return out

    def calls(self) -> list[Sequence[tuple[str, str]]]:
        """`calls_in` of each instruction's attributes, in `comps`' order, found once: the
        program (`trace_ops.program_from_text`) and the inventory's loop counts
        (`_multipliers`) both read them (~1.5 ms a pass over the real H100 program)."""
        if self._calls is None:
            # (one empty tuple for the instructions that call nothing, most of them: kept
            # with the parse, an empty list each was ~0.1 MB of the real H100 program)
            self._calls = [calls_in(i.attrs) or () for instrs in self.comps.values()
                           for i in instrs]
        return self._calls


# Parses kept for their texts inside `parses_kept` (per thread and task: a context variable);
# None outside one, where every `parsed` parses and nothing is held beyond its reader.
_KEPT: contextvars.ContextVar[dict[tuple[bool, str], ParsedHlo] | None] = \
    contextvars.ContextVar("overlap_parses_kept", default=None)


@contextlib.contextmanager
def parses_kept() -> Iterator[None]:
    """Within it, `parsed` gives one parse per text, and `offload_inventory` one inventory per
    parse. Why: a prediction reads its program's text at each of its steps (the copies' join,
    the estimate's schedule and timeline, the streams, each with the inventory): the real
    H100 transformer program was parsed 11 times and its inventory found 8, ~0.2 s of a
    `report --predict` (issue 32). Parses are read only (`ParsedHlo`); what was kept goes
    when the outermost one ends."""
    token = _KEPT.set({}) if _KEPT.get() is None else None
    try:
        yield
    finally:
        if token is not None:
            _KEPT.reset(token)


def parsed(text: str, uncommented: bool = False) -> ParsedHlo:
    """`ParsedHlo(text)`, or with `uncommented` of the text with its `/* */` comments taken
    out first (as the estimate's readers parse it), kept within `parses_kept`. There, the
    two are one parse where they read alike (`_read_alike`: each program a prediction
    prints was parsed both ways, ~a sixth of it on a capture of 32 programs); its `text` is
    then the first one asked's, which no reader of a kept parse reads."""
    kept = _KEPT.get()
    key = (uncommented, text)
    if kept is not None:
        got = kept.get(key)
        if got is None and (twin := kept.get((not uncommented, text))) is not None \
                and _read_alike(text):
            got = kept[key] = twin
        if got is not None:
            return got
    got = ParsedHlo(_COMMENT_RE.sub("", text) if uncommented else text)
    if kept is not None:
        kept[key] = got
    return got


# Line breaks `str.splitlines` reads besides a line feed (a comment may span them: `.` matches)
_OTHER_BREAKS_RE = LazyPattern("[\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")


def _read_alike(text: str) -> bool:
    """Whether `_parse_module` reads `text` as it reads `text` with its comments taken out
    first: it takes each line's own out once, so alike where only line feeds break lines and
    none is left once they are taken out (`//*a*/*b*/` leaves `/*b*/`, taken out once more)."""
    return _OTHER_BREAKS_RE.search(text) is None and "/*" not in _COMMENT_RE.sub("", text)


def offload_inventory(hlo: str | bytes | ParsedHlo | Any) -> OffloadInventory:
    """Transfers to/from host memory space S(5) in one compiled program.

    `hlo` is HLO text (``compiled.as_text()``) or its `ParsedHlo`, serialized ``HloProto``
    bytes, or an HloProto message (or the inventory itself, returned as it is). See the
    module docstring for what is counted and how loops are handled."""
    if isinstance(hlo, OffloadInventory):  # (found already: `names._programs`)
        return hlo
    if isinstance(hlo, (bytes, bytearray)) or hasattr(hlo, "hlo_module"):
        return _inventory_from_proto(hlo)
    if not isinstance(hlo, ParsedHlo):
        hlo = parsed(hlo)
    if hlo._inventory is not None:  # (read only, as the parse is)
        return hlo._inventory
    comps, by_name = hlo.comps, hlo.by_name()
    mult, known = _multipliers(comps, hlo.entry, hlo.calls(), by_name)
    # Instructions inside an async-wrapped computation are counted at their async-start.
    wrapped = {m.group(1) for instrs in comps.values() for i in instrs if i.opcode in _WRAPPERS
               for m in [re.search(r"calls=%?([\w.\-]+)", i.attrs)] if m}
    hlo._inventory = OffloadInventory(_collect_ops(
        comps, by_name, wrapped, lambda c: mult.get(c, 1), lambda c: known.get(c, True)))
    return hlo._inventory


# The opcodes `_classify` can name a host copy: any other is None there, before any shape.
_CLASSIFIED = frozenset({"copy-start", "copy", "dynamic-slice", "dynamic-update-slice",
                         "dynamic-slice-start", "dynamic-update-slice-start", *_WRAPPERS})


def _collect_ops(comps, by_name, wrapped, multiplier, trip_known) -> list[OffloadOp]:
    """Every host copy in `comps` (skipping computations wrapped by an async-start, which are
    counted at the async-start), with its per-run multiplier and whether that is known."""
    ops = []
    for cname, instrs in comps.items():
        if cname in wrapped:
            continue
        for ins in instrs:
            if ins.opcode not in _CLASSIFIED:
                continue  # (`_classify` says None to every other opcode)
            c = _classify(ins, by_name, comps)
            if c is None:
                continue
            opcode, direction, nbytes, is_async, layout_nbytes = c
            ops.append(OffloadOp(ins.name, cname, opcode, direction, nbytes, multiplier(cname),
                                 trip_known(cname), is_async,
                                 ", ".join(str(a) for a in _flatten(ins.shape)), layout_nbytes))
    return ops


# element type's bits -> a dtype string, only for byte counting (every value of _ENUM_BITS)
_BITS_DTYPE = {0: "token", 2: "u2", 4: "u4", 8: "u8", 16: "u16", 32: "u32", 64: "u64",
               128: "c128"}


def _proto_shape(sp) -> Any:
    if sp.tuple_shapes:
        return [_proto_shape(t) for t in sp.tuple_shapes]
    return ArrayShape(_BITS_DTYPE[_ENUM_BITS.get(sp.element_type, 0)], tuple(sp.dimensions),
                      sp.layout.memory_space)


class _ProtoInstr(_Instr):
    """An `_Instr` of an HloProto whose shape and operands are read from its message when
    first asked for: `_classify` reads those of host-copy candidates and their operands only,
    a few of a program's thousands of instructions (a shape ~7 us, the operands ~2 us; a
    2,000-instruction program: ~18 ms). `by_id` is the program's id -> instruction map, read
    after it is complete: operands resolve as one lookup after the first pass would (an id
    written twice: its last instruction has its own message's operands, the others none)."""

    def __init__(self, name: str, computation: str, msg: Any, opcode: str, iid: int,
                 by_id: dict[int, _Instr]):
        self.name, self.computation, self.opcode = name, computation, opcode
        self._msg, self._iid, self._by_id = msg, iid, by_id
        self._shape: Any = None
        self._shape_read = False
        self._operands: list[str] | None = None
        self.operand_shapes: list[Any] = []
        self.attrs = ""
        self.root = False

    @property
    def shape(self) -> Any:
        if not self._shape_read:
            self._shape, self._shape_read = _proto_shape(self._msg.shape), True
        return self._shape

    @shape.setter
    def shape(self, value: Any) -> None:
        self._shape, self._shape_read = value, True

    @property
    def operands(self) -> list[str]:
        if self._operands is None:
            by_id = self._by_id
            self._operands = [by_id[o].name for o in self._msg.operand_ids[:] if o in by_id] \
                if by_id.get(self._iid) is self else []
        return self._operands

    @operands.setter
    def operands(self, value: list[str]) -> None:
        self._operands = value


def _inventory_from_proto(hlo) -> OffloadInventory:
    from overlap.trace.programs import hlo_message

    proto = hlo_message(hlo) if isinstance(hlo, (bytes, bytearray)) else hlo
    mod = proto.hlo_module
    computations = mod.computations[:]  # (slices: `trace_ops.program_from_proto` says why)
    id_to_comp = {c.id: c.name for c in computations}
    comps: dict[str, list[_Instr]] = {}
    by_id: dict[int, _Instr] = {}
    calls: dict[str, list[tuple[str, str]]] = defaultdict(list)
    starts = []  # (id, called ids) of async-starts: each message's fields read once
    for c in computations:
        lst: list[_Instr] = []
        cname = c.name
        for i in c.instructions[:]:
            iid, opcode, called = i.id, i.opcode, i.called_computation_ids
            ins = _ProtoInstr(i.name, cname, i, opcode, iid, by_id)
            by_id[iid] = ins
            lst.append(ins)
            if called:
                for k, cid in enumerate(called[:]):
                    calls[cname].append((id_to_comp.get(cid, ""), opcode if k == 0 else ""))
                if opcode == "async-start":
                    starts.append((iid, called))
        comps[cname] = lst
    # (an id written twice: its last instruction gets the wrapper target, as a lookup by id
    # after the first pass gives it)
    for iid, called in starts:
        by_id[iid].attrs = f"calls={id_to_comp.get(called[0], '')}"
    # While trip counts live in backend_config, which our proto subset does not carry: a
    # computation reached through a while body gets multiplier 1 and known=False.
    loop_bodies = {callee for es in calls.values() for callee, opc in es if opc == "while"}
    reach_unknown: set[str] = set()
    # every computation a loop body reaches, 64 calls deep at most (a walk, not a recursive
    # closure: that would be a reference cycle, see below)
    todo = [(b, 0) for b in loop_bodies]
    while todo:
        c, depth = todo.pop()
        if c in reach_unknown or depth > 64:
            continue
        reach_unknown.add(c)
        todo.extend((callee, depth + 1) for callee, _ in reversed(calls.get(c, ())))
    by_name = {i.name: i for i in by_id.values()}
    wrapped = {i.attrs[6:] for i in by_id.values() if i.opcode == "async-start"}
    # Protos carry no backend_config, hence no trip counts: multiplier 1, known only outside loops.
    try:
        return OffloadInventory(_collect_ops(comps, by_name, wrapped, lambda c: 1,
                                             lambda c: c not in reach_unknown))
    finally:
        # Each instruction holds `by_id`, which holds it: a cycle that kept every program's
        # instructions and its decoded message alive where the collector is off (`report`:
        # `overlap.cli.main.run`), ~1.2 MiB per 2,000-instruction program, 12 MiB of the
        # H100 transformer captures' peak. Nothing here is read after the ops are made.
        by_id.clear()


# ---- Getting HloProtos ----------------------------------------------------------------------


def hlo_protos_from_xspace(xspace: str | os.PathLike | bytes | Any) -> dict[str, bytes]:
    """``{"<module>(<program_id>)": HloProto bytes}`` from a capture's ``/host:metadata`` plane.

    `xspace` is an ``.xplane.pb`` path, its bytes, or a parsed XSpace."""
    if isinstance(xspace, (str, os.PathLike)):
        from overlap.trace.files import planes_named

        # only the metadata planes' bytes: not a second parse of the whole file
        part = planes_named(Path(xspace), "/host:metadata")
        if part is not None:
            xspace = part
        else:
            from overlap.trace.paths import open_regular

            with open_regular(xspace, "capture file") as f:  # never a FIFO or a device
                xspace = f.read()
    if isinstance(xspace, (bytes, bytearray)):
        # invalid UTF-8 in a string field is read with replacement, as the reader reads it
        # (overlap.trace.wire's rule for damaged bytes), not a refusal of the whole file
        from overlap.trace.wire import space_message

        xspace = space_message(bytes(xspace))
    out: dict[str, bytes] = {}
    for plane in xspace.planes:
        if plane.name != "/host:metadata":
            continue
        stat_ids = [k for k, v in plane.stat_metadata.items() if v.name == "Hlo Proto"]
        for em in plane.event_metadata.values():
            for s in em.stats:
                if s.metadata_id in stat_ids and s.bytes_value:
                    out[em.name] = bytes(s.bytes_value)
    return out


def pick_module(protos: dict[str, bytes], hint: str | None = None) -> tuple[str, bytes]:
    """The module a capture is about: `hint` is the module that ran (its name, as the trace's
    `hlo_module` stats give it, or `<name>(<program_id>)`). jax also compiles helper programs
    (RNG seeding, `jit__normal`, broadcasts) that the capture records alongside the step and
    that can be larger, so without a hint the only safe answer is the single module there is.
    Several modules of that name: the latest compile (highest program id)."""
    if not protos:
        raise ValueError("no HLO protos in this capture (profile_options.enable_hlo_proto off?)")
    if hint:
        cands = [k for k in protos if k == hint or k.startswith(hint + "(")] or \
                [k for k in protos if hint in k]
    else:
        cands = list(protos)
    if not cands:
        raise ValueError(f"no HLO proto for module {hint!r} (have {', '.join(sorted(protos))})")
    if len({k.split("(")[0] for k in cands}) > 1:
        raise ValueError("several programs in this capture and no way to tell which one ran "
                         f"({', '.join(sorted(cands))}); name the module")

    def pid(k: str) -> int:
        tail = k.rsplit("(", 1)[-1].rstrip(")")
        return int(tail) if tail.isdigit() else -1

    name = max(cands, key=pid)
    return name, protos[name]


def hlo_text_from_proto(hlo_proto: bytes | Any) -> str:
    """HLO text (the form `compiled.as_text()` prints, schedule order kept) of a serialized
    ``HloProto`` (or an HloProto message), as a capture's ``/host:metadata`` plane carries it,
    printed by XLA itself through jaxlib: every field our own proto subset leaves out
    (layouts, tiles, backend configs) survives, since unknown fields are kept on re-serializing.
    Needs jaxlib (the `plan` extra)."""
    from overlap.errors import require_extra

    require_extra("plan", "jaxlib")
    from jaxlib import xla_client

    if isinstance(hlo_proto, (bytes, bytearray)):
        from overlap.trace.protos import HloProto

        hlo_proto = HloProto.FromString(bytes(hlo_proto))
    module = hlo_proto.hlo_module if hasattr(hlo_proto, "hlo_module") else hlo_proto
    return xla_client.XlaComputation(module.SerializeToString()).as_hlo_text()


def hlo_proto_from_jitted(jitted, *args, **kwargs) -> bytes:
    """Serialized ``HloProto`` (with buffer assignment and heap-simulator traces) of
    ``jitted(*args, **kwargs)``, by compiling once more with an XLA dump to a temp dir.

    Costs one extra compilation; nothing runs. The dump file is ``*after_optimizations.hlo.pb``
    (prefixed ``cpu_``/``gpu_`` by backend)."""
    import glob
    import tempfile  # here: ~2-4 ms of every GPU report's start-up (shutil, random)

    with tempfile.TemporaryDirectory(prefix="overlap-hlo-") as d:
        jitted.lower(*args, **kwargs).compile(compiler_options={
            "xla_dump_to": d, "xla_dump_hlo_as_proto": True, "xla_dump_hlo_as_text": False})
        files = sorted(glob.glob(os.path.join(d, "*after_optimizations.hlo.pb")),
                       key=os.path.getsize)
        if not files:
            raise RuntimeError(f"XLA wrote no *after_optimizations.hlo.pb (got {os.listdir(d)})")
        return Path(files[-1]).read_bytes()
