"""HLO array shapes as XLA prints them (`f32[8,128]{1,0:T(8,128)S(5)}`, tuples of them):
`parse_shape`, `ArrayShape` and their sizes; what `overlap.hlo.program` (which re-exports
them) reads an instruction's shapes with. Apart from it to keep that module within its size
(tests/test_architecture.py)."""

from __future__ import annotations

import functools

from overlap.hlo.records import FrozenRecord
from overlap.trace.hlotext import LazyPattern

HOST_MEMORY_SPACE = 5

# Bits per element for HLO primitive types (xla_data.proto); sub-byte types pack.
_BITS = {
    "pred": 8, "s2": 2, "u2": 2, "s4": 4, "u4": 4, "s8": 8, "u8": 8, "s16": 16, "u16": 16,
    "s32": 32, "u32": 32, "s64": 64, "u64": 64, "f16": 16, "bf16": 16, "f32": 32, "f64": 64,
    "c64": 64, "c128": 128, "f8e5m2": 8, "f8e4m3fn": 8, "f8e4m3b11fnuz": 8, "f8e5m2fnuz": 8,
    "f8e4m3fnuz": 8, "f8e4m3": 8, "f8e3m4": 8, "f8e8m0fnu": 8, "f4e2m1fn": 4, "token": 0,
}
# PrimitiveType enum -> bits, for ShapeProto.element_type.
_ENUM_BITS = {1: 8, 2: 8, 3: 16, 4: 32, 5: 64, 6: 8, 7: 16, 8: 32, 9: 64, 10: 16, 11: 32,
              12: 64, 15: 64, 16: 16, 18: 128, 19: 8, 20: 8, 21: 4, 22: 4, 23: 8, 24: 8,
              25: 8, 26: 2, 27: 2, 28: 8, 29: 8, 30: 4, 31: 8, 13: 0, 17: 0}

# (patterns compiled where first used: a capture's HloProto needs few of them, ~1 ms at import)
_ARRAY_RE = LazyPattern(r"([a-z][a-z0-9]*)\[([^\]]*)\](\{[^}]*\})?")
_MEMSPACE_RE = LazyPattern(r"S\((\d+)\)")


class ArrayShape(FrozenRecord):
    """An array's shape; frozen, equal and hashed by dtype, dims and memory space. (This
    module's records: `records.Record`s, its dataclasses without their import cost.)"""

    _fields = ("dtype", "dims", "memory_space", "minor_to_major", "tile")
    _compared = ("dtype", "dims", "memory_space")
    dtype: str
    dims: tuple[int, ...]
    memory_space: int
    # The layout the compiler chose, when printed: minor-to-major dimension order and the first
    # tile (`{3,2,1,0:T(8,128)}` -> (3, 2, 1, 0), (8, 128)); not compared: the same array.
    minor_to_major: tuple[int, ...] | None
    tile: tuple[int, ...] | None

    def __init__(self, dtype: str, dims: tuple[int, ...], memory_space: int = 0,
                 minor_to_major: tuple[int, ...] | None = None,
                 tile: tuple[int, ...] | None = None) -> None:
        d = self.__dict__
        d["dtype"], d["dims"], d["memory_space"], d["minor_to_major"], d["tile"] = (
            dtype, dims, memory_space, minor_to_major, tile)

    @property
    def nbytes(self) -> int:
        n = 1
        for d in self.dims:
            n *= d
        return (n * _BITS.get(self.dtype, 0) + 7) // 8

    @property
    def layout_nbytes(self) -> int:
        """Bytes of the array in the layout the compiler chose: with a tile `T(a,b)` the most
        minor physical dimension is padded up to a multiple of b and the next one to a
        multiple of a (XLA:TPU's tiled layouts; a 64-wide minor dimension under T(8,128)
        takes 128). Sub-tiles such as bf16's `(2,1)` pack within the tile and add nothing.
        Without a tile (XLA:GPU, XLA:CPU) this is `nbytes`."""
        if not self.tile:
            return self.nbytes
        order = self.minor_to_major
        if order is None or sorted(order) != list(range(len(self.dims))):
            order = tuple(range(len(self.dims) - 1, -1, -1))
        phys = [self.dims[i] for i in reversed(order)]  # major -> minor
        k = len(self.tile)
        phys = [1] * max(0, k - len(phys)) + phys  # a rank-0 array under T(128) is one tile
        for j, t in enumerate(self.tile):
            i = len(phys) - k + j
            if t > 0:
                phys[i] = -(-phys[i] // t) * t
        n = 1
        for d in phys:
            n *= d
        return (n * _BITS.get(self.dtype, 0) + 7) // 8

    def __str__(self) -> str:
        s = f"{self.dtype}[{','.join(map(str, self.dims))}]"
        return s + (f"S({self.memory_space})" if self.memory_space else "")


# The characters `_split_top` and `_matching` act on: they jump from one to the next (a
# character-at-a-time loop was ~30% of parsing a module; the same characters, the same rule)
_BRACKET_OR_COMMA_RE = LazyPattern(r"[()\[\]{},]")
_BRACKET_RE = LazyPattern(r"[()\[\]{}]")


def _split_top(s: str) -> list[str]:
    """Split at commas outside (), [], {} — HLO shapes and operand lists nest all three."""
    out, depth, start = [], 0, 0
    for m in _BRACKET_OR_COMMA_RE.finditer(s):
        ch = m.group()
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0:
            i = m.start()
            out.append(s[start:i])
            start = i + 1
    tail = s[start:]
    if tail.strip():
        out.append(tail)
    return [p.strip() for p in out]


def parse_shape(text: str) -> ArrayShape | list:
    """One HLO shape string -> ArrayShape, or a (nested) list of them for a tuple (a new list
    each call, of its parts split once per distinct text, `_tuple_parts`; its arrays, frozen,
    one object per distinct text: `_array`)."""
    text = text.strip()
    if text.startswith("("):
        return [parse_shape(p) for p in _tuple_parts(text)]
    return _array(text)


@functools.lru_cache(maxsize=4096)
def _tuple_parts(text: str) -> tuple[str, ...]:
    """A tuple's parts' texts, split once per distinct text (an unbalanced one raises each
    time): a prediction of 32 programs split 1,185 tuples' texts, ~0.02 s of bracket scans."""
    return tuple(_split_top(text[1:_matching(text, 0)]))


@functools.lru_cache(maxsize=4096)
def _array(text: str) -> ArrayShape:
    """`parse_shape` of one array's text, once per distinct text (a refused one raises each
    time). A program prints a few hundred distinct shapes for thousands of instructions: a
    prediction of 32 programs parsed 14,951 shapes, 769 distinct, ~0.1 s of its 0.6 s."""
    m = _ARRAY_RE.match(text)
    if not m:
        raise ValueError(f"not an HLO shape: {text[:80]!r}")
    dims = tuple(int(d.replace("<=", "")) for d in m.group(2).split(",") if d.strip())
    layout = m.group(3) or ""
    ms = _MEMSPACE_RE.search(layout)
    order, tile = _layout(layout)
    return ArrayShape(m.group(1), dims, int(ms.group(1)) if ms else 0, order, tile)


_TILE_RE = LazyPattern(r"T\(([\d,\s*]+)\)")


def _layout(layout: str) -> tuple[tuple[int, ...] | None, tuple[int, ...] | None]:
    """(minor_to_major, first tile) of a printed layout such as `{1,0:T(8,128)(2,1)S(5)}`."""
    if not layout:
        return None, None
    body = layout.strip("{}")
    head, _, tail = body.partition(":")
    try:
        order = tuple(int(x) for x in head.split(",") if x.strip())
    except ValueError:
        order = None
    tm = _TILE_RE.search(tail)
    tile = None
    if tm:
        # `*` (a combined dimension) has no size of its own: such a tile is not padded here.
        parts = [x.strip() for x in tm.group(1).split(",")]
        if all(x.isdigit() for x in parts):
            tile = tuple(int(x) for x in parts)
    return order, tile


def _matching(s: str, i: int) -> int:
    """Index of the bracket closing the one at s[i]."""
    depth = 0
    for m in _BRACKET_RE.finditer(s, i):
        if m.group() in "([{":
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                return m.start()
    raise ValueError(f"unbalanced brackets in {s[:80]!r}")


def _flatten(shape) -> list[ArrayShape]:
    if isinstance(shape, ArrayShape):
        return [shape]
    return [a for s in shape for a in _flatten(s)]


def _on_host(shape) -> bool:
    return any(a.memory_space == HOST_MEMORY_SPACE for a in _flatten(shape))


def _bytes(shape) -> int:
    return sum(a.nbytes for a in _flatten(shape))


def _layout_bytes(shape) -> int:
    return sum(a.layout_nbytes for a in _flatten(shape))
