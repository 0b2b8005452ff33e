"""A GPU plane's small lines are queued with numpy where it has many lines
(`gpu._read_gpu_planes`' `pend`): the same tables, rows in the same order, as adding them one
by one (the walk planes of a few lines still take), whatever mix of empty, small and big
lines, across planes and across the segment boundaries where the queue is read. SYNTHETIC
captures, labelled so."""

from __future__ import annotations

import random

import numpy as np
import pytest

from overlap.trace import gpu, read_trace
from overlap.trace.synthetic import SyntheticTrace

US = 1_000_000


def _capture(path, seed: int):
    rng = random.Random(seed)
    t = SyntheticTrace()
    for d in range(3):
        g = t.gpu(d)
        for stream in range(rng.choice([5, 40, 90, 250])):  # few lines, many, over 2 chunks
            n = rng.choice([0, 1, 2, 7, 30, 600])  # none, small, one past _SMALL_LINE
            for k in range(n):
                start = (10 + stream * 1000 + k) * US
                if k % 5 == 4:
                    g.memcpy("D2H", start, US // 2, 4096 + k, stream=1000 + stream)
                else:
                    g.kernel(start, US // 2, stream=stream, name=f"k{k % 3}")
    return t.write(path)


def _tables(path):
    tr = read_trace(path)
    return {name: tr.columns(name) for name in ("compute", "transfers", "lines")}


@pytest.mark.parametrize("seed", range(4))
def test_queued_with_numpy_as_one_by_one(tmp_path, monkeypatch, seed):
    f = _capture(tmp_path / "c.xplane.pb", seed)
    monkeypatch.setattr(gpu, "_SEGMENT", 97)  # many segments, boundaries mid-plane
    got = _tables(f)
    monkeypatch.setattr(gpu, "_FEW_LINES", 1 << 30)  # every plane walked line by line
    want = _tables(f)
    assert len(got["compute"]["start_ps"]) > 1000
    for name, cols in want.items():
        for col, v in cols.items():
            assert np.array_equal(got[name][col], v), (name, col)
