"""`link_throughput` (the measured host link of `report --predict`) reads the transfers'
columns with numpy (issue 32: pandas was loaded for it alone). Its answer must be what the
former pandas implementation gave, kept here as the oracle: on inline tables (SYNTHETIC,
built here) whose answers are also known by construction, and on real captures."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from overlap.analysis.predict import link_throughput
from overlap.trace import read_trace
from overlap.trace.tables import TRANSFER_COLUMNS, Columns, _frame

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"


def _by_pandas(t: pd.DataFrame, program_id: int | None = None) -> dict:
    """The former implementation, on the table's DataFrame."""
    if program_id is not None:
        t = t[t["program_id"].astype("Float64") == float(program_id)]
    out = {}
    for d in ("D2H", "H2D"):
        sub = t[t["direction"] == d]
        if sub.empty:
            continue
        sub = sub.sort_values(["host", "device", "start_ps"], kind="stable")
        start = sub["start_ps"].to_numpy(np.int64)
        end = np.maximum(sub["end_ps"].to_numpy(np.int64), start)
        key = pd.factorize(sub["host"].astype(str) + "\x00" + sub["device"].astype(str))[0]
        reach = pd.Series(end).groupby(key).cummax().to_numpy(np.int64)
        prev = pd.Series(reach).groupby(key).shift(1).to_numpy(dtype=float)
        prev = np.where(np.isnan(prev), -np.inf, prev)
        busy = float(np.clip(reach - np.maximum(start, prev), 0, None).sum())
        nbytes = int(sub["bytes"].sum())
        dev = sub["device_span_ps"]
        span = int(np.where(dev.notna().to_numpy(), dev.fillna(0).to_numpy(np.int64),
                            end - start).sum())
        out[d] = {"copies": int(len(sub)), "bytes": nbytes, "busy_ps": int(busy),
                  "link_Bps": nbytes / busy * 1e12 if busy else None,
                  "per_copy_Bps": nbytes / span * 1e12 if span else None}
    return out


def _columns(rows: list[dict]) -> Columns:
    return Columns({c: np.array([r.get(c) for r in rows],
                                np.int64 if t == "int64" else bool if t == "bool" else object)
                    for c, t in TRANSFER_COLUMNS.items()})


def _copy(host, dev, direction, start, end, nbytes, pid=7, clock=None) -> dict:
    return {"host": host, "device": dev, "direction": direction, "start_ps": start,
            "end_ps": end, "bytes": nbytes, "program_id": pid, "device_span_ps": clock,
            "stream": 1, "bytes_known": True}


def test_busy_union_per_device_and_program_known_by_construction() -> None:
    # SYNTHETIC: GPU:0 D2H copies [0,10) [5,20) [30,40) out of order -> busy 30; GPU:1 one
    # [0,100) -> busy 100; an end before its start counts as empty; a copy of program 8 and
    # one without a program id are left out of program 7's; H2D carries chip-clock spans
    rows = [_copy("h", "GPU:0", "D2H", 30, 40, 100), _copy("h", "GPU:0", "D2H", 0, 10, 100),
            _copy("h", "GPU:0", "D2H", 5, 20, 100), _copy("h", "GPU:1", "D2H", 0, 100, 400),
            _copy("h", "GPU:0", "D2H", 50, 45, 0), _copy("h", "GPU:0", "D2H", 0, 1000, 9, pid=8),
            _copy("h", "GPU:0", "D2H", 0, 1000, 9, pid=None),
            _copy("h", "GPU:0", "H2D", 0, 50, 50, clock=25), _copy("h", "GPU:0", "H2D", 60, 70, 50),
            _copy("h", "GPU:0", "D2D", 0, 5, 1)]
    cols = _columns(rows)
    got = link_throughput(cols, 7)
    assert got["D2H"]["busy_ps"] == 130 and got["D2H"]["copies"] == 5
    assert got["D2H"]["bytes"] == 700 and got["D2H"]["link_Bps"] == 700 / 130 * 1e12
    assert got["H2D"]["busy_ps"] == 60 and got["H2D"]["per_copy_Bps"] == 100 / 35 * 1e12
    frame = _frame(dict(cols), TRANSFER_COLUMNS)
    for pid in (7, 8, None):
        assert link_throughput(cols, pid) == _by_pandas(frame, pid)
    assert link_throughput(_columns([]), 7) == {} == _by_pandas(frame.iloc[:0], 7)


@pytest.mark.parametrize("path", [
    "tpu-v6e-offload", "gpu-h100/scan-h100/offload_x",
    "gpu-h100/transformer-h100-command-buffers/qkv_proj_offloaded_cb",
    "gpu-h100/user-script/balanced-offload",
])
def test_real_captures_as_pandas_read_them(path: str) -> None:
    root = SAMPLES / path
    target = root if (root / "run.json").exists() else sorted(root.rglob("*.xplane.pb"))[0]
    trace = read_trace(target)
    cols = trace.columns("transfers")
    pids = sorted({int(p) for p in cols["program_id"] if p is not None})
    assert len(cols["start_ps"])
    for pid in [None, *pids]:
        got = link_throughput(cols, pid)
        assert got == _by_pandas(trace.transfers, pid)
        assert all(v["busy_ps"] > 0 for v in got.values()) and (pid is not None or got)
