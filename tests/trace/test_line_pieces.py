"""A long GPU line decoded a piece at a time (issue 32, round 22): `_scan.event_cuts` cuts a
line's payload into pieces of whole fields whose decodes, one after the other, are the
line's decode; `lines.pieces` and `gpu._PIECE` read a line that way; a report is the same
whatever the pieces, and upb's (the mutated captures of test_differential, every line read
alone and pieced). The unread events' reasons, groups and line counts where their columns
repeat one value (`vendors._reason_codes`, `_code_runs`, `_lines_per_group`) are their
definitions'. SYNTHETIC captures, labelled so."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from overlap.arrays import is_repeated, repeated
from overlap.trace import gpu, lines, vendors, wire
from overlap.trace.protos import XEvent, XLine, XStat
from overlap.trace.values import object_array
from tests.trace.test_differential import _cli, _seeds, mutate, parse
from tests.trace.test_unread_lines_lean import _code_runs_definition, _unread_lines

pytestmark = pytest.mark.skipif(wire._scan is None, reason="the compiled scanner is not built")
_scan = wire._scan


def _line_bytes(events: list[XEvent], heads: list[bytes], rng: random.Random) -> bytes:
    """An XLine's payload: each event as its field 4, and the header fields `heads` among
    them anywhere (before, between, after the events: the wire allows any order)."""
    fields = [XLine(events=[e]).SerializeToString() for e in events]
    for h in heads:
        fields.insert(rng.randrange(len(fields) + 1), h)
    return b"".join(fields)


_HEADS = [XLine(id=7).SerializeToString(), XLine(name="Stream #1").SerializeToString(),
          XLine(timestamp_ns=123).SerializeToString(),
          XLine(display_name="s").SerializeToString()]


def _decode(buf, s: int, e: int, n: int) -> tuple:
    return _scan.decode_events(buf, np.array([s], np.int64), np.array([e], np.int64), n,
                               None, None, None, 0, None, wire.TIME_LIMIT_PS, False)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(-3, 1 << 40), st.integers(-3, 99),
                          st.lists(st.integers(1, 3), max_size=3)), max_size=30),
       st.integers(1, 34), st.integers(0, 4), st.randoms(use_true_random=False))
def test_pieces_decode_as_the_line(evs, every, n_heads, rng):
    events = [XEvent(metadata_id=m, offset_ps=o, duration_ps=d,
                     stats=[XStat(metadata_id=s, int64_value=s * 10) for s in sids])
              for m, o, d, sids in evs]
    raw = _line_bytes(events, [rng.choice(_HEADS) for _ in range(n_heads)], rng)
    buf = np.frombuffer(wire.padded(raw), np.uint8)
    cuts, counts = _scan.event_cuts(buf, 0, len(raw), every)
    # pieces of `every` events, the last the rest, covering the payload in order
    n = len(events)
    assert cuts[0] == 0 and cuts[-1] == len(raw) and (np.diff(cuts) >= 0).all()
    assert counts.sum() == n and len(cuts) == len(counts) + 1
    assert (counts[:-1] == every).all() and 0 < counts[-1] <= every or n == 0 == counts[-1]
    whole = _decode(buf, 0, len(raw), n)
    parts = [_decode(buf, a, b, k) for a, b, k in zip(cuts[:-1], cuts[1:], counts)]
    for j in range(4):  # ids, offsets, durations, aggregated
        assert np.concatenate([p[j] for p in parts]).tolist() == whole[j].tolist()
    firsts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    for k in ("ev", "sid", "ival"):
        got = np.concatenate([p[4][k] + (f if k == "ev" else 0) for p, f in zip(parts, firsts)])
        assert got.tolist() == whole[4][k].tolist()
    assert sum(p[7][3] for p in parts) == whole[7][3]  # rows of an impossible time


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 12), st.integers(1, 5), st.integers(0, 3), st.randoms(use_true_random=False))
def test_cuts_refuse_only_what_the_decoder_refuses(n, every, damage, rng):
    """Damaged bytes: where the cut refuses a line (None: read whole), its decode refuses it
    too; where it cuts, the pieces' decodes fail with the line's message or give its rows."""
    events = [XEvent(metadata_id=i % 3, offset_ps=i, duration_ps=1,
                     stats=[XStat(metadata_id=1, str_value="hlo")]) for i in range(n)]
    raw = bytearray(_line_bytes(events, [_HEADS[1]], rng))
    for _ in range(damage):
        raw[rng.randrange(len(raw))] = rng.randrange(256)
    end = rng.choice([len(raw), rng.randrange(len(raw) + 1)])  # (truncated, or not)
    buf = np.frombuffer(wire.padded(bytes(raw)), np.uint8)
    got = _scan.event_cuts(buf, 0, end, every)

    def decode(a, b, k):
        try:
            return _decode(buf, a, b, k)[:4]
        except wire.Corrupt as e:
            return str(e)

    if got is None:
        # (its count of events is what the line's split would have counted: `n` or fewer)
        assert all(isinstance(decode(0, end, k), str) for k in range(n + 1))
        return
    cuts, counts = got
    whole = decode(0, end, int(counts.sum()))
    parts = []
    for a, b, k in zip(cuts[:-1], cuts[1:], counts):
        parts.append(decode(a, b, k))
        if isinstance(parts[-1], str):
            assert parts[-1] == whole
            return
    assert not isinstance(whole, str)
    for j in range(4):
        assert np.concatenate([p[j] for p in parts]).tolist() == whole[j].tolist()


def test_cuts_of_no_use_are_none():
    raw = _line_bytes([XEvent(metadata_id=1)] * 3, [], random.Random(0))
    buf = np.frombuffer(wire.padded(raw), np.uint8)
    assert _scan.event_cuts(buf, 0, len(raw), 0) is None
    assert _scan.event_cuts(buf, 0, len(raw) + 10 ** 6, 1) is None
    cuts, counts = _scan.event_cuts(buf, 0, len(raw), 3)
    assert cuts.tolist() == [0, len(raw)] and counts.tolist() == [3]


def test_pieces_of_a_line(tmp_path):
    """`lines.pieces`: a line of more events than a piece, cut; one of no more, or read by
    upb, itself; each piece's `decoded` flag the line's."""
    raw = _unread_lines(tmp_path / "u.xplane.pb", [7, 3]).read_bytes()
    _, planes, _ = wire.parse_space(wire.padded(raw), len(raw))
    line = planes[0].lines.block.line(0)
    got = list(lines.pieces(line, 3, _scan))
    assert [pc.n_events for pc in got] == [3, 3, 1]
    assert got[0].pay_s[0] == line.pay_s[0] and got[-1].pay_e[0] == line.pay_e[0]
    assert all(pc.decoded == line.decoded and pc.events is None for pc in got)
    assert list(lines.pieces(line, 7, _scan)) == [line]
    assert list(lines.pieces(line, 3, None)) == [line]


@pytest.mark.parametrize("piece", [1, 2, 5])
def test_pieced_reports_are_upbs_on_mutated_captures(tmp_path, monkeypatch, piece):
    """Every GPU line read alone and cut into pieces of `piece` events, kernels and copies
    too (which the reader reads whole): the report (and the refusal, and the strings
    replaced) is upb's on test_differential's mutated captures."""
    monkeypatch.setattr(gpu, "_PIECE", piece)
    monkeypatch.setattr(gpu, "_SMALL_LINE", 1)
    monkeypatch.setattr(gpu, "_unread_only", lambda P, kinds: True)
    rng = random.Random(22 + piece)
    for name, raw, _ in _seeds():
        if name not in ("syn-gpu", "syn-rocm", "gpu", "rocm"):
            continue
        root = parse(raw)
        for case in range(12):
            data, what = mutate(root, rng) if case else (raw, "none")
            f = tmp_path / f"{name}-{case}.xplane.pb"
            f.write_bytes(data)
            got = _cli(["report", "--json", str(f)], wire._scan)
            assert got == _cli(["report", "--json", str(f)], None), f"{name} {case} {what}"


@pytest.mark.parametrize("events", [[10], [9, 4, 0, 11]])
@pytest.mark.parametrize("piece", [1, 3, 4])
def test_unread_lines_in_pieces_report_as_whole(tmp_path, monkeypatch, events, piece):
    """Lines of unread events read alone, whole or pieced: one report, and upb's."""
    p = _unread_lines(tmp_path / "u.xplane.pb", events)
    monkeypatch.setattr(gpu, "_SMALL_LINE", 1)
    whole = _cli(["report", "--json", str(p)], wire._scan)
    monkeypatch.setattr(gpu, "_PIECE", piece)
    assert _cli(["report", "--json", str(p)], wire._scan) == whole
    assert _cli(["report", "--json", str(p)], None) == whole
    assert f"{sum(events)} 'kernel_x' event(s)" in whole[1]


def test_only_planes_whose_events_give_no_row_are_pieced(tmp_path, monkeypatch):
    """A plane of unread events is cut into pieces; one with kernels or copies is not."""
    from overlap.trace.synthetic import SyntheticTrace

    cut = []
    real = lines.pieces

    def spy(line, every, scanner):
        cut.append(every < line.n_events)
        return real(line, every, scanner)

    monkeypatch.setattr(lines, "pieces", spy)
    monkeypatch.setattr(gpu, "_SMALL_LINE", 1)
    monkeypatch.setattr(gpu, "_PIECE", 2)
    _cli(["report", "--json", str(_unread_lines(tmp_path / "u.xplane.pb", [5]))], wire._scan)
    assert cut == [True]
    g = SyntheticTrace()
    gd = g.gpu(0)
    for i in range(4):
        gd.kernel((10 + 40 * i) * 1000000, 30 * 1000000, stream=7, name=f"k{i}")
        gd.memcpy("D2H", (15 + 40 * i) * 1000000, 20 * 1000000, 1 << 20, stream=13)
    p = tmp_path / "g.xplane.pb"
    p.write_bytes(g.to_bytes())
    cut.clear()
    _cli(["report", "--json", str(p)], wire._scan)
    assert cut and not any(cut)


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 30), st.integers(-1, 3), st.integers(0, 2), st.data())
def test_reason_codes_of_repeated_columns_are_the_rows(n, lc, nc, data):
    """`_reason_codes` of one line and one name repeated equals that of the same values as
    rows; and of rows, the definition: the line's reason, else 0, else -1 where skipped."""
    table = np.array(data.draw(st.lists(st.integers(-1, 2), min_size=4, max_size=4)) + [-1],
                     np.int8)
    skip = np.array(data.draw(st.lists(st.booleans(), min_size=3, max_size=3)) + [False])
    got = vendors._reason_codes(table, repeated(n, lc, np.int32), repeated(n, nc, np.int8),
                                skip)
    rows = vendors._reason_codes(table, np.full(n, lc, np.int32), np.full(n, nc, np.int8), skip)
    assert is_repeated(got) and got.tolist() == rows.tolist()
    w = int(table[lc])
    assert rows.tolist() == [w if w >= 0 else -1 if skip[nc] else 0] * n


@settings(max_examples=150, deadline=None)
@given(st.integers(2, 20), st.lists(st.integers(-1, 2), min_size=1, max_size=3))
def test_code_runs_of_repeated_columns_equal_the_definition(n, heads):
    codes = [repeated(n, h, np.int8) for h in heads]
    uniqs = [object_array([f"v{j}" for j in range(3)]) for _ in heads]
    vals, rows, starts, ends, order = vendors._code_runs(codes, uniqs)
    want = _code_runs_definition([np.full(n, h) for h in heads], uniqs)
    assert [(tuple(vals[i]), rows[a:b].tolist()) for i, (a, b) in
            enumerate(zip(starts.tolist(), ends.tolist()))] == want
    full = vendors._code_runs([np.full(n, h, np.int8) for h in heads], uniqs)
    assert [x.tolist() if isinstance(x, np.ndarray) else x for x in (vals, rows, starts, ends,
                                                                     order)] == \
        [x.tolist() if isinstance(x, np.ndarray) else x for x in full]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(-1, 5)), min_size=1, max_size=60),
       st.booleans(), st.integers(1, 8))
def test_lines_per_group_equal_the_definition(pairs, table, block):
    """Per group, its distinct line codes (-1, no line, one of them), by the table marked a
    block of rows at a time and by the sorted pairs; rows in any order."""
    rng = np.random.default_rng(len(pairs))
    pairs.sort(key=lambda p: p[0])
    grp = np.array([g for g, _ in pairs])
    lcode = np.array([c for _, c in pairs], np.int32)
    perm = rng.permutation(len(pairs))  # (each row's line code lies elsewhere)
    lc_stored = np.empty_like(lcode)
    lc_stored[perm] = lcode
    starts = np.flatnonzero(np.r_[True, grp[1:] != grp[:-1]])
    ends = np.append(starts[1:], len(grp))
    want = [len({int(c) for c in lcode[a:b]}) for a, b in zip(starts, ends)]
    old = vendors._BLOCK
    vendors._BLOCK = block
    try:
        span = 7 if table else 10 ** 7  # (a huge span takes the sorted pairs)
        assert vendors._lines_per_group(lc_stored, perm, starts, ends, span) == want
    finally:
        vendors._BLOCK = old


@pytest.mark.parametrize("kept", [False, True])
def test_row_names_read_as_the_names_of_their_rows(tmp_path, kept, monkeypatch):
    """`lines.RowNames` of a block's rows: `[i]`, `len` and `take` give the rows' names as
    the block's list does, names kept as bytes (`LineNames`) or decoded; `merge_rows` the
    rows' payloads and events."""
    from overlap.trace.synthetic import one_event_lines

    if kept:
        monkeypatch.setattr(_scan, "LAZY_NAMES_MIN", 1)
    raw = one_event_lines(40)
    _, planes, _ = wire.parse_space(wire.padded(raw), len(raw))
    block = planes[0].lines.block
    assert isinstance(block.names, lines.LineNames) == kept
    every = list(block.names)
    rows = np.array([3, 4, 5, 9, 2, 30], np.int64)
    names = lines.RowNames(block.names, rows)
    assert len(names) == len(rows) and [names[i] for i in range(len(rows))] == \
        [every[r] for r in rows]
    at = np.array([5, 0, 0, 2])
    got = names.take(at)
    assert got.dtype == object and got.tolist() == [every[r] for r in rows[at]]
    seg = lines.merge_rows(block, rows)
    rec = block.rec[rows].astype(np.int64)
    assert seg.pay_s.tolist() == rec[:, lines.PAY_S].tolist() and seg.pay_s.dtype == np.int64
    assert seg.pay_e.tolist() == rec[:, lines.PAY_E].tolist()
    assert seg.n_events == int(rec[:, lines.EVENTS].sum())


def test_later_is_made_once_where_asked():
    from overlap.arrays import Later, now

    calls = []
    v = Later(lambda: calls.append(1) or ["x"])
    assert calls == [] and now(5) == 5
    assert now(v) == ["x"] and now(v) is v() and calls == [1]


@pytest.mark.parametrize("kept", [False, True])
@pytest.mark.parametrize("segment", [1, 2, 7])
def test_segments_of_one_event_lines_report_as_upbs(tmp_path, monkeypatch, segment, kept):
    """One-event lines merged in segments of `segment` events (names decoded only for the
    rows that read them, kept as bytes or not): the report is upb's, beside kernels and
    copies of other lines."""
    from overlap.trace.synthetic import SyntheticTrace

    monkeypatch.setattr(gpu, "_SEGMENT", segment)
    if kept:
        monkeypatch.setattr(_scan, "LAZY_NAMES_MIN", 1)
    g = SyntheticTrace()
    gd = g.gpu(0)
    for i in range(5):
        gd.kernel((10 + 40 * i) * 1000000, 30 * 1000000, stream=7 + i % 3, name=f"k{i}")
        gd.memcpy("D2H", (15 + 40 * i) * 1000000, 20 * 1000000, 1 << 20, stream=13 + i)
    p = tmp_path / "g.xplane.pb"
    p.write_bytes(g.to_bytes())
    got = _cli(["report", "--json", str(p)], wire._scan)
    assert got == _cli(["report", "--json", str(p)], None)
    q = _unread_lines(tmp_path / "u.xplane.pb", [1] * 30)
    got = _cli(["report", "--json", str(q)], wire._scan)
    assert got == _cli(["report", "--json", str(q)], None)


@pytest.mark.parametrize("code", [-1, 0, 4])
def test_lines_per_group_of_one_repeated_line(code):
    """Every row on one line (`repeated`, -1 included: no line, counted as one): each group
    holds one line, as the rows written out give."""
    n = 9
    starts, ends = np.array([0, 2, 7]), np.array([2, 7, 9])
    rows = np.arange(n)
    want = vendors._lines_per_group(np.full(n, code, np.int32), rows, starts, ends, 6)
    assert vendors._lines_per_group(repeated(n, code, np.int32), rows, starts, ends, 6) == \
        want == [1, 1, 1]
