"""`overlap inspect`'s summary and `compare`'s per-run facts read the tables' columns
(`Trace.columns`), not pandas frames (issue 32). They must say what pandas' group-bys said:
the former implementation is kept here as the oracle, and both run on real captures and on
inline tables (SYNTHETIC, built here) whose keys are missing, whose directions are neither
D2H nor H2D, and whose devices appear in one table only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from overlap.analysis.compare import copy_module_names, device_kinds_of
from overlap.cli.inspect import inspect_trace
from overlap.trace import read_trace
from overlap.trace.tables import TABLES, Trace, _frame

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"


def _inspect_by_pandas(trace) -> dict[str, Any]:
    """The parts of `inspect_trace` that came from group-bys, as pandas gave them."""
    planes = []
    for (host, plane), grp in trace.lines.groupby(["host", "plane"], sort=False):
        planes.append({"host": host, "plane": plane, "lines": [
            {"id": int(i), "name": n, "events": int(c)}
            for i, n, c in zip(grp["line_id"], grp["line"], grp["events"])]})
    devices: dict[Any, dict[str, Any]] = {}
    for (host, dev), grp in trace.transfers.groupby(["host", "device"], sort=True):
        d = devices.setdefault((host, dev), {"host": host, "device": dev})
        for direction in ("D2H", "H2D"):
            g = grp[grp["direction"] == direction]
            d[direction] = {"count": int(len(g)), "bytes": int(g["bytes"].sum()),
                            "unknown_bytes": int((~g["bytes_known"].to_numpy(bool)).sum())}
    for (host, dev), n in trace.compute.groupby(["host", "device"], sort=True).size().items():
        d = devices.setdefault((host, dev), {"host": host, "device": dev})
        d["compute_ops"] = int(n)
    for d in devices.values():
        for direction in ("D2H", "H2D"):
            d.setdefault(direction, {"count": 0, "bytes": 0, "unknown_bytes": 0})
        d.setdefault("compute_ops", 0)
    hw = {(h, dv): row for h, dv, row in zip(trace.devices["host"], trace.devices["device"],
                                             trace.devices.to_dict("records"))}
    vendors = {(h, dev): v for h, c in trace.capture.items()
               for dev, v in (c.get("vendors") or {}).items()}
    for key, d in devices.items():
        d["vendor"] = vendors.get(key)
        row = hw.get(key)
        if row:
            d["name"] = row.get("name")
            d["memory_size"] = None if row.get("memory_size") is None or str(
                row.get("memory_size")) == "<NA>" else int(row["memory_size"])
    return {"planes": planes, "devices": [devices[k] for k in sorted(devices)],
            "steps": len(trace.steps), "memory_events": len(trace.memory),
            "modules": len(trace.modules)}


def _compare_facts_by_pandas(trace) -> tuple[list[str], list[str]]:
    """`copy_module_names` and `device_kinds_of` as pandas gave them."""
    t, mods = trace.transfers, trace.modules
    pids = {int(p) for p in t["program_id"].dropna().unique()}
    names = set()
    # (a module without a name: pandas 3's `astype(str)` keeps it missing, a float, which
    # `rpartition` refused; the columns' reading gives "None", a name no id follows)
    for name in mods["name"].dropna().astype(str):
        head, _, tail = name.rpartition("(")
        if head and tail.rstrip(")").isdigit() and int(tail.rstrip(")")) in pids:
            names.add(name)
    kinds = sorted({str(k) for k in trace.devices["name"].dropna().unique()})
    return sorted(names), kinds


def _same_as_pandas(trace) -> None:
    got = inspect_trace(trace)
    want = _inspect_by_pandas(trace)
    assert {k: got[k] for k in want} == want
    # (key order too: the JSON prints each device's keys as they were set)
    assert [list(d) for d in got["devices"]] == [list(d) for d in want["devices"]]
    assert (copy_module_names(trace), device_kinds_of(trace)) == _compare_facts_by_pandas(trace)


@pytest.mark.parametrize("path", [
    "tpu-v6e-offload", "gpu-v100-tf-multiworker", "rocm/mi300x-jax08-attention",
    "cpu-transformer-tiny/qkv_proj_offloaded", "gpu-h100/scan-h100/offload_x",
    "gpu-h100/transformer-h100-command-buffers",
])
def test_real_captures_read_as_pandas_grouped_them(path: str) -> None:
    root = SAMPLES / path
    target = root if (root / "run.json").exists() else sorted(root.rglob("*.xplane.pb"))[0]
    trace = read_trace(target)
    assert trace.rows("lines")
    _same_as_pandas(trace)


def _table(name: str, rows: list[tuple]) -> pd.DataFrame:
    cols = list(TABLES[name])
    return _frame({c: [r[i] if i < len(r) else None for r in rows]
                   for i, c in enumerate(cols)}, TABLES[name])


def test_missing_keys_other_directions_and_one_table_devices() -> None:
    # SYNTHETIC tables, answers known by construction:
    # - lines of two hosts interleaved (first appearance orders the planes), a line without a
    #   host and one without a plane (in no group);
    # - transfers: D2H with one size unknown, an H2D, a D2D (counted in neither direction but
    #   its device listed), one without a device and one without a host (in no group);
    # - compute on a device no transfer names, and one row without a device;
    # - device facts with and without a memory size, and one for a device nothing else names.
    tr = TABLES["transfers"]
    order = list(tr)

    def copy(host, dev, direction, nbytes, known=True, pid=None):
        row = dict.fromkeys(order)
        row.update(host=host, device=dev, direction=direction, start_ps=0, end_ps=1,
                   bytes=nbytes, stream=1, bytes_known=known, program_id=pid)
        return tuple(row[c] for c in order)

    co = list(TABLES["compute"])

    def kernel(host, dev):
        row = dict.fromkeys(co)
        row.update(host=host, device=dev, start_ps=0, end_ps=1, stream=1)
        return tuple(row[c] for c in co)

    dv = list(TABLES["devices"])

    def device(host, dev, name, size):
        row = dict.fromkeys(dv)
        row.update(host=host, device=dev, plane="/device:GPU:0", name=name, memory_size=size)
        return tuple(row[c] for c in dv)

    mods = list(TABLES["modules"])

    def module(name, pid):
        row = dict.fromkeys(mods)
        row.update(host="h1", name=name, program_id=pid)
        return tuple(row[c] for c in mods)

    trace = Trace(
        sources=[], backend="gpu", capture={"h1": {"vendors": {"GPU:0": "NVIDIA"}}, "h2": {}},
        transfers=_table("transfers", [
            copy("h2", "GPU:1", "H2D", 8), copy("h1", "GPU:0", "D2H", 4),
            copy("h1", "GPU:0", "D2H", 6, known=False, pid=7), copy("h1", "GPU:2", "D2D", 5),
            copy("h1", None, "D2H", 9), copy(None, "GPU:0", "H2D", 9)]),
        compute=_table("compute", [kernel("h1", "GPU:0"), kernel("h1", "GPU:3"),
                                   kernel("h1", "GPU:3"), kernel("h1", None)]),
        steps=_table("steps", []), memory=_table("memory", []),
        modules=_table("modules", [module("jit_step(7)", 7), module("jit_other(8)", 8),
                                   module(None, 9)]),
        devices=_table("devices", [device("h1", "GPU:0", "NVIDIA H100", 80 << 30),
                                   device("h2", "GPU:1", None, None),
                                   device("h1", "GPU:9", "NVIDIA H200", None)]),
        lines=_table("lines", [("h2", "/device:GPU:1", 3, "Stream #3", 5),
                               ("h1", "/device:GPU:0", 1, "Stream #1", 2),
                               ("h2", "/device:GPU:1", 4, None, 0),
                               (None, "/device:GPU:0", 5, "x", 1),
                               ("h1", None, 6, "y", 1)]))
    _same_as_pandas(trace)
    got = inspect_trace(trace)
    assert [(p["host"], [ln["id"] for ln in p["lines"]]) for p in got["planes"]] == \
        [("h2", [3, 4]), ("h1", [1])]
    by = {(d["host"], d["device"]): d for d in got["devices"]}
    assert list(by) == [("h1", "GPU:0"), ("h1", "GPU:2"), ("h1", "GPU:3"), ("h2", "GPU:1")]
    assert by["h1", "GPU:0"]["D2H"] == {"count": 2, "bytes": 10, "unknown_bytes": 1}
    assert by["h1", "GPU:2"]["D2H"]["count"] == by["h1", "GPU:2"]["H2D"]["count"] == 0
    assert by["h1", "GPU:3"]["compute_ops"] == 2 and by["h1", "GPU:3"]["H2D"]["count"] == 0
    assert (by["h1", "GPU:0"]["name"], by["h1", "GPU:0"]["memory_size"]) == \
        ("NVIDIA H100", 80 << 30)
    assert by["h2", "GPU:1"]["memory_size"] is None and "name" not in by["h1", "GPU:2"]
    assert by["h1", "GPU:0"]["vendor"] == "NVIDIA"
    assert copy_module_names(trace) == ["jit_step(7)"]
    assert device_kinds_of(trace) == ["NVIDIA H100", "NVIDIA H200"]
