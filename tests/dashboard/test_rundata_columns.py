"""The dashboard's RunData compute arrays come from the reader's columns (`Trace.columns`),
not from `trace.compute` (issue 32: that DataFrame of every compute event was built only to
copy five columns out of it, ~49 MiB of the server's peak on a 1M-event capture). The arrays
equal those the DataFrame gave, on synthetic and real captures, and the DataFrame is never
built on the way."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from overlap.analysis import overlap as analysis
from overlap.report.rundata import run_data
from overlap.trace import read_trace
from overlap.trace.synthetic import gpu_offload_scenario

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
REAL = ["cpu-scan/offload_x", "gpu-v100-tf-multiworker", "tpu-v6e-offload",
        "gpu-h100/scan-h100"]
DTYPES = {"host": object, "device": object, "stream": np.int64, "start_ps": np.int64,
          "end_ps": np.int64}


def _first_capture(d: Path) -> Path:
    return sorted(d.rglob("*.xplane.pb"))[0]


def _check(trace) -> None:
    result = analysis.analyze(trace)
    got = run_data(trace, result).compute
    assert trace.__dict__["compute"].frame is None  # no DataFrame of the compute events
    want = {c: trace.compute[c].to_numpy(dtype=t) for c, t in DTYPES.items()}
    assert set(got) == set(want)
    for c, t in DTYPES.items():
        assert got[c].dtype == np.dtype(t), c
        assert got[c].shape == want[c].shape, c
        assert np.array_equal(got[c], want[c]), c
        assert [type(v) for v in got[c][:50].tolist()] == \
            [type(v) for v in want[c][:50].tolist()], c


@pytest.mark.parametrize("sample", REAL)
def test_real_capture_compute_columns(sample):
    path = SAMPLES / sample
    if not path.exists():
        pytest.skip(f"{sample} not in sample_traces")
    _check(read_trace(_first_capture(path)))


def test_synthetic_compute_columns(tmp_path):
    t = gpu_offload_scenario(steps=3, layers=4, hidden_fraction=0.5)
    t.write_session(tmp_path / "run")
    _check(read_trace(_first_capture(tmp_path / "run")))
