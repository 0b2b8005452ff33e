"""The analysis on `Trace.columns` (issue 24): no DataFrame is built and pandas is never
imported on the way from one capture to its result, and every step that replaced a pandas
groupby, factorize or sort gives pandas' answer (pandas is the reference here, in the test)."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from overlap.analysis import grouping, pod
from overlap.analysis import overlap as analysis
from overlap.trace.reader import combine_parts, read_host_file
from overlap.trace.synthetic import SyntheticTrace
from overlap.trace.tables import (
    COMPUTE_COLUMNS,
    MEMORY_COLUMNS,
    STEP_COLUMNS,
    TRANSFER_COLUMNS,
    Trace,
    _frame,
    as_columns,
)

US = 1_000_000
REPO = Path(__file__).resolve().parents[2]


def _capture(path: Path) -> Path:
    """Two GPUs, copies both ways over two steps, one copy with no HLO op (SYNTHETIC)."""
    t = SyntheticTrace("h")
    for dev in range(2):
        g = t.gpu(dev)
        g.kernel(10 * US, 30 * US, stream=7)
        g.kernel(30 * US, 20 * US, stream=8)
        g.memcpy("D2H", 20 * US, 40 * US, 4_000_000, hlo_op="copy-start.1")
        g.memcpy("H2D", (70 + dev) * US, 10 * US, 2_000_000, host_kind="pageable", hlo_op=None)
        g.memcpy("H2D", 90 * US, 0, 64, hlo_op="copy-start.4")
    t.step(0, 5 * US, 65 * US)
    t.step(1, 65 * US, 100 * US)
    return t.write(path)


def _trace(path: Path) -> Trace:
    return combine_parts([read_host_file(path)], [path])


def test_analysis_builds_no_dataframe(tmp_path):
    trace = _trace(_capture(tmp_path / "c.xplane.pb"))
    result = analysis.analyze(trace)
    assert result["summary"]["transfers"] == 6
    # every table still held as columns only: no attribute was read
    assert all(trace.__dict__[name].frame is None
               for name in ("transfers", "compute", "steps", "memory"))
    by_op = {r["hlo_op"] for r in result["by_hlo_op"]["records"]}
    # the copy without an op (None in the columns) gets a label: outside any program, since
    # the synthetic kernels carry a module on an NVIDIA plane (analysis.OUTSIDE_PROGRAM_OP)
    assert analysis.OUTSIDE_PROGRAM_OP in by_op


def test_one_file_is_read_and_analysed_without_pandas(tmp_path):
    """The report's path (`pod.read_and_analyze` on one file, then the text and JSON
    renderers) in a fresh interpreter: pandas is never imported, the result is the one
    `analyze` gives here."""
    f = _capture(tmp_path / "c.xplane.pb")
    code = (
        "import sys, json\n"
        "from overlap.analysis.pod import read_and_analyze\n"
        "from overlap.report import text\n"
        f"trace, r = read_and_analyze({str(f)!r})\n"
        "text.text(r)\n"
        "print(json.dumps({'pandas': 'pandas' in sys.modules, 'result': r}, default=str))\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert p.returncode == 0, p.stderr[-2000:]
    out = json.loads(p.stdout)
    assert out["pandas"] is False
    want = json.loads(json.dumps(analysis.analyze(_trace(f)), default=str))
    assert out["result"] == want


def test_transfer_columns_are_transfer_table(tmp_path):
    trace = _trace(_capture(tmp_path / "c.xplane.pb"))
    cols, cov_c = analysis.transfer_columns(trace, hidden_threshold=0.8, exposed_threshold=0.2)
    frame, cov_f = analysis.transfer_table(trace, hidden_threshold=0.8, exposed_threshold=0.2)
    assert list(frame.columns) == list(cols)
    for c, v in cols.items():
        assert isinstance(v, np.ndarray) and frame[c].dtype == v.dtype, c
        assert frame[c].tolist() == v.tolist() or (
            v.dtype.kind == "f" and np.array_equal(frame[c].to_numpy(), v, equal_nan=True)), c
    assert cov_c.keys() == cov_f.keys()


def test_parts_pickle_and_reduce_alike(tmp_path):
    trace = _trace(_capture(tmp_path / "c.xplane.pb"))
    part = analysis.host_part(trace, top=3)
    again = pickle.loads(pickle.dumps(part))
    assert json.dumps(analysis.reduce_parts([again], top=3), default=str) == \
        json.dumps(analysis.reduce_parts([part], top=3), default=str)


def test_steps_without_a_host_are_in_no_step_and_hosts_are_sorted():
    """`groupby("host", sort=True)` dropped steps whose host is missing, and took hosts in
    name order, each host's steps by start (ties as read)."""
    tr = as_columns({"host": ["b", "a"], "device": ["GPU:0", "GPU:0"],
                     "direction": ["D2H", "H2D"], "start_ps": [11, 22], "end_ps": [13, 24],
                     "bytes": [1, 2], "stream": [0, 0]}, TRANSFER_COLUMNS)
    steps = as_columns({"host": ["b", None, "a", "b", "a"], "step": [7, 1, 5, 6, 4],
                        "name": ["s", "s", "s", "s", "t"], "start_ps": [10, 0, 20, 10, 20],
                        "end_ps": [20, 100, 30, 12, 25]}, STEP_COLUMNS)
    empty = as_columns(None, {"host": "object"})
    trace = Trace(sources=[], backend="gpu", transfers=tr,
                  compute=as_columns(None, COMPUTE_COLUMNS), steps=steps,
                  memory=empty, modules=empty, devices=empty, lines=empty,
                  capture={"a": {}, "b": {}})
    r = analysis.analyze(trace)
    assert [(s["host"], s["step"]) for s in r["steps"]] == [("a", 5), ("a", 4), ("b", 7),
                                                            ("b", 6)]
    # a copy goes to the last step (in that order) starting at or before it, if inside it:
    # b's at 11 to step 6 [10, 12), a's at 22 to step 4 [20, 25)
    assert [s["transfers"] for s in r["steps"]] == [0, 1, 0, 1]
    assert r["step_summary"]["unassigned_transfers"] == 0


_NAMES = st.one_of(st.none(), st.just(float("nan")),
                   st.sampled_from(["D2H", "H2D", "copy-start.1", "copy-start.10", "é", ""]))


@settings(max_examples=300, deadline=None)
@given(st.lists(_NAMES, max_size=60), st.booleans(), st.sampled_from(["as is", "runs", "str"]))
def test_key_codes_equal_pandas_factorize(values, sort, shape):
    """`grouping.key_codes` (few distinct objects by address, str columns by one dict pass, else
    `arrays.factorize`) numbers keys as `pd.factorize` does: first appearance or sorted,
    missing values -1 and no unique."""
    if shape == "runs":
        values = sorted(values, key=str)
    elif shape == "str":
        values = [f"op.{v}" for v in values]
    col = np.empty(len(values), object)
    col[:] = values
    codes, uniq = grouping.key_codes(col, sort)
    want_c, want_u = pd.factorize(pd.Series(col, dtype=object), sort=sort)
    assert codes.tolist() == want_c.tolist()
    assert uniq.tolist() == list(want_u)


@pytest.mark.parametrize("seed", range(30))
def test_dense_codes_equal_factorize(seed):
    """`grouping.dense_codes` numbers int keys as `arrays.factorize` does, in key order or by
    first appearance: keys with repeats, every row its own key (in any order), none."""
    from overlap.arrays import factorize

    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 50))
    for x in (rng.integers(0, max(2 * n, 1), n), rng.permutation(3 * n)[:n],
              np.arange(n)[::-1].copy()):
        x = x.astype(np.int64)
        for sort in (False, True):
            assert grouping.dense_codes(x, sort).tolist() == factorize(x, sort=sort)[0].tolist()


def test_key_codes_of_a_column_seen_before_or_changed_in_place():
    """A column of few objects is numbered once (`grouping._FEW`): the same objects at the
    same rows (another array) get those codes again; a column changed in place, or equal
    values held by other objects, are numbered afresh. The codes are kept read-only: a
    caller cannot write to them (and so change a later answer)."""
    d2h, h2d = "D2H", "".join(["H2", "D"])
    col = np.array([d2h, h2d] * 20, object)
    first = grouping.key_codes(col, True)
    again = grouping.key_codes(col.copy(), True)
    assert [a.tolist() for a in again] == [a.tolist() for a in first]
    with pytest.raises(ValueError):
        again[0][:] = 7  # a caller writing to its codes would change a later answer
    col[0] = h2d
    col[1] = "".join(["D2", "H"])  # a new object of a value seen before
    codes, uniq = grouping.key_codes(col, True)
    want_c, want_u = pd.factorize(pd.Series(col, dtype=object), sort=True)
    assert codes.tolist() == want_c.tolist() and uniq.tolist() == list(want_u)
    assert grouping.key_codes(np.array([d2h, h2d] * 20, object), True)[0].tolist() == \
        [0, 1] * 20
    # many distinct objects from the first rows on: no pass per object (op names)
    assert grouping.few_objects(np.array([f"op.{i}" for i in range(100)], object)) is None


def _pandas_kept_memory(mem: pd.DataFrame, lo: int, hi: int) -> pd.DataFrame:
    """The pandas code `pod._kept_memory` replaced (the reference)."""
    t = mem["time_ps"].to_numpy(np.int64)
    keep = (t >= lo) & (t < hi) if hi > lo else np.zeros(len(mem), bool)
    peak = mem["peak_bytes_in_use"]
    keys = [mem["device"].astype(object).fillna("").astype(str),
            mem["allocator"].astype(object).fillna("").astype(str)]
    best = peak.groupby(keys, sort=False).idxmax().dropna()
    keep[mem.index.get_indexer(best.to_numpy())] = True
    return mem[keep].reset_index(drop=True)


def _pandas_module_time(compute: pd.DataFrame) -> dict[str, int]:
    """The pandas code `pod._module_time` replaced (the reference)."""
    dur = (compute["end_ps"] - compute["start_ps"]).clip(lower=0)
    mod = compute["hlo_module"].astype(object)
    by = dur.groupby(mod.where(mod.notna(), None), dropna=True).sum()
    return {str(k): int(v) for k, v in by.items() if isinstance(k, str) and k}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 20), st.sampled_from([None, "", "GPU:0", "GPU:1"]),
                          st.sampled_from([None, "", "bfc", "pool"]), st.integers(0, 4)),
                min_size=1, max_size=40),
       st.integers(0, 20), st.integers(0, 20))
def test_kept_memory_equals_pandas(rows, lo, hi):
    mem = {"host": ["h"] * len(rows), "time_ps": [r[0] for r in rows],
           "device": [r[1] for r in rows], "allocator": [r[2] for r in rows],
           "peak_bytes_in_use": [r[3] for r in rows]}
    for c in MEMORY_COLUMNS:
        mem.setdefault(c, [0] * len(rows))
    cols = as_columns(mem, MEMORY_COLUMNS)
    got = pod._kept_memory(cols, lo, hi)
    want = _pandas_kept_memory(_frame(mem, MEMORY_COLUMNS), lo, hi)
    for c in MEMORY_COLUMNS:
        assert got[c].tolist() == want[c].astype(object).where(want[c].notna(), None).tolist()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([None, float("nan"), "", "jit_b", "jit_a"]),
                          st.integers(0, 50), st.integers(-10, 50)), max_size=40))
def test_module_time_equals_pandas(rows):
    co = {"host": ["h"] * len(rows), "device": ["GPU:0"] * len(rows),
          "start_ps": [r[1] for r in rows], "end_ps": [r[1] + r[2] for r in rows],
          "hlo_module": [r[0] for r in rows], "stream": [0] * len(rows)}
    for c in COMPUTE_COLUMNS:
        co.setdefault(c, [None] * len(rows))
    got = pod._module_time(as_columns(co, COMPUTE_COLUMNS))
    want = _pandas_module_time(_frame(co, COMPUTE_COLUMNS))
    assert list(got.items()) == list(want.items())


@pytest.mark.parametrize("sort", [False, True])
def test_group_sums_every_row_its_own_group_and_empty(sort):
    t = {"k": np.array(["b", "a", "c"], object)}
    got = grouping.group_sums(t, ["k"], {"v": np.array([1, 2, 3], np.int64)}, sort=sort)
    assert got["k"].tolist() == (["a", "b", "c"] if sort else ["b", "a", "c"])
    assert got["v"].tolist() == ([2, 1, 3] if sort else [1, 2, 3])
    empty = grouping.group_sums({"k": t["k"][:0]}, ["k"], {"v": np.zeros(0, np.int64)}, sort)
    assert empty["k"].dtype == object and len(empty["k"]) == len(empty["v"]) == 0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.integers(0, 30), st.integers(0, 2**40)), max_size=50),
       st.booleans())
def test_dense_codes_equal_pandas_factorize(keys, sort):
    """Group keys are numbered through a table indexed by key where they are small, else by
    `arrays.factorize`: both as `pd.factorize` numbers them."""
    x = np.array(keys, np.int64)
    assert grouping.dense_codes(x, sort).tolist() == pd.factorize(x, sort=sort)[0].tolist()


def test_one_hot_compares_values_not_objects():
    """Class labels are compared once per distinct object, by value: equal strings that are
    other objects (a table not made by `classify`) count alike."""
    labels = ["hid" + "den", "exposed", "", "partial"] * 5
    values = np.empty(len(labels), object)
    values[:] = [str(v) for v in labels]  # new objects, equal values
    values[3] = "".join(["part", "ial"])
    got = grouping.one_hot(values, ("hidden", "partial", "exposed"))
    for label in ("hidden", "partial", "exposed"):
        assert got[label].tolist() == [int(v == label) for v in labels]
    many = np.array([f"x{i}" for i in range(20)] + ["hidden"], object)
    assert grouping.one_hot(many, ("hidden",))["hidden"].tolist() == [0] * 20 + [1]
