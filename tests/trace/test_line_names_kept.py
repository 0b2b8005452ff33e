"""Many distinct line names kept as bytes until asked (`_scan.LAZY_NAMES_MIN`,
`lines.LineNames`), many lines' records as int32 where every value fits
(`_scan.NARROW_LINES_MIN`), and the `lines` table made when read (`tables.Deferred`; issue
32, round 21): a million one-event lines held a million `str` (76 MiB on the read's peak)
that no report reads, and 53 MiB of int64 records. Every answer is the one the decoded names
and int64 records give: the names as upb reads them, the report and `inspect`
byte-identical with the scanner and with upb, the codes' texts either way. SYNTHETIC
captures, labelled so."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from overlap.trace import lines, reader, wire
from overlap.trace.synthetic import one_event_lines
from overlap.trace.tables import LINE_COLUMNS, Columns, Deferred
from overlap.trace.values import Coded, per_mid
from tests.trace.test_differential import _cli
from tests.trace.test_line_name_codes import ABSENT, PIECES, _space, _upb_names

pytestmark = pytest.mark.skipif(wire._scan is None, reason="the compiled scanner is not built")


def _block(raw: bytes) -> lines.LineBlock:
    _, planes, _ = wire.parse_space(wire.padded(raw), len(raw))
    return planes[0].lines.block


@pytest.mark.parametrize("short", [0, 1])
def test_at_the_bound_the_names_are_kept_as_bytes_one_answer(tmp_path, short):
    """`LAZY_NAMES_MIN` distinct names are kept as bytes, one fewer are decoded; the report
    and `inspect` are upb's either way (`inspect` reads every name)."""
    n = wire._scan.LAZY_NAMES_MIN - short
    raw = one_event_lines(n)
    block = _block(raw)
    assert isinstance(block.names, lines.LineNames) == (not short)
    assert list(block.names) == _upb_names(raw)
    assert wire._scan.NARROW_LINES_MIN == wire._scan.LAZY_NAMES_MIN  # (one file for both)
    # (the columns that vary narrowed; those of one value (display id, timestamp, duration,
    # events) one int64 element, read-only)
    assert [c.dtype for c in block.rec.cols if c.strides[0]] == \
        [np.dtype(np.int64 if short else np.int32)] * 3
    assert [c.strides[0] == 0 and not c.flags.writeable for c in block.rec.cols] == \
        [False, True, True, True, False, False, True]
    p = tmp_path / "lines.xplane.pb"
    p.write_bytes(raw)
    for args in (["report", "--json", str(p)], ["inspect", "--json", str(p)]):
        assert _cli(args, wire._scan) == _cli(args, None)


names_lists = st.lists(st.one_of(st.just(ABSENT),
                                 st.lists(st.sampled_from(PIECES), max_size=4).map("".join)),
                       min_size=1, max_size=14)


@settings(max_examples=150, deadline=None)
@given(names_lists, st.data())
def test_kept_names_read_as_the_decoded_ones(names, data):
    """With the bound at 1 every coded parse keeps its names as bytes: each way of reading
    them (`[i]`, a slice, iteration, the codes' `texts` and `text_arrays`) gives what
    the decoded list gives, and that list is upb's."""
    raw = _space([names])
    want = _block(raw)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(wire._scan, "LAZY_NAMES_MIN", 1)
        got = _block(raw)
    assert isinstance(got.names, lines.LineNames) and isinstance(want.names, list)
    # (no first line per code kept beside the bytes; offsets as narrow as the bytes allow)
    assert got.coded.first is None and got.names.off.dtype == np.int32
    assert want.names == _upb_names(raw)
    assert list(got.names) == want.names and len(got.names) == len(want.names)
    n = len(want.names)
    i = data.draw(st.integers(-n, n - 1))
    assert got.names[i] == want.names[i] and got.line(i % n).name == want.names[i]
    a, b = data.draw(st.integers(0, n)), data.draw(st.integers(0, n))
    assert got.names[a:b] == want.names[a:b]
    rows = np.array(data.draw(st.lists(st.integers(0, n - 1), max_size=20)), np.int64)
    assert [got.names[r] for r in rows.tolist()] == [want.names[r] for r in rows.tolist()]
    codes = np.arange(len(got.coded))
    assert got.coded.texts(codes) == want.coded.texts(codes)
    per_event = [np.array(data.draw(st.lists(st.sampled_from(codes.tolist()), max_size=9)),
                 np.int32) for _ in range(2)]
    for g, w in zip(got.coded.text_arrays(per_event), want.coded.text_arrays(per_event)):
        assert g.dtype == w.dtype == object and g.tolist() == w.tolist()


def test_invalid_utf8_keeps_the_names_decoded(monkeypatch):
    """A name with invalid UTF-8 leaves the parse uncoded: its names are the list upb reads,
    whatever the bound."""
    raw = _space([[b"@@@@", "Stream #1", "Stream #2"]])
    raw = raw.replace(b"\x12\x04@@@@", b"\x12\x04S\xff\xfe1", 1)
    monkeypatch.setattr(wire._scan, "LAZY_NAMES_MIN", 1)
    block = _block(raw)
    assert block.coded is None and block.names == _upb_names(raw)


def _part(raw: bytes, tmp_path, name: str) -> dict:
    p = tmp_path / f"{name}.xplane.pb"
    p.write_bytes(raw)
    return reader.read_host_file(p)


def test_the_lines_table_is_made_when_read(tmp_path, monkeypatch):
    """The reader's `lines` table is a `Deferred`: its row count known, nothing made; a
    `Trace` of one part keeps it so until read; read, pickled (a worker's part) or combined
    with another part it is the table the names give."""
    monkeypatch.setattr(wire._scan, "LAZY_NAMES_MIN", 4)
    raw = one_event_lines(9)
    part = _part(raw, tmp_path, "a")
    table = part["lines"]
    assert isinstance(table, Deferred) and table.n == 9 and table._cols is None
    want = {"host": ["a"] * 9, "plane": ["/device:GPU:0"] * 9, "line_id": list(range(9)),
            "line": [f"Stream #{i}" for i in range(9)], "events": [1] * 9}
    trace = reader.combine_parts([part], [tmp_path / "a.xplane.pb"])
    assert trace.rows("lines") == 9 and table._cols is None
    got = trace.columns("lines")
    assert {k: v.tolist() for k, v in got.items()} == want and table._cols is not None
    assert list(got) == list(LINE_COLUMNS) and got["line"].dtype == object
    # pickled as its columns
    back = pickle.loads(pickle.dumps(_part(raw, tmp_path, "a")["lines"]))
    assert type(back) is Columns and {k: v.tolist() for k, v in back.items()} == want
    # two parts: one table, in part order
    parts = [_part(raw, tmp_path, "a"), _part(one_event_lines(2), tmp_path, "b")]
    both = reader.combine_parts(parts, [tmp_path / "a.xplane.pb", tmp_path / "b.xplane.pb"])
    assert both.columns("lines")["line"].tolist() == want["line"] + ["Stream #0", "Stream #1"]
    assert both.columns("lines")["host"].tolist() == ["a"] * 9 + ["b"] * 2
    # and as the DataFrame a caller reads
    one = reader.combine_parts([_part(raw, tmp_path, "a")], [tmp_path / "a.xplane.pb"])
    assert isinstance(one.__dict__["lines"].cols, Deferred)
    assert one.lines["line"].tolist() == want["line"]
    assert reader.part_frames(_part(raw, tmp_path, "a"))["lines"]["line"].tolist() == \
        want["line"]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 5), min_size=1, max_size=40), st.data())
def test_per_mid_coded_is_its_column(mids, data):
    """`per_mid(coded=True)` is a `Coded` whose column is what `per_mid` gives."""
    mids = np.array(mids, np.int64)
    at = np.array(sorted(set(data.draw(st.lists(st.integers(0, len(mids) - 1))))), np.int64)
    for kw in ({}, {"at": at}):
        plain = per_mid(mids, lambda m: f"n{m % 3}", **kw)
        got = per_mid(mids, lambda m: f"n{m % 3}", coded=True, **kw)
        assert isinstance(got, Coded) and got.column().tolist() == plain.tolist()


def _headers_space(heads: list[tuple[int, int, int, int, int]]) -> bytes:
    """SYNTHETIC: one GPU plane of lines with these (id, display_id, timestamp_ns,
    duration_ps, events) headers; each event a `kernel_x` of 5 ps, 10 ps apart."""
    from overlap.trace.protos import XSpace

    sp = XSpace()
    pl = sp.planes.add(id=1, name="/device:GPU:0")
    md = pl.event_metadata[1]
    md.id, md.name = 1, "kernel_x"
    for i, (lid, disp, ts, dur, n) in enumerate(heads):
        ln = pl.lines.add(id=lid, display_id=disp, name=f"Stream #{i % 3}", timestamp_ns=ts,
                          duration_ps=dur)
        for j in range(n):
            ln.events.add(metadata_id=1, offset_ps=10 * j, duration_ps=5)
    sp.planes.add(id=2, name="/host:CPU")
    return sp.SerializeToString()


FITS = 2**31 - 1
values = st.one_of(st.integers(0, 40), st.sampled_from([FITS, FITS + 1, 2**40, 2**63 - 1]))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(values, values, values, values, st.integers(0, 3)),
                min_size=1, max_size=8))
@example([(FITS + 1, 0, 5, 0, 1)])  # (one value just past int32: the records stay int64)
@example([(FITS, 0, 5, FITS, 2)])
def test_narrowed_records_are_the_int64_ones(heads):
    """With the bound at 1 every parse's records are int32 where every value fits (else
    int64, as they were): equal to the int64 records either way, and a `_Line` of each
    row reads the same fields."""
    raw = _headers_space(heads)
    want = _block(raw)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(wire._scan, "NARROW_LINES_MIN", 1)
        got = _block(raw)
    for w, g in zip(want.rec.cols, got.rec.cols):  # (column by column)
        assert w.dtype == np.int64
        one = bool((w == w[0]).all())  # (one value: not a column of its own)
        assert (g.strides[0] == 0) == (w.strides[0] == 0) == one
        fits = bool((np.abs(w) <= FITS).all())
        assert g.dtype == (np.int32 if fits and not one else np.int64)
    assert np.array_equal(got.rec[:], want.rec[:])
    for i in range(len(heads)):
        g, w = got.line(i), want.line(i)
        assert (g.id, g.display_id, g.timestamp_ns, g.duration_ps, g.n_events) == \
            (w.id, w.display_id, w.timestamp_ns, w.duration_ps, w.n_events) == \
            (heads[i][0], heads[i][1], heads[i][2], heads[i][3], heads[i][4])
        assert type(g.id) is int and g.pay_s.dtype == np.int64


@pytest.mark.parametrize("ts", [1000, 2**31 - 300, 2**31])
def test_narrowed_records_report_as_upb(tmp_path, monkeypatch, ts):
    """A report of many small lines (merged in segments: `lines.merge_rows` widens) whose
    records are int32, and one (timestamps past int32) whose are not, is upb's; the
    timestamps in ps (times 1000) never wrap."""
    monkeypatch.setattr(wire._scan, "NARROW_LINES_MIN", 1)
    heads = [(i, 0, ts + i, 0, 1 + i % 3) for i in range(300)]
    p = tmp_path / "narrow.xplane.pb"
    p.write_bytes(_headers_space(heads))
    assert _block(p.read_bytes()).rec.cols[lines.TIMESTAMP_NS].dtype == \
        (np.int32 if ts < 2**31 else np.int64)
    for args in (["report", "--json", str(p)], ["inspect", "--json", str(p)]):
        assert _cli(args, wire._scan) == _cli(args, None)


@pytest.mark.parametrize("at", [0, 17, 40, 99])
def test_records_widened_after_they_grew(at):
    """Round 23: records are written as int32 from the first line (`_scan._Pos`) and widened
    to int64 at the first value past int32, wherever it comes, after the block has grown
    several times: the same records as int64 throughout."""
    heads = [(i, 0, 1000 + i, 0, 1) for i in range(100)]
    heads[at] = (2**40 + at, 0, 1000 + at, 0, 1)
    raw = _headers_space(heads)
    want = _block(raw)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(wire._scan, "NARROW_LINES_MIN", 1)
        got = _block(raw)
    assert got.rec.cols[lines.ID].dtype == want.rec.cols[lines.ID].dtype == np.int64
    assert got.rec.cols[lines.TIMESTAMP_NS].dtype == np.int32  # (a column of its own)
    assert np.array_equal(got.rec[:], want.rec[:])
    assert got.rec[:, 0].tolist() == [h[0] for h in heads]


def test_int64_positions_read_as_int32_ones(tmp_path, monkeypatch):
    """Round 23: positions in the file (lines' name spans, entry spans) are int32 below 2 GiB;
    with the bound at 0 every parse keeps them int64 (the path of a file of 2 GiB or more):
    the same answers on real H100/H200 captures and on many one-event lines."""
    import glob

    files = sorted(glob.glob("sample_traces/gpu-h*/**/*.xplane.pb", recursive=True))[:2]
    p = tmp_path / "lines.xplane.pb"
    p.write_bytes(one_event_lines(300))
    assert files
    for f in [*files, str(p)]:
        want = [_cli(a, wire._scan) for a in (["report", "--json", f], ["inspect", "--json", f])]
        with pytest.MonkeyPatch.context() as m:
            m.setattr(wire._scan, "WIDE_POSITIONS", 0)
            got = [_cli(a, wire._scan) for a in (["report", "--json", f],
                                                 ["inspect", "--json", f])]
        assert got == want, f
