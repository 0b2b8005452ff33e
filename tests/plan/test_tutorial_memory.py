"""The JAX host-offloading tutorial's memory table against plans of its own functions
(benchmarks/tutorial_memory.py; docs/advise.md has the whole table).

What must hold, from the compiler: the argument sizes are the tutorial's exactly (20.25 MiB:
the input and both weight stacks; 0.25 MiB once the weights live in host memory, where the
compile-only device exposes host memory, i.e. on TPU); the offloaded activation is exactly the
ten 256 KiB `x` residuals in host temp; and offloading `x` lowers device temp where the
compiler keeps temporaries in HBM (h100, v5p), as the tutorial's 17.25 -> 6.50 MiB does.
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")

from benchmarks.tutorial_memory import PUBLISHED, run  # noqa: E402


@pytest.mark.parametrize("target", ["h100", "v5p"])
def test_tutorial_memory_table(target):
    rows = {r["program"]: r for r in run(target)}
    assert all(r["status"] == "ok" for r in rows.values())
    base, off, both = rows["baseline"], rows["offload_x"], rows["offload_x_and_params"]
    assert base["argument_MiB"] == off["argument_MiB"] == PUBLISHED["baseline"][1] == 20.25
    assert off["host_temp_MiB"] == both["host_temp_MiB"] == 10 * 0.25
    assert off["temp_MiB"] < base["temp_MiB"]
    assert off["d2h_bytes_per_step"] == 10 * 256 * 256 * 4
    if target == "v5p":
        assert both["argument_MiB"] == PUBLISHED["offload_x_and_params"][1] == 0.25
        assert both["host_argument_MiB"] == 20.0
        assert both["temp_MiB"] < off["temp_MiB"]
    else:  # the CUDA compile-only device lists no host memory: the plan says so
        assert any("exposes no host memory" in n for n in both["notes"])
