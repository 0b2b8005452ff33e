"""A sweep times its policies interleaved (one step of each per round, rotating), so drift of the
machine cannot make one policy look faster; compare says how the runs it judges were timed."""

from __future__ import annotations

from overlap.analysis.compare import compare_dirs, timing_note
from overlap.capture.sweep import sweep
from overlap.runs import rundir
from tests.capture import sweep_order


def test_timing_rounds_rotate_through_every_policy(tmp_path):
    sweep_order.CALLS.clear()
    pols = ["full", "none", "offload:x"]
    runs = sweep("tests.capture.sweep_order:logged", pols, tmp_path, steps=4, warmup=1)
    calls = sweep_order.CALLS
    # warm-up: each policy in turn; then 4 rounds of one step each, starting one later each
    # round; then each policy's profiled steps, one policy after another.
    assert calls[:3] == pols
    rounds = [calls[3 + 3 * r: 6 + 3 * r] for r in range(4)]
    assert rounds == [pols[r % 3:] + pols[:r % 3] for r in range(4)]
    assert calls[15:] == [p for p in pols for _ in range(4)]
    mans = [rundir.load_manifest(r) for r in runs]
    assert all(len(m["step_ns"]) == 4 and len(m["step_ns_profiled"]) == 4 for m in mans)
    timing = [m["step_timing"] for m in mans]
    assert {t["mode"] for t in timing} == {"interleaved"}
    assert len({t["group"] for t in timing}) == 1
    assert timing[0]["with"] == ["none", "offload_x"]
    res = compare_dirs([str(r) for r in runs], baseline="full")
    assert "interleaved in one sweep" in res["step_timing"]


def test_policies_with_different_states_are_swept_one_after_another(tmp_path):
    sweep_order.CALLS.clear()
    runs = sweep("tests.capture.sweep_order:shape_by_policy", ["full", "none"], tmp_path,
                 steps=2, warmup=1)
    assert sweep_order.CALLS == ["full"] * 5 + ["none"] * 5  # each run whole, in turn
    timing = [rundir.load_manifest(r)["step_timing"] for r in runs]
    assert [t["mode"] for t in timing] == ["sequential"] * 2 and "states differ" in timing[0]["why"]
    res = compare_dirs([str(r) for r in runs], baseline="full")
    assert "different times" in res["step_timing"]


def test_timing_note_needs_one_shared_sweep():
    a = {"step_timing": {"mode": "interleaved", "group": "g1"}}
    b = {"step_timing": {"mode": "interleaved", "group": "g2"}}
    alone = {"step_timing": {"mode": "alone", "group": None}}
    assert "interleaved" in timing_note([a, dict(a)])
    for rows in ([a, b], [a, alone], [alone, dict(alone)]):
        assert "different times" in timing_note(rows)
    assert timing_note([a]) is None


def test_every_view_shows_the_one_step_time(tmp_path):
    """compare (text/JSON), the dashboard's runs table and Compare bars: one median, one source."""
    from overlap.dashboard import data as dash
    from overlap.report import figures

    runs = sweep("tests.capture.sweep_order:logged", ["full", "none"], tmp_path, steps=5,
                 warmup=0)
    res = compare_dirs([str(r) for r in runs], baseline="full")
    want = {r["label"]: r["step_ns_median"] for r in res["runs"]}
    found = {r.name: r for r in dash.discover_runs([tmp_path])}
    for lab, med in want.items():
        m = rundir.load_manifest(tmp_path / lab)
        assert med == sorted(m["step_ns"])[2]  # the median of 5 samples, from run.json
        row = dash.run_row(found[lab])
        assert row["step_ms"] == round(med / 1e6, 3)
        assert row["step_source"] == "unprofiled wall clock (run.json)"
    assert {r["step_source"] for r in res["runs"]} == {"unprofiled wall clock (run.json)"}
    rows = figures.compare_rows([(n, dash.load_run(found[n])) for n in want], "full")
    assert {r["run"]: r["step_ps"] for r in rows} == {k: v * 1000 for k, v in want.items()}
    assert {r["step_source"] for r in rows} == {"unprofiled wall clock (run.json)"}
    assert "unprofiled wall clock (run.json)" in figures.step_time_figure(rows).layout.title.text
