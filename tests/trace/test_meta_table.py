"""`wire.MetaTable` (issue 15): event_metadata names and stats decoded from the file's bytes
for many ids at once must equal what upb gives one id at a time, for any encoding upb accepts.

The planes here are written byte by byte, so that they can hold what the canonical writers
never write but a valid file may: fields out of order, a string or a map key written twice, a
key written twice, child ids after the stats, unknown fields, stats with no value, with their
id after the value or with the id written twice, a value message written twice (upb merges
it: the table must refuse, and the answers still agree).
"""

from __future__ import annotations

import numpy as np
import pytest
from google.protobuf.message import DecodeError
from hypothesis import given, settings
from hypothesis import strategies as st

from overlap.trace import gpu, wire
from overlap.trace.protos import XSpace
from tests.trace.wire_bytes import field, stat_value_bytes, stat_values

# The table is the compiled scanner's (without it, upb reads every map and there is no table).
pytestmark = pytest.mark.skipif(wire.SCANNER is None,
                                reason="scanner not built or not used (OVERLAP_SCANNER=0)")


STAT_NAMES = {1: "hlo_module", 2: "program_id", 3: "raw_bytes_accessed", 4: "bytes_accessed",
              5: "hlo_module", 6: "other", 0: "bytes_accessed"}  # 1 and 5 share a name
WANTED = ("hlo_module", "program_id", "raw_bytes_accessed", "bytes_accessed")

text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
value = stat_values(12, [1, 2, 6, 99])
stat = st.tuples(st.sampled_from(sorted(STAT_NAMES) + [42]), value,
                 st.sampled_from(["canonical", "value first", "id twice", "no id"]))
entry = st.fixed_dictionaries({
    "key": st.integers(-3, 40),
    "name": text, "display": text,
    "stats": st.lists(stat, max_size=6),
    "layout": st.sampled_from(["canonical", "reversed", "name twice", "children", "unknown",
                               "no value", "key twice"]),
})


def stat_bytes(sid: int, val, how: str) -> bytes:
    v = stat_value_bytes(val)
    i = field(1, 0, sid) if sid else b""
    if how == "value first":
        return v + i
    if how == "id twice":
        return field(1, 0, 6) + v + i
    if how == "no id":
        return v
    return i + v


def entry_bytes(e: dict) -> bytes:
    stats = [field(5, 2, stat_bytes(*s)) for s in e["stats"]]
    parts = [field(1, 0, e["key"]), field(2, 2, e["name"].encode())]
    if e["display"]:
        parts.append(field(4, 2, e["display"].encode()))
    parts += stats
    lay = e["layout"]
    if lay == "reversed":
        parts = parts[::-1]  # the stats' own order flips too: the table must follow it
    elif lay == "name twice":
        parts.append(field(2, 2, ("last " + e["name"]).encode()))
    elif lay == "children":
        parts += [field(6, 0, 7), field(6, 0, 8)]
    elif lay == "unknown":
        parts.insert(1, field(9, 0, 5))
    value_msg = b"".join(parts)
    if lay == "no value":
        return field(1, 0, e["key"])
    if lay == "key twice":
        return field(1, 0, e["key"] + 1000) + field(2, 2, value_msg) + field(1, 0, e["key"])
    return field(1, 0, e["key"]) + field(2, 2, value_msg)


def plane_bytes(entries: list[dict], merged_value: bool) -> bytes:
    parts = [field(1, 0, 0), field(2, 2, b"/device:TPU:0")]
    for e in entries:
        body = entry_bytes(e)
        if merged_value:  # the value message twice in one entry: upb merges the two
            body += field(2, 2, field(4, 2, b"merged"))
        parts.append(field(4, 2, body))
    for k, n in STAT_NAMES.items():
        parts.append(field(5, 2, field(1, 0, k) + field(2, 2, field(1, 0, k)
                                                       + field(2, 2, n.encode()))))
    return field(1, 2, b"".join(parts))


def both(raw: bytes, strip: bool = False):
    """The plane as the reader reads it (upb skips its entries with `strip`), and upb's own
    parse of the whole file, independently."""
    xs, planes, _ = wire.parse_space(wire.padded(raw), len(raw),
                                     strip_meta=(lambda name: True) if strip else None)
    assert planes[0].meta_stripped == (strip and bool(planes[0].meta_pos[0].size))
    return wire.Plane(planes[0]), XSpace.FromString(raw)


def upb_twin(P: wire.Plane, upb) -> wire.Plane:
    """`P` reading its metadata through the upb map `upb`, one id at a time (no table)."""
    one = wire.Plane.__new__(wire.Plane)
    for k in wire.Plane.__slots__:
        setattr(one, k, getattr(P, k))
    one._meta, one._meta_stats, one._wanted, one._table = upb, {}, {}, None
    return one


def check(P: wire.Plane, mids: np.ndarray, upb=None) -> None:
    """The table's answers for `mids` equal upb's, one id at a time (`upb`: an independently
    parsed event_metadata map; else the plane's own)."""
    upb = P.meta if upb is None else upb
    one = upb_twin(P, upb)  # the per-id upb reads, against that map
    assert P.names(mids) == [one.name(int(m)) for m in mids]
    assert P.names(mids, display=True) == [one.display_name(int(m)) for m in mids]
    cols = P.meta_columns(mids, WANTED)
    for i, m in enumerate(mids.tolist()):
        want_all = one.meta_some(m, WANTED)
        for k in WANTED:
            got, want = cols[k][i], want_all.get(k)
            assert type(got) is type(want) and (got == want or got != got), (m, k, got, want)


@settings(max_examples=150, deadline=None)
@given(st.lists(entry, max_size=12), st.lists(st.integers(-5, 45), max_size=20),
       st.booleans())
def test_table_equals_upb_for_any_encoding(entries, extra, strip):
    P, xs = both(plane_bytes(entries, merged_value=False), strip)
    upb = xs.planes[0].event_metadata
    t = P.table()
    if entries:
        assert t is not None and t.ok  # nothing here needs the fallback
        assert sorted(P.meta_keys()) == sorted(upb.keys())
    keys = np.array(sorted(upb.keys()) + extra, np.int64)
    check(P, keys, upb)
    # each id once, in order: `MetaTable.columns` writes the values straight to their rows
    check(P, np.array(sorted(upb.keys()), np.int64), upb)
    if strip:  # upb's map, parsed on demand from the entries located, is the same map
        assert dict(P.meta) == dict(upb)


def test_a_value_written_twice_makes_the_table_refuse_and_the_answers_agree():
    e = {"key": 3, "name": "n", "display": "", "layout": "canonical",
         "stats": [(2, (3, 1 << 63), "canonical")]}
    for strip in (False, True):
        P, xs = both(plane_bytes([e], merged_value=True), strip)
        assert P.table() is None
        assert P.display_name(3) == "merged"  # upb merged the two value messages
        check(P, np.array([3, 4], np.int64), xs.planes[0].event_metadata)


def test_invalid_utf8_in_a_skipped_tpu_entry_is_read_with_replacement_and_counted(tmp_path):
    """upb no longer parses a TPU plane's entries up front; a name that is not UTF-8 is read
    with U+FFFD (overlap.trace.wire: the rule for damaged strings) and counted, the same with
    the scanner and with upb (which refuses the file and reads it through the bytes schema)."""
    from overlap.trace import read_trace, wire
    from overlap.trace.synthetic import SyntheticTrace

    t = SyntheticTrace()
    tpu = t.tpu(0)
    tpu.op(10_000_000, 5_000_000, name="fusion.7")
    raw = t.to_bytes()
    assert raw.count(b"fusion.7") >= 1
    bad = raw.replace(b"fusion.7", b"fusion\xff7")
    f = tmp_path / "h.xplane.pb"
    f.write_bytes(bad)
    got = []
    for scanner in (wire._scan, None):
        old = wire.SCANNER
        wire.SCANNER = scanner
        try:
            tr = read_trace(f)
        finally:
            wire.SCANNER = old
        facts = next(iter(tr.capture.values()))
        assert facts["strings_replaced"] >= 1
        names = set(tr.compute["name"].tolist())
        assert "fusion\ufffd7" in names and "fusion.7" not in names
        got.append((facts["strings_replaced"], sorted(names)))
    assert got[0] == got[1]


def test_copy_facts_program_ids_from_the_table_on_a_real_layout():
    """The canonical layout, as the synthetic TPU writer (and XLA) writes it: the table is
    used, and the facts equal upb's."""
    from overlap.trace.synthetic import SyntheticTrace

    t = SyntheticTrace()
    tpu = t.tpu(0)
    for k in range(50):
        t0 = (10 + k) * 1_000_000
        tpu.async_copy("D2H" if k % 2 else "H2D", t0, t0 + 500_000, dims=(8, 128 + k))
    raw = t.to_bytes()
    _, planes, _ = wire.parse_space(wire.padded(raw), len(raw))
    P = wire.Plane(next(p for p in planes if p.name.startswith("/device:TPU")))
    assert P.table() is not None
    check(P, np.array(sorted(P.meta.keys()), np.int64))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["MemcpyD2H", "MemcpyH2D", "MemcpyD2D", "CudaGraphExec:7",
                                           "fusion", "kernel_details", ""]),
                          st.lists(st.sampled_from([0, 1, 2, 3]), max_size=3)),
                min_size=1, max_size=300))
def test_gpu_kinds_through_the_table_equal_upb(entries):
    """GPU planes with many entries (one per distinct kernel) take memcpy and kernel kinds from
    the `MetaTable`; they must equal the per-entry upb reading, kernel_details ids included
    (two stat ids share that name here)."""

    names = {0: "other", 1: "kernel_details", 2: "kernel_details", 3: "memcpy_details"}
    parts = [field(1, 0, 0), field(2, 2, b"/device:GPU:0")]
    for k, (name, sids) in enumerate(entries):
        stats = b"".join(field(5, 2, field(1, 0, i) + field(5, 2, b"x")) for i in sids)
        parts.append(field(4, 2, field(1, 0, k) + field(2, 2, field(1, 0, k)
                                                       + field(2, 2, f"{name}{k}".encode()
                                                               if name == "fusion"
                                                               else name.encode()) + stats)))
    for k, n in names.items():
        parts.append(field(5, 2, field(1, 0, k) + field(2, 2, field(1, 0, k)
                                                       + field(2, 2, n.encode()))))
    raw = field(1, 2, b"".join(parts))
    _, planes, _ = wire.parse_space(wire.padded(raw), len(raw))
    old = gpu._TABLE_MIN
    try:
        gpu._TABLE_MIN = 0
        P = wire.Plane(planes[0])
        assert P.table() is not None
        fast = gpu._gpu_meta_kinds(P)
        gpu._TABLE_MIN = 1 << 30
        slow = gpu._gpu_meta_kinds(wire.Plane(planes[0]))
    finally:
        gpu._TABLE_MIN = old
    assert fast[0] == slow[0] and sorted(fast[1]) == sorted(slow[1])


@settings(max_examples=60, deadline=None)
@given(st.binary(min_size=0, max_size=400), st.data())
def test_compiled_gather_equals_the_numpy_gather(data, draw):
    """The scanner's `gather_spans` (a memcpy per span) gives exactly the bytes of the numpy
    paths it replaces (index take for short spans, joined slices for long ones), with and
    without a separator, empty spans included."""
    from overlap.trace import metatable

    if metatable._scan is None:
        pytest.skip("the scanner is not built")
    buf = np.frombuffer(data, np.uint8)
    n = draw.draw(st.integers(0, 12))
    spans = [sorted(draw.draw(st.tuples(st.integers(0, len(buf)), st.integers(0, len(buf)))))
             for _ in range(n)]
    fs = np.array([s for s, _ in spans], np.int64)
    fe = np.array([e for _, e in spans], np.int64)
    for sep in (None, 0, 0x2C):
        want = b"".join(data[s:e] + (b"" if sep is None else bytes((sep,))) for s, e in spans)
        got = wire.MetaTable.gather_spans(buf, fs, fe, sep)
        assert got.dtype == np.uint8 and got.tobytes() == want
        scan, metatable._scan = metatable._scan, None  # the numpy paths
        try:
            assert wire.MetaTable.gather_spans(buf, fs, fe, sep).tobytes() == want
        finally:
            metatable._scan = scan


@settings(max_examples=80, deadline=None)
@given(st.lists(entry, min_size=1, max_size=8),
       st.sampled_from([-3, 0, 1, (1 << 63) - 8, -(1 << 63)]), st.booleans())
def test_keys_in_order_without_gaps_are_found_by_subtraction_exactly(entries, k0, reverse):
    """Keys written once each, in order or in reverse order (upb writes a map newest first),
    without gaps (what producers write: ids 1..n) are kept without a sort and looked up by a
    subtraction; ids outside the run, at the int64 extremes where the subtraction wraps
    around, get no entry, the run's ids theirs, names and stats as upb says."""
    entries = [dict(e, key=k0 + i, layout="canonical") for i, e in enumerate(entries)]
    if reverse:
        entries.reverse()
    P, xs = both(plane_bytes(entries, merged_value=False))
    t = P.table()
    assert t is not None and t._dense
    upb = xs.planes[0].event_metadata
    lo, hi = -(1 << 63), (1 << 63) - 1
    near = [k0 - 1, k0 + len(entries), lo, hi, lo + 1, hi - 1, 0]
    mids = np.array([k0 + i for i in range(len(entries))]
                    + [m for m in near if lo <= m <= hi], np.int64)
    check(P, mids, upb)


@settings(max_examples=80, deadline=None)
@given(st.lists(entry, max_size=12), st.lists(st.integers(-5, 45), max_size=20))
def test_columns_by_searched_stat_ids_equal_upb(entries, extra):
    """The columns where the stat ids are not all small (looked up by a binary search, not
    through a table over the ids) equal upb's too."""
    P, xs = both(plane_bytes(entries, merged_value=False))
    t = P.table()
    if t is not None:
        t._top = None  # as where a stat id lies outside [0, 2**20)
    upb = xs.planes[0].event_metadata
    check(P, np.array(sorted(upb.keys()) + extra, np.int64), upb)


@settings(max_examples=120, deadline=None)
@given(st.lists(entry, max_size=12), st.sampled_from(["as drawn", "ascending", "descending"]))
def test_narrow_decode_equals_the_wide_one(entries, order):
    """`decode_meta(..., narrow=True)` (what `MetaTable` asks for under 2 GiB): int32 spans,
    and keys that strictly descend reversed in place, else the same columns as the int64
    decode; fails if a column is left unreversed or a span is cut."""
    if order != "as drawn":
        keys = sorted({e["key"] for e in entries}, reverse=order == "descending")
        entries = [dict(e, key=k, layout="canonical") for e, k in zip(entries, keys)]
    raw = plane_bytes(entries, merged_value=False)
    _, planes, _ = wire.parse_space(wire.padded(raw), len(raw))
    pv = planes[0]
    ms, me = (np.ascontiguousarray(a, np.int64) for a in pv.meta_pos)
    wide = wire._scan.decode_meta(pv.buf, ms, me)
    narrow = wire._scan.decode_meta(pv.buf, ms, me, narrow=True)
    assert narrow["ok"] == wide["ok"]
    if not wide["ok"]:
        return
    key = wide["key"]
    down = len(key) > 1 and bool((key[1:] < key[:-1]).all())
    assert narrow["reversed"] == down and not wide["reversed"]
    assert (order == "descending" and len(key) > 1) <= down
    flip = (lambda a: a[..., ::-1]) if down else (lambda a: a)
    assert narrow["key"].tolist() == flip(key).tolist()
    for c in ("name", "disp", "value"):
        assert narrow[c].dtype == np.int32 and wide[c].dtype == np.int64
        assert narrow[c].tolist() == flip(wide[c]).tolist(), c


@settings(max_examples=120, deadline=None)
@given(st.lists(entry, max_size=12))
def test_checked_decode_equals_the_checking_one(entries):
    """A stripped plane's entries were checked by `split_space` (each stat by `_stat`), and
    `MetaTable` then decodes them with `checked=True`, stepping over the stats: the same
    columns and `ok` as the decode that checks every stat; fails if skipping a stat by its
    length reads a key or a name span differently."""
    raw = plane_bytes(entries, merged_value=False)
    _, planes, _ = wire.parse_space(wire.padded(raw), len(raw), strip_meta=lambda name: True)
    pv = planes[0]
    ms, me = (np.ascontiguousarray(a, np.int64) for a in pv.meta_pos)
    for narrow in (False, True):
        full = wire._scan.decode_meta(pv.buf, ms, me, narrow=narrow)
        fast = wire._scan.decode_meta(pv.buf, ms, me, narrow=narrow, checked=True)
        assert set(fast) == set(full)
        for c in full:
            assert np.asarray(fast[c]).tolist() == np.asarray(full[c]).tolist(), (narrow, c)


def test_a_malformed_stat_in_a_stripped_entry_is_refused_before_the_table():
    """What `checked=True` relies on: a stat upb would refuse (its length past the value's
    end) in an entry of a stripped plane stops `parse_space` itself, so no table ever steps
    over it unchecked; the same bytes unstripped are refused by upb."""
    bad_stat = field(5, 2, field(1, 0, 1) + b"\x12\x05ab")  # a string stat 5 long, 2 there
    body = field(1, 0, 7) + field(2, 2, field(2, 2, b"op") + bad_stat)
    raw = field(1, 2, field(1, 0, 0) + field(2, 2, b"/device:TPU:0") + field(4, 2, body))
    with pytest.raises(wire.Corrupt):
        wire.parse_space(wire.padded(raw), len(raw), strip_meta=lambda name: True)
    with pytest.raises(DecodeError):
        XSpace.FromString(raw)
