"""`report --json` rows written from constant pieces and column texts (`text._rows_text`, issue
32 round 9): each row one join of the keys' and constant values' text with its own values'
texts, the text `_ENCODE` writes for that row. Pinned here where the join could go wrong:
varying columns first, last and side by side, and a float column of zeros (one 0.0 object in
every row goes into the constant text; 0.0 beside -0.0, equal but printed apart, never)."""

from __future__ import annotations

import pytest

from overlap.report.text import _ENCODE, _rows_text

_ZERO = 0.0


def _rows(n: int, zeros: list[float]) -> list[dict]:
    return [{"step": i, "host": "h", "start_ps": 10 * i, "end_ps": 10 * i + 5,
             "name": "train", "exposed_frac": zeros[i % len(zeros)], "worst_device": None,
             "exposure_causes": {} if i % 3 else {"device_waits": {"exposed_ps": i}},
             "last": i * i} for i in range(n)]


@pytest.mark.parametrize("zeros", [
    [_ZERO],                      # one object in every row: in the constant text
    [-0.0],                       # one negative zero object: "-0.0" in every row
    [0.0, -0.0],                  # equal, printed apart: per row
    [float("0"), float("-0") + 0.0, abs(-0.0)],  # equal +0.0 objects, maybe distinct: per row
])
def test_rows_are_the_encoders_text_row_by_row(zeros):
    rows = _rows(40, zeros)
    assert _rows_text(rows) == [_ENCODE(r) for r in rows]


def test_all_constant_rows_and_one_varying_column_at_either_end():
    same = [{"a": 1, "b": "x", "c": None, "d": 0.0}] * 20
    assert _rows_text(same) == [_ENCODE(same[0])] * 20
    first = [{"v": i, "a": 1, "b": "%d"} for i in range(20)]
    last = [{"a": 1, "b": "%s", "v": -i} for i in range(20)]
    for rows in (first, last):
        assert _rows_text(rows) == [_ENCODE(r) for r in rows]
