"""The CI gate's logic (`overlap.report.gate`): each check passes and fails where it should."""

from __future__ import annotations

import json

import pytest

import overlap
from overlap.analysis.overlap import analyze
from overlap.errors import InputError, UsageError
from overlap.report.gate import CheckConfig, load_baseline, run_checks
from overlap.trace.synthetic import gpu_offload_scenario
from tests.analysis.test_analysis import US, make_trace, read_bytes

COPY_PS = 200_000_000  # gpu_offload_scenario's copy length
# Per step: 2 directions x 4 layers, each copy exposed for copy_ps * (1 - f).
STEP_COPIES = 2 * 4


def scenario(f: float, steps: int = 2):
    return read_bytes(gpu_offload_scenario(steps=steps, hidden_fraction=f, copy_ps=COPY_PS))


@pytest.fixture(scope="module")
def hidden():
    return analyze(scenario(1.0))


@pytest.fixture(scope="module")
def half():
    return analyze(scenario(0.5))


def statuses(outcome) -> dict[str, str]:
    return {c["name"]: c["status"] for c in outcome["checks"]}


def test_defaults_are_transfers_present_and_min_overlap(hidden, half):
    ok = run_checks(hidden)
    assert ok["passed"] and statuses(ok) == {"no_transfers": "pass", "min_overlap": "pass"}
    assert ok["verdict"].startswith("PASS: D2H 100% hidden, H2D 100% hidden")
    bad = run_checks(half)
    assert not bad["passed"] and bad["failed"] == ["min_overlap"]
    assert bad["checks"][1]["value"] == pytest.approx(0.5)
    assert bad["verdict"].startswith("FAIL (min_overlap): D2H 50% hidden, H2D 50% hidden")


def test_min_overlap_boundary_is_inclusive(half):
    assert run_checks(half, CheckConfig(min_overlap=0.5))["passed"]
    assert not run_checks(half, CheckConfig(min_overlap=0.51))["passed"]


def test_no_transfers_fails_unless_allowed():
    r = analyze(make_trace(compute=[("CPU:0", US, 2 * US)], backend="cpu"))
    out = run_checks(r)
    assert out["failed"] == ["no_transfers"]
    assert "offload silently stopped happening" in out["checks"][0]["message"]
    assert statuses(out)["min_overlap"] == "skip"
    allowed = run_checks(r, CheckConfig(allow_no_transfers=True))
    assert allowed["passed"] and statuses(allowed)["no_transfers"] == "pass"


def test_per_direction():
    # D2H fully hidden under compute [1, 100) us, H2D fully exposed.
    r = analyze(make_trace(transfers=[("GPU:0", "D2H", 10 * US, 20 * US, 1, "pinned"),
                                      ("GPU:0", "H2D", 200 * US, 230 * US, 1, "pinned")],
                           compute=[("GPU:0", 1 * US, 100 * US)]))
    out = run_checks(r, CheckConfig(min_overlap=None, min_overlap_d2h=0.99, min_overlap_h2d=0.0))
    assert out["passed"], out
    out = run_checks(r, CheckConfig(min_overlap=None, min_overlap_h2d=0.01))
    assert out["failed"] == ["min_overlap_h2d"]
    # Overall: 10 of 40 us hidden.
    assert r["summary"]["overlap_ratio"] == pytest.approx(10 / (10 + 30))


def test_max_exposed_ms_uses_worst_step(half):
    per_step_ms = STEP_COPIES * (COPY_PS - COPY_PS // 2) / 1e9  # 0.8 ms
    assert half["step_summary"]["max_exposed_wall_ps"] == STEP_COPIES * (COPY_PS // 2)
    base = dict(min_overlap=None)
    assert run_checks(half, CheckConfig(max_exposed_ms=per_step_ms, **base))["passed"]
    out = run_checks(half, CheckConfig(max_exposed_ms=per_step_ms - 0.001, **base))
    assert out["failed"] == ["max_exposed_ms"]


def test_max_exposed_frac(half):
    frac = half["step_summary"]["max_exposed_frac"]
    assert 0 < frac < 1
    assert run_checks(half, CheckConfig(min_overlap=None, max_exposed_frac=frac))["passed"]
    assert not run_checks(half, CheckConfig(min_overlap=None,
                                            max_exposed_frac=frac * 0.99))["passed"]


def test_step_checks_fail_closed_without_steps():
    r = analyze(make_trace(transfers=[("GPU:0", "D2H", 10 * US, 20 * US, 1, "pinned")],
                           compute=[("GPU:0", 1 * US, 100 * US)]))
    out = run_checks(r, CheckConfig(max_exposed_ms=100.0, max_exposed_frac=1.0))
    assert out["failed"] == ["max_exposed_ms", "max_exposed_frac"]
    assert "no step annotations" in out["checks"][2]["message"]


def test_baseline_ratio_drop_and_exposed_growth(hidden, half):
    # 1.0 -> 0.5 is a 0.5 drop; exposed per step 0 -> 0.8 ms is far above 0 + 10 us slack.
    out = run_checks(half, CheckConfig(min_overlap=None, baseline=hidden))
    assert set(out["failed"]) == {"max_ratio_drop", "max_ratio_drop_d2h", "max_ratio_drop_h2d",
                                  "max_exposed_growth"}
    drop = next(c for c in out["checks"] if c["name"] == "max_ratio_drop")
    assert drop["value"] == pytest.approx(1.0 - 0.5)
    # Comparing a capture with itself passes; improving passes.
    assert run_checks(half, CheckConfig(min_overlap=None, baseline=half))["passed"]
    assert run_checks(hidden, CheckConfig(min_overlap=None, baseline=half))["passed"]


def test_exposed_growth_limit_is_relative_plus_slack():
    a, b = analyze(scenario(0.5)), analyze(scenario(0.45))
    old = STEP_COPIES * (COPY_PS - int(COPY_PS * 0.5))
    new = STEP_COPIES * (COPY_PS - int(COPY_PS * 0.45))
    assert b["step_summary"]["mean_exposed_wall_ps"] == new  # +10%
    loose = CheckConfig(min_overlap=None, max_ratio_drop=None, baseline=a,
                        max_exposed_growth=(new - old) / old, exposed_slack_ms=0.0)
    assert run_checks(b, loose)["passed"]
    tight = CheckConfig(min_overlap=None, max_ratio_drop=None, baseline=a,
                        max_exposed_growth=0.05, exposed_slack_ms=0.0)
    out = run_checks(b, tight)
    assert out["failed"] == ["max_exposed_growth"]
    assert out["checks"][-1]["limit"] == round(old * 1.05)


def test_baseline_file_forms_and_errors(tmp_path, hidden):
    report = tmp_path / "report.json"
    report.write_text(json.dumps(hidden))
    nested = tmp_path / "check.json"
    nested.write_text(json.dumps({"check": {}, "analysis": hidden}))
    assert load_baseline(report) == load_baseline(nested) == hidden
    for content, msg in ((None, "not found"), ("{not json", "not JSON"),
                         ('{"a": 1}', "not an overlap report")):
        p = tmp_path / f"bad{len(msg)}.json"
        if content is not None:
            p.write_text(content)
        with pytest.raises(InputError, match=msg) as e:
            load_baseline(p)
        assert str(p) in str(e.value)


@pytest.mark.parametrize("field,value", [("min_overlap", 1.5), ("max_exposed_ms", -1.0),
                                         ("max_exposed_frac", float("nan")),
                                         ("max_exposed_growth", -0.1)])
def test_bad_limits_are_usage_errors(hidden, field, value):
    with pytest.raises(UsageError):
        run_checks(hidden, CheckConfig(**{field: value}))


def test_assert_hidden():
    result = overlap.assert_hidden(scenario(1.0), min_overlap=0.99, max_exposed_ms=0.0)
    assert result["summary"]["overlap_ratio"] == 1.0
    with pytest.raises(AssertionError) as e:
        overlap.assert_hidden(scenario(0.5))
    msg = str(e.value)
    assert msg.startswith("FAIL (min_overlap): D2H 50% hidden, H2D 50% hidden")
    assert "overlap 0.500 (min 0.900)" in msg
    with pytest.raises(TypeError):
        overlap.assert_hidden(scenario(1.0), max_exposed_seconds=1)


def test_assert_hidden_reads_paths(tmp_path):
    path = gpu_offload_scenario(steps=1, hidden_fraction=0.25).write(tmp_path / "x.xplane.pb")
    with pytest.raises(AssertionError, match="D2H 25% hidden"):
        overlap.assert_hidden(path)
    overlap.assert_hidden(str(path), min_overlap=0.25)
