"""Map each host file to a compact part, reduce to one result: equal to analysing one trace of
every host (issue 14)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from overlap.analysis import overlap as analysis
from overlap.analysis import pod
from overlap.analysis.grouping import frame_of
from overlap.trace import read_trace
from overlap.trace.synthetic import SyntheticTrace
from tests.analysis.test_hosts import pod as gpu_pod
from tests.conftest import run_cli

US = 1_000_000
SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"


def _tpu_pod(root: Path, hosts: int = 3) -> Path:
    """TPU hosts with two chips each, steps, copies both ways, some not hidden (SYNTHETIC)."""
    for h in range(hosts):
        t = SyntheticTrace(host=f"tpu-{h}")
        for chip in range(2):
            d = t.tpu(chip, async_line=(chip == 0))
            for s in range(4):
                t0 = (5 + 500 * s) * US
                d.op(t0, (200 + 30 * h) * US)
                d.async_copy("D2H", t0 + 10 * US, t0 + (150 + 40 * h) * US)
                d.async_copy("H2D", t0 + 260 * US, t0 + 300 * US, dims=(8, 128))
        for s in range(4):
            t.step(s, (5 + 500 * s) * US, (5 + 500 * s + 480) * US)
        t.write_session(root)
    return root


def _no_steps_pod(root: Path) -> Path:
    """Two GPU hosts, no step annotations, one with no transfers at all (SYNTHETIC)."""
    for h in range(2):
        t = SyntheticTrace(host=f"n{h}")
        g = t.gpu(0)
        g.kernel(10 * US, 100 * US)
        if h == 0:
            g.memcpy("H2D", 50 * US, 200 * US, 1 << 20)
        t.write_session(root)
    return root


def _canon(result: dict) -> str:
    return json.dumps(result, sort_keys=True, default=str)


@pytest.fixture(scope="module")
def captures(tmp_path_factory):
    base = tmp_path_factory.mktemp("pods")
    return {
        "gpu pod": gpu_pod(base / "gpu", n=5, slow="host-2"),
        "tpu pod": _tpu_pod(base / "tpu"),
        "no steps": _no_steps_pod(base / "nosteps"),
        **{str(p.relative_to(SAMPLES).parents[2]): p for p in SAMPLES.rglob("*.xplane.pb")},
    }


def test_reduce_equals_one_analysis_of_every_host(captures):
    for name, path in captures.items():
        whole = analysis.analyze(read_trace(path))
        trace, mapped = pod.read_and_analyze(path)
        assert _canon(mapped) == _canon(whole), name
        single = len(whole["sources"]) == 1
        assert (len(trace.transfers) == whole["summary"]["transfers"]) == single or \
            not whole["summary"]["transfers"], name


def test_thresholds_and_top_reach_the_workers(captures):
    path = captures["tpu pod"]
    whole = analysis.analyze(read_trace(path), hidden_threshold=0.5, exposed_threshold=0.3, top=2)
    _, mapped = pod.read_and_analyze(path, hidden_threshold=0.5, exposed_threshold=0.3, top=2)
    assert _canon(mapped) == _canon(whole)
    with pytest.raises(ValueError):
        pod.read_and_analyze(path, hidden_threshold=0.2, exposed_threshold=0.3)


def test_parent_keeps_only_the_worst_steps_events(captures):
    path = captures["gpu pod"]
    full = read_trace(path)
    trace, result = pod.read_and_analyze(path)
    assert trace.compute_scope != "all" and 0 < len(trace.compute) < len(full.compute)
    assert 0 < len(trace.transfers) < len(full.transfers)
    # Every kept kernel and copy lies in its host's worst step; every host keeps some.
    for table in (trace.compute, trace.transfers):
        for host, rows in table.groupby("host"):
            mine = [s for s in result["steps"] if s["host"] == host]
            worst = max(mine, key=lambda s: (s["exposed_wall_ps"], -s["start_ps"]))
            assert ((rows["end_ps"] > worst["start_ps"])
                    & (rows["start_ps"] < worst["end_ps"])).all()
        assert set(table["host"]) == set(result["hosts"])
    # The per-transfer rows the figures use were computed from all the compute, per host: they
    # equal the whole read's rows for the same copies.
    whole, _ = analysis.transfer_table(full)
    kept = frame_of(trace.analysed_transfers[0])  # (columns: a pod's report loads no pandas)
    merged = kept.merge(whole, on=["host", "device", "start_ps", "end_ps"], suffixes=("", "_w"))
    assert len(merged) == len(kept) and (merged["hidden_ps"] == merged["hidden_ps_w"]).all()
    assert (kept["start_ps"].to_numpy() == trace.transfers["start_ps"].to_numpy()).all()
    one = next(iter(SAMPLES.rglob("*.xplane.pb")))
    single, _ = pod.read_and_analyze(one)
    assert single.compute_scope == "all" and single.compute.equals(read_trace(one).compute)


def test_workers_give_the_serial_answer(captures):
    path = captures["tpu pod"]
    _, serial = pod.read_and_analyze(path, jobs=1)
    _, pooled = pod.read_and_analyze(path, jobs=2)
    assert _canon(serial) == _canon(pooled)


def test_html_of_a_pod_report(captures, tmp_path):
    out = tmp_path / "pod.html"
    r = run_cli("report", str(captures["gpu pod"]), "--html", str(out), "--jobs", "1")
    assert r.returncode == 0, r.stderr
    page = out.read_text()
    assert "host-2" in page and "Step" in page and "worst step" in page


def test_memory_numbers_survive_the_cut(tmp_path):
    """Allocator peak and the executed module come from all events, not the kept ones."""
    for h in range(3):
        t = SyntheticTrace(host=f"m{h}")
        g = t.gpu(0)
        for s in range(3):
            t0 = (10 + 1000 * s) * US
            t.step(s, t0, t0 + 900 * US)
            g.kernel(t0, 400 * US)
            g.memcpy("D2H", t0 + 10 * US, (500 if s == 1 else 100) * US, 1 << 20)
            # The peak lies in step 0, not in the worst step (1).
            t.allocation(t0 + 5 * US, bytes_allocated=(9 if s == 0 else 1) << 30,
                         peak_bytes_in_use=(9 if s == 0 else 2) << 30)
        t.write_session(tmp_path)
    from overlap.analysis.memory import executed_module, peak_memory

    full = read_trace(tmp_path)
    trace, _ = pod.read_and_analyze(tmp_path)
    assert len(trace.memory) < len(full.memory)
    assert peak_memory(None, trace) == peak_memory(None, full)
    assert peak_memory(None, trace)["bytes"] == 9 << 30
    assert executed_module(trace) == executed_module(full)
