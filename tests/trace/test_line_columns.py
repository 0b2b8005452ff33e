"""Line records by column (`lines.Records`, `_scan._LineRecs`; issue 32, round 25): a column
where every line has one value is one read-only int64 element, any other the lines' values
(int32 where they are many and every value fits), made at the first line that differs; and
`LineBlock.check` reads one whole range of unread lines in place (the block's int32
columns, no rows or gathers) and makes nothing for ranges already decoded. A million
one-event lines held 16 MB of repeated values and 24 MB of rows and gathered bounds on the
read's peak. SYNTHETIC captures, labelled so."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from overlap.trace import lines, wire
from overlap.trace.synthetic import one_event_lines
from tests.trace.test_line_names_kept import FITS, _block, _headers_space

pytestmark = pytest.mark.skipif(wire._scan is None, reason="the compiled scanner is not built")

HEADS = (lines.ID, lines.DISPLAY_ID, lines.TIMESTAMP_NS, lines.DURATION_PS, lines.EVENTS)


def _runs(n: int, at: int, first: int, then: int) -> list[int]:
    """n values: `first` up to line `at`, `then` from there on."""
    return [first] * at + [then] * (n - at)


@given(st.integers(1, 40), st.data())
@settings(max_examples=60, deadline=None)
@example(30, None)
def test_columns_are_the_lines_values(n, data):
    """Each column holds the lines' values, whichever line first differs from the first
    line's (the values before it filled in, widened where the first value is past int32);
    one element, read-only, exactly where every line has one value."""
    if data is None:  # (the first value past int32, the column made at line 7: a widened fill)
        cols = [list(range(n)), _runs(n, 7, 2**40, 3), [1000] * n, _runs(n, 29, 0, 9),
                [1] * n]
    else:
        vals = st.sampled_from([0, 1, 7, FITS, FITS + 1, 2**40])
        cols = []
        for _ in range(5):
            kind = data.draw(st.sampled_from(["one", "step", "any"]))
            if kind == "one":
                cols.append([data.draw(vals)] * n)
            elif kind == "step":
                cols.append(_runs(n, data.draw(st.integers(0, n)), data.draw(vals),
                                  data.draw(vals)))
            else:
                cols.append(data.draw(st.lists(vals, min_size=n, max_size=n)))
        cols[4] = [v % 4 for v in cols[4]]  # (event counts: a few events a line)
    heads = list(zip(*cols))
    raw = _headers_space(heads)
    for narrow in (False, True):
        with pytest.MonkeyPatch.context() as m:
            if narrow:
                m.setattr(wire._scan, "NARROW_LINES_MIN", 1)
            rec = _block(raw).rec
        assert len(rec) == n
        for c, want in zip(HEADS, cols):
            col = rec.cols[c]
            assert col.tolist() == want
            one = len(set(want)) == 1
            assert (col.strides[0] == 0) == one and col.flags.writeable == (not one)
            fits = all(abs(v) <= FITS for v in want)
            assert col.dtype == (np.int32 if narrow and fits and not one else np.int64)
        assert rec[:].tolist() == [rec.row(i) for i in range(n)]
        assert [r[c] for r in rec[:].tolist() for c in HEADS] == \
            [v for h in heads for v in h]


class _Counting:
    """The scanner, with each `check_events` call's (dtype, length, arrays) kept."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def __getattr__(self, name):
        return getattr(wire._scan, name)

    def check_events(self, buf, s, e):
        self.calls.append((s.dtype, len(s), s, e))
        return wire._scan.check_events(buf, s, e)


def test_one_range_of_unread_lines_is_read_in_place(monkeypatch):
    """Lines no rule read, one range of a block: checked from the block's own int32 columns
    (views, not gathers); then every flag is one read-only True, a second check calls
    nothing, and marking a line decoded again is allowed."""
    monkeypatch.setattr(wire._scan, "NARROW_LINES_MIN", 1)
    raw = one_event_lines(500)
    _, planes, _ = wire.parse_space(wire.padded(raw), len(raw))
    block = planes[0].lines.block
    counting = _Counting()
    monkeypatch.setattr(wire, "SCANNER", counting)
    wire.check_lines(*planes)
    [(dtype, n, s, e)] = counting.calls
    assert (dtype, n) == (np.int32, 500)
    assert np.shares_memory(s, block.rec.cols[lines.PAY_S])
    assert np.shares_memory(e, block.rec.cols[lines.PAY_E])
    assert block.decoded.all() and not block.decoded.flags.writeable
    wire.check_lines(*planes)
    assert len(counting.calls) == 1
    ln = planes[0].lines.line(3)
    ln.decoded = True
    assert ln.decoded
    with pytest.raises(ValueError):
        ln.decoded = False


def test_decoded_lines_are_not_checked_again(monkeypatch):
    """Lines decoded one by one, then the rest: only the rest is checked (rows), and once
    every line is decoded a check calls nothing."""
    raw = one_event_lines(50)
    _, planes, _ = wire.parse_space(wire.padded(raw), len(raw))
    t = planes[0].lines
    for i in (0, 1, 7, 49):
        t.line(i).decoded = True
    counting = _Counting()
    monkeypatch.setattr(wire, "SCANNER", counting)
    wire.check_lines(*planes)
    [(dtype, n, s, _)] = counting.calls
    assert (dtype, n) == (np.int64, 46)
    assert t.block.decoded.all() and t.block.decoded.flags.writeable
    wire.check_lines(*planes)
    assert len(counting.calls) == 1


def test_check_events_reads_either_width_alike():
    """`check_events` of int32 positions is its int64 one: the strings counted, and a
    damaged event refused alike."""
    raw = _headers_space([(i, 0, 1000, 0, 1 + i % 3) for i in range(20)])
    buf = wire.padded(raw)
    _, planes, _ = wire.parse_space(buf, len(raw))
    rec = planes[0].lines.block.rec
    s, e = lines.wide(rec[:, lines.PAY_S]), lines.wide(rec[:, lines.PAY_E])
    assert wire._scan.check_events(buf, s, e) == \
        wire._scan.check_events(buf, s.astype(np.int32), e.astype(np.int32)) == 0
    bad = bytearray(buf)
    at = bytes(buf).index(b"\x22", int(s[5]), int(e[5]))  # (line 5's first event)
    bad[at + 1] = 0x7F  # (its length past the line's end)
    errors = []
    for dt in (np.int64, np.int32):
        with pytest.raises(Exception) as got:
            wire._scan.check_events(bytes(bad), s.astype(dt), e.astype(dt))
        errors.append((type(got.value), str(got.value)))
    assert errors[0] == errors[1]
