"""A kernel line's `hlo_op`/`hlo_module` (`gpu._kernel_stat`): read from the kernels' metadata
where no kernel carries the stat, as the line's one value where every kernel carries it, else
per kernel. Tiny synthetic GPU planes of every such mix, against the same read through the
per-kernel path (`coded_stat`) it stands in for."""

from __future__ import annotations

import random

import numpy as np
import pytest

from overlap.trace import gpu
from overlap.trace.protos import XSpace
from overlap.trace.reader import read_xspace
from overlap.trace.synthetic import LINE_TIMESTAMP_NS, Ref, _PlaneWriter
from overlap.trace.wire import coded_stat

BASE_PS = LINE_TIMESTAMP_NS * 1000
# (where the kernels' metadata say hlo_op/hlo_module, where their events do)
MIXES = ["meta", "events", "one_module", "some_events", "none", "memcpy_module"]


def _build(mix: str, n: int, seed: int) -> XSpace:
    rng = random.Random(seed)
    xs = XSpace()
    w = _PlaneWriter(xs.planes.add(name="/device:GPU:0"))
    kernels = []
    for k in range(7):
        ms: dict = {"kernel_details": "regs:32"}
        if mix in ("meta", "some_events"):
            ms |= {"hlo_op": rng.choice([f"fusion.{k}", f"a::b::dot.{k}", "", Ref("x::y.1")]),
                   "hlo_module": rng.choice(["jit_f", f"jit_g{k}", 3])}
        kernels.append(w.event_id(f"kernel_{k % 5}", stats=ms))
    memcpy = w.event_id("MemcpyD2H", stats={"memcpy_details": "kind_src:device size:64"})
    line = w.line(7, "Stream #7(Compute)")
    for i in range(n):
        s: dict = {}
        if mix == "events" or (mix == "some_events" and rng.random() < 0.01):
            s = {"hlo_op": rng.choice(["fusion.9", "c::d::add.2", 2.5]),
                 "hlo_module": rng.choice(["jit_f", "jit_h"])}
        elif mix == "one_module":
            s = {"hlo_module": "jit_one"}
        if mix == "memcpy_module" and i % 50 == 0:
            w.event(line, memcpy, BASE_PS + 10 * i, 5, {"hlo_module": "jit_copy"})
            continue
        w.event(line, rng.choice(kernels), BASE_PS + 10 * i, 5, s)
    return xs


def _per_kernel(P, ev, idx, knames, name, uniq, fn=None):
    got = coded_stat(P, ev, idx, name, fn)
    return got if fn is not None else gpu._one_or_coded(got)


@pytest.mark.parametrize("mix", MIXES)
@pytest.mark.parametrize("n", [40, 3000])
def test_kernel_stats_equal_the_per_kernel_read(mix, n, monkeypatch):
    xs = _build(mix, n, seed=len(mix) + n)
    got = read_xspace(xs, host="h")["compute"]
    monkeypatch.setattr(gpu, "_kernel_stat", _per_kernel)
    want = read_xspace(xs, host="h")["compute"]
    assert len(got["name"]) == len(want["name"]) > 0
    for col in ("name", "hlo_op", "hlo_module", "start_ps"):
        a, b = np.asarray(got[col]).tolist(), np.asarray(want[col]).tolist()
        assert [repr(v) for v in a] == [repr(v) for v in b], (mix, col)
    if mix == "none":
        assert set(np.asarray(got["hlo_module"]).tolist()) == {None}
    if mix == "one_module":
        assert set(np.asarray(got["hlo_module"]).tolist()) == {"jit_one"}


@pytest.mark.parametrize("seed", range(4))
def test_unique_inverse_at_is_np_unique(seed):
    """`values.unique_inverse_at` against `np.unique` of the rows taken: every
    row in order (read as the array's own slices), a sorted subset, rows repeated and out of
    order, ids of several dtypes from 0, offset and negative, few and many rows."""
    from overlap.trace.values import unique_inverse_at

    rng = np.random.default_rng(seed)
    for k in range(150):
        n, span = int(rng.integers(0, 6000)), int(rng.integers(1, 40_000))
        dt = (np.int64, np.uint64, np.int32, np.intp)[k % 4]
        shift = int(rng.choice([0, 7, 1 << 20] + ([] if dt == np.uint64 else [-50])))
        a = (rng.integers(0, span, n) + shift).astype(dt)
        idx = (np.arange(n), np.sort(rng.permutation(n)[:int(rng.integers(0, n + 1))]),
               rng.integers(0, max(n, 1), int(rng.integers(0, 3 * n + 1)) if n else 0))[k % 3]
        off = int(rng.integers(0, 5))
        u, inv = unique_inverse_at(a, idx, off)
        eu, einv = np.unique(a[idx], return_inverse=True)
        assert u.tolist() == eu.tolist() and (inv.astype(np.int64) - off).tolist() == einv.tolist()
