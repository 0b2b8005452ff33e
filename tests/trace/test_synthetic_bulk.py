"""The bulk SYNTHETIC writer: wire bytes parse, and the reader finds exactly the ground truth."""

from __future__ import annotations

import numpy as np
import pytest

from overlap.trace import read_trace, synthetic_bulk
from overlap.trace.protos import XSpace


def _varint_ref(v: int) -> bytes:
    return synthetic_bulk._varint(v)


def test_vectorized_varints_match_scalar():
    vals = np.array([0, 1, 127, 128, 300, 2**35, 2**63 - 1, -1, -7546550578646800604], np.int64)
    mat, lens = synthetic_bulk._varints(vals)
    for v, row, n in zip(vals.tolist(), mat, lens):
        assert bytes(row[:n]) == _varint_ref(v)


@pytest.mark.parametrize("backend,kw", [("gpu", {}), ("tpu", {}), ("gpu", {"compact": True})])
def test_bulk_file_parses_and_reads_back_truth(tmp_path, backend, kw):
    p = tmp_path / f"{backend}.xplane.pb"
    truth = synthetic_bulk.write(p, backend, 3000, **kw)
    data = p.read_bytes()
    xs = XSpace.FromString(data)
    assert any("overlap-synthetic" in w for w in xs.warnings)
    # Nothing unknown or duplicated: a canonical re-encoding has the same size.
    assert xs.ByteSize() == len(data)
    device = [pl for pl in xs.planes if pl.name.startswith("/device:")]
    host = [pl for pl in xs.planes if pl.name == "/host:CPU"]
    assert sum(len(ln.events) for pl in device for ln in pl.lines) == truth.device_events
    assert sum(len(ln.events) for pl in host for ln in pl.lines) == truth.host_events
    for pl in xs.planes:  # lines stay sorted by (begin, duration), as SortXSpace leaves them
        for ln in pl.lines:
            keys = [(e.offset_ps, e.duration_ps) for e in ln.events]
            assert keys == sorted(keys)

    t = read_trace(p)
    assert t.synthetic and t.backend == backend
    tr = t.transfers
    assert len(tr) == truth.transfers
    assert (tr["start_ps"].to_numpy() == truth.transfer_start_ps).all()
    assert (tr["end_ps"].to_numpy() == truth.transfer_end_ps).all()
    assert (tr["bytes"].to_numpy() == truth.transfer_bytes).all()
    assert list(tr["direction"]) == list(truth.transfer_direction)
    assert len(t.compute) == truth.compute
    assert int((t.compute["end_ps"] - t.compute["start_ps"]).sum()) == truth.compute_busy_ps
    assert len(t.steps) == truth.steps
    assert (t.steps["start_ps"].to_numpy() == truth.step_start_ps).all()
    assert (t.steps["end_ps"].to_numpy() == truth.step_end_ps).all()
    assert len(t.memory) == truth.memory_events


@pytest.mark.parametrize("backend,kw", [("gpu", {}), ("tpu", {}), ("gpu", {"compact": True})])
def test_bulk_hidden_time_matches_construction(tmp_path, backend, kw):
    analysis = pytest.importorskip("overlap.analysis.overlap")
    p = tmp_path / f"{backend}.xplane.pb"
    truth = synthetic_bulk.write(p, backend, 2000, **kw)
    r = analysis.analyze(read_trace(p))
    s = r["summary"]
    assert s["transfers"] == truth.transfers
    assert s["bytes"] == truth.bytes
    assert s["span_ps"] == truth.transfer_span_ps
    assert s["hidden_ps"] == truth.hidden_ps
    assert r["synthetic"] is True


def test_compact_gpu_events_are_smaller_and_carry_two_stats(tmp_path):
    """`compact`: kernels keep only the hlo_op and kernel_details refs (issue 32's compact
    shape), about half the bytes per device event, and no launch event per kernel."""
    full, compact = tmp_path / "full.xplane.pb", tmp_path / "compact.xplane.pb"
    a = synthetic_bulk.write_gpu(full, 3000)
    b = synthetic_bulk.write_gpu(compact, 3000, compact=True)
    assert a.device_events == b.device_events
    assert b.host_events < a.host_events
    assert compact.stat().st_size < 0.6 * full.stat().st_size
    xs = XSpace.FromString(compact.read_bytes())
    gpu = next(pl for pl in xs.planes if pl.name == "/device:GPU:0")
    names = {k: v.name for k, v in gpu.stat_metadata.items()}
    line = next(ln for ln in gpu.lines if ln.name.startswith("Stream #7"))
    assert {tuple(sorted(names[s.metadata_id] for s in e.stats)) for e in line.events} == {
        ("hlo_op", "kernel_details")}
    assert all(s.WhichOneof("value") == "ref_value" for e in line.events for s in e.stats)
