"""AMD ROCm captures and the explicit "cannot tell" status (issue 23).

Real captures: sample_traces/rocm (AMD TraceLens' MI300X and MI355 JAX captures, MIT); every
expected number below is counted here independently from the protobuf with the XSpace classes,
not taken from the reader. Synthetic fixtures (overlap.trace.synthetic) cover each shape the
rules name, with answers known by construction.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from overlap.analysis.overlap import STATUS_CANNOT_TELL, STATUS_NO_TRANSFERS, STATUS_OK, analyze
from overlap.cli.main import main
from overlap.report import gate
from overlap.trace import read_trace
from overlap.trace.protos import XSpace
from overlap.trace.synthetic import SyntheticTrace
from tests.conftest import SAMPLE_TRACES

ROCM = SAMPLE_TRACES / "rocm"
MI300X = ROCM / "mi300x-jax08-attention"
MI300X_FILE = MI300X / "plugins" / "profile" / "jax08_attention" / "tw003.xplane.pb"
MI355 = ROCM / "mi355-te-fused-attn"
MI355_FILE = next((MI355 / "plugins" / "profile").glob("*/*.xplane.pb"))


def _independent(path):
    """Per plane: the copy kernels' (start, end) and names of all device events; per API name
    the host events with their correlation ids. Straight from the protobuf classes."""
    xs = XSpace.FromString(path.read_bytes())
    dev_events, api = [], []
    for pl in xs.planes:
        sm = {k: v.name for k, v in pl.stat_metadata.items()}
        for ln in pl.lines:
            for e in ln.events:
                name = pl.event_metadata[e.metadata_id].name
                corr = next((s.uint64_value or s.int64_value for s in e.stats
                             if sm.get(s.metadata_id) == "correlation_id"), None)
                t0 = ln.timestamp_ns * 1000 + e.offset_ps
                if pl.name.startswith("/device:GPU"):
                    dev_events.append((name, corr, t0, t0 + e.duration_ps))
                elif pl.name == "/host:CPU" and name.startswith("hip"):
                    api.append((name, corr))
    return xs, dev_events, api


def _code(argv):
    try:
        return main(argv)
    except SystemExit as e:  # argparse / exit paths
        return int(e.code or 0)


# ---------------------------------------------------------------------------------------------
# Real captures


def test_mi300x_host_copies_are_h2d_transfers_with_the_kernel_spans():
    xs, dev, api = _independent(MI300X_FILE)
    h2d_calls = {c for n, c in api if n == "hipMemcpyHtoDAsync"}
    assert len(h2d_calls) == 18  # what the host issued (SOURCES.md)
    copies = sorted((t0, t1) for n, c, t0, t1 in dev if n.startswith("__amd_rocclr_copyBuffer")
                    and c in h2d_calls)
    assert len(copies) == 18
    t = read_trace(MI300X)
    tr = t.transfers
    assert len(tr) == 18 and set(tr["direction"]) == {"H2D"} and set(tr["device"]) == {"GPU:0"}
    # the device span is the kernel's (JAX writes line timestamps relative to the profile
    # start already, so line timestamp + offset is the capture clock)
    assert sorted(zip(tr["start_ps"].tolist(), tr["end_ps"].tolist())) == copies
    # the calls record `size:0`: unknown, never a confident 0
    assert not tr["bytes_known"].any() and (tr["bytes"] == 0).all()
    assert t.capture[t.hosts[0]]["vendors"]["GPU:0"] == "AMD"
    assert t.capture[t.hosts[0]]["transfer_unknowns"] == []


def test_mi300x_copies_are_not_compute_and_overlap_is_measured():
    _, dev, _ = _independent(MI300X_FILE)
    kernels = Counter(n for n, *_ in dev)
    t = read_trace(MI300X)
    names = set(t.compute["name"])
    assert not any(n.startswith("__amd_rocclr_") for n in names)
    assert len(t.compute) == sum(kernels.values()) - kernels["__amd_rocclr_copyBuffer.kd"] == 87
    r = analyze(t)
    assert r["status"] == STATUS_OK and r["by_direction"]["H2D"]["count"] == 18
    assert r["summary"]["unknown_bytes"] == 18 and r["summary"]["bandwidth_Bps"] is None
    assert r["vendors"] == {t.hosts[0]: {f"GPU:{i}": "AMD" for i in range(8)}}
    assert r["transfer_status"]["status"] == "complete"
    assert "unknown size" in r["verdict"]
    # invariants: hidden within span, classes sum to the total
    s = r["summary"]
    assert 0 <= s["hidden_ps"] <= s["span_ps"]
    assert s["hidden"] + s["partial"] + s["exposed"] + s["zero_length"] == 18


def test_mi300x_check_max_transfers_0_fails_and_names_the_vendor(capsys):
    assert _code(["check", "--max-transfers", "0", str(MI300X)]) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and "18 transfer(s)" in out and "vendor: AMD" in out
    # byte limits cannot be shown to hold on copies of unknown size
    assert _code(["check", "--max-transfer-bytes", "1000000", str(MI300X)]) == 1
    assert "unknown size" in capsys.readouterr().out
    assert _code(["check", "--max-transfer-bytes", "1000000", "--allow-unknown",
                  str(MI300X)]) == 0
    capsys.readouterr()
    assert _code(["report", "--json", str(MI300X)]) == 0
    doc = json.loads(capsys.readouterr().out)
    doc = doc.get("analysis", doc)
    assert doc["by_direction"]["H2D"]["count"] == 18 and "AMD" in json.dumps(doc["vendors"])
    assert _code(["inspect", str(MI300X)]) == 0
    out = capsys.readouterr().out
    assert "vendor: AMD" in out and "18 transfer(s) of unknown size" in out


def test_mi355_memsets_are_neither_transfers_nor_compute():
    _, dev, api = _independent(MI355_FILE)
    fills = [c for n, c, *_ in dev if n.startswith("__amd_rocclr_fillBuffer")]
    assert len(fills) == 20 and set(fills) == {c for n, c in api if n == "hipMemsetAsync"}
    t = read_trace(MI355)
    assert len(t.transfers) == 0
    assert len(t.compute) == len(dev) - 20 == 130
    assert not any(n.startswith("__amd_rocclr_") for n in t.compute["name"])
    r = analyze(t)
    # every device event was read by a rule: "no transfers" is an answer here
    assert r["status"] == STATUS_NO_TRANSFERS
    assert r["transfer_status"]["status"] == "complete"


# ---------------------------------------------------------------------------------------------
# Synthetic fixtures of each shape (answers known by construction)


def _read(st: SyntheticTrace, tmp_path, name="s.xplane.pb"):
    return read_trace(st.write(tmp_path / name))


def test_rocm_copies_direction_bytes_and_overlap(tmp_path):
    st = SyntheticTrace()
    g = st.rocm(0)
    g.kernel(1_000_000, 100_000_000, stream=16)  # compute [1, 101) us
    g.hip_copy("H2D", 51_000_000, 100_000_000, 4096)  # half hidden
    g.hip_copy("D2H", 200_000_000, 10_000_000)  # size unknown, exposed
    g.hip_copy("D2D", 300_000_000, 10_000_000, 64)  # device copy: neither
    g.hip_fill(400_000_000, 5_000_000)  # memset: neither
    t = _read(st, tmp_path)
    tr = t.transfers.sort_values("start_ps")
    assert tr["direction"].tolist() == ["H2D", "D2H"]
    assert tr["bytes"].tolist() == [4096, 0] and tr["bytes_known"].tolist() == [True, False]
    assert [(x.start_ps, x.end_ps) for x in st.truth.transfers] == list(
        zip(tr["start_ps"], tr["end_ps"]))
    assert t.compute["name"].tolist() == ["loop_fusion_kernel"]
    r = analyze(t)
    h2d, d2h = r["by_direction"]["H2D"], r["by_direction"]["D2H"]
    assert h2d["hidden_ps"] == 50_000_000 and h2d["bandwidth_Bps"] is not None
    assert d2h["hidden_ps"] == 0 and d2h["unknown_bytes"] == 1 and d2h["bandwidth_Bps"] is None
    assert r["transfer_status"]["status"] == "complete" and r["synthetic"]


def test_old_rocm_copy_device_to_device_on_memcpyother_is_read(tmp_path):
    st = SyntheticTrace()
    g = st.rocm(0)
    g.kernel(1_000_000, 10_000_000, stream=16)
    g.copy_other(20_000_000, 5_000_000, 1 << 20)
    t = _read(st, tmp_path)
    assert any("MemcpyOther" in n for n in t.lines["line"])
    assert len(t.transfers) == 0 and len(t.compute) == 1
    r = analyze(t)
    assert r["status"] == STATUS_NO_TRANSFERS and r["transfer_status"]["status"] == "complete"


@pytest.mark.parametrize("shape", [
    "unknown_vendor", "copy_kernel_without_call", "call_without_direction",
    "call_without_kernel", "unknown_stream_kind", "unknown_event_on_stream",
    "copy_like_kernel", "other_device_plane"])
def test_unknown_device_shape_is_cannot_tell_and_check_fails(shape, tmp_path, capsys):
    st = SyntheticTrace()
    if shape == "unknown_vendor":
        g = st.gpu(0, vendor="Intel")
        g.kernel(1_000_000, 10_000_000)
    elif shape == "other_device_plane":
        pl = st.xspace.planes.add()
        pl.name = "/device:XPU:0"
        ln = pl.lines.add(id=1, name="Stream #1", timestamp_ns=1000)
        pl.event_metadata[1].id = 1
        pl.event_metadata[1].name = "kernel"
        ln.events.add(metadata_id=1, offset_ps=0, duration_ps=5)
    else:
        g = st.rocm(0) if "call" in shape or shape == "copy_kernel_without_call" else st.gpu(0)
        g.kernel(1_000_000, 10_000_000)
        if shape == "copy_kernel_without_call":
            g.hip_copy("H2D", 20_000_000, 5_000_000, 64, call=False)
        elif shape == "call_without_direction":
            g.hip_copy("H2D", 20_000_000, 5_000_000, 64, api="hipMemcpyAsync")
        elif shape == "call_without_kernel":
            g._hip_call("hipMemcpyDtoHAsync", 20_000_000, 99_999,
                        {"memcpy_details": "kind:Unknown size:64 dest:512 async:1"})
        elif shape == "unknown_stream_kind":
            g.event("UnifiedMemoryMigration", 20_000_000, 5_000_000, stream=9,
                    kind="UnifiedMemory")
        elif shape == "unknown_event_on_stream":
            g.event("CopyHostToDevice", 20_000_000, 5_000_000, stream=9, kind="MemcpyH2D")
        elif shape == "copy_like_kernel":
            g.event("vendor_memcpy_kernel", 20_000_000, 5_000_000, stream=9, kind="Compute",
                    stats={"kernel_details": "grid:1,1,1 block:32,1,1"})
    path = st.write(tmp_path / "s.xplane.pb")
    t = read_trace(path)
    r = analyze(t)
    ts = r["transfer_status"]
    assert ts["status"] == "cannot_tell" and ts["unknown"], shape
    # never a confident "no transfers"
    assert r["status"] == STATUS_CANNOT_TELL
    assert "NO_TRANSFERS" not in r["verdict"]
    out = gate.run_checks(r, gate.CheckConfig(max_transfers=0), t)
    assert not out["passed"] and "transfers_readable" in out["failed"]
    ok = gate.run_checks(r, gate.CheckConfig(max_transfers=0, allow_unknown=True), t)
    assert ok["passed"]
    assert _code(["check", "--max-transfers", "0", str(path)]) == 1
    assert _code(["check", "--max-transfers", "0", "--allow-unknown", str(path)]) == 0
    capsys.readouterr()
    assert _code(["inspect", str(path)]) == 0
    assert "CANNOT TELL" in capsys.readouterr().out


def test_cannot_tell_beside_measured_transfers_keeps_them(tmp_path):
    st = SyntheticTrace()
    g = st.gpu(0)
    g.kernel(1_000_000, 100_000_000)
    g.memcpy("D2H", 10_000_000, 20_000_000, 1024)
    g.event("UnifiedMemoryMigration", 200_000_000, 5_000_000, stream=9, kind="UnifiedMemory")
    t = read_trace(st.write(tmp_path / "s.xplane.pb"))
    r = analyze(t)
    assert r["status"] == STATUS_OK and r["summary"]["transfers"] == 1
    assert r["transfer_status"]["status"] == "cannot_tell" and "CANNOT TELL" in r["verdict"]
    out = gate.run_checks(r, gate.CheckConfig(min_overlap=0.5), t)
    assert "transfers_readable" in out["failed"]
    assert gate.run_checks(r, gate.CheckConfig(min_overlap=0.5, allow_unknown=True), t)["passed"]


def test_cupti_shapes_stay_complete(tmp_path):
    """D2D/P2P copies, memsets and an old capture without device_vendor are read, not 'cannot
    tell'."""
    st = SyntheticTrace()
    g = st.gpu(0, vendor=None)
    g.kernel(1_000_000, 100_000_000)
    g.memcpy("H2D", 10_000_000, 20_000_000, 1024)
    g.memcpy("D2D", 30_000_000, 20_000_000, 1024)
    g.memset(60_000_000, 1_000_000)
    t = read_trace(st.write(tmp_path / "s.xplane.pb"))
    r = analyze(t)
    assert r["transfer_status"]["status"] == "complete", r["transfer_status"]
    assert r["vendors"][t.hosts[0]]["GPU:0"] == "NVIDIA (inferred)"
    assert r["summary"]["transfers"] == 1


def test_compare_dir_of_mixed_backends_keeps_each_run(tmp_path, capsys):
    """A GPU, a TPU and a ROCm file side by side: three runs, the mix named, no verdicts."""
    st = SyntheticTrace(host="nv")
    g = st.gpu(0)
    g.kernel(1_000_000, 100_000_000)
    g.memcpy("D2H", 10_000_000, 20_000_000, 1024)
    st.write(tmp_path / "nv.xplane.pb")
    st = SyntheticTrace(host="tp")
    d = st.tpu(0)
    d.op(1_000_000, 50_000_000)
    d.async_copy("D2H", 5_000_000, 15_000_000)
    st.write(tmp_path / "tp.xplane.pb")
    (tmp_path / "amd.xplane.pb").write_bytes(MI300X_FILE.read_bytes())
    assert _code(["compare", "--json", str(tmp_path)]) == 0
    res = json.loads(capsys.readouterr().out)
    assert len(res["runs"]) == 3
    assert res["mixed_platforms"] == ["gpu (AMD)", "gpu (NVIDIA)", "tpu (Google)"]
    assert not res["verdicts"] or all("not compared" in v for v in res["verdicts"])
    assert _code(["compare", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "different platforms" in out
    # no step annotations in any of them: nothing is labelled per step
    assert "/step" not in out and "/capture" in out
    # read as one directory (report), the mix is named, not a "multi-host run"
    r = analyze(read_trace(tmp_path))
    assert r["mixed_platforms"] and r["stragglers"] is None
    assert r["verdict"].startswith("NOT ONE CAPTURE")


def test_host_table_without_steps_is_not_labelled_per_step(tmp_path):
    """Two hosts of one capture, no step annotations: the straggler table and figure say the
    exposed time is the capture's; with steps they say per step."""
    from overlap.report.figures import hosts_figure
    from overlap.report.text import text

    for with_steps in (False, True):
        d = tmp_path / str(with_steps) / "plugins" / "profile" / "s"
        for h in ("a", "b"):
            st = SyntheticTrace(host=h)
            g = st.gpu(0)
            g.kernel(1_000_000, 10_000_000)
            g.memcpy("D2H", 2_000_000, 20_000_000, 64)
            if with_steps:
                st.step(0, 1_000_000, 30_000_000)
            st.write(d / f"{h}.xplane.pb")
        r = analyze(read_trace(d))
        assert r["stragglers"] and not r["mixed_platforms"]
        head = next(ln for ln in text(r).splitlines() if ln.startswith("host "))
        fig = hosts_figure(r)
        if with_steps:
            assert "exposed/step" in head and "per step" in fig.layout.yaxis.title.text
        else:
            assert "/step" not in head and "exposed (capture)" in head
            assert "per step" not in fig.layout.yaxis.title.text


def test_rocm_activity_memcpy_with_size_0_has_unknown_bytes(tmp_path):
    """rocm_collector's memcpy activity events (`MemcpyH2D`, `memcpy_details` = `kind:Unknown
    size:N ...`): transfers by the CUPTI rule; `size:0` there is unknown, not 0 bytes."""
    st = SyntheticTrace()
    g = st.rocm(0)
    g.kernel(1_000_000, 10_000_000, stream=16)
    for i, n in enumerate((0, 4096)):
        g.event("MemcpyH2D", 20_000_000 + i * 1_000_000, 500_000, stream=20, kind="MemcpyH2D",
                stats={"memcpy_details": f"kind:Unknown size:{n} dest:0 async:1"})
    t = _read(st, tmp_path)
    tr = t.transfers.sort_values("start_ps")
    assert tr["bytes"].tolist() == [0, 4096] and tr["bytes_known"].tolist() == [False, True]
    r = analyze(t)
    assert r["summary"]["unknown_bytes"] == 1 and r["transfer_status"]["status"] == "complete"
