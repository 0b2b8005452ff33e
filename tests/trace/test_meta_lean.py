"""A plane of many event-metadata entries held lean (issue 32, round 22): the split gives
every entry's span as int32 where the buffer is under 2 GiB (`_scan._Pos`), the keys of a
table of at least `_scan.NARROW_KEYS_MIN` entries as int32 where each fits (`_scan._Keys`,
widened at the first that does not), and never writes an absent display name's span. Each
column equals the int64 decode's, keys at and past int32's edges included; a report of such
a capture is upb's. SYNTHETIC captures, labelled so."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from overlap.trace import wire
from tests.trace.test_differential import _cli
from tests.trace.test_meta_table import entry, plane_bytes
from tests.trace.wire_bytes import field

pytestmark = pytest.mark.skipif(wire._scan is None, reason="the compiled scanner is not built")
_scan = wire._scan

EDGES = [-(2**31) - 1, -(2**31), -1, 0, 1, 2**31 - 2, 2**31 - 1, 2**31, 2**40]


def _decoded(raw: bytes, strip: bool):
    """The plane's table columns as the split gives them (stripped) or `decode_meta` does,
    and the int64 decode of the same entries (no narrowing of anything)."""
    _, planes, _ = wire.parse_space(wire.padded(raw), len(raw),
                                    strip_meta=(lambda name: True) if strip else None)
    pv = planes[0]
    ms, me = pv.meta_pos
    ms64, me64 = ms.astype(np.int64), me.astype(np.int64)
    wide = _scan.decode_meta(pv.buf, ms64, me64)
    got = pv.meta_decoded if strip else _scan.decode_meta(pv.buf, ms64, me64, narrow=True)
    return got, wide, (ms, me)


@settings(max_examples=150, deadline=None)
@given(st.lists(entry, max_size=12), st.lists(st.sampled_from(EDGES), max_size=4),
       st.sampled_from(["as drawn", "ascending", "descending"]), st.booleans(),
       st.sampled_from([1, 3, 1 << 16]))
def test_narrow_keys_and_spans_equal_the_wide_decode(entries, edges, order, strip, least):
    """With `NARROW_KEYS_MIN` patched low, a table's keys are int32 exactly where every key
    fits, and equal the int64 decode's (reversed where it reversed them); the entry spans
    are int32 and locate the same bytes; every other column is the wide decode's."""
    entries = entries + [dict(entries[0] if entries else _ENTRY, key=k) for k in edges]
    if order != "as drawn":
        keys = sorted({e["key"] for e in entries}, reverse=order == "descending")
        entries = [dict(e, key=k, layout="canonical") for e, k in zip(entries, keys)]
    old = _scan.NARROW_KEYS_MIN
    _scan.NARROW_KEYS_MIN = least
    try:
        got, wide, (ms, me) = _decoded(plane_bytes(entries, merged_value=False), strip)
    finally:
        _scan.NARROW_KEYS_MIN = old
    assert ms.dtype == me.dtype == np.int32
    if got is None or not wide["ok"]:
        return
    assert got["ok"]
    key = wide["key"]
    flip = (lambda a: a[..., ::-1]) if got["reversed"] else (lambda a: a)
    assert got["key"].tolist() == flip(key).tolist()
    fits = bool(len(key)) and int(key.min()) >= -(2**31) and int(key.max()) < 2**31
    assert got["key"].dtype == (np.int32 if fits and len(key) >= least else np.int64)
    for c in ("name", "disp", "value"):
        assert got[c].tolist() == flip(wide[c]).tolist(), c


_ENTRY = {"key": 1, "name": "n", "display": "", "stats": [], "layout": "canonical"}


@pytest.mark.parametrize("keys", [[1, 2, 3, 4], [2**31 + 5, 1, 7, 2], [-(2**31) - 1, 3, 4]])
@pytest.mark.parametrize("display", ["", "shown"])
def test_reports_of_narrow_tables_are_upbs(tmp_path, monkeypatch, keys, display):
    """A TPU plane and a GPU plane stripped with narrow keys (patched low): the report is
    upb's, names and display names included, keys past int32 widening the table."""
    monkeypatch.setattr(_scan, "NARROW_KEYS_MIN", 1)
    monkeypatch.setattr(_scan, "META_STRIP_MIN", 1)
    for dev in ("/device:TPU:0", "/device:GPU:0"):
        entries = b"".join(field(4, 2, _entry(i, k, display)) for i, k in enumerate(keys))
        line = field(3, 2, field(1, 0, 1) + field(2, 2, b"XLA Ops") + b"".join(
            field(4, 2, field(1, 0, k) + field(2, 0, 10 * i) + field(3, 0, 5))
            for i, k in enumerate(keys) if k > 0))
        plane = field(1, 0, 1) + field(2, 2, dev.encode()) + entries + line
        raw = field(1, 2, plane) + field(3, 2, b"SYNTHETIC")
        p = tmp_path / "t.xplane.pb"
        p.write_bytes(raw)
        got = _cli(["report", "--json", str(p)], wire._scan)
        assert got == _cli(["report", "--json", str(p)], None), dev


def _entry(i: int, k: int, display: str) -> bytes:
    """A map entry: key `k`, an XEventMetadata `fusion.<i>` (a display name on odd ones)."""
    shown = field(4, 2, display.encode()) if display and i % 2 else b""
    return field(1, 0, k) + field(2, 2, field(1, 0, k) + field(2, 2, f"fusion.{i}".encode())
                                  + shown)
