"""TPU copies timed on the chip's own clock (`device_offset_ps`/`device_duration_ps`, the
reader's `device_span_ps`) beside the host-aligned timeline the overlap is measured on.

Real: sample_traces/tpu-v6e-offload (XLA:TPU v6e; an independent pairing of its events here,
not the reader's). Synthetic (labelled so in the file): known device spans that the
host-aligned times squeeze, with and without the Async XLA Ops line, and copies without the
stats (the fallback, and the note saying so)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from overlap.analysis.overlap import analyze, transfer_columns
from overlap.trace import read_trace, wire
from overlap.trace.synthetic import SyntheticTrace
from tests.conftest import SAMPLE_TRACES, run_cli

V6E = SAMPLE_TRACES / "tpu-v6e-offload"
V6E_FILE = V6E / "plugins" / "profile" / "test_xplanes" / "tpu_inference_2.xplane.pb"
GIB = 1 << 30
LINK_BPS = 32e9  # v6e's host link on the data sheet: no copy can beat it


def _independent_device_spans() -> dict[str, list[int]]:
    """Per chip, the sorted device-clock spans of its copies: each copy-start.N with the next
    copy-done.N in device-clock order (no ties there), straight from the protobuf."""
    from overlap.trace.files import load_xspace

    out: dict[str, list[int]] = {}
    for p in load_xspace(V6E_FILE).planes:
        m = re.fullmatch(r"/device:(TPU:\d+)", p.name)
        if not m:
            continue
        names = {k: v.name for k, v in p.stat_metadata.items()}
        events = []
        for line in p.lines:
            if line.name != "XLA Ops":
                continue
            for e in line.events:
                op = p.event_metadata[e.metadata_id].name.split(" = ")[0].lstrip("%")
                g = re.fullmatch(r"copy-(start|done)(\.\d+)?", op)
                if g:
                    st = {names[s.metadata_id]: s.uint64_value or s.int64_value
                          for s in e.stats}
                    t0 = st["device_offset_ps"]
                    events.append((t0, g[1] == "done", t0 + st["device_duration_ps"],
                                   g[2] or ""))
        waiting: dict[str, list[int]] = {}
        spans = []
        for t0, done, t1, key in sorted(events):
            if done:
                spans.append(t1 - waiting[key].pop(0))
            else:
                waiting.setdefault(key, []).append(t0)
        out[m[1]] = sorted(spans)
    return out


@pytest.fixture(scope="module")
def v6e():
    return read_trace(V6E)


def test_v6e_copies_take_their_device_clock_time(v6e):
    tr = v6e.columns("transfers")
    dev = tr["device_span_ps"]
    assert all(v is not None for v in dev) and len(dev) == 2400
    dspan = np.array(dev.tolist(), np.int64)
    device = np.asarray(tr["device"], object)
    want = _independent_device_spans()
    assert sorted(want) == ["TPU:0", "TPU:1", "TPU:2", "TPU:3"]
    for chip, spans in want.items():
        assert sorted(dspan[device == chip].tolist()) == spans, chip
    # the host-aligned timeline squeezes one 5 GiB copy to 0.14 ms (39 TB/s); the chip's
    # clock says no copy took less than 182 ms
    host = np.asarray(tr["end_ps"]) - np.asarray(tr["start_ps"])
    assert host.min() == 135_938_828 and dspan.min() == 182_360_640_000
    assert (np.asarray(tr["bytes"]) * 1e12 / dspan).max() <= LINK_BPS
    assert int(dspan.sum()) == 785_447_083_526_250  # 791.3 s host-aligned


def test_v6e_bandwidth_on_device_clock_overlap_on_checked_timeline(v6e):
    """SOURCES.md's facts (hidden/partial/exposed 1/6/2393 on the host-aligned timeline) stay;
    bandwidth, per copy and per group, is bytes over device-clock time and physically
    possible."""
    r = analyze(v6e)
    s = r["summary"]
    assert (s["transfers"], s["bytes"]) == (2400, 12000 * GIB)
    assert (s["hidden"], s["partial"], s["exposed"]) == (1, 6, 2393)
    assert s["durations"] == {"tpu_device_clock": 2400, "tpu_host_aligned": 0}
    assert s["duration_ps"] < s["span_ps"]  # 785.4 s on the chips, 791.3 s host-aligned
    assert s["bandwidth_Bps"] == pytest.approx(s["bytes"] * 1e12 / s["duration_ps"])
    for d in ("D2H", "H2D"):
        b = r["by_direction"][d]
        assert b["bandwidth_Bps"] == pytest.approx(b["bytes"] * 1e12 / b["duration_ps"])
        assert b["bandwidth_Bps"] <= LINK_BPS
    table, _ = transfer_columns(v6e)
    bw = table["bandwidth_Bps"]
    assert np.nanmax(bw) <= LINK_BPS and np.nanmax(bw) == pytest.approx(29.44e9, rel=1e-3)
    assert not any("no device clock" in n for n in r["notes"])


def test_v6e_same_spans_without_the_scanner(v6e, monkeypatch):
    monkeypatch.setattr(wire, "SCANNER", None)
    t = read_trace(V6E)
    assert t.columns("transfers")["device_span_ps"].tolist() == \
        v6e.columns("transfers")["device_span_ps"].tolist()


def _squeezed(tmp_path, async_line: bool, stats: bool = True):
    """SYNTHETIC: two copies whose host-aligned spans an alignment jump squeezed (100 us and
    50 us) while the chip's clock says 200 ms and 100 ms; a fusion beside each."""
    st = SyntheticTrace("tpu-clock-host")
    d = st.tpu(0, async_line=async_line)
    ms = 1_000_000_000
    d.op(10 * ms, 5 * ms)
    d.async_copy("D2H", 10 * ms, 10 * ms + 100_000_000,
                 device_span=(7 * ms, 207 * ms) if stats else None)
    d.op(300 * ms, 5 * ms, name="fusion.2")
    d.async_copy("H2D", 300 * ms, 300 * ms + 50_000_000, dims=(2, 1024, 1024),
                 device_span=(400 * ms, 500 * ms) if stats else None)
    path = st.write(tmp_path / ("a" if async_line else "p") / "x.xplane.pb")
    return path, st.truth


@pytest.mark.parametrize("async_line", [True, False])
def test_synthetic_device_spans_are_the_written_ones(tmp_path, async_line):
    path, truth = _squeezed(tmp_path, async_line)
    t = read_trace(path)
    tr = t.columns("transfers")
    by_op = dict(zip(tr["hlo_op"].tolist(), tr["device_span_ps"].tolist()))
    want = {x.hlo_op: x.device_span_ps for x in truth.transfers}
    assert by_op == want == {"copy-start.1": 200_000_000_000, "copy-start.2": 100_000_000_000}
    r = analyze(t)
    # overlap stays on the host-aligned spans: the 5 ms fusion covers each 100 us / 50 us copy
    assert r["summary"]["hidden"] == 2 and r["summary"]["span_ps"] == 150_000_000
    # bandwidth is bytes over the chip's time: 16 MiB / 200 ms and 8 MiB / 100 ms
    assert r["by_direction"]["D2H"]["bandwidth_Bps"] == pytest.approx(16 * 2**20 / 0.2)
    assert r["by_direction"]["H2D"]["bandwidth_Bps"] == pytest.approx(8 * 2**20 / 0.1)
    assert r["summary"]["durations"]["tpu_device_clock"] == 2


@pytest.mark.parametrize("async_line", [True, False])
def test_synthetic_copies_without_device_clock_fall_back_and_say_so(tmp_path, async_line):
    path, truth = _squeezed(tmp_path, async_line, stats=False)
    t = read_trace(path)
    assert t.columns("transfers")["device_span_ps"].tolist() == [None, None]
    assert all(x.device_span_ps is None for x in truth.transfers)
    r = json.loads(run_cli("report", "--json", str(path)).stdout)
    assert r["summary"]["durations"] == {"tpu_device_clock": 0, "tpu_host_aligned": 2}
    assert any("2 TPU transfer(s) carry no device clock" in n for n in r["notes"])
    # bytes over the host-aligned span, as before: 16 MiB / 100 us
    assert r["by_direction"]["D2H"]["bandwidth_Bps"] == pytest.approx(16 * 2**20 / 1e-4)
    text = run_cli("report", str(path)).stdout
    assert "carry no device clock" in text and "SYNTHETIC" in text.upper()
