"""A column of dicts in rows of one layout (a step's `exposure_causes`) is written a key layout
at a time (`text._dicts_text`, issue 32 round 8): the same text as the encoder writes each row,
whatever the dicts' layouts (key sets and orders, empty, `%` in keys, nested containers, a
key that is no str), and a refused value (NaN) still refused where the encoder refuses it."""

from __future__ import annotations

import io
import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from overlap.report import text
from overlap.report.text import _ENCODE, _dicts_text, _rows_text, write_json


def _each(rows) -> str:
    """`write_json`'s text of `{"steps": rows}` with every row encoded on its own."""
    inner = ",\n".join("    " + _ENCODE(r) for r in rows)
    return '{\n  "steps": [\n' + inner + "\n  ]\n}\n"


_INNER = st.one_of(st.integers(-(2**64), 2**64), st.sampled_from([0, 1, 10**12]),
                   st.floats(allow_nan=False, allow_infinity=False), st.none(),
                   st.text(max_size=3), st.lists(st.integers(0, 3), max_size=2),
                   st.dictionaries(st.sampled_from(["u", "v"]), st.integers(0, 2), max_size=2))
_KEYS = ["device_waits", "unknown", "queued", "%s", "é"]


@st.composite
def _dict(draw):
    keys = draw(st.lists(st.sampled_from(_KEYS), max_size=4, unique=True))
    return {k: draw(_INNER) for k in keys}


@settings(max_examples=300, deadline=None)
@given(st.lists(_dict(), min_size=1, max_size=60), st.integers(0, 3))
def test_dict_columns_written_as_the_encoder_writes_each_row(dicts, layouts):
    if layouts == 0:  # one layout: the same keys in the same order in every dict
        head = list(dicts[0])
        dicts = [{k: d.get(k, 0) for k in head} for d in dicts]
    rows = [{"step": i, "exposure_causes": d} for i, d in enumerate(dicts)]
    fp = io.StringIO()
    write_json(fp, {"steps": rows})
    assert fp.getvalue() == _each(rows)
    assert _dicts_text(dicts) in (None, [_ENCODE(d) for d in dicts])


def test_dicts_of_a_few_layouts_each_written_by_rows():
    dicts = [{"device_waits": i, "unknown": 5} if i % 3 else {"unknown": i} for i in range(50)]
    dicts[7] = {}
    dicts[8] = {"unknown": 1, "device_waits": 2}  # the same keys, another order
    assert _dicts_text(dicts) == [_ENCODE(d) for d in dicts]
    rows = [{"step": i, "exposure_causes": d} for i, d in enumerate(dicts)]
    assert _rows_text(rows) == [_ENCODE(r) for r in rows]


def test_a_key_that_is_no_str_and_nan_go_back_to_the_encoder():
    rows = [{"step": i, "c": {"a": 1} if i % 2 else {1: 2}} for i in range(20)]
    fp = io.StringIO()
    write_json(fp, {"steps": rows})
    assert fp.getvalue() == _each(rows)
    assert json.loads(fp.getvalue())["steps"][1]["c"] == {"a": 1}
    bad = [{"step": i, "c": {"a": 0.5 if i != 11 else math.nan}} for i in range(20)]
    with pytest.raises(ValueError):
        write_json(io.StringIO(), {"steps": bad})
    assert _dicts_text([r["c"] for r in bad]) is None


@pytest.mark.parametrize("piece", [1, 2, 3, 7, 64])
def test_dicts_read_a_piece_at_a_time_give_every_rows_text(monkeypatch, piece):
    """`_dicts_text` reads `_DICTS` dicts at a time (its tuples held for one piece): pieces of
    one layout, of several, of few distinct rows (`_layout_text` once per distinct row) and of
    many give each row the encoder's text, in order; a refused value in a later piece than
    the first still sends the whole column back (None), and `write_json` raises as before."""
    monkeypatch.setattr(text, "_DICTS", piece)
    dicts = ([{"device_waits": 7}] * 9 + [{"device_waits": i, "unknown": 5} for i in range(9)]
             + [{}, {"unknown": 1, "device_waits": 2}, {"queued": 3}] * 4
             + [{"device_waits": 10**20 + i} for i in range(11)])
    assert _dicts_text(dicts) == [_ENCODE(d) for d in dicts]
    rows = [{"step": i, "exposure_causes": d} for i, d in enumerate(dicts)]
    fp = io.StringIO()
    write_json(fp, {"steps": rows})
    assert fp.getvalue() == _each(rows)
    bad = dicts + [{"device_waits": 1, "unknown": math.nan}]
    assert _dicts_text(bad) is None
    with pytest.raises(ValueError):
        write_json(io.StringIO(), {"steps": [{"step": 0, "c": d} for d in bad]})
