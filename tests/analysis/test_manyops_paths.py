"""The many-distinct-ops shortcuts of the analysis give the answers of the general paths.

Issue 32: on a capture where every copy is its own op (36k ops, no program at hand) the
analysis skips work whose answer it knows: `group_sums` stops numbering keys once one key
tells every row apart, `first_use` makes the per-copy numbers of the few `top_exposed` records
only, and `grouping.pair_codes` numbers (module, program id) pairs without a step per copy.
Each is checked here against the general path on inputs built to hit both (SYNTHETIC tables
and a SYNTHETIC capture beside a hand-written HLO module)."""

from __future__ import annotations

import copy
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from overlap.analysis import first_use as F
from overlap.analysis.grouping import codes_equal, equal_to, group_sums, key_codes, pair_codes
from overlap.analysis.names import programs_of
from overlap.analysis.overlap import analyze, transfer_columns
from overlap.trace import read_trace
from overlap.trace.synthetic import SyntheticTrace

US = 1_000_000
T0 = 5000 * US


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 60), st.booleans(), st.booleans(), st.randoms(use_true_random=False))
def test_group_sums_where_one_key_tells_rows_apart_equal_pandas(n, with_none, sort, rnd):
    """Op names all distinct (one of them missing, or not), hosts, devices and directions
    few: `group_sums` (which stops at the distinct key when unsorted) equals pandas'
    `groupby(by, sort, dropna=False).sum()`, in either key order."""
    import pandas as pd

    ops: list[object] = [f"copy-start.{i}" for i in rnd.sample(range(10 * n), n)]
    if with_none:
        ops[rnd.randrange(n)] = None
    t = {"host": np.array([rnd.choice(["h0", "h1"]) for _ in range(n)], object),
         "device": np.array([rnd.choice(["TPU:0", "TPU:1"]) for _ in range(n)], object),
         "direction": np.array([rnd.choice(["D2H", "H2D", None]) for _ in range(n)], object),
         "hlo_op": np.array(ops, object)}
    v = np.array([rnd.randrange(2**40) for _ in range(n)], np.int64)
    df = pd.DataFrame({k: pd.Series(c, dtype=object) for k, c in t.items()})
    df["v"] = v
    for by in (["host", "device", "direction", "hlo_op"], ["hlo_op", "direction"],
               ["direction", "host"]):
        got = group_sums(t, by, {"v": v}, sort=sort)
        want = df.groupby(by, sort=sort, dropna=False)["v"].sum().reset_index()
        for c in (*by, "v"):
            assert [None if pd.isna(x) else x for x in got[c].tolist()] == \
                [None if pd.isna(x) else x for x in want[c].tolist()], (by, c)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["D2H", "H2D", None]), st.sampled_from(["h0", "h1"])),
                min_size=1, max_size=60),
       st.integers(-2**62, 2**62), st.booleans())
def test_group_sums_of_one_value_and_zero_columns_equal_row_sums(rows, value, sort):
    """A column of one value (`arrays.repeated`) sums to each group's size times it and a
    column of zeros to zeros, without adding its rows: the same int64 sums (wrapping alike)
    as adding every row, per group of few keys."""
    from overlap.arrays import repeated

    n = len(rows)
    t = {"direction": np.array([r[0] for r in rows], object),
         "host": np.array([r[1] for r in rows], object)}
    cols = {"one": repeated(n, value, np.int64), "zero": np.zeros(n, np.int64),
            "rows": np.arange(n, dtype=np.int64) * 7}
    got = group_sums(t, ["host", "direction"], cols, sort=sort)
    keys = list(zip(got["host"].tolist(), got["direction"].tolist()))
    assert sorted(keys, key=str) == sorted(set((r[1], r[0]) for r in rows), key=str)
    for i, (h, d) in enumerate(keys):
        members = [j for j, r in enumerate(rows) if (r[1], r[0]) == (h, d)]
        wrapped = np.array([len(members) * value % 2**64], np.uint64).view(np.int64)[0]
        assert got["one"][i] == wrapped and got["zero"][i] == 0
        assert got["rows"][i] == 7 * sum(members)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), st.sampled_from(["jit_a", "jit_b"])),
                          st.one_of(st.none(), st.sampled_from([5, 7, 2**64 - 1]))),
                min_size=0, max_size=40))
def test_pair_codes_number_each_distinct_pair(rows):
    """Each row's number names its own (module, program id); the pairs are distinct, one per
    distinct pair of the rows."""
    mods = np.array([r[0] for r in rows], object)
    pids = np.array([r[1] for r in rows], object)
    code, pairs = pair_codes(mods, pids)
    assert len(code) == len(rows)
    assert [pairs[c] for c in code.tolist()] == rows
    assert sorted(pairs, key=str) == sorted(set(rows), key=str)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.none(), st.just(float("nan")), st.sampled_from(["D2H", "H2D", "x"]),
                          st.sampled_from([1, 1.0, True, 2]), st.text(max_size=3)),
                max_size=80),
       st.sampled_from(["D2H", "H2D", "", "zz", 1, 2.0, None, float("nan"), mock.ANY]))
def test_equal_to_is_elementwise_equality(values, value):
    """`equal_to` (compared once per distinct value), and `codes_equal` (the same of a column
    numbered once, as step rows and the causes' evidence number theirs), is `values == value`
    per row, a missing value (None, NaN) equal to nothing; on few shared objects and on many
    distinct ones; equal objects of other types (1, 1.0, True) match, and a value equal to
    several distinct keys (`mock.ANY`) matches each of them."""
    col = np.empty(len(values), object)
    col[:] = values
    want = [v is not None and v == v and bool(v == value) for v in values]
    got = equal_to(col, value)
    assert got.dtype == bool and got.tolist() == want
    assert codes_equal(*key_codes(col, sort=False), value).tolist() == want


HLO = """HloModule jit_train_step

%fused_a (a: f32[1024]) -> f32[1024] {
  %a = f32[1024]{0} parameter(0)
  ROOT %n = f32[1024]{0} negate(%a)
}

ENTRY %main (p0: f32[1024], p1: f32[1024]) -> f32[1024] {
  %p0 = f32[1024]{0:S(5)} parameter(0)
  %p1 = f32[1024]{0} parameter(1)
  %copy-start.1 = (f32[1024]{0}, f32[1024]{0:S(5)}, u32[]) copy-start(%p0)
  %fusion.1 = f32[1024]{0} fusion(%p1), kind=kLoop, calls=%fused_a
  %copy-done.1 = f32[1024]{0} copy-done(%copy-start.1)
  %fusion.2 = f32[1024]{0} fusion(%copy-done.1), kind=kLoop, calls=%fused_a
  ROOT %tuple = (f32[1024]{0}) tuple(%fusion.2)
}
"""


@pytest.mark.parametrize("with_hlo", [True, False])
def test_top_records_first_use_of_the_records_alone_equals_every_copys(tmp_path, with_hlo):
    """`top_exposed` records' `first_use` made from the matched copies' numbers alone (no
    direction needs every copy's) equal those read from every copy's `per_copy`: three
    SYNTHETIC reloads, two hidden (fusion.1 covers them), one exposed with a first user."""
    t = SyntheticTrace("h")
    g = t.gpu(0)
    g.kernel(T0, 100 * US, hlo_op="fusion.1")
    g.memcpy("H2D", T0 + 10 * US, 20 * US, 1_000_000, hlo_op="copy-start.1")
    g.memcpy("H2D", T0 + 40 * US, 20 * US, 2_000_000, hlo_op="copy-start.1")
    g.memcpy("H2D", T0 + 120 * US, 30 * US, 4_000_000, hlo_op="copy-start.1")
    g.kernel(T0 + 160 * US, 10 * US, hlo_op="fusion.2")
    g.kernel(T0 + 180 * US, 10 * US, hlo_op="fusion.2")
    g.kernel(T0 + 200 * US, 10 * US, hlo_op="fusion.2")
    session = tmp_path / "plugins" / "profile" / "s1"
    session.mkdir(parents=True)
    t.write(session / "h.xplane.pb")
    if with_hlo:
        (tmp_path / "hlo").mkdir()
        (tmp_path / "hlo" / "jit_train_step.hlo.txt").write_text(HLO)
    trace = read_trace(str(tmp_path))
    result = analyze(trace)
    progs = {k: v[0] for k, v in programs_of(Path(tmp_path), trace).items()}
    table, _ = transfer_columns(trace)
    fu = F.copy_first_use(trace, progs)
    start, end = np.asarray(table["start_ps"]), np.asarray(table["end_ps"])
    pc = F.per_copy(fu, start, end, np.asarray(table["bytes"], np.int64))
    every, alone = copy.deepcopy(result), copy.deepcopy(result)
    F._top_records(every, table, fu, pc)
    F._top_records(alone, table, fu, None)
    recs = [r["first_use"] for r in alone["top_exposed"]["records"]]
    assert recs == [r["first_use"] for r in every["top_exposed"]["records"]]
    assert len(recs) == 3
    if with_hlo:  # the exposed reload's first user ran at 160 us (fusion.2 after the copy)
        (known,) = [r for r in recs if "first_user" in r and r["first_use_ps"] - T0 == 160 * US]
        assert known["first_user"] == "fusion.2" and known["stall_ps"] >= 0
    else:
        assert all(set(r) == {"unknown"} and r["unknown"].startswith(F.NO_HLO) for r in recs)
