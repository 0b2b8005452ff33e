"""The scanner's per-op helpers (issue 32) against the Python rules they stand for.

* `_scan.text_facts` (what the TPU copy rules look for in each HLO text, in place in a
  table's buffer) gives exactly `tpu._text_facts_numpy` (the numpy rule over the texts
  gathered into one buffer), for texts made of the patterns' pieces, NULs and non-ASCII bytes,
  spans that touch, overlap, skip bytes or are empty (a pattern across two texts counts in
  neither).
* `_scan.str_codes` (`strcodes.str_codes`) gives `arrays.factorize`'s codes and uniques, in
  order of first appearance and sorted, and None where a value is not exactly a str;
  `grouping.key_codes` gives the same with and without the scanner.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from overlap import arrays
from overlap.analysis import grouping
from overlap.trace import hlotext, tpu, wire
from overlap.trace.strcodes import str_codes

pytestmark = pytest.mark.skipif(getattr(wire._scan, "text_facts", None) is None,
                                reason="the scanner was not built")

_piece = st.sampled_from(["%", " = ", " ", "=", "-", "copy-start", " copy-start(", "slice-start(",
                          "copy-", "start(", "S(5)", "S(", "5)", "S", "a", "(", "\0", "é", "\x7f",
                          "\x80", ""])


@st.composite
def _spans(draw):
    pieces = draw(st.lists(st.lists(_piece, max_size=10).map("".join), max_size=12))
    buf = "".join(pieces).encode("utf-8", "surrogatepass")
    cuts = [0]
    for p in pieces:
        cuts.append(cuts[-1] + len(p.encode()))
    n = len(buf)
    # the pieces' own spans, and spans cut anywhere (overlapping, empty, touching)
    extra = draw(st.lists(st.tuples(st.integers(0, n), st.integers(0, n)), max_size=8))
    spans = list(zip(cuts[:-1], cuts[1:])) + [(min(a, b), max(a, b)) for a, b in extra]
    lo = np.array([a for a, _ in spans], np.int64)
    hi = np.array([b for _, b in spans], np.int64)
    return np.frombuffer(buf, np.uint8), lo, hi


@settings(max_examples=400, deadline=None)
@given(_spans())
def test_text_facts_equal_numpy_rule(case):
    buf, lo, hi = case
    got = wire._scan.text_facts(buf, lo, hi)
    want = tpu._text_facts_numpy(buf, lo, hi)
    for g, w in zip(got, want):
        assert g.tolist() == np.asarray(w).tolist()


def test_text_facts_on_a_copy_start():
    text = (b"%copy-start.1 = (f32[8]{0:S(5)}, f32[8]{0}, u32[]) copy-start(f32[8]{0} %p)"
            b"\0slice-start( \xc3\xa9")
    buf = np.frombuffer(text, np.uint8)
    lo = np.array([0, 76], np.int64)
    hi = np.array([75, len(text)], np.int64)
    plain, eq, cs, sl, call, s5 = wire._scan.text_facts(buf, lo, hi)
    assert plain.tolist() == [True, False] and eq.tolist() == [13, -1]
    assert cs.tolist() == [True, False] and sl.tolist() == [False, True]
    assert call.tolist() == [text.index(b" copy-start("), -1]
    assert s5.tolist() == [True, False]
    with pytest.raises(ValueError):
        wire._scan.text_facts(buf, np.array([0], np.int64), np.array([len(text) + 1], np.int64))


class _Str(str):
    pass


_names = st.lists(st.sampled_from(["copy-start.1", "copy-start.2", "b", "a", "", "é", "a\0",
                                   "copy-start.10"]) | st.text(max_size=4), max_size=60)


_in_use = pytest.mark.skipif(wire.SCANNER is None, reason="scanner not used (OVERLAP_SCANNER=0)")


@_in_use
@settings(max_examples=300, deadline=None)
@given(_names, st.booleans())
def test_str_codes_equal_factorize(names, sort):
    v = np.empty(len(names), object)
    v[:] = names
    got = str_codes(v, sort)
    assert got is not None
    want = arrays._factorize_objects(v, sort)
    assert got[0].dtype == np.int64
    assert got[0].tolist() == want[0].tolist()
    assert got[1].tolist() == want[1].tolist()
    assert all(type(a) is str for a in got[1].tolist())


@_in_use
@settings(max_examples=100, deadline=None)
@given(_names, st.lists(st.booleans(), min_size=1, max_size=6), st.data())
def test_str_codes_of_a_column_coded_again_equal_factorize(names, sorts, data):
    """A column is coded once (`strcodes._seen`): the same column again, a copy holding the
    same objects, the same column changed in place, each in either order, give factorize's
    answers; writing to what was returned changes no later answer. Fails if a column changed
    in place got its old codes, or the two orders' answers were mixed up."""
    v = np.empty(len(names), object)
    v[:] = names
    for sort in sorts:
        how = data.draw(st.sampled_from(["same", "copy", "changed"]))
        if how == "copy":
            v = v.copy()
        elif how == "changed" and len(v):
            v[data.draw(st.integers(0, len(v) - 1))] = data.draw(st.text(max_size=3))
        got = str_codes(v, sort)
        assert got is not None
        want = arrays._factorize_objects(v, sort)
        assert got[0].tolist() == want[0].tolist()
        assert got[1].tolist() == want[1].tolist()
        got[0][:] = -7  # the caller's to change
        got[1][:] = "x"


@pytest.mark.parametrize("odd", [None, 1, float("nan"), _Str("a"), b"a"])
def test_str_codes_leave_other_values(odd):
    v = np.empty(3, object)
    v[:] = ["a", odd, "b"]
    assert str_codes(v, False) is None


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(["x", "y", "z", "w", "q"]) | st.text(max_size=3), max_size=80),
       st.booleans())
def test_key_codes_same_without_scanner(names, sort):
    v = np.empty(len(names), object)
    v[:] = names
    with_scan = grouping.key_codes(v, sort)
    saved = wire.SCANNER
    wire.SCANNER = None
    try:
        without = grouping.key_codes(v, sort)
    finally:
        wire.SCANNER = saved
    assert with_scan[0].tolist() == without[0].tolist()
    assert with_scan[1].tolist() == without[1].tolist()


# --- the Async line's join with the device clock (`tpu._async_device_spans`) ---------------

_times = st.integers(0, 6)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(-1, 4), _times), min_size=1, max_size=40),
       st.lists(st.tuples(st.integers(-1, 4), _times), max_size=40))
def test_join_first_equals_numpy_rule(entries, queries):
    # (at least one entry: the caller joins only where some boundary event has the clock)
    codes = np.array([c for c, _ in entries], np.int64)
    times = np.array([t for _, t in entries], np.int64)
    qc = np.array([c for c, _ in queries], np.int64)
    qt = np.array([t for _, t in queries], np.int64)
    got = wire._scan.join_first(codes, times, qc, qt)
    assert got.tolist() == tpu._join_numpy(codes, times, qc, qt).tolist()
    # and what the rule says: the first entry of that (code, time), none for code -1
    pairs = list(zip(codes.tolist(), times.tolist()))
    want = [pairs.index((c, t)) if c >= 0 and (c, t) in pairs else -1
            for c, t in zip(qc.tolist(), qt.tolist())]
    assert got.tolist() == want


def test_join_first_without_entries():
    none = np.zeros(0, np.int64)
    got = wire._scan.join_first(none, none, np.array([0, -1], np.int64), np.array([0, 0], np.int64))
    assert got.tolist() == [-1, -1]


_op_name = st.sampled_from(["copy-start", "copy-start.1", "copy-done.1", "copy-done",
                            "x-start-start.2", "x-start-done.2", "x-done-start.2",
                            "é-start", "é-done", "-start", "-done", "", "copy-start.1 ",
                            "fusion.3", "send", "a-startb", "a-doneb"]) | st.text(
    alphabet="-adeorstn.é1", max_size=9)


def _matches(codes: tuple[np.ndarray, ...]) -> list[tuple[bool, bool]]:
    s, d, o = codes
    return [(bool(si >= 0 and si == oj), bool(di >= 0 and di == oj))
            for si, di in zip(s.tolist(), d.tolist()) for oj in o.tolist()]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.none() | _op_name, max_size=12), st.lists(st.none() | _op_name, max_size=16))
def test_async_name_codes_match_as_python(names, op_names):
    got = wire._scan.async_name_codes(names, op_names)
    want = tpu._async_codes_py(names, op_names)
    assert _matches(got) == _matches(want)
    assert tpu._async_codes(names, op_names)[0].shape == (len(names),)


def test_async_name_codes_leave_other_values():
    assert wire._scan.async_name_codes(["a-start", 3], ["a-start"]) is None
    assert wire._scan.async_name_codes(["a-start"], [_Str("a-start")]) is None
    s, d, o = tpu._async_codes(["a-start"], [_Str("a-start"), "a-done"])
    assert s[0] == o[0] and d[0] == o[1]


# --- async boundaries by their names' bytes (`tpu._boundaries`) ---------------------------

_name_piece = st.sampled_from(["copy", "-start", "-done", "send", "recv", ".", "1", "0", "9",
                               "x", "\n", "é", "\0", "-", "start", "done"])
_digits = st.integers(0, 30).map(lambda k: "7" * k)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.tuples(st.lists(_name_piece, max_size=5).map("".join), st.booleans(),
                          _digits), max_size=20))
def test_boundary_names_equal_numpy_rule(parts):
    # names with and without a `.digits` tail, runs of digits around `_DIGITS_MAX`
    names = [(head + ("." if dot else "") + digits).encode() for head, dot, digits in parts]
    buf = np.frombuffer(b"".join(names) + b"\0", np.uint8)
    ln = np.array([len(x) for x in names], np.int64)
    hi = np.cumsum(ln)
    got = wire._scan.boundary_names(buf, hi - ln, hi)
    want = hlotext.async_boundaries_by_bytes(np.frombuffer(b"".join(names), np.uint8), ln)
    assert got.tolist() == want.tolist()
    # where decided, the regexes' answer
    for name, g in zip(names, got.tolist()):
        if g >= 0:
            assert g == hlotext.is_async_boundary(name.decode())


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([b"", b"a", b"ab", b" = (f32[8]{0:S(5)}, f32[8])", b"\0", b"\xff",
                                 b"12345678", b"123456789"]), max_size=30))
def test_span_codes_number_by_content(strings):
    # each string twice in the buffer, the spans pointing at the second copies in turn
    buf = np.frombuffer(b"".join(strings) * 2 + b"\0", np.uint8)
    ln = np.array([len(x) for x in strings], np.int64)
    hi = np.cumsum(ln) + int(ln.sum())
    codes, first = wire._scan.span_codes(buf, hi - ln, hi)
    want, _ = arrays.factorize(np.array(strings + [b""], dtype=object)[:len(strings)])
    assert codes.tolist() == want.tolist()
    assert first.tolist() == [strings.index(s) for s in dict.fromkeys(strings)]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.none() | _op_name, max_size=60), st.lists(st.none() | _op_name, max_size=40))
def test_async_name_codes_in_blocks_match_as_python(names, op_names):
    # more names than one block of the scanner's lookups (16), names without `-start` and
    # None among them: each name's own matches, not its neighbour's in the block
    got = wire._scan.async_name_codes(names, op_names)
    want = tpu._async_codes_py(names, op_names)
    assert _matches(got) == _matches(want)
    assert wire._scan.async_name_codes(names + [b"x-start"], op_names) is None
    assert wire._scan.async_name_codes(names + [b"x-start"], []) is None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_op_name, st.booleans()), min_size=1, max_size=12),
       st.lists(st.tuples(st.integers(0, 11), _times, _times, st.booleans()), min_size=1,
                max_size=20),
       st.lists(st.tuples(st.none() | _op_name, _times, _times), max_size=12))
def test_async_spans_same_from_the_boundary_ops_names_alone(ops, events, asked):
    # `join_ops` (the names of the ops the boundary events have, as a list) gives the same
    # spans as all of the line's op names: the other ops' names are never joined on
    u_names = np.array([n for n, _ in ops] + [None], object)[:-1]
    bop = np.array([i % len(ops) for i, *_ in events], np.int64)
    extra = np.array([j for j, (_, x) in enumerate(ops) if x], np.int64)
    at = np.unique(np.concatenate([bop, extra]))
    b0 = np.array([t for _, t, _, _ in events], np.int64)
    b1 = b0 + np.array([d for _, _, d, _ in events], np.int64)
    ok = np.array([c for *_, c in events], bool)
    clock = (np.where(ok, b0 * 10, 0), np.where(ok, b1 * 10 + 3, 0), ok)
    boundaries = (b0, b1, bop, bop, u_names)
    names = np.array([n for n, _, _ in asked] + [None], object)[:-1]
    inv = np.arange(len(asked), dtype=np.int64)
    s = np.array([t for _, t, _ in asked], np.int64)
    e = s + np.array([d for _, _, d in asked], np.int64)
    want = tpu._async_device_spans(s, e, inv, names, boundaries, clock)
    got = tpu._async_device_spans(s, e, inv, names, boundaries, clock,
                                  (at, u_names[at].tolist()))
    assert got.tolist() == want.tolist()
