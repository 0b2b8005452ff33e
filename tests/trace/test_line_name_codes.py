"""The split codes each parse's line names (`_scan._LineRecs`, `lines.NameCodes`; issue 32,
round 18), and the GPU rules read lines by those codes where they can.

* Codes: equal names (as upb reads them) have equal codes and are one object, codes number
  the distinct names in order of first appearance, `first` is each code's first line, and
  `marks` say what `_is_stream_line` and a search for `(` say of the name; an absent name
  reads as the empty one; a name with invalid UTF-8 leaves the parse uncoded (None), its
  text as upb reads it.
* The unread-event entries (`_other_event_unknowns`) from the codes equal their definition
  from the line names (tests/trace/test_other_unknowns.py); events set aside by codes and
  then without (another parse) get their line names back.
* A report whose GPU lines hold odd kinds lists, plain streams and derived lines is
  byte-identical with the scanner (coded) and with upb (`wire.SCANNER = None`).
"""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from overlap.arrays import factorize
from overlap.cli.main import main
from overlap.trace import lines, vendors, wire
from overlap.trace.protos import XSpace
from overlap.trace.values import object_array
from tests.trace.test_other_unknowns import LINES, NAMES, _definition

pytestmark = pytest.mark.skipif(wire._scan is None, reason="the compiled scanner is not built")

# names the rules tell apart, and some that only look alike
PIECES = ["Stream #", "Memcpy", "(", ")", "Compute", ",", "Odd", "1", "é", "流", " ", "#",
          "Stream", "memcpy", "Memcp"]
ABSENT = object()  # a line without a name field


def _space(planes: list[list]) -> bytes:
    """SYNTHETIC: GPU planes of one-event lines with these names (`ABSENT`: no name field;
    bytes: the placeholder `@@@@`, for the caller to replace)."""
    sp = XSpace()
    for d, names in enumerate(planes):
        pl = sp.planes.add(id=d, name=f"/device:GPU:{d}")
        md = pl.event_metadata[1]
        md.id, md.name = 1, "kernel_x"
        for i, nm in enumerate(names):
            ln = pl.lines.add(id=i, timestamp_ns=1000)
            if nm is not ABSENT:
                ln.name = "@@@@" if isinstance(nm, bytes) else nm
            ln.events.add(metadata_id=1, offset_ps=10 * i, duration_ps=5)
    return sp.SerializeToString()


def _block(raw: bytes) -> lines.LineBlock:
    _, planes, _ = wire.parse_space(wire.padded(raw), len(raw))
    return planes[0].lines.block


def _upb_names(raw: bytes) -> list[str]:
    xs = wire._strict_or_sanitized(XSpace, raw)
    return [ln.name for pl in xs.planes for ln in pl.lines]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.one_of(st.just(ABSENT),
                                   st.lists(st.sampled_from(PIECES), max_size=4).map("".join)),
                         min_size=1, max_size=12), min_size=1, max_size=3))
def test_codes_number_the_names_as_upb_reads_them(planes):
    raw = _space(planes)
    block = _block(raw)
    names = _upb_names(raw)
    assert block.names == names
    coded = block.coded
    assert coded is not None and coded.names is block.names
    codes, uniq = factorize(object_array(names))
    assert coded.codes.dtype == np.int32 and coded.codes.tolist() == codes.tolist()
    assert coded.first.tolist() == [names.index(u) for u in uniq.tolist()]
    assert coded.texts(np.arange(len(coded))) == uniq.tolist()
    for c, u in enumerate(uniq.tolist()):
        assert bool(coded.marks[c] & lines.STREAM) == vendors._is_stream_line(u)
        assert bool(coded.marks[c] & lines.PAREN) == ("(" in u)
    # equal names are one object
    for i, nm in enumerate(block.names):
        assert nm is block.names[int(coded.first[coded.codes[i]])]


def test_an_absent_name_is_the_empty_one():
    block = _block(_space([[ABSENT, "", "Stream #1", ABSENT]]))
    assert block.names == ["", "", "Stream #1", ""]
    assert block.coded.codes.tolist() == [0, 0, 1, 0]
    assert block.coded.marks.tolist() == [0, lines.STREAM]


def test_invalid_utf8_leaves_the_parse_uncoded_and_reads_as_upb():
    # two different invalid byte strings that upb reads as one text
    raw = _space([[b"@@@@", "Stream #1", b"@@@@"]])
    raw = raw.replace(b"\x12\x04@@@@", b"\x12\x04S\xff\xfe1", 1)
    raw = raw.replace(b"\x12\x04@@@@", b"\x12\x04S\xfe\xff1", 1)
    block = _block(raw)
    assert block.coded is None
    assert block.names == _upb_names(raw) == ["S\ufffd\ufffd1", "Stream #1", "S\ufffd\ufffd1"]


def _coded_of(line_names: list[str]) -> lines.NameCodes:
    return _block(_space([line_names])).coded


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([d for d in ("GPU:0", "GPU:1", None)]),
                          st.integers(0, len(LINES) - 2), st.sampled_from(NAMES)),
                min_size=1, max_size=60))
def test_unread_entries_from_codes_equal_the_definition(rows):
    """(None, no line, is not a coded name: the lines here are `LINES` without it.)"""
    names = [ln for ln in LINES if ln is not None]
    coded = _coded_of(names)
    lcode = coded.codes[[r[1] for r in rows]]
    other = {"device": object_array([r[0] for r in rows]),
             "name": object_array([r[2] for r in rows]), "lcode": lcode}
    plain = {"device": other["device"], "name": other["name"],
             "line": object_array([names[r[1]] for r in rows])}
    assert vendors._other_event_unknowns(other, coded) == _definition(plain)


def test_events_set_aside_without_codes_give_the_coded_ones_their_names():
    a = _coded_of(["Stream #1", "Stream #2(Odd)", "Stream #1"])
    b = _coded_of(["Stream #1", "Stream #9"])
    side = vendors.GpuSide()
    assert side.codes_of(_block(_space([["x"]]))) is not None
    side.add_other(2, a, a.codes[[1, 2]], None, device="GPU:0", name=object_array(["k", "k"]))
    assert side.coded is a and side.codes_of(None) is None
    assert side.codes_of(type("B", (), {"coded": b})()) is None  # another parse
    side.add_other(1, None, None, object_array(["Stream #9"]), device="GPU:1",
                   name=object_array(["k"]))
    assert side.coded is False
    rows = vendors._cols_rows(side.other, ("device", "line", "name"))
    assert rows["line"].tolist() == ["Stream #2(Odd)", "Stream #1", "Stream #9"]
    assert side.codes_of(type("B", (), {"coded": a})()) is None  # never coded again


def _report(path, scanner) -> str:
    old = wire.SCANNER
    wire.SCANNER = scanner
    try:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert main(["report", "--json", str(path)]) in (0, None)
        return out.getvalue()
    finally:
        wire.SCANNER = old


def test_a_report_of_odd_lines_is_one_answer_coded_or_not(tmp_path):
    """SYNTHETIC: three GPU planes whose lines repeat names across planes (and within one),
    with kinds lists the tracers write and ones they do not, plain streams, copies by name
    and derived lines; enough lines (> `gpu._FEW_LINES`) that they are merged in segments,
    and one long line read alone."""
    names = ["Stream #1(Compute)", "Stream #2(Compute,Odd)", "Stream #3", "TensorFlow Ops",
             "Stream #4(Weird)", "MemcpyD2D", "Stream #x(Odd)", "Steps"]
    sp = XSpace()
    for d in range(3):
        pl = sp.planes.add(id=d, name=f"/device:GPU:{d}")
        for k, nm in enumerate(["kernel_x", "MemcpyD2D", "Memset 1", "other"], start=1):
            md = pl.event_metadata[k]
            md.id, md.name = k, nm
        for i in range(40 + d):
            ln = pl.lines.add(id=i, name=names[(i * (d + 1)) % len(names)], timestamp_ns=1000)
            for j in range(1 + i % 3):
                ln.events.add(metadata_id=1 + (i + j) % 4, offset_ps=100 * j, duration_ps=5)
        ln = pl.lines.add(id=99, name="Stream #2(Compute,Odd)", timestamp_ns=1000)
        for j in range(600):  # (a line of its own: `gpu._SMALL_LINE` events)
            ln.events.add(metadata_id=1 + j % 4, offset_ps=10 * j, duration_ps=5)
    sp.planes.add(id=9, name="/host:CPU")
    path = tmp_path / "odd_lines.xplane.pb"
    path.write_bytes(sp.SerializeToString())
    coded = _report(path, wire.SCANNER)
    assert coded == _report(path, None)
    unknowns = json.loads(coded)
    assert "Odd" in coded and "Weird" in coded and unknowns


def test_events_in_sums_each_range_either_way():
    """`LineBlock.events_in`: a wide range summed on its own, a narrow one by the running
    sum, and a wide one again once that is made: each the range's events."""
    rng = np.random.default_rng(7)
    n = 40
    rec = np.zeros((n, 7), np.int64)
    rec[:, lines.EVENTS] = rng.integers(0, 1000, n)
    block = lines.LineBlock(rec, [""] * n, [""] * n, None)
    pairs = [(a, b) for a in range(n + 1) for b in range(a, n + 1)]
    for a, b in sorted(pairs, key=lambda p: p[0] - p[1]):  # (the widest first)
        assert block.events_in(a, b) == int(rec[a:b, lines.EVENTS].sum())
    assert block._cum is not None
    assert block.events_in(0, n) == int(rec[:, lines.EVENTS].sum())


def test_display_names_kept_only_where_one_is_written():
    """The split keeps no list of display names while every one is empty; from the first
    one written, a list in which the lines before it read "" (as upb reads them)."""
    sp = XSpace()
    pl = sp.planes.add(id=0, name="/device:GPU:0")
    for i, disp in enumerate([None, "", None, "shown", None, "shown", "other"]):
        ln = pl.lines.add(id=i, name=f"Stream #{i}")
        if disp is not None:
            ln.display_name = disp
    raw = sp.SerializeToString()
    block = _block(raw)
    want = [ln.display_name for ln in XSpace.FromString(raw).planes[0].lines]
    assert block.displays == want and [block.line(i).display_name for i in range(7)] == want
    none = _block(_space([["a", "b", ABSENT]]))
    assert none.displays is None
    assert [none.line(i).display_name for i in range(3)] == ["", "", ""]
