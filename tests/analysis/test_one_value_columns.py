"""Columns the analysis gives as read-only one-value views or as its input (issue 32 round 24:
a million copies without compute held 8 MB of zeros for `hidden_ps`, 9 MB for the copies'
stream evidence and 23 MB of the exposed coverage that copied the copies themselves). The
answers are known by construction; nothing may write through a shared column."""

from __future__ import annotations

import numpy as np
import pytest

from overlap.analysis import causes as C
from overlap.analysis import intervals as iv
from overlap.analysis.overlap import analyze, host_part_and_table, transfer_columns
from overlap.arrays import is_repeated, labels_at
from tests.analysis.test_analysis import make_trace

US = 1_000_000
COPIES = [("GPU:0", "D2H", 100 * US, 200 * US, 1000, "pinned"),
          ("GPU:0", "H2D", 300 * US, 450 * US, 2000, "pinned"),
          ("GPU:1", "D2H", 100 * US, 130 * US, 3000, "pinned")]


def test_no_compute_nothing_hidden_and_the_coverage_is_the_copies():
    t = make_trace(transfers=COPIES, steps=[(0, 0, 1000 * US)])
    table, cov = transfer_columns(t)
    assert is_repeated(table["hidden_ps"]) and not table["hidden_ps"].flags.writeable
    assert table["hidden_ps"].tolist() == [0, 0, 0]
    assert table["exposed_ps"].tolist() == [100 * US, 150 * US, 30 * US]
    assert table["overlap_ratio"].tolist() == [0.0, 0.0, 0.0]
    assert {k: (c[1].starts.tolist(), c[1].ends.tolist()) for k, c in cov.items()} == {
        ("h", "GPU:0"): ([100 * US, 300 * US], [200 * US, 450 * US]),
        ("h", "GPU:1"): ([100 * US], [130 * US])}
    r = analyze(t)
    # (the step's worst device: GPU:0's two copies, 100 + 150 us, nothing hidden)
    assert (r["steps"][0]["exposed_wall_ps"], r["steps"][0]["worst_device"]) == \
        (250 * US, "GPU:0")
    assert r["by_direction"]["D2H"]["exposed_ps"] == 130 * US


def test_subtracting_nothing_gives_the_input_read_only():
    g = np.array([0, 0, 1], np.int64)
    s = np.array([10, 30, 5], np.int64)
    e = np.array([20, 40, 9], np.int64)
    none = iv.MergedGroups(np.zeros(0, np.int64), np.zeros(0, np.int64),
                           np.zeros(0, np.int64))
    xg, xs, xe = none.subtract_from(g, s, e)
    assert (xg.tolist(), xs.tolist(), xe.tolist()) == ([0, 0, 1], [10, 30, 5], [20, 40, 9])
    for v in (xg, xs, xe):
        with pytest.raises(ValueError):
            v[0] = 1
    s[0] = 11  # (the input itself stays the caller's to write)
    # an empty interval among them is still dropped
    xg, xs, xe = none.subtract_from(g, s, np.array([20, 30, 9], np.int64))
    assert (xg.tolist(), xs.tolist(), xe.tolist()) == ([0, 1], [11, 5], [20, 9])


def test_copies_off_the_compute_stream_share_one_value():
    """Kernels on stream 7, copies on stream 20 (`make_trace`): no copy on a compute stream."""
    t = make_trace(transfers=COPIES, compute=[("GPU:0", 0, 150 * US)])
    _, table = host_part_and_table(t, hidden_threshold=0.9, exposed_threshold=0.1, top=5)
    extra = C.transfer_causes(t, table)
    for col, v in (("on_compute_stream", False), ("stream_kernels", 0)):
        assert is_repeated(extra[col]) and extra[col].tolist() == [v] * 3
    assert table["hidden_ps"].tolist() == [50 * US, 0, 0]  # (compute here: a real column)
    assert not is_repeated(table["hidden_ps"])


@pytest.mark.parametrize("codes", [[], [2], [1, 1, 1], [0, 2, 1, 2], [3, 3, 0]])
@pytest.mark.parametrize("dtype", [np.int8, np.int64])
def test_labels_at_is_the_gather(codes, dtype):
    """`labels_at` (a class, a cause, a `Coded` column) is `values[codes]`, the same object at
    each row, and a read-only one-value column exactly where every code is one."""
    values = np.array(["", "hidden", "exposed", "partial"], dtype=object)
    c = np.array(codes, dtype)
    got = labels_at(values, c)
    assert got.dtype == object and [id(v) for v in got] == [id(values[i]) for i in codes]
    assert is_repeated(got) == (len(codes) > 1 and len(set(codes)) == 1)
    if is_repeated(got):
        assert not got.flags.writeable
    assert is_repeated(labels_at(values[:1], np.zeros(3, dtype)))  # (one label at all)
