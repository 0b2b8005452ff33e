"""`report --json`'s encoder (`overlap.report.text._ENCODE`): one C encoder made once (issue 32),
the same text as `json.JSONEncoder(allow_nan=False).encode`, NaN refused, usable after a refusal."""

from __future__ import annotations

import io
import json
import math

import pytest

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
