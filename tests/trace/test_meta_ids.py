"""`Plane.meta_columns(ids=...)`: an identifier stat (program_id) as `as_id` of its value,
made from the table's typed records (`metatable.id_objects`: one Python int per distinct
integer), equals `as_id` of the value upb gives one id at a time, for any encoding and any
kind of value (int64 of either sign, uint64 on both sides of 2**63, doubles, strings, refs,
no value); the other names' columns are unchanged; and the upb path gives the same."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from overlap.trace import wire
from overlap.trace.values import as_id
from tests.trace.test_meta_table import WANTED, both, entry, plane_bytes, upb_twin
from tests.trace.wire_bytes import split_planes

pytestmark = pytest.mark.skipif(wire._scan is None, reason="the scanner was not built")

IDS = ("program_id",)


def _same(a: list, b: list) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert type(x) is type(y) and (x == y or x != x), (x, y)


def _check(raw: bytes, extra: list[int]) -> None:
    P, xs = both(raw)
    upb = xs.planes[0].event_metadata
    mids = np.array(sorted(upb.keys()) + extra, np.int64)
    got = P.meta_columns(mids, WANTED, ids=IDS)
    plain = P.meta_columns(mids, WANTED)
    for k in WANTED:
        if k in IDS:
            _same(got[k].tolist(), [as_id(v) for v in plain[k].tolist()])
        else:
            _same(got[k].tolist(), plain[k].tolist())
    one = upb_twin(P, upb)  # the upb path, one id at a time
    slow = one.meta_columns(mids, WANTED, ids=IDS)
    for k in WANTED:
        _same(got[k].tolist(), slow[k].tolist())


@settings(max_examples=150, deadline=None)
@given(st.lists(entry, max_size=12), st.lists(st.integers(-5, 45), max_size=6))
def test_ids_equal_as_id_of_the_values(entries, extra):
    _check(plane_bytes(entries, merged_value=False), extra)


@pytest.mark.parametrize("values", [
    [(3, 12190760917235803885)] * 20,                      # one program: one int
    [(3, 5), (4, 5), (3, 7), (4, 7), (3, (1 << 64) - 1)],  # uint64 and int64 alike
    [(4, -1), (4, 0), (4, (1 << 63) - 1), (3, 1 << 63)],   # a negative int64 is no id
    [(2, 5.0), (2, -1.0), (5, "9"), (5, "x"), (6, b"1"), (7, 1), None, (3, 2)],
])
def test_ids_of_each_kind(values):
    entries = [{"key": i + 1, "name": f"op{i}", "display": "", "layout": "canonical",
                "stats": [] if v is None else [(2, v, "canonical"), (2, (3, 77), "canonical")]}
               for i, v in enumerate(values)]
    _check(plane_bytes(entries, merged_value=False), [0, 99])


@settings(max_examples=150, deadline=None)
@given(st.lists(entry, max_size=12), st.booleans(), st.booleans())
def test_split_decodes_the_entries_as_decode_meta(entries, merged, strip):
    """`split_space`: a stripped plane's entries decoded while they are checked are
    `decode_meta(narrow=True)`'s columns exactly, whether that checks every stat or steps
    over them (`checked=True`, what a table built again asks for), refusals included; a
    plane not stripped has none."""
    raw = plane_bytes(entries, merged_value=merged)
    buf = wire.padded(raw)
    fn = (lambda name: True) if strip else None
    skel, planes, _ = split_planes(buf, len(raw), fn)
    (lines, ms, me, stripped, bad, meta), = planes
    if not stripped:
        assert meta is None
        return
    for checked in (False, True):
        want = wire._scan.decode_meta(buf, ms.astype(np.int64), me.astype(np.int64), narrow=True,
                                      checked=checked)
        assert meta["ok"] == want["ok"] and meta["reversed"] == want["reversed"]
        if want["ok"]:
            for k in ("key", "name", "disp", "value"):
                assert meta[k].dtype == want[k].dtype and meta[k].tolist() == want[k].tolist(), k
