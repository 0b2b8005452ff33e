"""The clocked TPU join on the boundary ops' name bytes (`tpu._join_names`,
`_scan.async_name_codes_at`) against the same join on their names as strs
(`tpu._async_codes_py`, `async_name_codes`): the same matches for any names (non-ASCII, a
`-start` anywhere, empty), the str rule where a name has no UTF-8 form, and the bytes taken
only where `MetaTable.span_strings` would give every name as a str."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from overlap.trace import tpu, wire
from overlap.trace.metatable import MetaTable

pytestmark = pytest.mark.skipif(getattr(wire._scan, "async_name_codes_at", None) is None,
                                reason="the scanner was not built")

_op_name = st.sampled_from(["copy-start", "copy-start.1", "copy-done.1", "copy-done",
                            "x-start-start.2", "x-start-done.2", "x-done-start.2",
                            "é-start", "é-done", "-start", "-done", "copy-start.1 ",
                            "fusion.3", "a-startb", "a-doneb", "é-start-é", "é-done-é"]) | \
    st.text(alphabet="-adeorstn.é1€", min_size=1, max_size=9)


def _spans(op_names: list[str], gap: bytes = b"\0") -> tuple[np.ndarray, ...]:
    """The names' UTF-8 bytes in one buffer, `gap` after each: (buffer, starts, ends)."""
    enc = [n.encode() for n in op_names]
    buf = np.frombuffer(b"".join(e + gap for e in enc) + b"\0", np.uint8)
    ln = np.array([len(e) for e in enc], np.int64)
    hi = np.cumsum(ln + len(gap)) - len(gap)
    return buf, hi - ln, hi


def _matches(codes: tuple[np.ndarray, ...]) -> list[tuple[bool, bool]]:
    s, d, o = codes
    return [(bool(si >= 0 and si == oj), bool(di >= 0 and di == oj))
            for si, di in zip(s.tolist(), d.tolist()) for oj in o.tolist()]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.none() | st.just("") | _op_name, max_size=40),
       st.lists(_op_name, max_size=40), st.sampled_from([b"\0", b"", b"xy-start"]))
def test_codes_on_bytes_match_as_python(names, op_names, gap):
    # more names than a block of lookups (16); spans touching, or bytes between them that
    # would make a name if read past its end
    got = wire._scan.async_name_codes_at(names, *_spans(op_names, gap))
    assert _matches(got) == _matches(tpu._async_codes_py(names, op_names))
    assert _matches(tpu._async_codes_at(names, *_spans(op_names, gap))) == _matches(got)


def test_values_the_bytes_cannot_take():
    buf, fs, fe = _spans(["a-start", "a-done"])
    assert wire._scan.async_name_codes_at(["a-start", 3], buf, fs, fe) is None
    # a lone surrogate has no UTF-8 form: the str rule answers (it matches nothing)
    odd = ["\ud800-start", "a-start"]
    assert wire._scan.async_name_codes_at(odd, buf, fs, fe) is None
    s, d, o = tpu._async_codes_at(odd, buf, fs, fe)
    assert s.tolist()[0] == d.tolist()[0] == -1
    assert s[1] == o[0] and d[1] == o[1]
    # no ops: nothing matches
    s, d, o = wire._scan.async_name_codes_at(["a-start"], buf, fs[:0], fe[:0])
    assert s.tolist() == d.tolist() == [-1] and not len(o)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["copy-start.1", "copy-done.1", "é-start", "é-done", "",
                                 "a\0-start", "\udcff-done", "b-start"]), min_size=1,
                max_size=12))
def test_bytes_only_where_span_strings_gives_every_name(op_names):
    raw = [n.encode("utf-8", "surrogateescape") for n in op_names]
    buf = np.frombuffer(b"".join(raw) + b"\0", np.uint8)
    ln = np.array([len(r) for r in raw], np.int64)
    hi = np.cumsum(ln)
    t = SimpleNamespace(buf=buf, gather=lambda fs, fe, sep=None: MetaTable.gather_spans(
        buf, fs, fe, sep))
    P = SimpleNamespace(table=lambda: t)
    at = np.arange(len(raw), dtype=np.int64)
    real, tpu._names_list = tpu._names_list, lambda *a: "strs"
    try:
        got = tpu._join_names(P, at, np.full(len(raw), None, object), at, (hi - ln, hi))
    finally:
        tpu._names_list = real
    strs = MetaTable.span_strings_of(buf, hi - ln, hi)
    if strs is None or not all(strs):
        assert got == "strs"
    else:
        g, lo2, hi2 = got
        assert MetaTable.span_strings_of(g, lo2, hi2) == strs == op_names
        names = ["copy-start.1", "é-start", "b-start", None]
        assert _matches(tpu._async_codes_at(names, g, lo2, hi2)) == \
            _matches(tpu._async_codes_py(names, strs))
