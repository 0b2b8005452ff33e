"""Dashboard aggregation and figure builders on known SYNTHETIC traces, without a browser.

The offload scenario (tests/dashboard_support.py): per step 4 layers forward then 4 backward;
each layer is one 400 us kernel, and its 200 us copy starts 100 us before the kernel ends
(hidden_fraction 0.5), so each copy is exposed for exactly 200 - 100 = 100 us.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from overlap.analysis import overlap as analysis
from overlap.dashboard import data
from overlap.report import aggregate, figures
from overlap.trace import read_trace
from overlap.trace.tables import n_rows
from tests.dashboard.dashboard_support import COPY_PS, KERNEL_PS, OFFLOAD_HIDDEN_FRACTION, write_run


@pytest.fixture(scope="module")
def offload(tmp_path_factory) -> data.RunData:
    run = write_run(tmp_path_factory.mktemp("fig"), "offload", {"policy": "qkv_proj_offloaded"},
                    hidden_fraction=OFFLOAD_HIDDEN_FRACTION, peak_gib=4)
    trace = read_trace(run)
    return data.run_data(trace, analysis.analyze(trace))


def test_fig001_timeline_exposed_segments(offload):
    tl = aggregate.step_timeline(offload, "synthetic-host", 1)
    assert tl.lanes == ["GPU:0 compute stream 7", "GPU:0 D2H stream 20", "GPU:0 H2D stream 20"]
    seg = pd.DataFrame(tl.segments)  # (numpy columns: a frame here to ask of them)
    kinds = seg["kind"].value_counts().to_dict()
    assert kinds == {"compute": 8, "D2H": 4, "H2D": 4, "exposed": 8}
    exposed = seg[seg["kind"] == "exposed"]
    # Each copy's exposed part is its tail after its kernel ends: 200 us - 100 us = 100 us.
    expected = COPY_PS - int(COPY_PS * OFFLOAD_HIDDEN_FRACTION)
    assert (exposed["end_ps"] - exposed["start_ps"]).tolist() == [expected] * 8
    # ...and starts exactly where a kernel ends.
    kernel_ends = set(seg.loc[seg["kind"] == "compute", "end_ps"])
    assert set(exposed["start_ps"]) <= kernel_ends
    # Summed exposed time drawn = the analysis's exposed wall time of that step.
    step = next(s for s in offload.result["steps"] if s["step"] == 1)
    exposed_ps = int((exposed["end_ps"] - exposed["start_ps"]).sum())
    assert exposed_ps == step["exposed_wall_ps"] == 8 * expected
    # Every segment lies inside the step window.
    assert (seg["start_ps"] >= tl.start_ps).all() and (seg["end_ps"] <= tl.end_ps).all()
    d2h = seg[seg["kind"] == "D2H"]
    assert d2h["ratio"].tolist() == [OFFLOAD_HIDDEN_FRACTION] * 4
    assert d2h["hlo_op"].tolist() == [f"copy-start.{i}" for i in range(4)]


def test_fig002_timeline_figure_traces_and_units(offload):
    tl = aggregate.step_timeline(offload, "synthetic-host", 0)
    fig = figures.timeline_figure(tl, synthetic=True)
    assert [t.name for t in fig.data] == ["compute", "D2H", "H2D", "exposed (no compute)"]
    assert fig.layout.title.text.startswith("SYNTHETIC")
    exposed = fig.data[3]
    # Display unit is ms since the step start: 100 us = 0.1 ms.
    assert np.allclose(np.asarray(exposed.x), 0.1)
    seg = pd.DataFrame(tl.segments)
    first_kernel = seg[seg["kind"] == "compute"].iloc[0]
    assert fig.data[0].base[0] == pytest.approx((first_kernel["start_ps"] - tl.start_ps) / 1e9)
    assert fig.data[0].x[0] == pytest.approx(KERNEL_PS / 1e9)


def test_fig003_timeline_caps_segments_for_big_lanes():
    # 20,000 back-to-back 1 us kernels with 0.1 us gaps, and 1,000 copies over them.
    n = 20_000
    starts = np.arange(n, dtype=np.int64) * 1_100_000
    ends = starts + 1_000_000
    tstart = np.arange(1000, dtype=np.int64) * 22_000_000
    rd = data.RunData(
        result={"steps": [{"host": "h", "step": 0, "start_ps": 0, "end_ps": int(ends[-1])}]},
        backend="gpu", synthetic=True,
        compute={"host": np.full(n, "h", object), "device": np.full(n, "GPU:0", object),
                 "stream": np.full(n, 7), "start_ps": starts, "end_ps": ends},
        transfers={"host": np.full(1000, "h", object), "device": np.full(1000, "GPU:0", object),
                   "direction": np.full(1000, "D2H", object), "stream": np.full(1000, 20),
                   "start_ps": tstart, "end_ps": tstart + 5_000_000,
                   "span_ps": np.full(1000, 5_000_000), "hidden_ps": np.zeros(1000, np.int64),
                   "exposed_ps": np.zeros(1000, np.int64), "overlap_ratio": np.zeros(1000),
                   "bytes": np.full(1000, 1 << 20), "bandwidth_Bps": np.ones(1000),
                   "hlo_op": np.full(1000, "copy-start.1", object)},
        memory={"time_ps": np.zeros(0, np.int64)}, program_memory=None, device_names=[])
    tl = aggregate.step_timeline(rd, "h", 0, cap=600)
    seg = pd.DataFrame(tl.segments)
    per_lane = seg.groupby(["lane", "kind"]).size()
    assert per_lane.max() <= 201  # cap 600 over 3 lanes, +1 for the last group
    assert "GPU:0 compute stream 7" in tl.merged_lanes
    # Merging never loses covered time: compute is one long busy stretch once gaps close.
    comp = seg[seg["kind"] == "compute"]
    assert comp["count"].sum() == n
    assert comp["start_ps"].min() == 0 and comp["end_ps"].max() == ends[-1]
    # 1,000 transfers fit under their lane budget? No (200): merged, counts add up.
    assert seg.loc[seg["kind"] == "D2H", "count"].sum() == 1000


def test_fig004_histogram(offload):
    hist = aggregate.overlap_histogram(offload.transfers)
    # 3 steps x 4 copies per direction, all at ratio 0.5 -> bin [0.5, 0.6).
    frame = pd.DataFrame(hist)
    for d in ("D2H", "H2D"):
        h = frame[frame["direction"] == d]
        assert h["count"].tolist() == [0] * 5 + [12] + [0] * 4
        assert int(h["exposed_ps"].sum()) == 12 * (COPY_PS // 2)
    fig = figures.overlap_histogram_figure(hist)
    assert [t.name for t in fig.data] == ["D2H", "H2D"]


def test_fig005_bandwidth_points_and_cap(offload):
    pts, total = aggregate.step_transfers(offload, "synthetic-host", 0)
    assert total == 8 and n_rows(pts) == 8
    # 8 MiB in 200 us.
    assert pts["bandwidth_Bps"][0] == pytest.approx((8 << 20) * 1e12 / COPY_PS)
    pts2, total2 = aggregate.step_transfers(offload, "synthetic-host", 0, cap=3)
    assert total2 == 8 and n_rows(pts2) == 3  # every 3rd: ceil(8 / 3)
    fig = figures.bandwidth_figure(pts2, total2, offload.result["by_direction"])
    assert "3 of 8" in fig.layout.title.text


def test_fig006_downsample_keeps_extremes():
    rng = np.random.default_rng(0)
    x = np.arange(100_000)
    y = rng.integers(0, 1000, x.size)
    y[54_321] = 5000  # a spike must survive
    y[12_345] = -7
    xs, ys = aggregate.downsample_minmax(x, y, buckets=100)
    assert len(xs) <= 200
    assert ys.max() == 5000 and ys.min() == -7
    assert np.all(np.diff(xs) > 0)  # still in x order


def test_fig007_compare_figures(offload, tmp_path):
    base_run = write_run(tmp_path, "base", {"policy": "full"}, hidden_fraction=1.0, peak_gib=6)
    tr = read_trace(base_run)
    base = data.run_data(tr, analysis.analyze(tr))
    figs = figures.compare_figures([("base", base), ("offload", offload)], "base")
    mem = figs["memory"]
    assert [t.name for t in mem.data] == ["base GPU:0 (baseline)", "offload GPU:0"]
    assert max(mem.data[0].y) == 6 and max(mem.data[1].y) == 4  # GiB
    assert list(figs["peak_memory"].data[0].y) == [6, 4]
    assert [t.name for t in figs["overlap"].data] == ["D2H", "H2D"]
    assert list(figs["overlap"].data[0].y) == [100, 50]
    rows = figures.compare_rows([("base", base), ("offload", offload)], "base")
    assert rows[0]["baseline"] and not rows[1]["baseline"]


def test_fig008_empty_inputs_give_messages_not_blank_figures():
    fig = figures.compare_figures([], None)["memory"]
    assert not fig.data and fig.layout.annotations[0].text.startswith("No allocator")
    empty = {c: np.zeros(0) for c in ("direction", "start_ps", "bandwidth_Bps")}
    fig = figures.bandwidth_figure(empty, 0, {})
    assert not fig.data and "No transfers" in fig.layout.annotations[0].text


def test_fig009_html_report(offload, tmp_path):
    from overlap.report.html import write_html

    run = write_run(tmp_path, "r", {"policy": "x"}, hidden_fraction=0.5)
    trace = read_trace(run)
    result = analysis.analyze(trace)
    out = write_html(result, trace, tmp_path / "report.html", baseline=offload.result)
    page = out.read_text()
    assert page.count('class="plotly-graph-div"') == 6  # 3 run + memory + 2 baseline bars
    assert page.count("<script type=\"text/javascript\">/**") <= 1  # plotly.js inlined once
    assert "SYNTHETIC" in page and result["verdict"] in page
    assert "copy-start.0" in page  # the top-exposed table


def test_fig010_prepare_run_view(tmp_path):
    write_run(tmp_path, "r", {"policy": "x"}, hidden_fraction=0.5)
    run = data.discover_runs([tmp_path])[0]
    view = data.prepare_run_view(run)
    assert view["step"] == ("synthetic-host", 1)  # the median step (all tie: the middle one)
    assert set(view["figures"]) == {"timeline", "histogram", "bandwidth"}
    assert 0 < view["payload_bytes"] < 200_000
    assert len(view["top_exposed"]) == 10


def test_runs_table_reads_real_manifests_from_sample_traces():
    """run.json written by overlap.capture.api holds policy/workload as dicts: show their names."""
    from overlap.dashboard.data import default_baseline, discover_runs, run_row
    from tests.conftest import SAMPLE_TRACES

    runs = discover_runs([SAMPLE_TRACES / "cpu-transformer-tiny"])
    rows = {r["policy"]: r for r in map(run_row, runs)}
    assert sorted(rows) == ["everything_saveable", "full", "qkv_proj_offloaded"]
    row = rows["qkv_proj_offloaded"]
    assert row["workload"] == "transformer:tiny" and row["backend"] == "cpu"
    assert row["verdict"] == "no transfers: XLA:CPU compiles offload away"
    assert row["step_ms"] > 0 and row["peak"] and row["peak_source"]
    assert default_baseline(runs) == next(r.name for r in runs if r.name.endswith("full"))


def test_cpu_thread_lanes_are_numbered_not_hashed():
    from tests.conftest import SAMPLE_TRACES

    runs = data.discover_runs([SAMPLE_TRACES / "cpu-scan"])
    d = data.load_run(runs[0])
    step = data.default_step(d)
    tl = aggregate.step_timeline(d, *step)
    assert tl.lanes and all("thread" in n or "stream" in n for n in tl.lanes)
    assert not any(any(ch.isdigit() for ch in n.split()[-1]) and len(n.split()[-1]) > 7
                   for n in tl.lanes)


def _bw_points(gbs: list[float], direction: str = "D2H") -> aggregate.Table:
    """SYNTHETIC per-transfer points: 1 MiB copies at the given GB/s, 1 ms apart."""
    n = len(gbs)
    return {"direction": np.full(n, direction, object), "start_ps": np.arange(n) * 10**9,
            "bandwidth_Bps": np.asarray(gbs, float) * 1e9, "overlap_ratio": np.full(n, 0.5),
            "bytes": np.full(n, 1 << 20), "hlo_op": np.array([f"copy.{i}" for i in range(n)],
                                                             object)}


def test_fig010_bandwidth_axis_survives_one_outlier():
    """One copy 700x faster than the rest is drawn at the top edge and counted, not to scale;
    without it, or with points that are merely spread, the axis is plotly's own."""
    bulk = list(np.linspace(8.0, 58.0, 199))
    fig = figures.bandwidth_figure(_bw_points(bulk + [39_494.0]), 200, {})
    kept, out = fig.data
    assert len(kept.y) == 199 and max(kept.y) == pytest.approx(58.0)
    assert len(out.y) == 1 and out.customdata[0][2] == pytest.approx(39_494.0)
    assert "1 above the axis (up to 39,494 GB/s)" in out.name
    lo, hi = fig.layout.yaxis.range
    assert lo == 0 and 58.0 < out.y[0] <= hi < 2 * 58.0
    assert "1 transfer above" in fig.layout.title.text
    # No outlier: nothing clipped, no range set; a 3x spread is data, not an outlier.
    for gbs in (bulk, [10.0, 12.0, 30.0], [5.0] * 4):
        fig = figures.bandwidth_figure(_bw_points(gbs), len(gbs), {})
        assert len(fig.data) == 1 and fig.layout.yaxis.range is None
    # Few points: the largest is not its own reference (99th percentile, "lower").
    fig = figures.bandwidth_figure(_bw_points([20.0, 21.0, 22.0, 5000.0]), 4, {})
    assert [len(t.y) for t in fig.data] == [3, 1]


def test_fig011_bandwidth_axis_on_the_tpu_v6e_sample():
    """Real capture (sample_traces/tpu-v6e-offload, no step annotations): 2,400 copies. On the
    host-aligned timeline one D2H read 39,494 GB/s; bandwidth is now bytes over the chip's own
    clock (overlap.trace.tpu `device_span_ps`): 9.0-29.4 GB/s, no point above the axis, none
    beyond the 32 GB/s link."""
    from pathlib import Path

    run = Path(__file__).resolve().parents[2] / "sample_traces" / "tpu-v6e-offload"
    trace = read_trace(run)
    rd = data.run_data(trace, analysis.analyze(trace))
    fig = figures.run_figures(rd, None)["bandwidth"]
    by = {t.name.split(" ")[0].rstrip(":"): t for t in fig.data if "above" not in t.name}
    assert not [t for t in fig.data if "above" in t.name]
    assert len(by["D2H"].y) + len(by["H2D"].y) == 2400
    top = max(max(by["D2H"].y), max(by["H2D"].y))
    assert 29.4 < top < 29.5
    assert fig.layout.yaxis.range is None or fig.layout.yaxis.range[1] < 1.2 * top


def _many_devices_run(n_dev: int) -> data.RunData:
    """SYNTHETIC: `n_dev` GPUs, rows shuffled across devices; device k runs k + 1 kernels of
    10 us on stream 7 (and one at 5 ms on stream 9 where k is even), and one D2H copy of 10 us on
    stream 20 starting 5 us before its last kernel ends (5 us exposed)."""
    rng = np.random.default_rng(7)
    cdev, cstream, cs = [], [], []
    for k in range(n_dev):
        for j in range(k + 1):
            cdev.append(f"GPU:{k}"), cstream.append(7), cs.append(j * 20_000_000)
        if k % 2 == 0:
            cdev.append(f"GPU:{k}"), cstream.append(9), cs.append(5_000_000_000)
    order = rng.permutation(len(cdev))
    cs_a = np.array(cs, np.int64)[order]
    tdev = [f"GPU:{k}" for k in range(n_dev)]
    ts = np.array([k * 20_000_000 + 5_000_000 for k in range(n_dev)], np.int64)
    t_order = rng.permutation(n_dev)
    n_t = n_dev
    return data.RunData(
        result={"steps": [{"host": "h", "step": 0, "start_ps": 0, "end_ps": 10**12}]},
        backend="gpu", synthetic=True,
        compute={"host": np.full(len(cs), "h", object),
                 "device": np.array(cdev, object)[order],
                 "stream": np.array(cstream)[order], "start_ps": cs_a,
                 "end_ps": cs_a + 10_000_000},
        transfers={"host": np.full(n_t, "h", object), "device": np.array(tdev, object)[t_order],
                   "direction": np.full(n_t, "D2H", object), "stream": np.full(n_t, 20),
                   "start_ps": ts[t_order], "end_ps": ts[t_order] + 10_000_000,
                   "span_ps": np.full(n_t, 10_000_000), "hidden_ps": np.zeros(n_t, np.int64),
                   "exposed_ps": np.zeros(n_t, np.int64), "overlap_ratio": np.zeros(n_t),
                   "bytes": np.full(n_t, 1 << 20), "bandwidth_Bps": np.ones(n_t),
                   "hlo_op": np.full(n_t, "copy-start.1", object)},
        memory={"time_ps": np.zeros(0, np.int64)}, program_memory=None, device_names=[])


def test_timeline_of_many_devices_is_each_devices_own(monkeypatch):
    """More devices than `_FEW_DEVICES`: each device's rows found by one sort, not a mask
    each; the same lanes and segments as the masks give, and the counts built in."""
    n_dev = 48
    assert n_dev > aggregate._FEW_DEVICES
    rd = _many_devices_run(n_dev)
    tl = aggregate.step_timeline(rd, "h", 0)
    devices = sorted(f"GPU:{k}" for k in range(n_dev))
    want_lanes = [lane for d in devices for lane in
                  [f"{d} compute stream 7"] + ([f"{d} compute stream 9"]
                                               if int(d[4:]) % 2 == 0 else [])
                  + [f"{d} D2H stream 20"]]
    assert tl.lanes == want_lanes
    seg = pd.DataFrame(tl.segments)
    comp = seg[seg["kind"] == "compute"].groupby("lane")["count"].sum()
    assert all(comp[f"GPU:{k} compute stream 7"] == k + 1 for k in range(n_dev))
    exposed = seg[seg["kind"] == "exposed"]
    assert len(exposed) == n_dev and ((exposed["end_ps"] - exposed["start_ps"]) == 5_000_000).all()
    monkeypatch.setattr(aggregate, "_FEW_DEVICES", 10 * n_dev)  # a mask per device
    masked = aggregate.step_timeline(rd, "h", 0)
    assert masked.lanes == tl.lanes and masked.merged_lanes == tl.merged_lanes
    for k in tl.segments:
        np.testing.assert_array_equal(masked.segments[k], tl.segments[k], err_msg=k)
