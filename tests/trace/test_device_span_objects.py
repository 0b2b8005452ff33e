"""`device_span_ps` as the tables keep it ("Int64": Python ints and None), made by the TPU
reader in that form (`tpu._nullable_ints`, issue 32 round 11) rather than as an int64 array
the table then turned into a list: the plain rule is -1 -> None, any other value its int.
Pinned on arrays of every mix and on a SYNTHETIC capture whose copies are clocked or not in
turn, both TPU paths (Async XLA Ops spans and copy-start/copy-done pairs)."""

from __future__ import annotations

import numpy as np
import pytest

from overlap.trace import read_trace, tpu
from overlap.trace.synthetic import SyntheticTrace


@pytest.mark.parametrize("vals", [[], [-1], [5], [-1, -1, -1], [0, 7, 1 << 40],
                                  [3, -1, 0, -1, 9], [-1, 2]])
def test_nullable_ints_is_the_plain_rule(vals):
    got = tpu._nullable_ints(np.array(vals, np.int64))
    assert got.dtype == object and len(got) == len(vals)
    want = [None if v < 0 else v for v in vals]
    assert got.tolist() == want
    assert [type(x) for x in got.tolist()] == [type(x) for x in want]


@pytest.mark.parametrize("async_line", [True, False])
def test_copies_clocked_in_turn_keep_each_ones_span(tmp_path, async_line):
    t = SyntheticTrace()
    dev = t.tpu(0, async_line=async_line)
    us = 1_000_000
    for k in range(9):
        a = (10 + 20 * k) * us
        dev.op(a, 6 * us, name=f"fusion.{k}")
        dev.async_copy("D2H" if k % 2 else "H2D", a + us, a + 5 * us, dims=(8, 128 + k),
                       device_span=(a, a + (3 + k) * us) if k % 3 else None)
    tr = read_trace(t.write(tmp_path / "x.xplane.pb")).columns("transfers")
    got = dict(zip(tr["hlo_op"].tolist(), tr["device_span_ps"].tolist()))
    want = {x.hlo_op: x.device_span_ps for x in t.truth.transfers}
    assert got == want and len(got) == 9
    assert sum(v is None for v in got.values()) == 3
    assert all(type(v) is int for v in got.values() if v is not None)
    assert tr["device_span_ps"].dtype == object
