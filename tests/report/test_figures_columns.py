"""The figures' tables are numpy columns, not DataFrames (issue 32: `overlap report --html`
loaded pandas for them alone). What they draw must be what the frames drew: the former
pandas code of the hover texts and of the plan timeline's table is kept here as the oracle,
on segments (SYNTHETIC, built here) that are merged, single with and without a hidden share,
and without an op; and `report --html` of real captures in a fresh interpreter imports no
pandas."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from overlap.report import aggregate, figures

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "sample_traces"
PS_PER_MS = figures.PS_PER_MS


def _hover_by_pandas(s: pd.DataFrame, dur_ps: np.ndarray) -> list[str]:
    """The former `_segment_hover`, on a DataFrame of segments."""
    ms = pd.Series(dur_ps / PS_PER_MS, index=s.index).map("{:.4f} ms".format)
    text = s["kind"].astype(str) + " " + ms
    merged = s["count"] > 1
    text = text.where(~merged, text + " (" + s["count"].astype(str) + " events merged)")
    single = (~merged) & s["hlo_op"].notna()
    if single.any():
        ratio = s["ratio"].map(lambda r: "n/a" if pd.isna(r) else f"{100 * r:.0f}%")
        detail = ("<br>" + s["hlo_op"].astype(str) + "<br>hidden " + ratio + ", exposed "
                  + (s["exposed_ps"] / PS_PER_MS).map("{:.4f} ms".format) + "<br>"
                  + (s["bytes"] / 2**20).map("{:.2f} MiB".format))
        text = text.where(~single, text + detail)
    return text.tolist()


def _segments() -> aggregate.Table:
    # SYNTHETIC: a compute bar, a merged transfer bar, single transfers with a share, without
    # one (NaN) and with no op (None, and NaN as a frame would hold it)
    return {
        "lane": np.array(["GPU:0 compute stream 7"] + ["GPU:0 D2H stream 20"] * 5, object),
        "kind": np.array(["compute", "D2H", "D2H", "D2H", "D2H", "exposed"], object),
        "start_ps": np.array([0, 10, 2_000_000, 3_000_000, 4_000_000, 5_000_000], np.int64),
        "end_ps": np.array([1_234_567, 1_000_010, 2_500_000, 3_333_333, 4_100_000, 5_000_001],
                           np.int64),
        "count": np.array([1, 17, 1, 1, 1, 1], np.int64),
        "hlo_op": np.array([None, None, "copy-start.3", "copy-start.4", None, np.nan], object),
        "ratio": np.array([np.nan, np.nan, 0.456, np.nan, 0.5, np.nan]),
        "bytes": np.array([0, 0, 3 << 20, 12_345_678, 1, 0], np.int64),
        "exposed_ps": np.array([0, 0, 272_000, 333_333, 0, 0], np.int64),
    }


def test_hover_texts_are_the_frames():
    seg = _segments()
    dur = seg["end_ps"] - seg["start_ps"]
    got = figures._segment_hover(seg, dur)
    assert got == _hover_by_pandas(pd.DataFrame(seg), dur)
    assert got[1] == "D2H 0.0010 ms (17 events merged)"
    assert got[2] == "D2H 0.0005 ms<br>copy-start.3<br>hidden 46%, exposed 0.0003 ms<br>3.00 MiB"
    assert "hidden n/a" in got[3] and got[4] == "D2H 0.0001 ms" and got[5] == "exposed 0.0000 ms"


def test_plan_rows_are_typed_as_a_frame_of_them():
    rows = [{"lane": "c", "kind": "compute", "start_ps": 0, "end_ps": 5, "count": 1,
             "hlo_op": None, "ratio": None, "bytes": None, "exposed_ps": None},
            {"lane": "d", "kind": "D2H", "start_ps": 2, "end_ps": np.int64(9), "count": 1,
             "hlo_op": "copy-start", "ratio": 1.0, "bytes": 4 << 20, "exposed_ps": 3}]
    got = figures._records_table(rows)
    want = pd.DataFrame(rows, columns=list(aggregate.SEGMENT_COLUMNS))
    for c in aggregate.SEGMENT_COLUMNS:
        if want[c].dtype.kind in "if":  # numbers: the same dtype (NaN where None)
            assert got[c].dtype == want[c].dtype, c
            assert np.array_equal(got[c], want[c].to_numpy(), equal_nan=True), c
        else:  # texts (pandas 3 infers its string dtype; objects here), None missing
            assert [None if pd.isna(v) else v for v in got[c]] == \
                [None if pd.isna(v) else v for v in want[c]], c
    dur = got["end_ps"] - got["start_ps"]
    assert figures._segment_hover(got, dur) == _hover_by_pandas(want, dur)
    assert all(v.dtype == object and not len(v) for v in figures._records_table([]).values())


@pytest.mark.parametrize("run", ["gpu-h100/scan-h100/offload_x", "tpu-v6e-offload",
                                 "cpu-transformer-tiny/qkv_proj_offloaded"])
def test_html_report_of_a_real_capture_imports_no_pandas(run, tmp_path):
    from tests.cli.test_no_pandas import _NEVER, run_overlap

    root = SAMPLES / run
    target = root if (root / "run.json").exists() else sorted(root.rglob("*.xplane.pb"))[0]
    page = tmp_path / "r.html"
    code, _, heavy = run_overlap(["report", "--html", str(page), str(target)])
    assert code == 0 and "plotly" in heavy
    assert not set(heavy) & (_NEVER - {"plotly"})
    assert page.read_text().startswith("<!DOCTYPE html>")


def test_memory_curves_key_a_missing_device_by_its_allocator():
    # SYNTHETIC allocator events: a device given, missing (None, and NaN as a caller's frame
    # may hold it), each curve time-ordered; keys as pandas' `isna` chose them
    dev = np.array([None, "GPU:0", np.nan, "GPU:0", None], object)
    alloc = np.array(["a", "b", "c", "d", "a"], object)
    mem = {"time_ps": np.array([3, 1, 2, 5, 0], np.int64),
           "bytes_allocated": np.array([1, 2, 3, 4, 5], np.int64),
           "device": dev, "allocator": alloc}
    got = aggregate.memory_curves(mem)
    want = np.where(pd.isna(dev), alloc, dev)
    assert sorted(got) == sorted({str(k) for k in want.tolist()}) == ["GPU:0", "a", "c"]
    assert [(x.tolist(), y.tolist()) for x, y in (got["a"], got["GPU:0"])] == \
        [([0, 3], [5, 1]), ([1, 5], [2, 4])]
