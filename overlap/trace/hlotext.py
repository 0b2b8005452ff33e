"""HLO text rules of the TPU reader: a TPU op's event metadata names it by its HLO text.

Instruction names, async start/done boundaries (also decided on name bytes for many ops at
once), array shapes' bytes, and the direction and bytes of host-memory async copies
(`copy-start`, `dynamic-update-slice-start`, `dynamic-slice-start` across memory space `S(5)`).
`overlap.trace.reader` applies them (and re-exports them); `overlap.trace.programs` reads the
same copy facts from a program's HLO proto where the capture carries it.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np


class LazyPattern:
    """`re.compile(pattern, flags)`, compiled where it is first used: every attribute read
    from it (`.match`, `.search`, `.pattern` ...) is the compiled pattern's own, and after the
    first read a plain attribute of this object (no call per read).

    Why: a module's patterns compiled at import cost ~0.1 ms each (0.3 ms the largest), in
    every process, where most captures use few of them (a GPU capture reads no TPU
    instruction text, a TPU capture no CUDA stream names)."""

    _METHODS = ("match", "search", "fullmatch", "sub", "subn", "split", "findall", "finditer",
                "pattern", "flags", "groups", "groupindex")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self._args = (pattern, flags)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # protocols (copy, pickle) are not the pattern's
            raise AttributeError(name)
        compiled = re.compile(*self._args)
        for a in self._METHODS:
            self.__dict__[a] = getattr(compiled, a)
        return getattr(compiled, name)


# `<base>-start[.N]` / `<base>-done[.N]` and bare `send`/`recv`: async start/done ops, which are
# not compute (xprof's async_overlap uses the same rule, so TPU answers agree with it).
_START_DONE_RE = LazyPattern(r"^(?P<base>.+)-(?P<role>start|done)(?P<n>\.\d+)?$")
_SEND_RECV_RE = LazyPattern(r"^(?:send|recv)(?:\.\d+)?$")
# Host memory space in an HLO shape layout, e.g. `f32[8,128]{1,0:T(8,128)S(5)}`.
HOST_MEMORY_SPACE = "S(5)"


def text_lines(text: str, head: int = 0, more: Callable[[], bool] | None = None,
               chunk: int = 1 << 16) -> Iterator[str]:
    """`text.splitlines()`, the same lines, in order, made a piece of the text at a time:
    all of `text[:head]`'s (`head` just after a line feed, or the end), then the next ones
    (only while `more()` is true when each is asked for, where given). Each piece ends just
    after a line feed, where `splitlines` always ends a line (a CR LF kept whole): no line is
    cut. Why: a module's text split whole held every line at once (a 6 MB program: ~8 MB of
    lines beside its parse), and the stack frame sections, at its top, were read to its end."""
    yield from text[:head].splitlines()
    pos, n = head, len(text)
    while pos < n and (more is None or more()):
        size = chunk
        while True:
            cut = text.rfind("\n", pos, pos + size) + 1
            if cut > pos or pos + size >= n:
                break
            size *= 2  # (a line longer than the piece: a larger piece)
        cut = cut if cut > pos else n
        for line in text[pos:cut].splitlines():
            yield line
            if more is not None and not more():
                return
        pos = cut


def file_pieces(path: Any, chunk: int = 1 << 16) -> Iterator[str]:
    """The text of the file at `path` (UTF-8, bad bytes replaced, line ends as written) a
    piece at a time: each piece ends just after a line feed (the last one at the file's
    end), so the pieces' `splitlines()`, one after another, are the whole text's lines.
    Equal to `Path(path).read_text(encoding="utf-8", errors="replace")` joined, up to its
    line ends (it reads `\\r\\n` and `\\r` as `\\n`, where `splitlines` ends a line alike).

    Why: a run directory's program text read whole stood beside its parse at a report's
    peak (a 6 MB unrolled program: the text, and 6 MB of bytes more while it was decoded).
    A line longer than a piece is gathered and joined once, not grown piece by piece."""
    with open(path, encoding="utf-8", errors="replace", newline="") as f:
        held: list[str] = []  # (the pieces since the last line feed)
        while True:
            piece = f.read(chunk)
            if not piece:
                break
            cut = piece.rfind("\n") + 1
            if not cut:
                held.append(piece)
                continue
            if held:
                held.append(piece[:cut])
                yield "".join(held)
                held = []
            else:
                yield piece[:cut] if cut < len(piece) else piece
            if cut < len(piece):
                held.append(piece[cut:])
        if held:
            yield "".join(held)


def instruction_name(name: str) -> str:
    """`%copy-start.5 = (...) copy-start(...)` -> `copy-start.5`; bare names pass through."""
    name = name.strip()
    if name.startswith("%"):
        name = name[1:].split(" = ", 1)[0].strip()
    return name


def instruction_names(texts: list[str]) -> list[str]:
    """`instruction_name` of many texts; the usual `%name = ...` without a call each."""
    out = []
    for t in texts:
        if t[:1] == "%" and not t[-1:].isspace():  # nothing to strip at either end
            k = t.find(" = ")
            out.append((t[1:k] if k > 0 else t[1:]).strip())
        else:
            out.append(instruction_name(t))
    return out


def is_async_boundary(instr: str) -> bool:
    return bool(_START_DONE_RE.match(instr) or _SEND_RECV_RE.match(instr))


def _suffix_is(b: np.ndarray, end: np.ndarray, ok: np.ndarray, text: bytes) -> np.ndarray:
    """Where `ok`: do the bytes of `b` just before `end` spell `text`? (Last byte first, on
    the candidates left: most names fail at once.)"""
    cand = np.flatnonzero(ok)
    for i in range(len(text) - 1, -1, -1):
        if not cand.size:
            break
        cand = cand[b[end[cand] - len(text) + i] == text[i]]
    out = np.zeros(len(ok), bool)
    out[cand] = True
    return out


def async_boundaries_by_bytes(b: np.ndarray, ln: np.ndarray) -> np.ndarray:
    """`is_async_boundary` of many names given as bytes (`MetaTable.string_bytes`): per name,
    1 (a boundary), 0 (not one) or -1 (not decided here: empty, non-ASCII, holding a newline,
    or ending in a run of more than `_DIGITS_MAX` digits; the caller applies the regex to
    those).

    For ASCII names without a newline the two regexes say exactly: strip a trailing `.digits`
    (digits alone, without the dot, match neither); what is left ends with `-start` or `-done`
    after at least one more byte, or is `send` or `recv`. Why bytes: a capture where every copy
    is its own op has tens of thousands of distinct copy-start/copy-done ops, and a Python
    string and a regex match each cost more than all the rest of their reading. Only two
    passes touch every byte (the ASCII test); the trailing digits are walked back from each
    name's end, one step for all names at a time.
    """
    n = len(ln)
    out = np.full(n, -1, np.int8)
    have = np.flatnonzero(ln > 0)
    if not have.size:
        return out
    end = np.cumsum(ln)[have]  # each name's end in `b`
    start = end - ln[have]
    ok = np.ones(len(have), bool)
    bad = np.flatnonzero((b >= 0x80) | (b == 0x0A))
    if bad.size:
        ok[np.searchsorted(end, bad, side="right")] = False
    # the last non-digit byte of each name (start - 1 where the name is all digits)
    last = end - 1
    walk = np.flatnonzero(_DIGIT[b[last]])
    for _ in range(_DIGITS_MAX):
        if not walk.size:
            break
        last[walk] -= 1
        q = last[walk]
        walk = walk[(q >= start[walk]) & _DIGIT[b[np.maximum(q, 0)]]]
    ok[walk] = False  # a longer run of digits: the regex decides
    has_n = last < end - 1  # a trailing run of digits
    dotted = has_n & (last >= start) & (b[np.maximum(last, 0)] == 0x2E)
    core_end = np.where(dotted, last, end)
    core_len = core_end - start
    fits = ~has_n | dotted  # digits without a dot: neither regex matches
    yes = _suffix_is(b, core_end, fits & (core_len >= 7), b"-start")
    yes |= _suffix_is(b, core_end, fits & (core_len >= 6), b"-done")
    yes |= _suffix_is(b, core_end, fits & (core_len == 4), b"send")
    yes |= _suffix_is(b, core_end, fits & (core_len == 4), b"recv")
    out[have[ok]] = yes[ok].astype(np.int8)
    return out


_DIGIT = np.zeros(256, bool)
_DIGIT[0x30:0x3A] = True
# Trailing digits walked back per name; an instruction number has a few (`copy-start.35999`).
_DIGITS_MAX = 24


# Byte-level rules over many texts at once: the texts' bytes joined in one uint8 array `b`,
# text i at [lo[i], hi[i]).

# str.isspace() of the ASCII bytes (str.strip's set)
_ASCII_SPACE = np.zeros(256, bool)
_ASCII_SPACE[[0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x1C, 0x1D, 0x1E, 0x1F, 0x20]] = True


# Bytes per pass of `find_all`/`plain_texts`: their temporaries (a bool per byte, a position
# per candidate) stay this small, where a pass over all of a TPU plane's texts at once (5 MB on
# 36k copy ops) would add them to the read's peak; at this size the blocks cost no time.
_BLOCK = 1 << 18


def find_all(b: np.ndarray, pat: bytes, anchor: int = 0) -> np.ndarray:
    """Ascending positions in `b` where `pat` begins (a match may run across two joined
    texts: `first_within` bounds it). `anchor`: the index of a rare byte of `pat`, the one
    looked for in a full pass (the rest are checked at its candidates only), `_BLOCK` bytes
    at a time."""
    n = len(b) - len(pat) + 1
    if n <= 0:
        return np.zeros(0, np.intp)
    parts = []
    for s in range(0, n, _BLOCK):
        cand = np.flatnonzero(b[anchor + s:anchor + min(n, s + _BLOCK)] == pat[anchor])
        if s:
            cand += s
        for i, ch in enumerate(pat):
            if i != anchor and cand.size:
                cand = cand[b[cand + i] == ch]
        parts.append(cand)
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def first_within(occ: np.ndarray, lo: np.ndarray, hi: np.ndarray, width: int) -> np.ndarray:
    """Per span [lo, hi): the first of the ascending positions `occ` at or after lo whose
    `width` bytes end by hi, else -1 (if the first at or after lo runs past hi, every later
    one does too)."""
    if not occ.size:
        return np.full(len(lo), -1, np.int64)
    i = np.searchsorted(occ, lo)
    p = occ[np.minimum(i, len(occ) - 1)]
    return np.where((i < len(occ)) & (p + width <= hi), p, -1)


def plain_texts(b: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Per text: only ASCII bytes and no NUL? (The byte rules are exact on those: a byte is a
    character, the text is valid UTF-8, and a NUL-separated join splits back.)"""
    out = np.ones(len(lo), bool)
    v = b.view(np.int8)
    for s in range(0, len(v), _BLOCK):  # (a bool per byte of a block at a time)
        bad = np.flatnonzero(v[s:s + _BLOCK] <= 0)  # 0x00 and 0x80-0xff
        if bad.size:
            out[np.searchsorted(hi, bad + s, side="right")] = False
    return out


def instruction_name_spans(b: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                           eq: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`instruction_names` of plain ASCII texts (`plain_texts`), on their bytes: per text,
    the span of its instruction name (`eq`: where its first ` = ` begins, -1 where none), and
    whether that span is the answer (False where stripping whitespace would change it: the
    str rule decides those).

    `%name = ...` (not ending in whitespace) -> `name`, up to the first ` = ` (the whole rest
    without one); a text without the `%` -> itself; each exact where no whitespace is at
    either end of the result."""
    n = len(lo)
    ln = hi - lo
    some = ln > 0
    first = np.where(some, b[np.where(some, lo, 0)] if len(b) else 0, 0)
    last = np.where(some, b[np.where(some, hi - 1, 0)] if len(b) else 0, 0)
    pct = some & (first == 0x25) & ~_ASCII_SPACE[last]
    ns = np.where(pct, lo + 1, lo)
    ne = np.where(pct & (eq >= 0), eq, hi)
    bare = some & (first != 0x25) & ~_ASCII_SPACE[first] & ~_ASCII_SPACE[last]
    nonempty = ne > ns
    ends_ok = np.ones(n, bool)
    at = np.flatnonzero(nonempty)
    ends_ok[at] = ~_ASCII_SPACE[b[ns[at]]] & ~_ASCII_SPACE[b[ne[at] - 1]]
    ok = ~some | bare | (pct & ends_ok)
    return ns, ne, ok


def _split_top_level(s: str) -> list[str]:
    """Split `a, b{c,d}, e[1,2]` on commas outside brackets/braces/parens."""
    parts: list[str] = []
    depth = 0
    cur: list[str] = []
    for ch in s:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if cur:
        parts.append("".join(cur).strip())
    return parts


_DTYPE_BYTES = {
    "pred": 1, "s4": 0.5, "u4": 0.5, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "s32": 4, "u32": 4,
    "s64": 8, "u64": 8, "f16": 2, "bf16": 2, "f32": 4, "f64": 8, "c64": 8, "c128": 16,
    "f8e4m3fn": 1, "f8e5m2": 1, "f8e4m3": 1, "f8e3m4": 1, "f8e4m3fnuz": 1, "f8e5m2fnuz": 1,
    "f8e4m3b11fnuz": 1, "f8e8m0fnu": 1, "f4e2m1fn": 0.5,
}
_ARRAY_SHAPE_RE = LazyPattern(r"^([a-z0-9]+)\[([0-9,\s]*)\]")


@functools.lru_cache(maxsize=1 << 12)  # a few distinct shapes, met once per copy op
def shape_bytes(shape: str) -> int | None:
    """Bytes of one array shape such as `bf16[2,2048,4096]{2,1,0:S(5)}`."""
    m = _ARRAY_SHAPE_RE.match(shape.strip())
    if not m or m.group(1) not in _DTYPE_BYTES:
        return None
    dims = [int(d) for d in m.group(2).replace(" ", "").split(",") if d]
    return array_bytes(m.group(1), dims)


def array_bytes(dtype: str, dims) -> int | None:
    """Bytes of an array of `dtype` (an HLO type name) and `dims`; None for a type without a
    size here or a count no array can have. One definition for the HLO text rule and the
    programs' protos (`overlap.trace.programs`)."""
    per = _DTYPE_BYTES.get(dtype)
    if per is None:
        return None
    n = 1
    for d in dims:  # Python ints: a huge shape must not wrap to a small byte count
        n *= int(d)
    nbytes = math.ceil(n * per)  # 4-bit types: whole bytes
    return nbytes if nbytes < (1 << 53) else None


_TUPLE_HEAD_RE = LazyPattern(
    r" = \((?P<a>[a-z][a-z0-9]*\[[0-9,\s]*\](?:\{[^{}]*\})?), "
    r"(?P<b>[a-z][a-z0-9]*\[[0-9,\s]*\](?:\{[^{}]*\})?)[,)]")


def copy_start_direction(hlo_text: str) -> tuple[str | None, int | None]:
    """Direction and bytes of a `copy-start` from its HLO text.

    The result tuple is `(destination, source, u32[] context)`: `S(5)` on element 0 means the
    copy writes host memory (D2H), on element 1 that it reads host memory (H2D).
    """
    return copy_directions([hlo_text])[0]


def copy_directions(texts: list[str]) -> list[tuple[str | None, int | None]]:
    """`copy_start_direction` of many texts (a capture where every copy is its own op has tens
    of thousands of distinct ones: a cache keyed by the text never hits)."""
    match = _TUPLE_HEAD_RE.match
    by_head: dict[str, tuple] = {}
    out = []
    for t in texts:
        # Fast path: the first two tuple elements are plain array shapes (every copy-start
        # XLA writes), matched right at the first " = " (no match can start before it).
        k = t.find(" = ")
        if k < 0:
            out.append(_copy_start_direction_slow(t))
            continue
        # Copies of the same shapes share the text from " = " to the opcode: decide once per
        # such head. Exact: each part of the pattern stops at a byte it cannot take (a
        # bracket, a brace, the comma), so a match inside the head reads nothing after it
        # and is the match in the whole text; a head without one is matched in the text.
        j = t.find(" copy-start(", k)
        head = t[k:j] if j > 0 else None
        got = by_head.get(head) if head is not None else None
        if got is None:
            m = match(head) if head is not None else None
            if m is None:
                m = match(t, k)
                if m is None:
                    out.append(_copy_start_direction_slow(t))
                    continue
                head = None  # decided in the whole text: not cached
            got = _tuple_head_direction(m)
            if head is not None:
                by_head[head] = got
        out.append(got)
    return out


def _tuple_head_direction(m: re.Match) -> tuple[str | None, int | None]:
    """A copy-start's direction and bytes from its result tuple's first two elements (a
    `_TUPLE_HEAD_RE` match): S(5) on the destination, D2H; on the source, H2D."""
    a, b = m.group("a", "b")
    if HOST_MEMORY_SPACE in a:
        return "D2H", shape_bytes(a)
    if HOST_MEMORY_SPACE in b:
        return "H2D", shape_bytes(b)
    return None, None


def copy_head_facts(heads: list[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`copy_directions` of copy-start texts given by their heads: each text's part from its
    first ` = ` up to the first ` copy-start(` after it (`copy_directions` caches by the same
    head), as ASCII bytes. Per head: (direction code: 1 D2H, 2 H2D, 0 neither, -1 where the
    tuple rule does not match the head, so that only the whole text can say; bytes; bytes
    known), decided once per distinct head.

    Why the head decides: where `_TUPLE_HEAD_RE` matches the head it is the match in the whole
    text (each part of the pattern stops at a byte it cannot take), so the text's answer is the
    head's."""
    order = {h: i for i, h in enumerate(dict.fromkeys(heads))}
    code = np.full(len(order), -1, np.int64)
    nbytes = np.zeros(len(order), np.int64)
    known = np.zeros(len(order), bool)
    match = _TUPLE_HEAD_RE.match
    for h, i in order.items():
        m = match(h.decode("ascii"))
        if m is None:
            continue
        d, nb = _tuple_head_direction(m)
        code[i] = 0 if d is None else 1 if d == "D2H" else 2
        if nb is not None:
            nbytes[i], known[i] = nb, True
    at = np.array([order[h] for h in heads], np.intp)
    return code[at], nbytes[at], known[at]


def _copy_start_direction_slow(hlo_text: str) -> tuple[str | None, int | None]:
    _, _, rhs = hlo_text.partition(" = ")
    rhs = rhs.strip()
    if not rhs.startswith("("):
        return None, None
    depth = 0
    for i, ch in enumerate(rhs):
        depth += ch in "([{"
        depth -= ch in ")]}"
        if depth == 0:
            inner = rhs[1:i]
            break
    else:
        return None, None
    elems = _split_top_level(inner)
    if len(elems) < 2:
        return None, None
    if HOST_MEMORY_SPACE in elems[0]:
        return "D2H", shape_bytes(elems[0])
    if HOST_MEMORY_SPACE in elems[1]:
        return "H2D", shape_bytes(elems[1])
    return None, None


_SLICE_START_RE = LazyPattern(r"\) (dynamic-update-slice-start|dynamic-slice-start)\(")
_COMMENT_RE = LazyPattern(r"/\*.*?\*/")


def slice_start_direction(hlo_text: str) -> tuple[str | None, int | None]:
    """Direction and bytes of an async `dynamic-update-slice-start` / `dynamic-slice-start`
    across host memory, from its HLO text: how XLA:TPU offloads a scan's per-layer residuals
    (one slice per iteration into or out of a stacked `S(5)` buffer).

    The result tuple is `((operands...), result, u32[] context)`. A dynamic-update-slice
    writing an `S(5)` result from a device update (operand 1) is D2H of the update's bytes; a
    dynamic-slice reading an `S(5)` operand 0 into a device result is H2D of the result's bytes
    (the rule of `overlap.hlo.program.offload_inventory`, which plans them)."""
    k = hlo_text.find(" = ")
    m = _SLICE_START_RE.search(hlo_text, k + 1) if k >= 0 else None
    if m is None:
        return None, None
    shape = hlo_text[k + 3:m.start() + 1].strip()
    if not shape.startswith("((") or not shape.endswith(")"):
        return None, None
    elems = _split_top_level(_COMMENT_RE.sub("", shape[1:-1]))
    if len(elems) < 2 or not elems[0].startswith("("):
        return None, None
    operands, result = _split_top_level(elems[0][1:-1]), elems[1]
    if m.group(1) == "dynamic-update-slice-start":
        if len(operands) > 1 and HOST_MEMORY_SPACE in result \
                and HOST_MEMORY_SPACE not in operands[1]:
            return "D2H", shape_bytes(operands[1])
    elif operands and HOST_MEMORY_SPACE in operands[0] and HOST_MEMORY_SPACE not in result:
        return "H2D", shape_bytes(result)
    return None, None


def is_host_async_start(hlo_text: str) -> bool:
    """Could this op's HLO text be an async start that moves data across host memory (`S(5)`
    in it, opcode copy-start or dynamic-(update-)slice-start)? The direction rules decide."""
    if HOST_MEMORY_SPACE not in hlo_text:
        return False
    rhs = hlo_text.split(" = ", 1)[-1]
    return "copy-start" in rhs or "slice-start(" in rhs


def host_transfer_directions(texts: list[str]) -> list[tuple[str | None, int | None]]:
    """Per async start op's HLO text: (direction, bytes) of the host transfer it makes, or
    (None, None). copy-starts go through `copy_directions`; dynamic-(update-)slice-starts
    through `slice_start_direction`."""
    # By opcode first: a dynamic-slice-start's operand tuple holds S(5) where a copy-start's
    # destination would, so the copy rule would call an H2D slice D2H.
    sl = [i for i, t in enumerate(texts) if "slice-start(" in t
          and _SLICE_START_RE.search(t, max(t.find(" = "), 0))]
    if not sl:
        return copy_directions(texts)
    slset = set(sl)
    rest = [i for i in range(len(texts)) if i not in slset]
    out: list[tuple[str | None, int | None]] = [(None, None)] * len(texts)
    for i, d in zip(rest, copy_directions([texts[i] for i in rest])):
        out[i] = d
    for i in sl:
        out[i] = slice_start_direction(texts[i])
    return out
