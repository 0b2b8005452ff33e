"""A copy's `memcpy_details` read where its bytes lie (issue 32, round 22): the scanner's
`memcpy_details_at` answers each interned value as `memcpy_details` answers its text, and
`gpu._details_facts` gives the facts `stat_codes` and `_details_columns` give, values the
bytes do not answer (not ASCII, not text) and copies without the stat (their metadata's)
included; a report is upb's. Round 23: refs (CUPTI's form) read in their stat names' bytes.
SYNTHETIC captures, labelled so."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from overlap.trace import gpu, wire
from overlap.trace.protos import XSpace
from overlap.trace.statids import LazyStatNames
from overlap.trace.values import _K_REF, _K_STR
from tests.trace.test_differential import _cli
from tests.trace.test_scanner import GROUPS, STAT_NAMES, _lines, space_bytes
from tests.trace.test_scanner import event as scanner_event

pytestmark = pytest.mark.skipif(wire._scan is None, reason="the compiled scanner is not built")
_scan = wire._scan
_NAMES_OF = LazyStatNames.names_of

TOKENS = ["size:4096", "size:0", "size:12a", "size:", "size:9999999999999999",
          "kind_src:device", "kind_src:pinned", "kind_dst:pageable", "async:1", "async:0",
          "kind:Unknown", "kind:HtoD", "x:y", "size:77", "\u00e9:1", "kind_dst:h\u00f4te"]
text = st.lists(st.sampled_from(TOKENS), max_size=6).map(" ".join) | st.text(max_size=20)


def _columns(got) -> list:
    return [np.asarray(c).tolist() if isinstance(c, np.ndarray) else list(c) for c in got]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(text, st.sampled_from([_K_STR, _K_STR, 6, 4])), max_size=12))
def test_bytes_answer_as_the_text_does(values):
    """Each value laid in a buffer: of kind str and ASCII, the text's answer; else no answer
    (0 and None), for the caller to read."""
    raw = b"".join(v.encode() for v, _ in values)
    buf = np.frombuffer(wire.padded(raw), np.uint8)
    lens = [len(v.encode()) for v, _ in values]
    vpos = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64) if values else \
        np.zeros(0, np.int64)
    kind = np.array([k for _, k in values], np.int8)
    got = _columns(_scan.memcpy_details_at(buf, kind, np.array(lens, np.uint64), vpos, _K_STR))
    want = _columns(_scan.memcpy_details([v if k == _K_STR else None for v, k in values],
                                         True))
    assert got == want


def test_bytes_out_of_the_buffer_are_not_read():
    buf = np.frombuffer(wire.padded(b"size:1"), np.uint8)
    got = _scan.memcpy_details_at(buf, np.array([_K_STR, _K_STR], np.int8),
                                  np.array([6, 10**9], np.uint64), np.array([0, 2], np.int64),
                                  _K_STR)
    assert got[5].tolist() == [1, 0] and got[0].tolist() == [1, 0]


def _copies(path, details: list, meta_details: str | None = None):
    """SYNTHETIC: one GPU stream line of D2H copies, copy i carrying `details[i]` (a str, bytes,
    a ref to a stat name, or None: no stat; its metadata's `meta_details` then)."""
    sp = XSpace()
    sp.warnings.append("SYNTHETIC")
    pl = sp.planes.add(id=1, name="/device:GPU:0")
    for sid, name in ((1, "memcpy_details"), (2, "kind_src:device kind_dst:pinned size:64")):
        sm = pl.stat_metadata[sid]
        sm.id, sm.name = sid, name
    md = pl.event_metadata[1]
    md.id, md.name = 1, "MemcpyD2H"
    if meta_details is not None:
        md.stats.add(metadata_id=1, str_value=meta_details)
    ln = pl.lines.add(id=13, name="Stream #13(MemcpyD2H)", timestamp_ns=1000)
    for i, d in enumerate(details):
        ev = ln.events.add(metadata_id=1, offset_ps=i * 10_000, duration_ps=5000)
        if isinstance(d, str):
            ev.stats.add(metadata_id=1, str_value=d)
        elif isinstance(d, bytes):
            ev.stats.add(metadata_id=1, bytes_value=d)
        elif d == "ref":
            ev.stats.add(metadata_id=1, ref_value=2)
    sp.planes.add(id=2, name="/host:CPU")
    path.write_bytes(sp.SerializeToString())
    return path


CASES = {
    "distinct": [f"kind_src:device kind_dst:pinned size:{4096 + i}" for i in range(9)],
    "odd": ["kind_src:device kind_dst:pinned size:100", "kind_src:d\u00e9vice size:5",
            b"kind_src:device size:7", None, "size:abc kind:Unknown", "kind:Unknown size:0",
            "kind_src:device kind_dst:pinned size:100"],
    "none_carry": [None, None, None],
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("meta", [None, "kind_src:device kind_dst:pageable size:32"])
def test_reports_of_copies_read_from_bytes_are_upbs(tmp_path, case, meta, monkeypatch):
    """Copies of distinct, odd (not ASCII, bytes, a bad size) or no details (their
    metadata's, or none): the report is upb's, and the reader's path equal to the one
    through objects (the bytes path off)."""
    p = _copies(tmp_path / "c.xplane.pb", CASES[case], meta)
    got = _cli(["report", "--json", str(p)], wire._scan)
    assert got == _cli(["report", "--json", str(p)], None)
    monkeypatch.setattr(gpu, "_details_facts", _through_objects)
    assert _cli(["report", "--json", str(p)], wire._scan) == got


def _through_objects(P, ev, idx, cache):
    codes, details = gpu.stat_codes(P, ev, idx, "memcpy_details")
    return codes, gpu._details_columns(details.tolist(), cache)


def test_a_ref_detail_reads_as_through_objects(tmp_path, monkeypatch):
    """A details value written as a ref (not text: read as an object, as before)."""
    p = _copies(tmp_path / "r.xplane.pb", ["ref", "kind_src:device size:8", "ref"])
    got = _cli(["report", "--json", str(p)], wire._scan)
    assert got == _cli(["report", "--json", str(p)], None)
    monkeypatch.setattr(gpu, "_details_facts", _through_objects)
    assert _cli(["report", "--json", str(p)], wire._scan) == got


def _ref_copies(path, n_names: int, refs: list, texts: dict | None = None):
    """SYNTHETIC: stat metadata 2..n_names+1 named `kind_src:device kind_dst:pinned size:<id>`
    (or `texts[id]`: non-ASCII, empty, odd), and copies whose `memcpy_details` is a ref to
    `refs[i]` (an id; one without metadata reads as ""), text (a str), or absent (None)."""
    sp = XSpace()
    sp.warnings.append("SYNTHETIC")
    pl = sp.planes.add(id=1, name="/device:GPU:0")
    sm = pl.stat_metadata[1]
    sm.id, sm.name = 1, "memcpy_details"
    for sid in range(2, n_names + 2):
        sm = pl.stat_metadata[sid]
        sm.id, sm.name = sid, (texts or {}).get(sid, f"kind_src:device kind_dst:pinned size:{sid}")
    md = pl.event_metadata[1]
    md.id, md.name = 1, "MemcpyH2D"
    ln = pl.lines.add(id=13, name="Stream #13(MemcpyH2D)", timestamp_ns=1000)
    for i, r in enumerate(refs):
        ev = ln.events.add(metadata_id=1, offset_ps=i * 10_000, duration_ps=5000)
        if isinstance(r, str):
            ev.stats.add(metadata_id=1, str_value=r)
        elif r is not None:
            ev.stats.add(metadata_id=1, ref_value=r)
    sp.planes.add(id=2, name="/host:CPU")
    path.write_bytes(sp.SerializeToString())
    return path


def test_refs_to_many_names_are_read_in_the_names_bytes(tmp_path, monkeypatch):
    """CUPTI's form (each copy's details a ref to a stat name) on a plane of more stat names
    than `LAZY_STAT_NAMES` (kept undecoded, `statids.LazyStatNames`): the facts come from the
    names' bytes, no name decoded, and the report is upb's and the path through objects'.
    Odd names (not ASCII, empty, a bad size), an id without a name and text beside them
    fall back to objects."""
    n = wire.LAZY_STAT_NAMES + 10
    texts = {5: "kind_src:d\u00e9vice kind_dst:pinned size:9", 6: "", 7: "size:12x kind:Unknown",
             8: "kind_src:pinned kind_dst:device size:3 async:1"}
    refs = [2, 3, 5, 6, 7, 8, n + 50, "kind_src:device size:8", None, 9, 3, n + 1]
    # (a line read alone, not merged with others: `gpu._SMALL_LINE` copies or more)
    refs += list(range(10, 10 + gpu._SMALL_LINE))
    p = _ref_copies(tmp_path / "r.xplane.pb", n, refs, texts)
    decoded = []
    monkeypatch.setattr(LazyStatNames, "names_of",
                        lambda self, ids, default="": decoded.append(len(ids)) or
                        _NAMES_OF(self, ids, default))
    got = _cli(["report", "--json", str(p)], wire._scan)
    # (the odd values only: 5, 6, 7 and the missing id, through `_stat_objects`)
    assert decoded and sum(decoded) <= 4, decoded
    assert got == _cli(["report", "--json", str(p)], None)
    monkeypatch.setattr(gpu, "_details_facts", _through_objects)
    assert _cli(["report", "--json", str(p)], wire._scan) == got


def test_refs_read_at_their_names_spans():
    """`memcpy_details_at` of refs: each id's name span read as its text is, an id out of
    the table, without a row, or with a span outside the bytes not answered."""
    names = [b"kind_src:device size:1", b"size:2 async:0", b"", b"kind_dst:p\xc3\xa9 size:3"]
    raw = b"".join(names)
    buf = np.frombuffer(wire.padded(raw), np.uint8)
    ends = np.cumsum([len(x) for x in names]).astype(np.int64)
    ns, ne = np.r_[0, ends[:-1]].astype(np.int32), ends.astype(np.int32)
    ns, ne = np.r_[ns, 5].astype(np.int32), np.r_[ne, 10**9].astype(np.int32)  # row 4: past
    pos = np.array([-1, 0, 1, 2, 3, -1, 4], np.int32)  # id -> row
    ids = np.array([1, 2, 3, 4, 5, 6, 99], np.uint64)
    kind = np.full(len(ids), _K_REF, np.int8)
    got = _scan.memcpy_details_at(buf, kind, ids, np.zeros(len(ids), np.int64), _K_STR,
                                  _K_REF, buf, pos, ns, ne)
    want = _scan.memcpy_details([x.decode() for x in names], True)
    assert got[5].tolist() == [1, 1, 1, 0, 0, 0, 0]
    for col in (0, 3, 4):
        assert got[col][:3].tolist() == want[col][:3].tolist()
    for col in (1, 2):
        assert [got[6][c] for c in got[col][:3]] == [want[6][c] for c in want[col][:3]]
    # without the names (`names` None): refs are not answered
    assert _scan.memcpy_details_at(buf, kind, ids, np.zeros(len(ids), np.int64),
                                   _K_STR)[5].tolist() == [0] * 7


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(scanner_event, max_size=8), min_size=1, max_size=3))
def test_a_forgotten_stat_is_read_again_the_same(lines):
    """Round 23: `LineEvents.forget` (the copies' details, once read) keeps nothing of a
    stat; asked again (codes, presence, first values), the line decodes it again: the same
    answers as before it was forgotten, for every set of ids and every other set alike."""
    raw = space_bytes(lines, False)
    for line in _lines(raw, _scan):
        ev = wire.LineEvents(line, 7, wanted=(), groups=GROUPS)
        sets = ([1, 3], [2], [42], [1])
        before = [(ev.first_codes(s, STAT_NAMES)[0].tolist(),
                   [repr(v) for v in ev.first_codes(s, STAT_NAMES)[1].tolist()],
                   ev.has_stat(s).tolist()) for s in sets]
        for gone in ([2], [1, 3]):
            ev.forget(gone)
            assert ev.interned(gone) is None
            after = [(ev.first_codes(s, STAT_NAMES)[0].tolist(),
                      [repr(v) for v in ev.first_codes(s, STAT_NAMES)[1].tolist()],
                      ev.has_stat(s).tolist()) for s in sets]
            # (codes number the values of each read: compare the values per event)
            for (bc, bv, bh), (ac, av, ah) in zip(before, after):
                assert bh == ah
                assert [bv[c] if c >= 0 else None for c in bc] == \
                    [av[c] if c >= 0 else None for c in ac]


def test_many_stat_names_read_alike_from_int32_and_int64_spans(tmp_path, monkeypatch):
    """Round 23: a plane of many stat names (`LazyStatNames`) whose ids ascend comes from the
    split as three int32 rows; from a buffer of 2 GiB or more (`_scan.WIDE_POSITIONS`
    lowered to 0 here) as int64 entries: the same reports, the refs read in the names' bytes
    from the first and through objects from the second."""
    n = wire.LAZY_STAT_NAMES + 10
    refs = [2, 3, n + 1, None, "kind_src:device size:8"] + list(range(10, 10 + gpu._SMALL_LINE))
    p = _ref_copies(tmp_path / "r.xplane.pb", n, refs)
    got = _cli(["report", "--json", str(p)], wire._scan)
    monkeypatch.setattr(_scan, "WIDE_POSITIONS", 0)
    assert _cli(["report", "--json", str(p)], wire._scan) == got
    assert _cli(["report", "--json", str(p)], None) == got
