"""`device_span_ps` as the tables keep it ("Int64": Python ints and None; issue 32 round
11): the TPU reader's -1 -> None (`tpu._nullable_ints`; an int64 array where every copy has
the clock), and such an integer column made objects by `as_columns` (one `astype`, once the
planes are freed): the same column as the plain rule's list of Python ints makes. Pinned on
arrays of every mix and on a SYNTHETIC capture whose copies are clocked or not in turn, both
TPU paths (Async XLA Ops spans and copy-start/copy-done pairs)."""

from __future__ import annotations

import numpy as np
import pytest

from overlap.arrays import repeated
from overlap.trace import read_trace, tpu
from overlap.trace.synthetic import SyntheticTrace
from overlap.trace.tables import as_columns


@pytest.mark.parametrize("vals", [[], [-1], [5], [-1, -1, -1], [0, 7, 1 << 40],
                                  [3, -1, 0, -1, 9], [-1, 2]])
def test_nullable_ints_is_the_plain_rule(vals):
    got = tpu._nullable_ints(np.array(vals, np.int64))
    want = [None if v < 0 else v for v in vals]
    assert got.dtype == (np.int64 if None not in want else object) and len(got) == len(vals)
    assert got.tolist() == want
    assert [type(x) for x in got.tolist()] == [type(x) for x in want]


@pytest.mark.parametrize("every", [False, True])
@pytest.mark.parametrize("async_line", [True, False])
def test_copies_clocked_in_turn_keep_each_ones_span(tmp_path, async_line, every):
    t = SyntheticTrace()
    dev = t.tpu(0, async_line=async_line)
    us = 1_000_000
    for k in range(9):
        a = (10 + 20 * k) * us
        dev.op(a, 6 * us, name=f"fusion.{k}")
        dev.async_copy("D2H" if k % 2 else "H2D", a + us, a + 5 * us, dims=(8, 128 + k),
                       device_span=(a, a + (3 + k) * us) if every or k % 3 else None)
    tr = read_trace(t.write(tmp_path / "x.xplane.pb")).columns("transfers")
    got = dict(zip(tr["hlo_op"].tolist(), tr["device_span_ps"].tolist()))
    want = {x.hlo_op: x.device_span_ps for x in t.truth.transfers}
    assert got == want and len(got) == 9
    assert sum(v is None for v in got.values()) == (0 if every else 3)
    assert all(type(v) is int for v in got.values() if v is not None)
    assert tr["device_span_ps"].dtype == object


@pytest.mark.parametrize("dtype", ["Int64", "UInt64"])
@pytest.mark.parametrize("col", [
    np.array([0, 5, 1 << 40], np.int64), np.array([3, (1 << 63) + 1], np.uint64),
    np.zeros(0, np.int64), np.array([7], np.int64), repeated(4, 9, np.int64),
    np.array([1, None, 3], object), repeated(3, None)])
def test_int_objects_equal_what_as_columns_makes(col, dtype):
    """The column `as_columns` makes from the reader's rows is the same (values, their
    types, dtype) as from the plain rule's list of Python ints (None kept)."""
    schema = {"span": dtype, "start_ps": "int64"}
    rows = {"span": col, "start_ps": np.arange(len(col), dtype=np.int64)}
    plain = dict(rows, span=[None if x is None else int(x) for x in col.tolist()])
    want = as_columns(plain, schema, checked=("hlo_module",))["span"]
    got = as_columns(dict(rows), schema, checked=("hlo_module",))["span"]
    assert got.dtype == want.dtype == object
    assert got.tolist() == want.tolist()
    assert [type(x) for x in got.tolist()] == [type(x) for x in want.tolist()]
