"""The scanner's `memcpy_details` reads a `memcpy_details` stat as `gpu._memcpy_facts` does
(`names.parse_details`: tokens split where `str.split()` splits, keyed before their first ':',
the last of a key winning; the size as `as_int` reads it, below 2**53), or says None and
leaves the value to it: any ASCII text, the CUPTI and ROCm forms among them."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from overlap.trace import gpu, wire

pytestmark = pytest.mark.skipif(getattr(wire._scan, "memcpy_details", None) is None,
                                reason="the scanner was not built")

KEYS = ["size", "kind_src", "kind_dst", "async", "kind", "dest", "sizes", "kin", "Size", ""]
VALUES = ["1", "0", "4096", "0012", "+5", "-3", "1_000", "12a", "", "device", "pinned",
          "Unknown", "9" * 15, "9" * 16, "9007199254740992", ":x", "1:2"]
SPACES = [" ", "  ", "\t", "\n", "\x0b", "\x0c", "\r", "\x1c", "\x1f", "\x85", "\xa0"]

token = st.one_of(st.builds(lambda k, v: f"{k}:{v}", st.sampled_from(KEYS),
                             st.sampled_from(VALUES)),
                  st.sampled_from(["size", "async", "kind", ":", "x"]))
text = st.builds(lambda toks, seps, lead: lead + "".join(t + s for t, s in zip(toks, seps)),
                 st.lists(token, max_size=8), st.lists(st.sampled_from(SPACES), min_size=8,
                                                        max_size=8),
                 st.sampled_from(["", " ", "\t"]))


@settings(max_examples=2000, deadline=None)
@given(st.lists(text, min_size=1, max_size=20))
def test_same_facts_as_the_python_reading(values):
    got = wire._scan.memcpy_details(values)
    for v, g in zip(values, got):
        if g is None:  # (left to the caller: non-ASCII text, or a size not plain digits)
            continue
        assert v.isascii()
        assert g == gpu._memcpy_facts(v), v


def test_the_usual_forms_are_answered():
    values = ["kind_src:device kind_dst:pinned size:4096 dest:0 async:1",
              "kind:Unknown size:0 dest:512 async:1", "kind:Unknown size:65536 dest:512 async:0",
              "", "kind_src:pinned kind_dst:device size:12 dest:1 async:1 size:13"]
    got = wire._scan.memcpy_details(values)
    assert got == [gpu._memcpy_facts(v) for v in values]
    assert got[1] == (0, "unknown", "unknown", True, False) and got[4][0] == 13
    # not answered: the caller reads these
    assert wire._scan.memcpy_details([b"size:1", None, 5, "size:\u00e91", "size:+5",
                                      "size:" + "9" * 16]) == [None] * 6


@settings(max_examples=500, deadline=None)
@given(st.lists(st.one_of(text, st.sampled_from([None, b"size:1", 5, "size:\u00e91"])),
                max_size=20))
def test_columns_are_the_tuples(values):
    """`columns=True`: the same facts as columns, each value's answered flag; and
    `gpu._details_columns` (the scanner where it answers, `_memcpy_facts` else) is
    `_memcpy_facts` per value, whatever answered it."""
    tuples = wire._scan.memcpy_details(values)
    size, src, dst, asy, known, ok, kinds = wire._scan.memcpy_details(values, True)
    assert ok.tolist() == [t is not None for t in tuples]
    assert len(set(kinds)) == len(kinds)  # (one code per distinct kind)
    for i, t in enumerate(tuples):
        if t is None:  # not answered: nothing written
            assert (size[i], src[i], dst[i], asy[i], known[i]) == (0, 0, 0, 0, 0)
            continue
        got = (int(size[i]), kinds[src[i]], kinds[dst[i]], [None, False, True][asy[i]],
               bool(known[i]))
        assert got == t
    f = gpu._details_columns(values, {})
    assert [c.dtype.kind for c in (f.size, f.src, f.dst, f.asy, f.known, f.kinds)] == \
        ["i", "i", "i", "i", "b", "O"]
    texts = [v if isinstance(v, (str, bytes)) or v is None else str(v) for v in values]
    assert [(int(f.size[i]), f.kinds[f.src[i]], f.kinds[f.dst[i]], gpu._ASYNC[f.asy[i]],
             bool(f.known[i])) for i in range(len(values))] == \
        [gpu._memcpy_facts(v) for v in texts]


@pytest.mark.parametrize("kinds", [1, 127, 128, 300])
def test_kind_codes_widen_past_int8(kinds):
    """Round 23: the kinds' codes are int8 while there are at most 127 kinds (128 with the
    absent kind's "unknown"), widened to int32 at the next one, the values coded before it
    kept: every value's kinds as its tuple says."""
    values = [f"kind_src:s{i} kind_dst:d{i % 7} size:{i}" for i in range(kinds)] + \
        ["size:3", "kind_src:s0 kind_dst:d0 size:1"]
    tuples = wire._scan.memcpy_details(values)
    size, src, dst, asy, known, ok, names = wire._scan.memcpy_details(values, True)
    assert src.dtype == (np.int8 if len(names) <= 127 else np.int32) == dst.dtype
    assert [(names[s], names[d]) for s, d in zip(src, dst)] == [t[1:3] for t in tuples]


# ROCm's rule (`vendors._details_size`): the first `size` token's value, above 0 and below
# 2**53, else None. `_details_sizes` answers a column at once (int64, 0 for None), by the
# scanner where it can.
rocm_value = st.one_of(text, st.sampled_from([None, b"size:7", 5, "size:\u00e91", "size:+5",
                                              "size:1 size:2", "size:0 size:9",
                                              "size:x size:3", "kind:Unknown size:0 dest:512"]))


@settings(max_examples=300, deadline=None)
@given(st.lists(rocm_value, min_size=64, max_size=100))
def test_rocm_sizes_are_the_first_size_tokens(values):
    from overlap.trace import vendors

    col = np.empty(len(values), object)
    col[:] = values
    want = [vendors._details_size(v) or 0 for v in values]  # (0: None, unknown)
    got = vendors._details_sizes(col)
    assert got.dtype == np.int64 and got.tolist() == want


def test_rocm_sizes_without_the_scanner(monkeypatch):
    from overlap.trace import vendors

    values = [f"kind:Unknown size:{i} dest:512 async:1" for i in range(70)] + [
        "size:1 size:2", "size:0", "size:\u00e93", None]
    col = np.empty(len(values), object)
    col[:] = values
    with_scanner = vendors._details_sizes(col).tolist()
    monkeypatch.setattr(wire, "SCANNER", None)
    assert vendors._details_sizes(col).tolist() == with_scanner == [
        vendors._details_size(v) or 0 for v in values]
    assert with_scanner[:3] == [0, 1, 2] and with_scanner[-4:] == [1, 0, 0, 0]
