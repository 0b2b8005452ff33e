"""`report --json`'s encoder (`overlap.report.text._ENCODE`): one C encoder made once (issue 32),
the same text as `json.JSONEncoder(allow_nan=False).encode`, NaN refused, usable after a refusal."""

from __future__ import annotations

import io
import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from overlap.report.text import _ENCODE, write_json

_REF = json.JSONEncoder(allow_nan=False).encode


@pytest.mark.parametrize("value", [
    0, -1, 2**70, 1.5, -0.0, 1e300, 5e-324, None, True, False, "", "a\u00e9\n\"\\\x00\U0001f600",
    [], {}, (1, 2), [1, {"x": 2.0, "y": [None, "z"]}], {"k": 1, 3: 4, 2.5: "f", None: 0},
])
def test_same_text_as_the_standard_encoder(value):
    assert _ENCODE(value) == _REF(value)


def test_nan_refused_and_the_encoder_still_works():
    shared = [1]
    for bad in (math.nan, [math.inf], {"a": [shared, -math.inf]}):
        with pytest.raises(ValueError):
            _ENCODE(bad)
    # the containers of a refused value are no longer marked: no false circular reference
    assert _ENCODE({"a": [shared, shared]}) == '{"a": [[1], [1]]}'
    loop: list = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular"):
        _ENCODE(loop)


def test_write_json_round_trips():
    result = {"a": [{"x": 1, "y": 0.25}] * 3, "b": {"c": [1, 2], "d": "e"}, "n": None}
    fp = io.StringIO()
    write_json(fp, result)
    assert json.loads(fp.getvalue()) == result


def _reference(result) -> str:
    """`write_json`'s layout with every list element encoded on its own by `_ENCODE`."""
    out = io.StringIO()

    def emit(v, indent, depth):
        inner = indent + "  "
        if isinstance(v, dict) and v and depth < 3:
            out.write("{\n")
            for i, (k, x) in enumerate(v.items()):
                out.write(f"{inner}{_ENCODE(str(k))}: ")
                emit(x, inner, depth + 1)
                out.write(",\n" if i < len(v) - 1 else "\n")
            out.write(indent + "}")
        elif isinstance(v, (list, tuple)) and v and depth < 3:
            out.write("[\n" + ",\n".join(inner + _ENCODE(x) for x in v) + "\n" + indent + "]")
        else:
            out.write(_ENCODE(v))

    emit(result, "", 0)
    out.write("\n")
    return out.getvalue()


_VALUES = st.one_of(
    st.integers(-(2**70), 2**70), st.sampled_from([0, 7, 7, -1]), st.floats(allow_nan=False,
    allow_infinity=False), st.sampled_from([0.0, -0.0, 0.5]), st.none(), st.booleans(),
    st.text(max_size=4), st.sampled_from(["%s", "%d", "a%", "é"]),
    st.dictionaries(st.sampled_from(["x", "%"]), st.integers(0, 3), max_size=2),
    st.lists(st.integers(0, 3), max_size=2))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["host", "step", "%k", "r", "é"]), min_size=1, max_size=5,
                unique=True),
       st.integers(0, 40), st.data())
def test_rows_of_one_layout_are_written_as_the_encoder_writes_each(keys, n, data):
    """A list of dicts with the same keys (step rows, records) is written column by column
    (`_rows_text`): per column one type, one value, or anything; the text is the encoder's,
    row by row, whatever the values (`%` in keys and values, -0.0 beside 0.0, bools beside
    ints, nested containers)."""
    kinds = {k: data.draw(st.sampled_from(["const", "any", "int", "float", "str"])) for k in keys}
    const = {k: data.draw(_VALUES) for k in keys}
    one = {"int": st.integers(-(2**64), 2**64), "float": st.floats(allow_nan=False,
           allow_infinity=False), "str": st.text(max_size=3), "any": _VALUES}
    rows = [{k: const[k] if kinds[k] == "const" else data.draw(one[kinds[k]]) for k in keys}
            for _ in range(n)]
    result = {"steps": rows, "top": {"records": rows[:20]}, "other": list(range(n))}
    fp = io.StringIO()
    write_json(fp, result)
    assert fp.getvalue() == _reference(result)


@pytest.mark.parametrize("bad_row", [0, 17, 4100])
def test_a_refused_value_in_a_long_list_writes_what_the_encoder_wrote_and_raises(bad_row):
    """NaN in a row of a long list: the rows before it are written as before, then ValueError
    (the encoder's refusal), in batch after batch of rows."""
    rows = [{"a": i, "b": 0.5} for i in range(4200)]
    rows[bad_row]["b"] = math.nan
    got, want = io.StringIO(), io.StringIO()
    with pytest.raises(ValueError):
        write_json(got, {"steps": rows})
    want.write('{\n  "steps": [\n')
    for i in range(bad_row):
        want.write(f"    {_ENCODE(rows[i])},\n")
    assert got.getvalue() == want.getvalue()


def test_rows_of_other_layouts_are_encoded_one_by_one():
    """Rows whose keys differ in order or set, or that are not dicts, take the encoder row by
    row: the same text."""
    rows = [{"a": 1, "b": 2}] * 20 + [{"b": 2, "a": 1}]
    mixed = [{"a": 1}] * 20 + [[1]]
    for v in (rows, mixed, [{}] * 20, [{1: 2}] * 20):
        fp = io.StringIO()
        write_json(fp, {"v": v})
        assert fp.getvalue() == _reference({"v": v})
