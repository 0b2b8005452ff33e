"""The compiled scanner (`overlap/trace/_scan.pyx`) against upb, the reference decoder.

upb (protobuf's parser) is what the reader falls back to where the extension was not built;
it is also the definition of what a file says. So: for any encoding upb accepts (fields out of
order, written twice, the `data` oneof switched back and forth, unknown fields of every wire
type including groups, fields of the wrong wire type, over-long varints, stats without a
value or id), the scanner's event and stat columns must equal those built from upb's
messages; on the fuzz corpus either both read the file to the same tables or the scanner
refuses it (one line); and on every test capture the two paths give the same tables.
"""

from __future__ import annotations

import logging
import random
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from google.protobuf.message import DecodeError
from hypothesis import given, settings
from hypothesis import strategies as st

from overlap.errors import InputError
from overlap.trace import wire
from overlap.trace.protos import XSpace
from overlap.trace.reader import part_frames, read_host_file, read_xspace
from overlap.trace.synthetic import SyntheticTrace
from tests.trace.wire_bytes import field, stat_value_bytes, stat_values

pytestmark = pytest.mark.skipif(wire._scan is None, reason="the scanner was not built")

REPO = Path(__file__).resolve().parents[2]
SHARED = Path("/work/shared/captures")
US = 1_000_000


value = stat_values(8, [1, 2, 3, 99])
stat = st.tuples(st.sampled_from([0, 1, 2, 3, 42]), value,
                 st.sampled_from(["canonical", "value first", "id twice", "no id",
                                  "two values", "unknown", "long varints"]))
UNKNOWN = [field(9, 0, 5), field(10, 5, b"abcd"), field(12, 1, b"12345678"),
           field(11, 3, field(1, 0, 3) + field(2, 2, b"xy") + field(7, 3, field(1, 0, 1))),
           field(1, 2, b"wrong wire type for an int field"), field(3, 1, b"\0" * 8)]
event = st.fixed_dictionaries({
    "mid": st.sampled_from([0, 1, 2, 3, 7, 1 << 40, -1]),
    "offset": st.one_of(st.integers(0, 10_000 * US), st.sampled_from([-5, 1 << 62])),
    "dur": st.one_of(st.integers(0, 500 * US), st.sampled_from([-1, (1 << 63) - 1])),
    "stats": st.lists(stat, max_size=4),
    "layout": st.sampled_from(["canonical", "reversed", "mid twice", "aggregated",
                               "aggregated then offset", "unknown", "long varints",
                               "no offset"]),
    "unknown": st.sampled_from(range(len(UNKNOWN))),
})


def stat_bytes(sid: int, val, how: str) -> bytes:
    pad = 3 if how == "long varints" else 0
    v = stat_value_bytes(val, pad)
    i = field(1, 0, sid, pad) if sid else b""
    if how == "value first":
        return v + i
    if how == "id twice":
        return field(1, 0, 3) + v + i
    if how == "no id":
        return v
    if how == "two values":  # the oneof: the last value written wins
        return i + field(4, 0, 17) + v
    if how == "unknown":
        return i + UNKNOWN[3] + v + UNKNOWN[0]
    return i + v


def event_bytes(e: dict) -> bytes:
    pad = 2 if e["layout"] == "long varints" else 0
    head = [field(1, 0, e["mid"], pad)]
    if e["layout"] != "no offset":
        head.append(field(2, 0, e["offset"], pad))
    head.append(field(3, 0, e["dur"], pad))
    stats = [field(4, 2, stat_bytes(*s)) for s in e["stats"]]
    lay = e["layout"]
    if lay == "reversed":
        parts = stats[::-1] + head[::-1]  # stats' own order flips too: the first still wins
    elif lay == "mid twice":
        parts = [field(1, 0, 12345)] + stats + head
    elif lay == "aggregated":
        parts = head + [field(5, 0, 3)] + stats
    elif lay == "aggregated then offset":
        parts = [field(5, 0, 3)] + head + stats
    elif lay == "unknown":
        parts = head[:1] + [UNKNOWN[e["unknown"]]] + head[1:] + stats
    else:
        parts = head + stats
    return b"".join(parts)


STAT_NAMES = {1: "hlo_op", 2: "memcpy_details", 3: "hlo_op", 42: "other"}
GROUPS = [[1, 3], [2], [42]]  # the ids of each stat name, as the GPU rules ask for them
SIDS = ([1], [2], [3], [42], [0], [1, 3], [99], [0, 1, 2, 3, 42], [1, 2, 3, 42, 99, 7])
STRIDE = wire.GROUP_STRIDE
# two planes read as one PlaneGroup: keys `plane * STRIDE + id`
NAMES2 = {p * STRIDE + k: v for p in (0, 1) for k, v in STAT_NAMES.items()}
GROUPS2 = [[p * STRIDE + k for p in (0, 1) for k in g] for g in GROUPS]
SIDS2 = tuple([p * STRIDE + k for p in (0, 1) for k in s] for s in SIDS) + ([STRIDE + 1],)


def space_bytes(lines: list[list[dict]], interleave: bool) -> bytes:
    """One GPU plane with these lines; metadata 1 and 2 named, stat ids as STAT_NAMES."""
    parts = [field(1, 0, 0), field(2, 2, b"/device:GPU:0")]
    for k, evs in enumerate(lines):
        body = [field(4, 2, event_bytes(e)) for e in evs]
        hdr = [field(1, 0, k + 1), field(2, 2, f"stream {k}".encode()), field(3, 0, 1000)]
        if interleave and body:  # header fields between and after the events
            body = body[:1] + hdr[1:] + body[1:] + hdr[:1] + [field(9, 0, 5), UNKNOWN[3]]
        else:
            body = hdr + body
        parts.append(field(3, 2, b"".join(body)))
    for k, name in ((1, b"MemcpyD2H"), (2, b"kernel")):
        parts.append(field(4, 2, field(1, 0, k) + field(2, 2, field(1, 0, k)
                                                       + field(2, 2, name))))
    for k, stat in STAT_NAMES.items():
        parts.append(field(5, 2, field(1, 0, k) + field(2, 2, field(1, 0, k)
                                                       + field(2, 2, stat.encode()))))
    return field(1, 2, b"".join(parts))


def _lines(raw: bytes, scanner) -> list:
    old = wire.SCANNER
    wire.SCANNER = scanner
    try:
        _, planes, _ = wire.parse_space(wire.padded(raw), len(raw))
    finally:
        wire.SCANNER = old
    return planes[0].lines


def _events(raw: bytes, scanner) -> list[wire.LineEvents]:
    return [wire.LineEvents(ln, 7) for ln in _lines(raw, scanner)]


def _segment(raw: bytes, scanner, planes: int = 1, groups=None) -> wire.LineEvents:
    """All lines as one `merge_lines` segment, events alternating between `planes` planes."""
    seg = wire.merge_lines(_lines(raw, scanner))
    n = seg.n_events
    return wire.LineEvents(seg, np.zeros(n, np.int64), plane_of=np.arange(n) % planes,
                           wanted=None if groups is None else (), groups=groups)


def same_values(a: np.ndarray, b: np.ndarray) -> None:
    assert len(a) == len(b)
    for x, y in zip(a.tolist(), b.tolist()):
        assert type(x) is type(y) and (x == y or (x != x and y != y)), (x, y)


def check_line(fast: wire.LineEvents, slow: wire.LineEvents, names=STAT_NAMES,
               sid_sets=SIDS) -> None:
    assert fast.n == slow.n
    for k in ("mids", "starts", "durs"):
        assert getattr(fast, k).tolist() == getattr(slow, k).tolist(), k
    assert fast.all_positioned == slow.all_positioned
    for sids in sid_sets:
        se, sv = slow.first_stat(sids, names)
        # some events, out of order, asked before anything else of `fast` (its lookup by
        # search, where the values come from records; `first_stat` below reuses them)
        idx = np.arange(fast.n, dtype=np.int64)[::-2]
        c, v = fast.codes_at(sids, names, idx)
        of = dict(zip(se.tolist(), range(len(se))))
        assert (c >= 0).tolist() == [i in of for i in idx.tolist()]
        same_values(v[c[c >= 0]], sv[[of[i] for i in idx[c >= 0].tolist()]])
        assert fast.has_stat(sids).tolist() == slow.has_stat(sids).tolist()
        # an event has one of the stats exactly where it has a first of them (`has_stat`
        # compares a few ids one by one, more by `np.isin`: round 40)
        has = np.zeros(fast.n, bool)
        has[se] = True
        assert fast.has_stat(sids).tolist() == has.tolist()
        fe, fv = fast.first_stat(sids, names)
        assert fe.tolist() == se.tolist()
        same_values(fv, sv)


def _raw_values(ev: wire.LineEvents, sids) -> list[tuple]:
    """The scanner's distinct values of a group as written (refs before they become names)."""
    t = ev._groups[frozenset(sids)][1]
    buf = ev.buf.tobytes()
    return [(k, buf[p:p + n] if k in (5, 6) else n)
            for k, n, p in zip(t["kind"].tolist(), t["ival"].tolist(), t["vpos"].tolist())]


def check_groups(fast: wire.LineEvents, upb: wire.LineEvents, slow: wire.LineEvents,
                 groups=GROUPS, names=STAT_NAMES) -> None:
    """`fast` (the scanner) and `upb` decoded with `groups`: per group the same codes and
    values on both decoders, each distinct value once, and the values the codes pick are
    each event's first stat of the group as `slow`'s records say."""
    for sids in groups:
        codes, vals = fast.first_codes(sids, names)
        u_codes, u_vals = upb.first_codes(sids, names)
        assert codes.tolist() == u_codes.tolist()
        same_values(vals, u_vals)
        if fast.n:  # each distinct value once
            assert len(set(_raw_values(fast, sids))) == len(vals)
        se, sv = slow.first_stat(sids, names)
        assert np.flatnonzero(codes >= 0).tolist() == se.tolist()
        same_values(vals[codes[codes >= 0]], sv)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(event, max_size=8), min_size=1, max_size=3), st.booleans())
def test_scanner_equals_upb_for_any_encoding(lines, interleave):
    raw = space_bytes(lines, interleave)
    XSpace.FromString(raw)  # upb accepts every file written here
    before = wire.INVALID_EVENTS[0]
    fast = _events(raw, wire._scan)
    dropped_fast = wire.INVALID_EVENTS[0] - before
    slow = _events(raw, None)
    assert wire.INVALID_EVENTS[0] - before == 2 * dropped_fast
    for f, s in zip(fast, slow):
        check_line(f, s)
    # keeping only some stats: questions about the others are still answered exactly
    for wanted in ([], [1], [2, 42], [1, 3]):
        for line, s in zip(_lines(raw, wire._scan), slow):
            check_line(wire.LineEvents(line, 7, wanted=wanted), s)
    # merged segments of several lines (a PlaneGroup read) agree too
    check_line(*[_segment(raw, scanner) for scanner in (wire._scan, None)])
    # each event's first stat per group of ids, interned while decoding, on both decoders
    for line, uline, s in zip(_lines(raw, wire._scan), _lines(raw, None), slow):
        f = wire.LineEvents(line, 7, wanted=(), groups=GROUPS)
        u = wire.LineEvents(uline, 7, wanted=(), groups=GROUPS)
        check_line(f, s)
        check_line(u, s)
        check_groups(f, u, s)
    # records of some ids of a two-plane segment (keys past the scanner's lookup tables:
    # searched), and events whose metadata is skipped keep no stats (ids small and large)
    seg = [wire.LineEvents(wire.merge_lines(_lines(raw, scanner)), 0,
                           plane_of=np.arange(sum(len(x) for x in lines)) % 2,
                           wanted=[2, STRIDE + 1, STRIDE + 3]) for scanner in (wire._scan, None)]
    check_line(*seg, NAMES2, SIDS2)
    for skip in ([1], [1 << 40, 7], [-1, 3]):
        check_line(*[wire.LineEvents(ln, 7, skip_mids=skip, wanted=(), groups=GROUPS)
                     for ln in (_lines(raw, wire._scan)[0], _lines(raw, None)[0])])
    # sets only tested for (presence): nothing interned, values still exact (from records)
    for scanner in (wire._scan, None):
        for line, s in zip(_lines(raw, scanner), slow):
            check_line(wire.LineEvents(line, 7, wanted=(), groups=GROUPS[:1],
                                       presence=GROUPS[1:]), s)
    # and in a segment of two planes' events: keys and refs are each event's plane's
    f2, u2 = [_segment(raw, scanner, 2, GROUPS2) for scanner in (wire._scan, None)]
    s2 = _segment(raw, None, 2)
    check_line(f2, s2, NAMES2, SIDS2)
    check_groups(f2, u2, s2, GROUPS2, NAMES2)
    # and the reader's tables
    tables_equal(lambda: read_xspace(XSpace.FromString(raw), host="h"))
    # typed ints of some events' stats (the TPU device clock): the scanner decodes only those
    # events again, stepping over the others; upb's records answer the same
    for mids in ([1], [0, 7], [2, 3, 1 << 40], [-1, 1, 2, 3, 7]):
        for line, uline in zip(_lines(raw, wire._scan), _lines(raw, None)):
            f, u = (wire.LineEvents(ln, 7, wanted=()) for ln in (line, uline))
            for (fv, fh), (uv, uh) in zip(f.ints_of([[1, 3], [2], [42]], mids),
                                          u.ints_of([[1, 3], [2], [42]], mids)):
                assert fh.tolist() == uh.tolist()
                assert fv[fh].tolist() == uv[uh].tolist()
            # some of those events by index: values there only, on both decoders
            at = np.flatnonzero(np.isin(f.mids, mids))[::2]
            for (fv, fh), (uv, uh) in zip(f.ints_of([[1, 3], [2]], mids, at=at),
                                          u.ints_of([[1, 3], [2]], mids, at=at)):
                assert fh.tolist() == uh.tolist()
                assert not fh[np.setdiff1d(np.arange(f.n), at)].any()
                assert fv[fh].tolist() == uv[uh].tolist()
                # `at_only`: the same, those events' only, on both decoders
                for ev in (f, u):
                    for (av, ah), (full_v, full_h) in zip(
                            ev.ints_of([[1, 3], [2]], mids, at=at, at_only=True),
                            ev.ints_of([[1, 3], [2]], mids, at=at)):
                        assert ah.tolist() == full_h[at].tolist()
                        assert av[ah].tolist() == full_v[at][full_h[at]].tolist()


def test_interned_values_are_equal_by_kind_and_content():
    """Strings written at different places are one value; a str and bytes of the same bytes,
    0.0 and -0.0, a uint64 and an int64 5 are not; no value is a value (None)."""
    vals = [(5, "ab"), (5, "ab"), (6, b"ab"), (2, 0.0), (2, -0.0), (3, 5), (4, 5), None,
            (5, "ab"), (7, 1), (7, 3)]
    evs = [{"mid": 1, "offset": i, "dur": 1, "stats": [(42, (4, i), "canonical"),
                                                       (2, v, "canonical"),
                                                       (2, (5, "later"), "canonical")],
            "layout": "canonical", "unknown": 0} for i, v in enumerate(vals)]
    raw = space_bytes([evs], False)
    for scanner in (wire._scan, None):
        ev = wire.LineEvents(_lines(raw, scanner)[0], 0, wanted=(), groups=GROUPS)
        codes, got = ev.first_codes([2], STAT_NAMES)
        assert codes.tolist() == [0, 0, 1, 2, 3, 4, 5, 6, 0, 7, 8]
        same_values(got, wire.object_array(["ab", b"ab", 0.0, -0.0, 5, 5, None,
                                            "hlo_op", "hlo_op"]))
        assert ev.has_stat([2]).all() and ev.has_stat([42, 2]).all()
        assert wire.map_stat(wire.Plane(XSpace.FromString(raw).planes[0]), ev,
                             np.arange(ev.n), "memcpy_details", type).tolist() == [
            str, str, bytes, float, float, int, int, type(None), str, str, str]


@pytest.mark.parametrize("tag_cap", [None, 32, 0])
@pytest.mark.parametrize("n_values", [127, 128, 129, 300, 40_000])
def test_many_distinct_values_in_a_group(n_values, tag_cap, monkeypatch):
    """A group with more distinct values than int8 codes hold (the scanner writes int8 codes
    until a code passes 127, then widens the rows written so far): the same codes and values
    as upb's, on every event, before and after the widening; with the interning table's
    slots tagged by hash throughout, untagged past 32 values, or never tagged
    (`_scan.TAGGED_CAP`)."""
    if tag_cap is not None:
        monkeypatch.setattr(wire._scan, "TAGGED_CAP", tag_cap)
    evs = [{"mid": 1 + i % 2, "offset": i, "dur": 1,
            "stats": [(42, (3, i % 5), "canonical"), (2, (3, i % n_values), "canonical")]
            + ([(1, (5, f"op{i % 7}"), "canonical")] if i % 3 else []),
            "layout": "canonical", "unknown": 0} for i in range(n_values + 50)]
    raw = space_bytes([evs], False)
    fast, upb = (wire.LineEvents(_lines(raw, sc)[0], 0, wanted=(), groups=GROUPS)
                 for sc in (wire._scan, None))
    check_groups(fast, upb, _events(raw, None)[0])
    codes, vals = fast.first_codes([2], STAT_NAMES)
    assert len(vals) == n_values and codes.max() == n_values - 1


def _invalid_counts() -> tuple[int, ...]:
    return (wire.INVALID_EVENTS[0], *wire.INVALID_REASONS.values())


def _read_counted(line, *args, **kw) -> tuple[wire.LineEvents, tuple[int, ...]]:
    """A `LineEvents` and the impossible times it counted (total, then by reason)."""
    before = _invalid_counts()
    ev = wire.LineEvents(line, *args, **kw)
    return ev, tuple(a - b for a, b in zip(_invalid_counts(), before))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(event, max_size=8), min_size=1, max_size=3),
       st.sampled_from([[1], [1 << 40, 7], [-1, 3], [0, 2, 3], [0, 1, 2, 3, 7, 1 << 40, -1]]),
       st.booleans())
def test_skipped_events_keep_no_rows(lines, skip, grouped):
    """`skip_mids`: the events of those metadata ids keep no row on either decoder; every
    other event's row, stats, typed ints and per-event values are the read without `skip`'s,
    renumbered; the skipped events' impossible times are counted as before (by reason)."""
    _some_events_keep_no_rows(lines, grouped, dict(skip_mids=skip),
                              lambda full: ~np.isin(full.mids, skip))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(event, max_size=8), min_size=1, max_size=3),
       st.sampled_from([[1], [1, 2, 3], [0, 2, 7, 1 << 40], [-1, 3]]),
       st.sampled_from([[], [1], [2, 42], [3, 1 << 40], [-1, 1, 2, 3, 42]]),
       st.sampled_from([None, [2], [1 << 40, 7]]), st.booleans())
def test_events_kept_only_with_a_stat_keep_no_rows_without(lines, cond, need, skip, grouped):
    """`keep_if=(mids, sids)`: an event of those metadata ids keeps a row only where it
    carries a stat of those ids (with or without `skip_mids`), on either decoder; the others
    are as the read without it, renumbered, and every impossible time is still counted."""
    def keep(full):
        k = ~(np.isin(full.mids, cond) & ~full.has_stat(need))
        return k & ~np.isin(full.mids, skip) if skip else k

    _some_events_keep_no_rows(lines, grouped, dict(skip_mids=skip, keep_if=(cond, need)),
                              keep)


def _some_events_keep_no_rows(lines, grouped, kw, keep_of) -> None:
    raw = space_bytes(lines, False)
    groups = dict(wanted=(), groups=GROUPS) if grouped else {}
    n = [len(x) for x in lines]
    skip = kw.get("skip_mids") or []
    for scanner in (wire._scan, None):
        segs = [_lines(raw, scanner)[0], wire.merge_lines(_lines(raw, scanner))]
        for line, base in zip(segs, (7, np.repeat(np.arange(len(n), dtype=np.int64) * 5, n))):
            full, counted = _read_counted(line, base)
            part, counted_skip = _read_counted(line, base, **kw, **groups)
            assert counted_skip == counted
            keep = keep_of(full)
            rows = np.cumsum(keep) - 1  # a kept event's row in `part`
            assert part.n == int(keep.sum())
            for k in ("mids", "starts", "durs"):
                assert getattr(part, k).tolist() == getattr(full, k)[keep].tolist(), k
            events = np.arange(line.n_events)  # per event of the line, its index
            assert part.kept(events).tolist() == full.kept(events)[keep].tolist()
            for sids in SIDS:
                fe, fv = full.first_stat(sids, STAT_NAMES)
                pe, pv = part.first_stat(sids, STAT_NAMES)
                assert pe.tolist() == rows[fe[keep[fe]]].tolist()
                same_values(pv, fv[keep[fe]])
                assert part.has_stat(sids).tolist() == full.has_stat(sids)[keep].tolist()
            asked = [m for m in (1, 2, 3, 0) if m not in skip]
            if not asked or line is segs[1]:
                continue
            at = np.flatnonzero(np.isin(part.mids, asked))[::2]
            for kwa in ({}, {"at": at}):
                fk = {} if not kwa else {"at": np.flatnonzero(keep)[at]}
                for (pv2, ph), (fv2, fh) in zip(part.ints_of([[1, 3], [2]], asked, **kwa),
                                                full.ints_of([[1, 3], [2]], asked, **fk)):
                    assert ph.tolist() == fh[keep].tolist()
                    assert pv2[ph].tolist() == fv2[keep][fh[keep]].tolist()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, (1 << 64) - 1), max_size=10), st.integers(0, 8))
def test_long_and_large_varints(values, pad):
    """Metadata ids, offsets and stat values of every size, canonical and over-long."""
    evs = [{"mid": v & ((1 << 63) - 1), "offset": v % (1 << 50), "dur": v % 997,
            "stats": [(1, (3, v), "long varints"), (2, (4, v - (1 << 63)), "canonical")],
            "layout": "long varints" if pad else "canonical", "unknown": 0} for v in values]
    raw = space_bytes([evs], False)
    for f, s in zip(_events(raw, wire._scan), _events(raw, None)):
        check_line(f, s)


def tables_equal(read) -> dict | None:
    """`read()` with the scanner and with upb: the same tables and facts, or both refuse.
    Returns the scanner's result."""
    old = wire.SCANNER
    try:
        wire.SCANNER = wire._scan
        try:
            a = read()
        except InputError:
            a = None
        wire.SCANNER = None
        try:
            b = read()
        except InputError:
            b = None
    finally:
        wire.SCANNER = old
    if b is None:  # upb refuses: the scanner may read what it does not decode (its blind spot)
        return a
    assert a is not None, "the scanner refused a file upb reads"
    a, b = part_frames(a), part_frames(b)
    for k in ("transfers", "compute", "steps", "memory", "modules", "devices", "lines"):
        pd.testing.assert_frame_equal(a[k], b[k], check_exact=True)
    assert a["capture"] == b["capture"]
    return a


# stats the reader's rules read (gpu.py, host.py, vendors.py)
RULE_STATS = {"kernel_details", "memcpy_details", "hlo_op", "hlo_module", "program_id",
              "correlation_id", "_r", "step_num", "device_ordinal", "bytes_allocated"}


def groups_agree(raw: bytes) -> bool:
    """Every line of every plane decoded by the scanner with one group of ids per stat name
    of its plane (as the GPU rules read them; every other one presence only), against upb's
    records: the same first stat per name and event, and `stat_column`/`map_stat` against a
    per-event reading of upb's messages. False where upb refuses the file."""
    try:
        XSpace.FromString(raw)
    except DecodeError:
        return False
    fast = _planes(raw, wire._scan)
    slow = _planes(raw, None)
    for fp, sp in zip(fast, slow):
        P = wire.Plane(sp)
        groups = [P.stat_ids[n] for n in sorted(P.stat_ids)]
        rules = [P.stat_ids[n] for n in sorted(set(P.stat_ids) & RULE_STATS)]
        for fl, sl in zip(fp.lines, sp.lines):
            # every other name only tested for (presence), as kernel_details on GPU lines
            f = wire.LineEvents(fl, 0, wanted=(), groups=groups[::2], presence=groups[1::2])
            s = wire.LineEvents(sl, 0)
            check_line(f, s, P.stat_names, rules + groups[:20])
            idx = np.arange(f.n)
            # the event's first stat of a name, else its metadata's, one event at a time
            firsts = [P.stats(e.stats) for e in sl.events]
            for name in sorted(set(P.stat_ids) & RULE_STATS):
                want = f.kept(wire.object_array([
                    d[name] if name in d else P.meta_stats(e.metadata_id).get(name)
                    for d, e in zip(firsts, sl.events)]))
                same_values(wire.stat_column(P, f, idx, name), want)
                same_values(wire.map_stat(P, f, idx, name, repr),
                            wire.object_array([repr(v) for v in want.tolist()]))
    return True


def _planes(raw: bytes, scanner) -> list:
    old = wire.SCANNER
    wire.SCANNER = scanner
    try:
        return wire.parse_space(wire.padded(raw), len(raw))[1]
    finally:
        wire.SCANNER = old


def test_scanner_equals_upb_on_the_fuzz_corpus(tmp_path):
    """The fuzz mutator's cases (tests/trace/test_fuzz.py): wherever upb reads the file, the
    scanner reads it to the same tables."""
    from tests.trace.test_fuzz import _bases, mutate

    rng = random.Random(20261123)
    bases = _bases()
    path = tmp_path / "case.xplane.pb"
    read = grouped = 0
    for case in range(150):
        name, base = bases[case % len(bases)]
        raw = mutate(base, rng)
        path.write_bytes(raw)
        if tables_equal(lambda: read_host_file(path)) is not None:
            read += 1
        grouped += groups_agree(raw)
    assert read > 30 and grouped > 30


def _captures() -> list[Path]:
    out = sorted((REPO / "sample_traces").rglob("*.xplane.pb"))
    if SHARED.is_dir():
        out += sorted(SHARED.rglob("*.xplane.pb"))
    return out


@pytest.mark.parametrize("path", _captures(), ids=lambda p: p.parent.name + "/" + p.name)
def test_fallback_equals_scanner_on_real_captures(path):
    assert tables_equal(lambda: read_host_file(path)) is not None
    assert groups_agree(path.read_bytes())


def _synthetic() -> dict[str, bytes]:
    out = {}
    t = SyntheticTrace()
    for dev in (0, 1):
        g = t.gpu(dev)
        for i in range(20):
            g.kernel((10 + 40 * i) * US, 30 * US, stream=7, name=f"k{i % 3}")
            g.memcpy("D2H" if i % 2 else "H2D", (15 + 40 * i) * US, 20 * US, 1 << 20,
                     stream=13, hlo_op=f"copy-start.{i}")
    for s in range(3):
        t.step(s, (5 + 80 * s) * US, (85 + 80 * s) * US)
    t.allocation(12 * US, bytes_allocated=4096)
    t.python_noise(3 * US, 2 * US)
    out["gpu"] = t.to_bytes()
    for async_line in (True, False):
        t = SyntheticTrace()
        tpu = t.tpu(0, async_line=async_line)
        for i in range(10):
            tpu.op((10 + 50 * i) * US, 40 * US, name=f"fusion.{i}")
            tpu.async_copy("D2H" if i % 2 else "H2D", (12 + 50 * i) * US, (48 + 50 * i) * US)
            tpu.async_slice("H2D" if i % 2 else "D2H", (13 + 50 * i) * US, (47 + 50 * i) * US)
        t.step(0, 5 * US, 600 * US)
        out[f"tpu async_line={async_line}"] = t.to_bytes()
    # many small GPU planes: read as merged segments against a PlaneGroup
    t = SyntheticTrace()
    for dev in range(40):
        g = t.gpu(dev)
        g.kernel(10 * US, 5 * US)
        g.memcpy("D2H", 12 * US, 3 * US, 4096)
    out["gpu 40 planes"] = t.to_bytes()
    return out


@pytest.mark.parametrize("name", list(_synthetic()))
def test_fallback_equals_scanner_on_synthetic_captures(name, tmp_path):
    raw = _synthetic()[name]
    for label, data in (("ours", raw), ("upb-written", XSpace.FromString(raw)
                                        .SerializeToString())):
        p = tmp_path / f"{label}.xplane.pb"
        p.write_bytes(data)
        got = tables_equal(lambda p=p: read_host_file(p))
        assert got is not None and (len(got["transfers"]) or len(got["compute"]))


def test_bulk_captures_equal_on_both_paths(tmp_path):
    """The benchmark writer's files (another event layout, constant stat blocks)."""
    from overlap.trace import synthetic_bulk

    for write in (synthetic_bulk.write_gpu, synthetic_bulk.write_tpu):
        p = tmp_path / f"{write.__name__}.xplane.pb"
        write(p, 2_000)
        got = tables_equal(lambda p=p: read_host_file(p))
        assert got is not None and len(got["transfers"]) > 0


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 1 << 30), st.integers(0, 5000), st.integers(1, 20000),
       st.sampled_from([0, -(1 << 40), 1 << 50]))
def test_unique_inverse_equals_np_unique(seed, n, span, shift):
    a = np.random.default_rng(seed).integers(0, span, n) + shift
    u, inv = wire.unique_inverse(a)
    eu, einv = np.unique(a, return_inverse=True)
    assert u.dtype == a.dtype and u.tolist() == eu.tolist() and inv.tolist() == einv.tolist()


def test_the_fallback_says_so_once(monkeypatch, caplog, tmp_path):
    p = tmp_path / "g.xplane.pb"
    p.write_bytes(_synthetic()["gpu"])
    monkeypatch.setattr(wire, "_scan", None)
    monkeypatch.setattr(wire, "SCANNER", None)
    monkeypatch.setattr(wire, "_WARNED", [False])
    with caplog.at_level(logging.WARNING, logger="overlap"):
        read_host_file(p)
        read_host_file(p)
    said = [r for r in caplog.records if "scanner" in r.getMessage()]
    assert len(said) == 1 and "\n" not in said[0].getMessage()


@pytest.mark.parametrize("scanner", ["1", "0"])
def test_damaged_file_is_one_line_exit_3_on_both_paths(tmp_path, scanner):
    from tests.conftest import run_cli

    raw = _synthetic()["gpu"]
    p = tmp_path / "h.xplane.pb"
    p.write_bytes(raw[: len(raw) * 2 // 3])
    r = run_cli("report", str(p), env={"OVERLAP_SCANNER": scanner})
    assert r.returncode == 3, r.stderr
    lines = [x for x in r.stderr.strip().splitlines() if "scanner" not in x]
    assert len(lines) == 1 and str(p) in lines[0]


CORRUPT = SHARED / "tpu_v6e_corrupt_upstream.xplane.pb.bin"


@pytest.mark.skipif(not CORRUPT.exists(), reason="the shared corrupt capture is not here")
def test_a_real_corrupt_capture_is_refused_on_both_paths(tmp_path):
    """The upstream capture damaged by a text round-trip (SOURCES.md): refused with one line
    naming the file by the scanner and by the upb fallback alike."""
    p = tmp_path / "h.xplane.pb"
    p.write_bytes(CORRUPT.read_bytes())
    old = wire.SCANNER
    try:
        for scanner in (wire._scan, None):
            wire.SCANNER = scanner
            with pytest.raises(InputError) as e:
                read_host_file(p)
            assert str(p) in str(e.value) and "\n" not in str(e.value)
    finally:
        wire.SCANNER = old


def test_id_table_base_bounds():
    """The one "small id range" rule every id table uses (`values.id_table_base`): a table
    up to 2n + 65536 wide, at 0 where the ids are non-negative and fit it; fails if a bound
    moves by one."""
    from overlap.trace.values import id_table_base

    n = 1000
    w = 2 * n + (1 << 16)
    assert id_table_base(n, 0, w) == 0
    assert id_table_base(n, 5, w) == 0
    assert id_table_base(n, 0, w + 1) is None
    assert id_table_base(n, 5, w + 1) == 5  # (as wide as allowed, not from 0)
    assert id_table_base(n, -1, w - 1) == -1
    assert id_table_base(n, -1, w) is None


_NUMBER = st.sampled_from([3, 4, 7, 2])  # int64, uint64, ref, double (a value's kind)


@settings(max_examples=120, deadline=None)
@given(st.lists(st.one_of(
    # a run that only grows (refs to stat names in order: added without a lookup) ...
    st.tuples(st.just("up"), _NUMBER, st.integers(0, 50), st.integers(1, 120)),
    # ... values again, in any order, and strings among them
    st.tuples(st.just("any"), _NUMBER, st.lists(st.integers(0, 200), max_size=40),
              st.just(0)),
    st.tuples(st.just("text"), st.just(5), st.lists(st.integers(0, 5), max_size=8),
              st.just(0))), min_size=1, max_size=6))
def test_numbers_that_only_grow_are_coded_as_upb_reads_them(runs):
    """A group's numbers above every earlier one of their kind are added without a lookup
    (issue 32 round 24) and put in the table when one is needed: the codes and values are
    upb's, for growing runs of each number kind (past the table's growth), repeats of them
    after, lower ones, strings between, and kinds whose integers are equal."""
    for tag_cap in (1 << 23, 16):  # (slots tagged by hash; untagged past 16 values)
        wire._scan.TAGGED_CAP = tag_cap
        try:
            _numbers_coded_as_upb(runs)
        finally:
            wire._scan.TAGGED_CAP = 1 << 23


def _numbers_coded_as_upb(runs):
    vals: list = []
    for how, kind, a, b in runs:
        if how == "up":
            vals += [(kind, float(a + i) if kind == 2 else a + i) for i in range(b)]
        elif how == "any":
            vals += [(kind, float(x) if kind == 2 else x) for x in a]
        else:
            vals += [(5, f"s{x}") for x in a]
    evs = [{"mid": 1, "offset": i, "dur": 1, "stats": [(2, v, "canonical")],
            "layout": "canonical", "unknown": 0} for i, v in enumerate(vals)]
    raw = space_bytes([evs], False)
    fast, upb = (wire.LineEvents(_lines(raw, sc)[0], 0, wanted=(), groups=GROUPS)
                 for sc in (wire._scan, None))
    check_groups(fast, upb, _events(raw, None)[0])
    codes, got = fast.first_codes([2], STAT_NAMES)
    # (each distinct (kind, value) one code, numbered in order of first appearance)
    first: dict = {}
    want = [first.setdefault(v, len(first)) for v in vals]
    assert codes.tolist() == want and len(got) == len(first)
    if vals and not any(k == 5 for k, _ in vals):  # (no string: no position written, zeros)
        assert not fast._groups[frozenset([2])][1]["vpos"].any()
