"""An array's shape is parsed once per distinct text (`overlap.hlo.shapes._array`), and a
tuple's text split once (`_tuple_parts`): every shape of the real programs here reads as a
fresh parse reads it, field by field; an array's shape is one frozen object however often
asked, a tuple's list a new one each call (a caller may keep or change its list, never
another's); a text that is no shape is refused every time."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from overlap.hlo import shapes
from overlap.hlo.program import _parse_module
from overlap.hlo.shapes import ArrayShape, parse_shape

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def _fresh(text: str):
    """`parse_shape` without the cache: the function it wraps, called directly."""
    text = text.strip()
    if text.startswith("("):
        inner = text[1:shapes._matching(text, 0)]
        return [_fresh(p) for p in shapes._split_top(inner)]
    return shapes._array.__wrapped__(text)


def _fields(s):
    if isinstance(s, list):
        return [_fields(x) for x in s]
    return (type(s), s.dtype, s.dims, s.memory_space, s.minor_to_major, s.tile)


def _shape_texts() -> list[str]:
    out = []
    for path in sorted((HERE / "fixtures").glob("*.hlo.txt")) + \
            sorted((REPO / "sample_traces").rglob("hlo/*.hlo.txt")):
        comps, _ = _parse_module(path.read_text())
        out += [i._shape for instrs in comps.values() for i in instrs
                if isinstance(i._shape, str)]
    return out


def test_every_shape_of_the_real_programs_reads_as_a_fresh_parse():
    texts = _shape_texts()
    assert len(texts) > 1000 and len(set(texts)) < len(texts)  # (repeated, as programs do)
    for t in texts:
        assert _fields(parse_shape(t)) == _fields(_fresh(t))
        assert _fields(parse_shape(t)) == _fields(parse_shape(t))  # (asked again: the same)


def test_an_array_is_one_frozen_object_and_a_tuple_a_new_list():
    a = parse_shape("f32[8,128]{1,0:T(8,128)S(5)}")
    assert parse_shape(" f32[8,128]{1,0:T(8,128)S(5)} ") is a
    assert a.tile == (8, 128) and a.memory_space == 5
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.dims = (1,)  # type: ignore[misc]
    t1 = parse_shape("(f32[8]{0}, (s32[], f32[8]{0}))")
    t2 = parse_shape("(f32[8]{0}, (s32[], f32[8]{0}))")
    assert t1 == t2 and t1 is not t2 and t1[1] is not t2[1]
    assert t1[0] is t2[0] and isinstance(t1[0], ArrayShape)
    t1.append("changed")  # (a caller's own list: the next call's is not)
    assert len(parse_shape("(f32[8]{0}, (s32[], f32[8]{0}))")) == 2


def test_a_text_that_is_no_shape_is_refused_every_time():
    for _ in range(3):
        with pytest.raises(ValueError, match="not an HLO shape"):
            parse_shape("no shape here")
        with pytest.raises(ValueError, match="unbalanced brackets"):
            parse_shape("(f32[8]{0}, (s32[]")
        with pytest.raises(ValueError, match="not an HLO shape"):
            parse_shape("(f32[8]{0}, nothing)")
    assert shapes._array.cache_info().maxsize == 4096
    assert shapes._tuple_parts.cache_info().maxsize == 4096


def test_a_tuple_reads_only_up_to_its_closing_bracket_as_before():
    t = "(f32[8]{0}, s32[]) and more"
    assert _fields(parse_shape(t)) == _fields(_fresh(t))
    assert _fields(parse_shape("()")) == _fields(_fresh("()")) == []
