"""The clocked TPU join's names read where they lie (round 11 of issue 32), against the
plain rules they stand for:

* `_scan.spans_text_ok` says True exactly where every span is non-empty and
  `MetaTable.span_strings` gives each one as a str of its own (valid UTF-8, no NUL), a NUL or
  a bad byte at every position of every length up to 40 included;
* `_scan.boundary_names(nul_left=True)` is the plain rule (`async_boundaries_by_bytes`) with
  a name holding a NUL left (-1), so every name it decides is one `span_strings` gives; the
  numpy path of `tpu._boundaries` (a build without the scanner's function) says the same;
* `tpu._join_names` hands out the table's own buffer and the names' spans (no copy), with
  or without `checked`, only where `span_strings` gives every name;
* `_scan.span_codes`' last-two-strings shortcut numbers spans by content as
  `arrays.factorize` does, for strings that alternate, share a length or a prefix.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from overlap import arrays
from overlap.trace import hlotext, tpu, wire
from overlap.trace.metatable import MetaTable

_scan = wire._scan
pytestmark = pytest.mark.skipif(getattr(_scan, "spans_text_ok", None) is None,
                                reason="the scanner was not built")

_piece = st.sampled_from([b"a", b"copy-start", b"-done", b".1", b"\0", b"\xc3\xa9", b"\xc3",
                          b"\xa9", b"\xed\xa0\x80", b"\xf0\x9f\x98\x80", b"\xff", b"\n",
                          b"12345678", b""])


def _buffer(raw: list[bytes], gap: bytes = b"") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The byte strings in one buffer, `gap` after each: (buffer, starts, ends)."""
    buf = np.frombuffer(b"".join(r + gap for r in raw) + b"\0", np.uint8)
    ln = np.array([len(r) for r in raw], np.int64)
    hi = np.cumsum(ln + len(gap)) - len(gap)
    return buf, hi - ln, hi


def _plain_ok(raw: list[bytes]) -> bool:
    """The plain rule: every string non-empty and given by `span_strings` as itself."""
    buf, fs, fe = _buffer(raw)
    got = MetaTable.span_strings_of(buf, fs, fe)
    return got is not None and all(raw) and len(got) == len(raw)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.lists(_piece, max_size=8).map(b"".join), max_size=12),
       st.sampled_from([b"", b"\0", b"\xff"]))
def test_spans_text_ok_is_the_plain_rule(raw, gap):
    # bytes between the spans (a NUL, a bad byte) never count: only each span's own
    assert _scan.spans_text_ok(*_buffer(raw, gap)) == _plain_ok(raw)


@pytest.mark.parametrize("bad", [b"\0", b"\xff", b"\xc3"])
def test_spans_text_ok_sees_one_byte_anywhere(bad):
    # every position of every length up to 40: the words, the overlapping last word, the
    # short strings' bytes (fails if a tail byte or the NUL test is left out)
    for n in range(1, 41):
        for at in range(n):
            s = b"x" * at + bad + b"y" * (n - at - 1)
            assert not _scan.spans_text_ok(*_buffer([b"copy-start.1", s]))
        assert _scan.spans_text_ok(*_buffer([b"z" * n, b"\xc3\xa9" * n]))
    assert _scan.spans_text_ok(*_buffer([]))
    assert not _scan.spans_text_ok(*_buffer([b"a", b""]))


_name = st.sampled_from([b"copy-start", b"copy-done", b"copy-start.12", b"x-done.3", b"send",
                         b"recv", b"fusion", b"a\0-start", b"copy-start.1\0", b"\0", b"-start",
                         b"\xc3\xa9-done", b"copy-done\n", b"", b"a" * 30 + b"-start.7"])


@settings(max_examples=300, deadline=None)
@given(st.lists(_name, max_size=20))
def test_boundary_names_nul_left(raw):
    buf, fs, fe = _buffer(raw, b"\0")
    plain = _scan.boundary_names(buf, fs, fe)
    got = _scan.boundary_names(buf, fs, fe, True)
    joined = np.frombuffer(b"".join(raw), np.uint8)
    want = hlotext.async_boundaries_by_bytes(joined, np.array([len(r) for r in raw], np.int64))
    assert plain.tolist() == want.tolist()
    assert got.tolist() == [-1 if b"\0" in r else w for r, w in zip(raw, want.tolist())]
    for r, g in zip(raw, got.tolist()):  # decided: a str of its own by `span_strings`
        if g >= 0:
            assert _plain_ok([r])
    # `tpu._boundaries` with and without the scanner's function: the same answers
    t = SimpleNamespace(buf=buf, gather=lambda a, b, sep=None: MetaTable.gather_spans(
        buf, a, b, sep))
    assert tpu._boundaries(t, (fs, fe)).tolist() == got.tolist()
    real = tpu._scan
    tpu._scan = SimpleNamespace()
    try:
        assert tpu._boundaries(t, (fs, fe)).tolist() == got.tolist()
    finally:
        tpu._scan = real


@settings(max_examples=200, deadline=None)
@given(st.lists(_name, min_size=1, max_size=12), st.booleans())
def test_join_names_hands_out_the_buffer(raw, checked):
    buf, fs, fe = _buffer(raw, b"\xff")
    t = SimpleNamespace(buf=buf, gather=lambda a, b, sep=None: MetaTable.gather_spans(
        buf, a, b, sep))
    P = SimpleNamespace(table=lambda: t)
    at = np.arange(len(raw), dtype=np.int64)
    ok = _plain_ok(raw)
    real, tpu._names_list = tpu._names_list, lambda *a: "strs"
    try:
        # `checked` only where the caller knows every name is one (`_op_names`' by_bytes)
        got = tpu._join_names(P, at, np.full(len(raw), None, object), at, (fs, fe),
                              checked and ok)
    finally:
        tpu._names_list = real
    if not ok:
        assert got == "strs"
        return
    g, lo, hi = got
    assert g is buf  # (where the names lie: no copy)
    assert MetaTable.span_strings_of(g, lo, hi) == [r.decode() for r in raw]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([b"", b"ab", b"ac", b"ad", b"abc", b"ab\0", b"\0ab", b"x" * 75,
                                 b"x" * 74 + b"y"]), max_size=40))
def test_span_codes_shortcut_numbers_by_content(strings):
    # strings that alternate (the shortcut's two), share a length or a prefix, each read
    # from a copy of its own in the buffer (never by position)
    buf = np.frombuffer(b"".join(strings) * 2 + b"\0", np.uint8)
    ln = np.array([len(x) for x in strings], np.int64)
    hi = np.cumsum(ln) + int(ln.sum())
    codes, first = _scan.span_codes(buf, hi - ln, hi)
    want, _ = arrays.factorize(np.array(strings + [b""], dtype=object)[:len(strings)])
    assert codes.tolist() == want.tolist()
    assert first.tolist() == [strings.index(s) for s in dict.fromkeys(strings)]


def test_span_codes_alternating_heads():
    a, b, c = b"(f32[8]{0:S(5)}, f32[8])", b"(f32[8], f32[8]{0:S(5)})", b"(f32[9], f32[8])"
    strings = [a, b] * 5 + [c, a, c, b, b, a]
    buf = np.frombuffer(b"".join(strings), np.uint8)
    ln = np.array([len(x) for x in strings], np.int64)
    hi = np.cumsum(ln)
    codes, first = _scan.span_codes(buf, hi - ln, hi)
    assert codes.tolist() == [0, 1] * 5 + [2, 0, 2, 1, 1, 0]
    assert first.tolist() == [0, 1, 10]
