"""Did each checkpoint name offload? Per name: asked for, compiled into host copies, seen.

`offload_by_name(path, trace, result)` answers, for every name given to
`jax.ad_checkpoint.checkpoint_name` that a policy (`save_and_offload_only_these_names`) offloads:

* ``asked``: the run's policy lists it (run.json `policy.offloaded`, written by `overlap
  capture`); None where the capture has no manifest (a user's own script).
* ``compiled``: per direction, the compiled program's host-copy instructions (`overlap.hlo.
  program.offload_inventory`) that carry the name: their count and bytes per execution of the
  program (loop trip counts multiplied: `executed_bytes`). Where the copies of a name come
  from several programs (one step jitted for several shapes, as a loader bucketing lengths
  makes it: each step runs one of them), `executed_bytes` is their sum, which no step moves:
  `programs` then counts them and `executed_bytes_range` gives the least and most bytes one
  execution of one of them moves (absent where one program holds them all).
* ``seen``: per direction, the trace's copies whose op maps to those instructions
  (`overlap.hlo.trace_ops.trace_op_instructions`): count, bytes, in-flight (`span_ps`),
  hidden and exposed ps, hidden / in-flight (the definitions of `overlap.analysis.overlap`).
* ``flag``: one line where users want one: asked but never compiled into host copies, or
  compiled but never seen in the trace.

Where a name comes from. jax (0.10/0.11) lowers `checkpoint_name` to nothing: no HLO op, no
op_name, no attribute carries the name (checked on every real capture here). What the
program keeps is each instruction's source location (op metadata `stack_frame_id`). A D2H
copy's name is read from the source: the value it copies out (followed back through bitcasts,
tuples and loops: `trace_ops.origins`) was computed by an expression that lies inside the first
argument of a `checkpoint_name(EXPR, "NAME")` call at that location (Python's `ast`, the exact
line and column span). An H2D copy takes the names of the D2H copies that wrote the host buffer
it reads (the same data flow). Each name says which file was read. Evidence, in order:

* ``source``: as above.
* ``only name left``: a copy no source location names (the named value is a function
  argument, `x = checkpoint_name(x, "x")`, which no op computes), in a run that asked for
  exactly one name that no other copy claims.

Copies whose op maps to instructions of several names (a CUDA graph's `command_buffer_N`
holds every host copy of its direction) are a ``shared`` row: their time cannot be split.
Copies outside any program (`overlap.analysis.overlap.OUTSIDE_PROGRAM_OP`) and host copies of
no name (parameters or optimizer state in host memory) are rows of their own.

Source files change after a capture. `overlap capture` records what this module reads from
them (`record_sources`: per file the program's stack frames name, its SHA-256 and its
`checkpoint_name` spans) in run.json as `checkpoint_names`; where a run has that record, the
recorded spans are read, whatever the file holds now (the evidence's `file` says "recorded at
capture" and whether the file changed since or is missing).

Blind spots: without that record (a user's own script under `jax.profiler.trace`, a run of an
older version) the source file must be on this machine (the recorded path, a file of that name
in or above the run directory, or this package's own module for `overlap capture`'s
workloads) and unchanged since the capture (a location that no longer lies inside a
`checkpoint_name` call names nothing); a program whose HLO the capture lacks has no names.
"""

from __future__ import annotations

import ast
import functools
from bisect import bisect_left
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from overlap.analysis.grouping import copy_pairs, group_sums, is_none
from overlap.trace.hlotext import LazyPattern

if TYPE_CHECKING:  # imported where a program is at hand (~3 ms of start-up otherwise)
    from overlap.hlo import trace_ops

DIRECTIONS = ("D2H", "H2D")
SOURCE, ONLY_LEFT, MERGED = "source", "only name left", "merged"
MERGED_OP = "(merged op: names cannot be told apart)"
NO_NAME = "(no checkpoint name)"


# ---------------------------------------------------------------------------------------------
# Names in the source


def _checkpoint_aliases(tree: ast.AST, lines: list[int] | None = None
                        ) -> tuple[set[str], list[ast.Call]]:
    """(the names `checkpoint_name` goes by in the module, its calls with arguments in
    `ast.walk`'s order): one walk of the tree for both (a 1,500-line workload: ~20 ms a walk).

    `lines` (sorted): the only lines where the identifier `checkpoint_name` can be (every line
    the text has it on). Then a node whose lines hold none of them is not entered: every call
    of that name, and every import that gives it another name, has the identifier on a line
    within each of its enclosing nodes' lines, so the calls of that name (and the aliases)
    come out as the whole walk gives them, in its order (the walk's queue less whole
    subtrees keeps the others' order); other calls are left out (calls of an alias too: the
    caller walks again where it finds one). Enclosing lines as Python's parser gives them,
    with two exceptions kept: a decorated def or class starts at its `def`/`class` line (its
    decorators are above: they count), and nodes inside an f-string carry positions that
    Python before 3.12 did not always place inside the string (an f-string's nodes are all
    entered). A 455-line workload: walk ~3.4 -> ~0.2 ms (issue 32)."""
    names = {"checkpoint_name"}
    calls = []
    # `ast.walk`'s breadth-first order, without its generators (`iter_child_nodes` and
    # `iter_fields` per node: ~2x the time): a list appended to while it is read is its queue
    Call, ImportFrom, AST = ast.Call, ast.ImportFrom, ast.AST
    todo: list[ast.AST] = [tree]
    whole: set[int] = set()  # ids of nodes entered whatever their lines (`_holds_line`)
    for node in todo:
        if isinstance(node, Call):
            if node.args:
                calls.append(node)
        elif isinstance(node, ImportFrom):
            names |= {a.asname for a in node.names if a.name == "checkpoint_name" and a.asname}
        for field in node._fields:
            v = getattr(node, field, None)
            if isinstance(v, AST):
                if lines is None or _holds_line(v, lines, whole):
                    todo.append(v)
            elif isinstance(v, list):
                todo += [x for x in v if isinstance(x, AST)
                         and (lines is None or _holds_line(x, lines, whole))]
    return names, calls


_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _holds_line(node: ast.AST, lines: list[int], whole: set[int]) -> bool:
    """Whether `node`'s lines (its decorators' included) hold one of `lines`; True for a
    node without a position (a module, `arguments`, a comprehension ...) or inside an
    f-string (`whole`: ids of nodes whose subtrees are entered whole, grown here)."""
    lo = getattr(node, "lineno", None)
    hi = getattr(node, "end_lineno", None)
    if lo is None or hi is None or id(node) in whole:
        return True
    if isinstance(node, ast.JoinedStr):
        # this f-string's nodes are entered whole if it holds one of the lines
        if _holds(lo, hi, lines):
            whole.update(id(n) for n in ast.walk(node))
            return True
        return False
    if isinstance(node, _DEFS) and node.decorator_list:
        lo = min(lo, *(d.lineno for d in node.decorator_list))
    return _holds(lo, hi, lines)


def _holds(lo: int, hi: int, lines: list[int]) -> bool:
    k = bisect_left(lines, lo)
    return k < len(lines) and lines[k] <= hi


def named_spans(path: str) -> tuple[tuple[tuple[int, int, int, int], str], ...]:
    """Every `checkpoint_name(EXPR, NAME)` call of a Python file with a literal name: (EXPR's
    span (line, col, end_line, end_col), NAME). Empty for a file that does not parse or
    cannot be read. Cached per (path, mtime, size): a file edited since is read again (a
    long-lived process, the dashboard, must not name copies from an older text)."""
    try:
        st = Path(path).stat()
    except OSError:
        return ()
    return _named_spans(path, st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=64)
def _named_spans(path: str, mtime_ns: int, size: int
                 ) -> tuple[tuple[tuple[int, int, int, int], str], ...]:
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ()
    return _spans_of_text(text)


# Where a `checkpoint_name` call or alias can be: the identifier (not part of a longer one)
# followed, across blanks, line continuations and comments, by a call's `(` or an import's
# `as`. A text without one has no span (`_spans_of_text`), whatever ast would say.
# (The literal first, then the look-behind: the engine finds the literal by a fast scan;
# possessive: no backtracking over blanks and comments.)
_MAYBE_CALL = LazyPattern(  # compiled where a source is read (not at import: ~0.2 ms)
    r"checkpoint_name(?<!\wcheckpoint_name)(?:\s|\\|#[^\n]*+)*+(?:\(|as(?!\w))")


def _spans_of_text(text: str) -> tuple[tuple[tuple[int, int, int, int], str], ...]:
    """`named_spans` of a file's text."""
    # No call and no alias without the identifier in the text: the stack frames' other files
    # (the capture driver, the CLI, a module that only mentions the name) are not parsed
    # (~7-40 ms each, issue 32). Python folds an identifier's letters by NFKC (a fullwidth
    # letter is its ASCII one): a text with other letters is searched folded.
    if "checkpoint_name" not in text:
        return ()
    if not text.isascii():
        import unicodedata  # (C; only for such texts)

        probe = unicodedata.normalize("NFKC", text)
    else:
        probe = text
    if not _MAYBE_CALL.search(probe):
        return ()
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return ()
    # The lines the identifier is on, where they can be told from the text as the parser
    # counts them (ASCII, lines ended by "\n" alone): the walk enters only nodes on them.
    lines = _lines_of(text, "checkpoint_name") if probe is text and "\r" not in text else None
    aliases, calls = _checkpoint_aliases(tree, lines)
    if lines is not None and aliases != {"checkpoint_name"}:
        # calls of another name for it are on other lines: the whole walk
        aliases, calls = _checkpoint_aliases(tree)
    out = []
    for node in calls:
        f = node.func
        fname = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
        if fname not in aliases:
            continue
        name = node.args[1] if len(node.args) > 1 else next(
            (k.value for k in node.keywords if k.arg == "name"), None)
        if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
            continue
        a = node.args[0]
        out.append(((a.lineno, a.col_offset, a.end_lineno or a.lineno, a.end_col_offset or 0),
                    name.value))
    return tuple(out)


def _lines_of(text: str, word: str) -> list[int]:
    """The 1-based numbers of the lines (as newlines end them) that hold `word`, ascending."""
    out: list[int] = []
    line, pos = 1, 0
    k = text.find(word)
    while k >= 0:
        line += text.count("\n", pos, k)
        pos = k
        if not out or out[-1] != line:
            out.append(line)
        k = text.find(word, k + len(word))
    return out


def name_at(path: str, loc: trace_ops.Location) -> str | None:
    """The name of the innermost `checkpoint_name` call whose first argument contains `loc`."""
    return _name_in(named_spans(path), loc)


Spans = tuple[tuple[tuple[int, int, int, int], str], ...]


def _name_in(spans: Spans, loc: trace_ops.Location) -> str | None:
    best = None
    for (l0, c0, l1, c1), name in spans:
        if (l0, c0) <= (loc.line, loc.column) and (loc.end_line, loc.end_column) <= (l1, c1):
            size = (l1 - l0, c1 - c0)
            if best is None or size < best[0]:
                best = (size, name)
    return best[1] if best else None


def source_file(recorded: str, hints: tuple[Path, ...]) -> tuple[str, str] | None:
    """(path read, how found) for a file a program's stack frames name, or None."""
    p = Path(recorded)
    if recorded and p.is_file():
        return str(p), "as recorded"
    if not p.name or p.suffix != ".py":
        return None
    for d in hints:
        if (d / p.name).is_file():
            return str(d / p.name), f"{p.name} beside the capture"
    parts = p.parts
    if "overlap" in parts:
        # `overlap capture`'s own workloads: this package's copy of the module
        rel = parts[len(parts) - 1 - parts[::-1].index("overlap") + 1:]
        mine = _package_root().joinpath(*rel)
        if rel and mine.is_file():
            return str(mine), "this overlap package's copy"
    return None


@functools.cache
def _package_root() -> Path:
    """This package's directory (resolved once: ~50 us a call, ~100 calls a report)."""
    return Path(__file__).resolve().parent.parent


@functools.lru_cache(maxsize=256)
def _sha256(path: str, mtime_ns: int, size: int) -> str | None:
    import hashlib  # here: OpenSSL's load is ~3 ms of every GPU/TPU report's start-up

    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def file_sha256(path: str) -> str | None:
    """The SHA-256 of a file's bytes (hex), None where it cannot be read; cached per
    (path, mtime, size), so an edited file is hashed again."""
    try:
        st = Path(path).stat()
    except OSError:
        return None
    return _sha256(path, st.st_mtime_ns, st.st_size)


_MAX_RECORDED = 200  # source files recorded per program


def record_sources(program: trace_ops.Program, hints: tuple[Path, ...] = ()
                   ) -> dict[str, dict[str, Any]]:
    """What names need from the source files, to keep in run.json at capture time: per file
    the program's stack frames name (as they name it), found as `source_file` finds it, its
    `sha256` and `spans` (`named_spans` as [line, col, end_line, end_col, name] lists; empty
    for a file without checkpoint_name calls, so a call added later names nothing)."""
    out: dict[str, dict[str, Any]] = {}
    for f in sorted({loc.file for loc, _ in program.frames.values() if loc.file}):
        found = source_file(f, hints)
        digest = file_sha256(found[0]) if found is not None else None
        if found is None or digest is None:
            continue
        out[f] = {"sha256": digest,
                  "spans": [[*span, name] for span, name in named_spans(found[0])]}
        if len(out) >= _MAX_RECORDED:
            break
    return out


def _spans_for(file: str, hints: tuple[Path, ...], recorded: dict[str, Any] | None,
               memo: dict[str, Any] | None = None) -> tuple[Spans, str, str] | None:
    """(spans, path named in evidence, how found) of a file the stack frames name: the spans
    recorded at capture where the run has them (the file's current text may differ), else the
    file's own; None where neither is at hand. `memo`: answers of this section so far, per
    file (a program's ~100 source locations name a few files: each is looked for, stat'ed and
    hashed once per report, not once per location)."""
    if memo is not None:
        if file not in memo:
            memo[file] = _spans_for(file, hints, recorded)
        return memo[file]
    rec = (recorded or {}).get(file)
    found = source_file(file, hints)
    if isinstance(rec, dict):
        spans = tuple((tuple(s[:4]), s[4]) for s in rec.get("spans") or ())
        if found is not None and file_sha256(found[0]) == rec.get("sha256"):
            return spans, found[0], f"{found[1]}, unchanged since the capture"
        state = "the file changed since" if found is not None else "the file is missing here"
        return spans, file, f"recorded at capture ({state})"
    if found is None:
        return None
    return named_spans(found[0]), found[0], found[1]


def _hints(path: str | Path | None) -> tuple[Path, ...]:
    if path is None:
        return ()
    p = Path(path).resolve()
    d = p if p.is_dir() else p.parent
    return tuple([d, *list(d.parents)[:3]])


def _named(program: trace_ops.Program, start: str, hints: tuple[Path, ...],
           recorded: dict[str, Any] | None = None, memo: dict[str, Any] | None = None
           ) -> tuple[str | None, dict[str, Any]] | None:
    """(name, evidence) of the value `start`: the nearest origin whose source location lies
    inside a checkpoint_name call. A value sliced out of a bigger result on the way (XLA
    merged several dots into one and slices it: the merged op keeps one source location) has
    no name of its own: (None, evidence `merged`)."""
    from overlap.hlo import trace_ops

    sliced = None
    for ins, idx in trace_ops.origins(program, start):
        if idx is not None:
            continue
        if sliced is None and _is_slice(program, ins):
            sliced = ins
        for loc in trace_ops.frame_locations(program, ins):
            found = _spans_for(loc.file, hints, recorded, memo)
            if found is None:
                continue
            name = _name_in(found[0], loc)
            if name is not None:
                ev = {"how": SOURCE, "instruction": ins,
                      "at": f"{found[1]}:{loc.line}:{loc.column}", "file": found[2]}
                if sliced is not None:
                    return None, {**ev, "how": MERGED, "instruction": sliced,
                                  "at": f"a slice of a merged op whose metadata names "
                                        f"{name!r} at {ev['at']}"}
                return name, ev
    return None


def _is_slice(program: trace_ops.Program, name: str) -> bool:
    """A slice, or a fusion whose result is one (XLA's `loop_slice_fusion`)."""
    ins = program.instrs[name]
    if ins.opcode == "slice":
        return True
    if ins.opcode == "fusion":
        for c in ins.calls:
            root = program.instrs.get(program.roots.get(c, ""))
            if root is not None and root.opcode == "slice":
                return True
    return False


# ---------------------------------------------------------------------------------------------
# Names of a program's host copies


def op_names(program: trace_ops.Program, raw: Any, hints: tuple[Path, ...] = (),
             asked: list[str] | None = None, recorded: dict[str, Any] | None = None,
             memo: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """Per host-copy instruction of the program: {direction, bytes, executed_bytes, executions,
    name (None: none found), evidence}. `raw` is what `offload_inventory` reads (the inventory
    `_programs` took, or the parsed text or proto the program was built from); `memo` as
    `_spans_for`'s."""
    # here, not at import: overlap.hlo.program loads protobuf, which a report of a capture
    # without programs never needs (tests/cli/test_no_protobuf.py)
    from overlap.hlo import trace_ops
    from overlap.hlo.program import offload_inventory

    inv = offload_inventory(raw)
    ops: dict[str, dict[str, Any]] = {}
    for o in inv.ops:
        # an HloProto's inventory names the slice inside the async wrapper: key by the
        # instruction the schedule runs (what the trace's op maps to)
        key = trace_ops.outermost_async(program, o.name) if o.name in program.instrs else o.name
        ops[key] = {"direction": o.direction, "bytes": o.bytes, "executions": o.executions,
                    "trip_count_known": o.trip_count_known,
                    "executed_bytes": o.bytes * o.executions,
                    "in_loop": key in program.instrs and trace_ops.in_loop(program, key),
                    "name": None, "evidence": None}
    d2h = [n for n, o in ops.items() if o["direction"] == "D2H"]
    for n in d2h:
        ins = program.instrs.get(n)
        if ins is None or not ins.operands:
            continue
        value = ins.operands[1] if "dynamic-update-slice" in ops_opcode(program, n) \
            and len(ins.operands) > 1 else ins.operands[0]
        got = _named(program, value, hints, recorded, memo)
        if got:
            ops[n]["name"], ops[n]["evidence"] = got
            ops[n]["merged"] = got[0] is None
    for n, h in ops.items():
        if h["direction"] != "H2D":
            continue
        ins = program.instrs.get(n)
        if ins is None or not ins.operands:
            continue
        writers = [k for k, _ in trace_ops.origins(program, ins.operands[0])
                   if k in ops and ops[k]["direction"] == "D2H"]
        names = sorted({ops[w]["name"] for w in writers if ops[w]["name"]})
        if not names and any(ops[w].get("merged") for w in writers):
            h["merged"] = True
            h["evidence"] = {"how": MERGED, "instruction": n, "file": None,
                             "at": "reads the host buffer a merged op's copy wrote"}
        if len(names) == 1:
            h["name"] = names[0]
            h["evidence"] = {"how": SOURCE, "instruction": n,
                             "at": f"reads the host buffer {', '.join(sorted(set(writers)))} "
                                   "wrote", "file": None}
    left = _only_left(ops, asked)
    if left is not None:
        for r in ops.values():
            if r["name"] is None and r["in_loop"]:
                r["name"], r["evidence"] = left, {
                    "how": ONLY_LEFT, "instruction": None, "file": None,
                    "at": "no source location names this copy (a loop's residual); the run "
                          f"asked for {left!r} alone"}
    return ops


def _only_left(ops: dict[str, dict[str, Any]], asked: list[str] | None) -> str | None:
    """The one asked-for name no copy claims, where copies in loops have no name."""
    if not asked:
        return None
    claimed = {o["name"] for o in ops.values() if o["name"]}
    rest = [a for a in dict.fromkeys(asked) if a not in claimed]
    unnamed = [o for o in ops.values() if o["name"] is None and o["in_loop"]]
    return rest[0] if len(rest) == 1 and unnamed and len(set(asked)) == 1 else None


def ops_opcode(program: trace_ops.Program, name: str) -> str:
    """The opcode of a host copy, or of the dynamic-(update-)slice an async wrapper holds."""
    ins = program.instrs[name]
    if ins.opcode not in ("fusion-start", "async-start", "fusion", "call-start"):
        return ins.opcode
    todo, seen = list(ins.calls), set()
    while todo:
        c = todo.pop()
        if c in seen:
            continue
        seen.add(c)
        for i in program.instrs.values():
            if i.computation == c:
                if i.opcode in ("dynamic-update-slice", "dynamic-slice"):
                    return i.opcode
                todo += i.calls
    return ins.opcode


def tagged_names(program: trace_ops.Program, hints: tuple[Path, ...] = (),
                 recorded: dict[str, Any] | None = None, memo: dict[str, Any] | None = None
                 ) -> dict[str, str]:
    """Every literal name a `checkpoint_name` call gives in the source files the program's
    stack frames name (name -> first `file:line`): what the code tags, offloaded or not."""
    out: dict[str, str] = {}
    files = sorted({loc.file for loc, _ in program.frames.values() if loc.file})
    for f in files:
        found = _spans_for(f, hints, recorded, memo)
        if found is None:
            continue
        for (line, _, _, _), name in found[0]:
            out.setdefault(name, f"{found[1]}:{line}")
    return out


# ---------------------------------------------------------------------------------------------
# Programs of a capture


def _programs(path: str | Path | None, trace: Any, keys: list[tuple[str, Any]]
              ) -> dict[tuple[str, Any], tuple[trace_ops.Program, Any, str]]:
    """(module, program id) -> (program, raw HLO, where from): a run directory's
    `hlo/<module>.hlo.txt` first (raw: the offload inventory of its text, found from the same
    parse as the program, `overlap.hlo.program.offload_inventory`), else
    the capture's `Hlo Proto` of that program id (raw: the offload inventory of its parsed
    message, or the message where none could be taken: `op_names` raises on it, as it did)."""
    out: dict[tuple[str, Any], tuple[trace_ops.Program, Any, str]] = {}
    p = Path(path) if path is not None else None
    texts = {t.name[: -len(".hlo.txt")]: t for t in sorted(p.glob("hlo/*.hlo.txt"))} \
        if p is not None and p.is_dir() else {}
    need = []
    for module, pid in keys:
        t = texts.get(module)
        if t is not None:
            from overlap.hlo import trace_ops  # where a program is at hand, not at start-up
            from overlap.hlo.program import ParsedHlo, offload_inventory
            from overlap.trace.hlotext import file_pieces

            # parsed once: `op_names`' inventory found from the parse first (its raw HLO),
            # then the program made from it as the parse's instructions are let go (both
            # held at once were a report's peak: a 6 MB unrolled program, ~26 + ~13 MB).
            # The file's lines parsed as it is read, its frame sections read on the way: the
            # text is not held (it stood beside the parse at that peak). A module named by
            # its text alone (a file `.hlo.txt`) is read whole, for its `HloModule` line.
            # A text that cannot be read (a directory so named, a dangling link) is as none:
            # the capture's HloProto, if any, stands for it (it ended the report, exit 4).
            frames = None
            try:
                if module:
                    sections = trace_ops.FrameSections()
                    parsed = ParsedHlo.of_lines(line for piece in sections.pieces(
                        file_pieces(t)) for line in piece.splitlines())
                    frames = sections.frames()
                else:
                    parsed = ParsedHlo(t.read_text(encoding="utf-8", errors="replace"))
            except OSError:
                need.append((module, pid))
                continue
            inventory = offload_inventory(parsed)
            out[(module, pid)] = (trace_ops.program_from_text(parsed, module, consume=True,
                                                              frames=frames),
                                  inventory, f"hlo/{t.name}")
            del parsed
        else:
            need.append((module, pid))
    if need:
        wanted = {f"{m}({pid})": (m, pid) for m, pid in need}
        for k, raw in capture_protos(trace).items():
            if k in wanted and wanted[k] not in out:
                from overlap.hlo import trace_ops  # where a program is at hand
                from overlap.hlo.program import offload_inventory
                from overlap.trace.programs import hlo_message

                try:
                    # parsed once: the message is what the inventory reads (the bytes were
                    # parsed there again: ~1 ms a 400 KB program); the scanner's where it
                    # reads the bytes, without protobuf (`hlo_message`)
                    msg = hlo_message(raw)
                    prog = trace_ops.program_from_proto(msg, k)
                except Exception:  # noqa: BLE001 - a damaged program names nothing
                    continue
                # The inventory found now, and the message let go: each program's decoded
                # message held until `op_names` read it was ~0.1 MiB a 300-instruction
                # program (32 bucketed programs: the report's peak, over its goal). One that
                # cannot be taken stock of is handed on as it is, to fail where it did.
                try:
                    held: Any = offload_inventory(msg)
                except Exception:  # noqa: BLE001 - raised again by `op_names`, as before
                    held = msg
                del msg
                out[wanted[k]] = (prog, held, f"the capture's HloProto {k}")
    return out


def capture_protos(trace: Any) -> dict[str, bytes]:
    """`{"<module>(<program id>)": HloProto bytes}` the reader kept (its `modules` table: the
    `Hlo Proto` stats of `/host:metadata`), empty ones left out. The reader has them already:
    parsing the whole file again with upb to find them cost as much as the read itself."""
    try:
        mods = trace.columns("modules")
    except (AttributeError, KeyError):
        return {}
    out: dict[str, bytes] = {}
    for name, raw in zip(mods["name"].tolist(), mods["hlo_proto"].tolist()):
        if isinstance(raw, (bytes, bytearray)) and raw and isinstance(name, str):
            out.setdefault(name, bytes(raw))
    return out


def programs_of(path: str | Path | None, trace: Any
                ) -> dict[tuple[str, Any], tuple[trace_ops.Program, Any, str]]:
    """The compiled programs of the trace's copies: (module, program id) -> (program, raw
    HLO, where from), as `_programs` reads them (the run directory's HLO text first, else the
    capture's HloProto). Read once by the caller and passed to `offload_by_name` and
    `overlap.analysis.first_use` (which reads nothing itself)."""
    tr = trace.columns("transfers")
    if not len(tr["hlo_module"]):
        return {}
    _, pairs = copy_pairs(trace)
    keys = sorted({(m, p) for m, p in pairs if m is not None}, key=str)
    return _programs(path, trace, keys)


def _transfer_groups(t: dict[str, np.ndarray], table: dict[str, np.ndarray],
                     rows: np.ndarray) -> dict[str, np.ndarray]:
    """Per (module, program id, hlo_op, direction) of the transfers `rows`: count, bytes,
    span_ps, hidden_ps (the analysis' per-transfer numbers, `overlap.analysis.overlap.
    transfer_columns`), groups in key order. `t`: the transfers' module and program id
    columns; `table`: their `transfer_columns` table."""
    keys = {"hlo_module": t["hlo_module"][rows], "program_id": t["program_id"][rows],
            "hlo_op": np.asarray(table["hlo_op"], dtype=object)[rows],
            "direction": np.asarray(table["direction"], dtype=object)[rows]}
    sums = {"count": np.ones(len(rows), np.int64)}
    sums.update({c: np.asarray(table[c], np.int64)[rows] for c in ("bytes", "span_ps",
                                                                     "hidden_ps")})
    return group_sums(keys, list(keys), sums, sort=True)


def _exact_sum(a: np.ndarray) -> int:
    """The sum of an integer column as a Python int, exact: numpy's where no partial sum can
    leave int64 (every value's magnitude times the count below 2**63), else Python's on the
    values (a list of 36k ints per column cost ~0.5 ms, four columns a report)."""
    if a.dtype.kind in "iu" and len(a):
        lo, hi = int(a.min()), int(a.max())
        if max(-lo, hi) * len(a) < 2 ** 63:
            return int(a.sum(dtype=np.int64))
    return sum(a.tolist())


def _bucket(count: int = 0, nbytes: int = 0, span: int = 0, hidden: int = 0) -> dict[str, Any]:
    return {"count": count, "bytes": nbytes, "span_ps": span, "hidden_ps": hidden,
            "exposed_ps": span - hidden, "overlap_ratio": hidden / span if span > 0 else None}


def _add(b: dict[str, Any], count: int, nbytes: int, span: int, hidden: int) -> None:
    b.update(_bucket(b["count"] + count, b["bytes"] + nbytes, b["span_ps"] + span,
                     b["hidden_ps"] + hidden))


def per_pair(have: np.ndarray, pair: np.ndarray) -> np.ndarray:
    """`have[pair]`: per copy its (module, program id) pair's flag (`pair`: codes into
    `have`, `grouping.copy_pairs`). Where every pair's flag is the same (no program at hand,
    or all), that flag for every copy: no gather per copy."""
    if len(have) and (have.all() or not have.any()):
        return np.full(len(pair), bool(have[0]))
    return have[pair]


def offload_by_name(path: str | Path | None, trace: Any, result: dict[str, Any],
                    manifest: dict[str, Any] | None = None,
                    programs: dict[tuple[str, Any], tuple[trace_ops.Program, Any, str]]
                    | None = None) -> dict[str, Any] | None:
    """The `offload_by_name` section (module docstring); None for a capture with no host
    copies and no names asked for. `programs`: `programs_of(path, trace)` where the caller has
    read them already (else they are read here)."""
    from overlap.analysis.overlap import OUTSIDE_PROGRAM_OP

    policy = (manifest or {}).get("policy")
    offloaded = policy.get("offloaded") if isinstance(policy, dict) else None
    # a list of names (overlap capture); anything else (a plan's flag, a damaged file) names none
    asked = [str(a) for a in offloaded] if isinstance(offloaded, (list, tuple)) else None
    recorded = (manifest or {}).get("checkpoint_names")  # spans kept at capture (run.json)
    if not (trace.rows("transfers") if hasattr(trace, "rows") else 0) and not asked:
        return None
    from overlap.analysis.overlap import transfer_columns

    th = result.get("thresholds") or {}
    table, _ = transfer_columns(trace, **{k: th[v] for k, v in (
        ("hidden_threshold", "hidden"), ("exposed_threshold", "exposed")) if v in th})
    tr = trace.columns("transfers")
    t = {"hlo_module": np.asarray(tr["hlo_module"], dtype=object),
         "program_id": np.asarray(tr["program_id"], dtype=object)}
    # each (module, program id) once (a few: a step per copy op cost ~10 ms on 36k, issue 32)
    pair, pairs = copy_pairs(trace)
    keys = sorted({(m, p) for m, p in pairs if m is not None}, key=str)
    hints = _hints(path)
    if programs is None:
        programs = _programs(path, trace, keys)
    else:
        programs = {k: v for k, v in programs.items() if k in set(keys)}
    names: dict[str, dict[str, Any]] = {}
    shared: dict[tuple[str, ...], dict[str, Any]] = {}
    other: dict[str, dict[str, Any]] = {}
    tagged: dict[str, str] = {}
    notes: list[str] = []

    def row(name: str) -> dict[str, Any]:
        return names.setdefault(name, {
            "name": name, "asked": None if asked is None else name in asked,
            "compiled": {d: {"ops": [], "count": 0, "executed_bytes": 0} for d in DIRECTIONS},
            "seen": {d: _bucket() for d in DIRECTIONS}, "evidence": [], "flag": None})

    per_program: dict[tuple[str, Any], dict[str, dict[str, Any]]] = {}
    # (name, direction) -> program -> its executed bytes (`executed_bytes_range`)
    by_program: dict[tuple[str, str], dict[tuple[str, Any], int]] = {}
    memo: dict[str, Any] = {}  # source files looked up, for this section (`_spans_for`)
    for key, (prog, raw, where) in programs.items():
        ops = per_program[key] = op_names(prog, raw, hints, asked, recorded, memo)
        tagged.update({k: v for k, v in tagged_names(prog, hints, recorded, memo).items()
                       if k not in tagged})
        for op, o in ops.items():
            if o["name"] is None:
                continue
            r = row(o["name"])
            c = r["compiled"][o["direction"]]
            c["ops"].append(op)
            c["count"] += 1
            c["executed_bytes"] += o["executed_bytes"]
            each = by_program.setdefault((o["name"], o["direction"]), {})
            each[key] = each.get(key, 0) + o["executed_bytes"]
            ev = {**o["evidence"], "program": f"{key[0]}({key[1]})", "hlo": where}
            if ev not in r["evidence"]:
                r["evidence"].append(ev)
    for a in asked or []:
        row(a)
    # Copies whose program is not at hand: one row per reason, not per op (a capture of 36k
    # copy ops without programs gave 36k rows, 5 MB of JSON; the per-op numbers are in
    # by_hlo_op), summed over the copies themselves: a group's sums are its copies' sums, and
    # whether a program is at hand is a fact of the copy's (module, program id), so only the
    # copies with a program are grouped (36k ops without one were grouped and sorted by op
    # to be summed into one row, issue 32).
    at_hand = per_pair(np.array([programs.get(k) is not None for k in pairs], bool), pair)
    # one C comparison per copy (a None or any other value is simply not equal)
    outside = np.asarray(table["hlo_op"] == OUTSIDE_PROGRAM_OP, dtype=np.bool_).reshape(-1)
    unnamed = is_none(t["hlo_module"])
    for label, m in ((OUTSIDE_PROGRAM_OP, outside),
                     ("(program's HLO not in the capture)", ~outside & ~unnamed),
                     ("(no program named by the trace)", ~outside & unnamed)):
        sel = m & ~at_hand
        count = int(np.count_nonzero(sel))
        if count:
            every = count == len(sel)  # (all copies: the columns as they are)
            _add(other.setdefault(label, _bucket()), count,
                 *(_exact_sum(np.asarray(table[c], np.int64) if every
                               else np.asarray(table[c], np.int64)[sel])
                   for c in ("bytes", "span_ps", "hidden_ps")))
    g = _transfer_groups(t, table, np.flatnonzero(at_hand))
    if at_hand.any():
        from overlap.hlo import trace_ops
    for i in range(len(g["count"])):  # one row per (program, op, direction): few
        module, pid, op, d = (g["hlo_module"][i], g["program_id"][i], g["hlo_op"][i],
                              g["direction"][i])
        vals = (int(g["count"][i]), int(g["bytes"][i]), int(g["span_ps"][i]),
                int(g["hidden_ps"][i]))
        got = programs[(module, pid)]
        ops = per_program.get((module, pid), {})
        instrs, rule = trace_ops.trace_op_instructions(got[0], str(op))
        if instrs is None and rule == trace_ops.COMMAND_BUFFER:
            # a CUDA graph holds every host copy of its direction: narrow by direction
            instrs = [k for k, o in ops.items() if o["direction"] == d]
        mine = [ops[k] for k in instrs or () if k in ops and ops[k]["direction"] == d]
        cand = {o["name"] for o in mine}
        if mine and all(o.get("merged") for o in mine):
            _add(other.setdefault(MERGED_OP, _bucket()), *vals)
        elif not cand or cand == {None}:
            _add(other.setdefault(NO_NAME, _bucket()), *vals)
        elif len(cand) == 1 and None not in cand:
            (nm,) = cand
            _add(row(str(nm))["seen"][d], *vals)
        else:
            k = tuple(sorted(str(c) if c else NO_NAME for c in cand))
            s = shared.setdefault(k, {"names": list(k), "ops": [], "by_direction": {
                dd: _bucket() for dd in DIRECTIONS}, "why": f"{rule}: one trace op for copies "
                "of several names; its time cannot be split between them"})
            if op not in s["ops"]:
                s["ops"].append(op)
            _add(s["by_direction"][d], *vals)
    for (nm, d), each in by_program.items():
        if len(each) > 1:
            c = names[nm]["compiled"][d]
            c["programs"] = len(each)
            c["executed_bytes_range"] = [min(each.values()), max(each.values())]
    in_shared = {n for s in shared.values() for n in s["names"]}
    merged = sum(1 for ops in per_program.values() for o in ops.values() if o.get("merged"))
    for r in names.values():
        compiled = sum(r["compiled"][d]["count"] for d in DIRECTIONS)
        seen = sum(r["seen"][d]["count"] for d in DIRECTIONS)
        if r["asked"] and not compiled and programs:
            tag = tagged.get(r["name"])
            r["flag"] = (f"asked for, never compiled into host copies (tagged at {tag}: "
                         "the backward pass may not need it, or it is kept on device)"
                         if tag else "asked for, never compiled into host copies (no "
                         "checkpoint_name in the program's sources gives this name)")
            if merged and tag:
                r["flag"] = ("asked for; no host copy carries it by name, but "
                             f"{merged} host-copy instruction(s) copy slices of merged ops "
                             "(XLA combined several dots; one source location kept) and may "
                             "hold it")
        elif compiled and not seen and r["name"] not in in_shared:
            r["flag"] = "compiled into host copies, never seen in the trace"
        elif r["asked"] is False and compiled:
            r["flag"] = "offloaded, but the run's policy does not list it"
    if not programs and keys:
        notes.append("no compiled program of the copies is in the run directory or the "
                     "capture (HloProto off?): names cannot be told")
    return {"asked": asked, "names": sorted(names.values(), key=lambda r: r["name"]),
            "shared": list(shared.values()),
            "other": [{"label": k, **v} for k, v in sorted(other.items())],
            "programs": {f"{k[0]}({k[1]})": v[2] for k, v in programs.items()},
            "notes": notes}
