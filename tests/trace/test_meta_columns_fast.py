"""`MetaTable.columns` and `MetaTable._rows` fast paths (issue 32, round 11) against the plain
rule, upb's map read one id at a time: one stat name asked (a copy op's program id, `ids`
converted by `as_id`), ids inside a run of consecutive keys (no search), each entry with one
record of that name (the values are the column) or with two (the first wins), ids asked in
order, out of order, twice, or outside the keys."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from overlap.trace import metatable, wire
from overlap.trace.values import as_id
from tests.trace.test_meta_table import both, entry, plane_bytes, upb_twin

# (the table is the scanner's: none without it, or under OVERLAP_SCANNER=0)
pytestmark = pytest.mark.skipif(wire.SCANNER is None, reason="the scanner is not used")

# one name per call, as the TPU copy rules ask (hlo_module: two stat ids share it)
ONE = (("program_id", ("program_id",)), ("hlo_module", ()), ("raw_bytes_accessed", ()),
       ("bytes_accessed", ("bytes_accessed",)))


def plain(P: wire.Plane, upb, mids: np.ndarray, name: str, ids: tuple) -> list:
    """The rule, one id at a time through upb: the first stat of that name, `as_id` of it
    for the names in `ids`, None where absent."""
    one = upb_twin(P, upb)
    out = []
    for m in mids.tolist():
        v = one.meta_some(m, (name,)).get(name)
        out.append(as_id(v) if name in ids else v)
    return out


def same(got: np.ndarray, want: list) -> None:
    assert got.dtype == object and len(got) == len(want)
    for g, w in zip(got.tolist(), want):
        assert type(g) is type(w) and (g == w or g != g), (g, w)


def dense(n: int, stats_of) -> list[dict]:
    """Entries with keys 1..n (a dense table, in order), stats given per key."""
    return [{"key": k, "name": f"copy-start.{k}", "display": "", "layout": "canonical",
             "stats": stats_of(k)} for k in range(1, n + 1)]


def asks(n: int) -> list[np.ndarray]:
    k = np.arange(1, n + 1, dtype=np.int64)
    return [k, k[3:n - 2], k[::-1].copy(), np.repeat(k[:5], 2), np.r_[k, n + 7, 0],
            k[::2].copy(), np.r_[k[:4], n + 1], np.r_[1, n]]


@pytest.mark.parametrize("strip", [False, True])
def test_one_record_per_entry_in_a_dense_table(strip):
    """A program id per entry (one value, or one per key), bytes as an int or a uint64 of
    2**63 (no id), the name asked or not: every way to ask equals the plain rule."""
    for stats_of in (lambda k: [(2, (3, 7), "canonical")],
                     lambda k: [(2, (3, k * 11), "canonical"), (6, (5, "x"), "canonical")],
                     lambda k: [(4, (3, 1 << 63), "canonical")] if k % 3 else [],
                     lambda k: [(6, (5, "other"), "canonical")]):
        P, xs = both(plane_bytes(dense(40, stats_of), merged_value=False), strip)
        t = P.table()
        assert t is not None and t._dense
        for mids in asks(40):
            for name, ids in ONE:
                got = P.meta_columns(mids, (name,), ids=ids)[name]
                same(got, plain(P, xs.planes[0].event_metadata, mids, name, ids))
            two = P.meta_columns(mids, ("hlo_module", "program_id"), ids=("program_id",))
            for name in ("hlo_module", "program_id"):
                same(two[name], plain(P, xs.planes[0].event_metadata, mids, name,
                                      ("program_id",)))


def test_two_records_of_the_name_take_the_first():
    """hlo_module written twice (stat ids 1 and 5 share the name; and id 1 twice): the
    first record of each entry wins, as upb's reading."""
    def stats_of(k):
        if k % 2:
            return [(5, (5, f"first{k}"), "canonical"), (1, (5, "second"), "canonical")]
        return [(1, (5, f"a{k}"), "canonical"), (1, (5, "b"), "canonical")]
    P, xs = both(plane_bytes(dense(12, stats_of), merged_value=False))
    for mids in asks(12):
        same(P.meta_columns(mids, ("hlo_module",))["hlo_module"],
             plain(P, xs.planes[0].event_metadata, mids, "hlo_module", ()))


def test_rows_inside_a_dense_run_are_the_ids_minus_the_first_key():
    P, _ = both(plane_bytes(dense(20, lambda k: []), merged_value=False))
    t = P.table()
    for mids in asks(20) + [np.array([-3, 1, 20, 21], np.int64), np.zeros(0, np.int64)]:
        rows, ent = t._rows(mids)
        inside = (mids >= 1) & (mids <= 20)
        assert rows.tolist() == np.flatnonzero(inside).tolist()
        assert ent.tolist() == (mids[inside] - 1).tolist()


@settings(max_examples=120, deadline=None)
@given(st.lists(entry, max_size=12), st.lists(st.integers(-5, 45), max_size=20),
       st.booleans())
def test_one_name_equals_upb_for_any_encoding(entries, extra, strip):
    P, xs = both(plane_bytes(entries, merged_value=False), strip)
    upb = xs.planes[0].event_metadata
    for mids in (np.array(sorted(upb.keys()), np.int64),
                 np.array(sorted(upb.keys()) + extra, np.int64)):
        for name, ids in ONE:
            same(P.meta_columns(mids, (name,), ids=ids)[name], plain(P, upb, mids, name, ids))


def test_ascending_is_the_arange_test():
    for a in ([], [0], [0, 1, 2], [1], [0, 2], [0, 0, 2], [0, 2, 1, 2], [1, 0]):
        arr = np.array(a, np.int64)
        assert metatable._ascending(arr) == (arr == np.arange(len(arr))).all()
