"""`causes._waits` judges exposed copies `_WAIT_BLOCK` at a time: the same causes, evidence,
stalls and ready times per copy whatever the block, on real captures (the H100 and H200
offload runs and the public TPU v6e capture: the sample captures whose copies `_waits`
judges) and on a SYNTHETIC capture of two GPUs whose copies interleave."""

from __future__ import annotations

import json

import numpy as np
import pytest

from overlap.analysis import causes as C
from overlap.analysis.overlap import analyze, transfer_columns
from overlap.trace import read_trace
from overlap.trace.synthetic import SyntheticTrace
from tests.conftest import SAMPLE_TRACES

US = 1_000_000


def _two_gpus(path):
    """Two GPUs, 40 layers each; GPU 1's steps lag GPU 0's by 150 us, so the two devices'
    copies interleave in the table. Copies start 100 us before their kernel ends and run
    200-260 us: each has an exposed tail, some end near the next kernel's start."""
    t = SyntheticTrace("h")
    for dev, lag in ((0, 0), (1, 150)):
        g = t.gpu(dev)
        for i in range(40):
            k0 = (1000 + lag + 600 * i) * US
            g.kernel(k0, 400 * US, hlo_op=f"fusion.{i}")
            g.memcpy("D2H" if i % 2 else "H2D", k0 + 300 * US, (200 + 3 * (i % 20)) * US,
                     1 << 20, hlo_op=f"copy-start.{i}")
    return t.write(path)


def _inputs(tmp_path):
    return [SAMPLE_TRACES / "gpu-h100" / "scan-h100" / "offload_x",
            SAMPLE_TRACES / "gpu-h200" / "scan-h100" / "offload_x",
            SAMPLE_TRACES / "tpu-v6e-offload", _two_gpus(tmp_path / "two.xplane.pb")]


def _answers(path):
    trace = read_trace(path)
    table, _ = transfer_columns(trace)
    extra = C.transfer_causes(trace, table)
    cols = {k: np.asarray(extra[k]).tolist() for k in sorted(extra)}
    return json.dumps(analyze(trace), sort_keys=True, default=str), cols


@pytest.mark.parametrize("block", [1, 3, 64])
def test_blocks_give_each_copy_the_same_causes(block, tmp_path, monkeypatch):
    for path in _inputs(tmp_path):
        want = _answers(path)
        exposed = sum(1 for x in want[1]["cause"] if x)
        assert exposed > block, path  # (more exposed copies than a block: several blocks)
        monkeypatch.setattr(C, "_WAIT_BLOCK", block)
        calls: list[int] = []
        monkeypatch.setattr(C, "_wait_block",
                            lambda *a, calls=calls, real=C._wait_block: calls.append(1)
                            or real(*a))
        got = _answers(path)
        monkeypatch.undo()
        assert len(calls) > 1, path  # (copies judged by `_waits`, in several blocks)
        assert got[0] == want[0], path
        assert got[1] == want[1], path
