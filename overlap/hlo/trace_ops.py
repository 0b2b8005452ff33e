"""From a trace's copy op to the compiled program's instructions, and along their data flow.

A GPU copy event of a capture names the op that launched it (`hlo_op` stat) and its program
(`hlo_module`, `program_id`); the compiled program (a run directory's `hlo/*.hlo.txt`, or the
`Hlo Proto` the capture carries per program) holds the instructions. They do not always share
a name. Rules (:func:`trace_op_instructions`), checked on the real H100/H200 captures of jax
0.11.2 (/work/notes/trace-hlo-names.md has the evidence):

* ``name``: the op is an instruction's name (`copy-start.14.0`: XLA:GPU's async copies; every
  TPU op).
* ``called computation``: the op is `X` (or `X.N`) and an instruction calls the computation
  `X_computation` (or `X_computation.N`: XLA numbers a clone after the suffix):
  `wrapped_dynamic-update-slice.1` is the thunk of the async `dynamic-update-slice-start.1.0
  = fusion-start(...), calls=%wrapped_dynamic-update-slice_computation.1` (XLA:GPU keeps the
  wrapped fusion's name for the thunk; the instruction was renamed). An instruction inside an
  async wrapper computation (the proto's `async-start` calls a computation holding the
  fusion) maps to the async-start that calls it.
* ``command buffer``: `command_buffer_N` is a CUDA-graph thunk XLA:GPU builds after the HLO
  is final; no HLO instruction or computation carries the name, so the op maps to no
  instruction (None): a caller can only narrow it by direction and bytes.

Data flow (:func:`origins`): where a value comes from, through bitcasts, copies, tuples,
`get-tuple-element`, async done/start pairs and while loops (a body parameter's tuple element
comes from the loop's initial tuple and from the body's result of the previous iteration).
:func:`frame_locations` gives an instruction's source locations (op metadata `stack_frame_id`
into the module's stack frame index), innermost first.

Blind spots: the positional operand rule (an async wrapper's operands are the wrapped
computation's parameters, in order) is XLA's convention, not checked per instruction; loops
other than `while` (conditionals, calls) are followed only through their parameters.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

from overlap.hlo.records import FrozenRecord, Record
from overlap.trace.hlotext import LazyPattern, text_lines


class Location(FrozenRecord):
    """A source location (1-based line; 0-based columns, end exclusive, as Python's). Frozen."""

    _fields = ("file", "function", "line", "column", "end_line", "end_column")
    file: str
    function: str
    line: int
    column: int
    end_line: int
    end_column: int

    def __init__(self, file: str, function: str, line: int, column: int, end_line: int,
                 end_column: int) -> None:
        d = self.__dict__
        d["file"], d["function"], d["line"], d["column"], d["end_line"], d["end_column"] = (
            file, function, line, column, end_line, end_column)


class Ins(Record):
    """One instruction of a `Program`. One read from HLO text (`program_from_text`) holds its
    attributes' text (`_attrs`) and reads `tuple_index`, `frame`, `op_name` and
    `control_predecessors` from it when one is first asked (`_read_attrs`): a report looks
    at the copies' and their neighbours' (a few dozen of the real H100 transformer
    program's 1,819 instructions), where the searches for every instruction took ~4 ms.

    Slots, no `__dict__` (round 32): a 6 MB unrolled program's ~28k instructions each held a
    56-byte object and a 112-byte array of its dict's values (CPython 3.11); slotted, one
    96-byte block (4.7 -> 2.7 MB), the size of the parse's records (`program._Instr`), so a
    program made while the parse is let go takes the blocks the parse leaves."""

    __slots__ = ("name", "opcode", "computation", "operands", "calls", "parameter_number",
                 "_attrs", "_more")
    _fields = ("name", "opcode", "computation", "operands", "calls", "tuple_index",
               "parameter_number", "frame", "op_name", "control_predecessors")
    _attrs: str | None  # (one read from text: its attributes' text, until a field is read)
    # (tuple_index, frame, op_name, control_predecessors); None until read from `_attrs`
    _more: tuple[int | None, int, str, list[str]] | None

    def __init__(self, name: str, opcode: str, computation: str, operands: list[str],
                 calls: list[str], tuple_index: int | None = None,
                 parameter_number: int | None = None, frame: int = 0, op_name: str = "",
                 control_predecessors: list[str] | None = None) -> None:
        self.name = name
        self.opcode = opcode
        self.computation = computation
        self.operands = operands
        self.calls = calls
        self.parameter_number = parameter_number
        self._attrs = None
        # frame: stack_frame_id, 1-based; 0 = none. control_predecessors: instructions that
        # must run before this one though it reads none of their values (XLA's scheduler
        # orders an async copy's -done before the kernels after it this way)
        self._more = (tuple_index, frame, op_name,
                      [] if control_predecessors is None else control_predecessors)

    def _read_attrs(self) -> tuple[int | None, int, str, list[str]]:
        """The four fields read from the attributes' text (which is then let go)."""
        attrs = self._attrs
        if attrs is None:  # (none to read: an `Ins` whose four fields were taken away)
            raise AttributeError(f"instruction {self.name!r} holds no attributes to read")
        idx = _INDEX_RE.search(attrs) if self.opcode == "get-tuple-element" else None
        fr = _search_from(_FRAME_RE, "stack_frame_id=", attrs)
        on = _search_from(_OPNAME_RE, 'op_name="', attrs)
        cp = _CONTROL_RE.search(attrs) if "control-predecessors=" in attrs else None
        more = self._more = (
            int(idx.group(1)) if idx else None, int(fr.group(1)) if fr else 0,
            on.group(1) if on else "",
            [x.strip().lstrip("%") for x in cp.group(1).split(",") if x.strip()] if cp else [])
        self._attrs = None
        return more

    # (properties, not slots of their own: four more slots would make the record a
    # 128-byte block, and every instruction but a few dozen never has them read)
    @property
    def tuple_index(self) -> int | None:
        more = self._more
        return (self._read_attrs() if more is None else more)[0]

    @tuple_index.setter
    def tuple_index(self, value: int | None) -> None:
        self._set_more(0, value)

    @property
    def frame(self) -> int:
        more = self._more
        return (self._read_attrs() if more is None else more)[1]

    @frame.setter
    def frame(self, value: int) -> None:
        self._set_more(1, value)

    @property
    def op_name(self) -> str:
        more = self._more
        return (self._read_attrs() if more is None else more)[2]

    @op_name.setter
    def op_name(self, value: str) -> None:
        self._set_more(2, value)

    @property
    def control_predecessors(self) -> list[str]:
        more = self._more
        return (self._read_attrs() if more is None else more)[3]

    @control_predecessors.setter
    def control_predecessors(self, value: list[str]) -> None:
        self._set_more(3, value)

    def predecessors(self) -> list[str]:
        """`control_predecessors`, without reading the other three fields where the attributes
        name none (`first_use.users_index` asks every instruction: the real H100 transformer
        program's 1,819 read whole were ~3 ms, a 28k-instruction one ~70 ms; few have any)."""
        more = self._more
        if more is not None:
            return more[3]
        attrs = self._attrs
        if attrs is not None and "control-predecessors=" not in attrs:
            return _NOTHING  # (what `_read_attrs` finds there: no match, no predecessor)
        return self._read_attrs()[3]

    def _set_more(self, k: int, value: Any) -> None:
        more: list[Any] = list(self._read_attrs() if self._more is None else self._more)
        more[k] = value
        self._more = (more[0], more[1], more[2], more[3])


class Program(Record):
    """One compiled module: instructions by name, each computation's root and callers, and the
    stack frames (id -> (location, parent id)) its metadata points to."""

    _fields = ("name", "instrs", "roots", "frames", "callers", "by_computation_called")

    def __init__(self, name: str, instrs: dict[str, Ins], roots: dict[str, str],
                 frames: dict[int, tuple[Location, int]],
                 callers: dict[str, list[str]] | None = None,
                 by_computation_called: dict[str, list[str]] | None = None) -> None:
        self.name = name
        self.instrs = instrs
        self.roots = roots
        self.frames = frames
        self.callers = {} if callers is None else callers
        self.by_computation_called = {} if by_computation_called is None \
            else by_computation_called
        for ins in self.instrs.values():
            for c in ins.calls:
                self.callers.setdefault(c, []).append(ins.name)


# (compiled where HLO text is read: a capture's HloProto needs none of them, ~0.5 ms at import)
_INDEX_RE = LazyPattern(r"\bindex=(\d+)")
_FRAME_RE = LazyPattern(r"\bstack_frame_id=(\d+)")
# (the quoted name as runs of plain characters between escapes: the same match as
# `(?:[^"\\]|\\.)*`, an alternation tried at every character, ~4x as long)
_OPNAME_RE = LazyPattern(r'\bop_name="([^"\\]*(?:\\.[^"\\]*)*)"')
_SECTION_ROW = LazyPattern(r"^(\d+)\s+(.*)$")
_KV_RE = LazyPattern(r"(\w+)=(-?\d+)")
_CONTROL_RE = LazyPattern(r"\bcontrol-predecessors=\{([^}]*)\}")


class _Nothing(list):
    """The one empty list the instructions of programs read from text share for no calls
    and a parameter's or constant's operands (a 6 MB unrolled program: ~30k lists, 1.6 MB of
    a report's peak). Equal to `[]` and read as one; a change to it raises, since every
    instruction would see it."""

    __slots__ = ()

    def _read_only(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("an instruction's shared empty list is read only")

    append = extend = insert = remove = pop = clear = sort = reverse = _read_only
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _read_only


_NOTHING = _Nothing()


def program_from_text(text: Any, name: str = "", consume: bool = False,
                      frames: dict[int, tuple[Location, int]] | None = None) -> Program:
    """A `compiled.as_text()` module (with its FileNames/.../StackFrames sections), or its
    `overlap.hlo.program.ParsedHlo` (not parsed again). `consume`: the parse's instructions
    are let go as the program's are made, and the parse is left empty (for a caller done
    with it: the two were both held at a report's peak, ~26 and ~13 MB of a 6 MB unrolled
    program; the program's records now take the room the parse's leave). `frames`: the
    text's `FrameSections`, read as its lines were (a parse of a file's lines holds no
    text: `ParsedHlo.of_lines`; its caller gives the name too)."""
    # here, not at import: overlap.hlo.program loads protobuf (tests/cli/test_no_protobuf.py)
    from overlap.hlo.program import ParsedHlo, _parse_module, calls_in

    instrs: dict[str, Ins] = {}
    if isinstance(text, ParsedHlo):
        if consume:
            # (the parse's name -> instruction dict where the inventory made it: the same
            # names in the same order, each value replaced below by its `Ins`, no second dict)
            instrs = text.take_by_name() or instrs
        comps, found, text = text.comps, iter(text.calls()), text.text
    else:
        (comps, _), found = _parse_module(text), None
    roots: dict[str, str] = {}
    new = Ins.__new__
    for cname in list(comps):
        lst = comps.pop(cname) if consume else comps[cname]
        last = lst[-1].name if lst else None
        for j, i in enumerate(lst):
            if consume:
                lst[j] = None  # type: ignore[call-overload]  # (`i` is the last reference)
            opcode = i.opcode
            pnum = None
            if opcode == "parameter" and i.operands and i.operands[0].isdigit():
                pnum = int(i.operands[0])
            called = calls_in(i.attrs) if found is None else next(found)
            # (the four fields read from the attributes' text when first asked: `Ins._read_attrs`.
            # Slots set one by one: no call of `__init__` a record; no comprehension run for
            # the many that call nothing)
            ins = instrs[i.name] = new(Ins)
            ins.name = i.name
            ins.opcode = opcode
            ins.computation = cname
            ins.operands = _NOTHING if opcode in ("parameter", "constant") or not i.operands \
                else i.operands
            ins.calls = [c for _, c in called] if called else _NOTHING
            ins.parameter_number = pnum
            ins._attrs = i.attrs
            ins._more = None
            if i.root:
                roots[cname] = i.name
        if cname not in roots and last is not None:
            roots[cname] = last
    if text is None and (frames is None or not name):
        raise ValueError("a parse of lines holds no text: its frames and name are given")
    return Program(name or _module_name(text), instrs, roots,
                   _text_frames(text) if frames is None else frames)


def _search_from(pattern: Any, word: str, s: str) -> Any:
    """`pattern.search(s)`, for a pattern each of whose matches begins with `word` (after a
    `\\b`): searched from the word's first place (a C string search), None where it is
    absent. Why: a leading `\\b` leaves the regex engine no literal to skip ahead to, so it
    tried the pattern at every character of an instruction's attributes (~3 us each, ~5 ms
    a pattern over the real H100 transformer program's 1,819 instructions). The same match:
    none can begin before the word's first place, and `\\b` still reads the character
    before it (a search from a position sees the whole string)."""
    j = s.find(word)
    return None if j < 0 else pattern.search(s, j)


_SECTIONS = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")


def _module_name(text: str) -> str:
    m = re.match(r"\s*HloModule\s+([\w.\-]+)", text)
    return m.group(1) if m else ""


class FrameSections:
    """A module text's stack frame sections, read from its lines in order (`feed`): the
    FileNames, FunctionNames, FileLocations and StackFrames rows, each section from its word
    on a line of its own to a line that is no row (or that begins a computation).
    `frames()`: id -> (location, parent id). The printer writes a frame's parent as its
    1-based id plus one (frame 1, which has none, prints `parent_frame_id=1`; the proto of
    the same program says 0): checked against the capture's own HloProto (tests)."""

    __slots__ = ("sections", "current")

    def __init__(self) -> None:
        self.sections: dict[str, dict[int, str]] = {}
        self.current: dict[int, str] | None = None  # (the open section's rows)

    def feed(self, line: str) -> None:
        s = line.strip()
        if s in _SECTIONS:
            self.current = self.sections.setdefault(s, {})
            return
        if self.current is None:
            return
        m = _SECTION_ROW.match(s)
        if not m:
            if s.startswith(("%", "ENTRY", "HloModule")) or s.endswith("{"):
                self.current = None
            return
        self.current[int(m.group(1))] = m.group(2)

    def pieces(self, pieces: Iterable[str]) -> Iterator[str]:
        """`pieces` (a text's pieces, each ending after a line feed: `hlotext.file_pieces`)
        passed on as they are, each one's lines fed first where they can hold a section:
        while one is open, or where the piece holds a section word (a line that opens one
        holds it). The others' lines would change nothing, and are not split."""
        for piece in pieces:
            if self.current is not None or any(w in piece for w in _SECTIONS):
                for line in piece.splitlines():
                    self.feed(line)
            yield piece

    def frames(self) -> dict[int, tuple[Location, int]]:
        sections = self.sections
        files = {k: v.strip().strip('"') for k, v in sections.get("FileNames", {}).items()}
        funcs = {k: v.strip().strip('"') for k, v in sections.get("FunctionNames", {}).items()}
        locs = {k: dict((a, int(b)) for a, b in _KV_RE.findall(v))
                for k, v in sections.get("FileLocations", {}).items()}
        out: dict[int, tuple[Location, int]] = {}
        for k, v in sections.get("StackFrames", {}).items():
            f = dict((a, int(b)) for a, b in _KV_RE.findall(v))
            loc = locs.get(f.get("file_location_id", 0))
            if loc is None:
                continue
            out[k] = (_location(files.get(loc.get("file_name_id", 0), ""),
                                funcs.get(loc.get("function_name_id", 0), ""), loc),
                      max(f.get("parent_frame_id", 0) - 1, 0))
        return out


def _text_frames(text: str) -> dict[int, tuple[Location, int]]:
    """`FrameSections` of the whole text."""
    sections = FrameSections()
    # No line after the last section word's can begin a section: the lines are read up to
    # it, then on only while a section is open (XLA prints the sections before the
    # computations: a 6 MB unrolled program's 36k lines were each split and tested, ~10 ms)
    last = max(map(text.rfind, _SECTIONS))
    if last < 0:
        return {}
    feed = sections.feed
    for line in text_lines(text, text.find("\n", last) + 1 or len(text),
                           lambda: sections.current is not None):
        feed(line)
    return sections.frames()


def _location(file: str, function: str, loc: dict[str, int]) -> Location:
    line = loc.get("line", 0)
    return Location(file, function, line, loc.get("column", 0), loc.get("end_line", line) or line,
                    loc.get("end_column", 0))


def program_from_proto(hlo: bytes | Any, name: str = "") -> Program:
    """A serialized `HloProto` (the `Hlo Proto` a capture carries) or its message."""
    if isinstance(hlo, (bytes, bytearray, memoryview)):
        from overlap.trace.programs import hlo_message

        hlo = hlo_message(hlo)
    mod = hlo.hlo_module if hasattr(hlo, "hlo_module") else hlo
    # (each message and field read once: upb builds a wrapper per access, ~2,000 instructions
    # a program; repeated fields read as slices, lists: iterating one ends in an IndexError
    # that upb formats, ~2,500 instructions a field)
    computations = mod.computations[:]
    comp_names = {c.id: c.name for c in computations}
    instrs: dict[str, Ins] = {}
    roots: dict[str, str] = {}
    all_ids: dict[int, str] = {}
    # per instruction kept: its operand and control predecessor ids and its computation's
    # id -> name map, named once every computation is read (below)
    ids_of: dict[str, tuple[Any, dict[int, str], Any]] = {}
    for c in computations:
        cname = c.name
        msgs = [(i, i.id, i.name) for i in c.instructions[:]]
        ids = {iid: name for _, iid, name in msgs}
        for i, _, name in msgs:
            opcode = i.opcode
            md = i.metadata
            called = i.called_computation_ids
            instrs[name] = Ins(
                name, opcode, cname, [],
                [comp_names[k] for k in called[:] if k in comp_names] if called else [],
                int(i.tuple_index) if opcode == "get-tuple-element" else None,
                int(i.parameter_number) if opcode == "parameter" else None,
                md.stack_frame_id, md.op_name)
            ids_of[name] = (i.operand_ids, ids, i.control_predecessor_ids)
        if c.root_id in ids:
            roots[cname] = ids[c.root_id]
        # Operand ids are unique in the module: resolve operands named in other computations
        # (below; the last instruction of an id written twice names it)
        all_ids.update(ids)
    # An operand is the instruction of its id in its own computation, else in the module,
    # else `#<id>`; a name of the first kind written `#<digits>` is read as an id of the
    # module (a name `#` + anything else is no id: the program is refused, ValueError).
    for name, ins in instrs.items():
        operand_ids, own, preds = ids_of[name]
        ops = []
        for o in operand_ids[:]:
            n = own.get(o)
            if n is None:
                n = all_ids.get(o)
                if n is None:
                    n = f"#{o}"
            elif n[:1] == "#":
                n = all_ids.get(int(n[1:]), n)
            ops.append(n)
        ins.operands = ops
        if preds:
            ins.control_predecessors = [all_ids.get(k, f"#{k}") for k in preds[:]]
    si = mod.stack_frame_index
    files, funcs = list(si.file_names), list(si.function_names)
    frames: dict[int, tuple[Location, int]] = {}
    for k, f in enumerate(si.stack_frames, start=1):
        if not 0 < f.file_location_id <= len(si.file_locations):
            continue
        fl = si.file_locations[f.file_location_id - 1]
        loc = {"line": fl.line, "column": fl.column, "end_line": fl.end_line,
               "end_column": fl.end_column}
        frames[k] = (_location(files[fl.file_name_id - 1] if 0 < fl.file_name_id <= len(files)
                               else "",
                               funcs[fl.function_name_id - 1]
                               if 0 < fl.function_name_id <= len(funcs) else "", loc),
                     int(f.parent_frame_id))
    return Program(name or mod.name, instrs, roots, frames)


# ---------------------------------------------------------------------------------------------
# Trace op -> instructions

NAME, CALLED, COMMAND_BUFFER = "name", "called computation", "command buffer"
_COMMAND_BUFFER = LazyPattern(r"^command_buffer_\d+$")
_ASYNC_WRAPPERS = ("async-start", "fusion-start", "call-start")


def trace_op_instructions(program: Program, op: str) -> tuple[list[str] | None, str | None]:
    """(instruction names, rule) for a trace's `hlo_op` (module docstring); (None, rule) for a
    command buffer, (None, None) where no rule applies."""
    if op in program.instrs:
        return [op], NAME
    if _COMMAND_BUFFER.match(op or ""):
        return None, COMMAND_BUFFER
    # XLA numbers clones after the suffix: op `X.1` is the thunk of `X_computation.1`
    m = re.match(r"^(.*)\.(\d+)$", op or "")
    comp = f"{m.group(1)}_computation.{m.group(2)}" if m else f"{op}_computation"
    callers = program.callers.get(comp) or program.callers.get(f"{op}_computation")
    if callers:
        return sorted({outermost_async(program, c) for c in callers}), CALLED
    return None, None


def outermost_async(program: Program, name: str) -> str:
    """The async-start (or fusion) whose called computations hold `name`, outermost first,
    else `name`: the instruction a thunk runs (an HloProto's offload inventory names the
    dynamic-update-slice inside `wrapped_..._computation`; the schedule runs its async-start)."""
    for _ in range(6):
        ins = program.instrs[name]
        up = [c for c in program.callers.get(ins.computation, ())
              if program.instrs[c].opcode in _ASYNC_WRAPPERS + ("fusion",)]
        if not up:
            return name
        name = up[0]
    return name


def in_loop(program: Program, name: str) -> bool:
    """Whether the instruction runs inside a while loop (its computation, or one that calls
    it, is a while's body)."""
    comp, seen = program.instrs[name].computation, set()
    todo = [comp]
    while todo:
        c = todo.pop()
        if c in seen:
            continue
        seen.add(c)
        for caller in program.callers.get(c, ()):
            ins = program.instrs[caller]
            if ins.opcode == "while":
                return True
            todo.append(ins.computation)
    return False


# ---------------------------------------------------------------------------------------------
# Data flow

_PASS = ("bitcast", "copy", "reshape", "convert", "transpose", "copy-done", "async-done",
         "fusion-done", "bitcast-convert", "optimization-barrier")


def origins(program: Program, name: str, index: int | None = None, limit: int = 4000
            ) -> list[tuple[str, int | None]]:
    """Every (instruction, tuple index) the value `name` (element `index` of a tuple) may come
    from, nearest first, including itself: a breadth-first walk backwards through the ops
    that pass a value on unchanged (module docstring). Bounded by `limit` steps."""
    seen: set[tuple[str, int | None]] = set()
    order: list[tuple[str, int | None]] = []
    todo = [(name, index)]
    while todo and len(order) < limit:
        nxt: list[tuple[str, int | None]] = []
        for key in todo:
            if key in seen or key[0] not in program.instrs:
                continue
            seen.add(key)
            order.append(key)
            nxt += _sources(program, *key)
        todo = nxt
    return order


def _sources(program: Program, name: str, index: int | None) -> list[tuple[str, int | None]]:
    ins = program.instrs[name]
    op = ins.opcode
    out: list[tuple[str, int | None]] = []
    if op == "get-tuple-element" and ins.operands:
        return [(ins.operands[0], ins.tuple_index)]
    if op == "tuple" and index is not None and index < len(ins.operands):
        return [(ins.operands[index], None)]
    if op == "while" and index is not None:
        body = next(iter(c for c in ins.calls if _is_body(program, name, c)), None)
        out = [(ins.operands[0], index)] if ins.operands else []
        if body is not None and body in program.roots:
            out.insert(0, (program.roots[body], index))
        return out
    if op == "parameter":
        for c in program.callers.get(ins.computation, ()):
            caller = program.instrs[c]
            if caller.opcode == "while" and caller.operands:
                out.append((caller.operands[0], index))
                body = program.roots.get(ins.computation)
                if body is not None and _is_body(program, c, ins.computation):
                    out.append((body, index))
            elif ins.parameter_number is not None and ins.parameter_number < len(caller.operands):
                out.append((caller.operands[ins.parameter_number], index))
        return out
    if op in _PASS and ins.operands and index is None:
        return [(ins.operands[0], None)]
    return []


def _is_body(program: Program, while_name: str, comp: str) -> bool:
    """`comp` is the body of `while_name` (its first called computation that is not the
    condition: the condition returns pred[] and is never a value's origin)."""
    calls = program.instrs[while_name].calls
    # _CALLS_RE lists body= and condition= in the order printed; the proto lists
    # (body, condition) for a while (XLA's HloInstruction::called_computations order).
    return bool(calls) and comp == _body_of(program, while_name)


def _body_of(program: Program, while_name: str) -> str | None:
    calls = program.instrs[while_name].calls
    for c in calls:
        root = program.instrs.get(program.roots.get(c, ""))
        if root is not None and root.opcode == "tuple":
            return c
    return calls[0] if calls else None


def frame_locations(program: Program, name: str) -> list[Location]:
    """The instruction's source locations, innermost first (empty without metadata)."""
    out: list[Location] = []
    f = program.instrs[name].frame if name in program.instrs else 0
    seen: set[int] = set()
    while f and f in program.frames and f not in seen:
        seen.add(f)
        loc, parent = program.frames[f]
        out.append(loc)
        f = parent
    return out
