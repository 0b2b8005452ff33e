"""The host-link model (partial duplex, command buffers), the per-step exposed wall time, the
why_not sentences and the memory-fraction variables, on hand-written scheduled HLO whose answers
are known by construction; and calibration (`--calibrate RUN`) on a real H100 capture."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from overlap.errors import UsageError
from overlap.hlo.schedule import Roofline, estimate_overlap
from overlap.plan.estimate import command_buffers_for, command_buffers_from_flags, roofline_for
from overlap.plan.targets import get_target, memory_budget, target_mismatch
from tests.conftest import REPO

HBM = 1e12    # 1 byte = 1 ps
LINK = 1e10   # 10 GB/s: 1 byte = 100 ps
ACT = "f32[256,256]{1,0}"
NB = 256 * 256 * 4
HOST = "f32[256,256]{1,0:S(5)}"


def _model(**kw) -> Roofline:
    return Roofline(hbm_Bps=HBM, peak_flops_bf16=1e18, peak_flops_f32=1e18,
                    host_link_Bps=LINK, **kw)


def _both_ways(between: str = "") -> str:
    """One D2H and one H2D copy of NB bytes issued together, both dones at the end."""
    return f"""HloModule m, is_scheduled=true

ENTRY %main (x: f32[256,256], h: f32[256,256]) -> f32[256,256] {{
  %x = {ACT} parameter(0)
  %h = {HOST} parameter(1)
  %d2h = ({HOST}, {ACT}, u32[]) copy-start(%x)
  %h2d = ({ACT}, {HOST}, u32[]) copy-start(%h)
{between}
  %d2h-done = {HOST} copy-done(%d2h)
  %h2d-done = {ACT} copy-done(%h2d)
  ROOT %out = {ACT} add(%x, %h2d-done)
}}
"""


def _by_dir(est: dict) -> dict[str, dict]:
    return {r["direction"]: r for r in est["ops"]}


def test_partial_duplex_slows_both_directions_while_both_move():
    alone = NB * 100  # ps at 10 GB/s
    full = _by_dir(estimate_overlap(_both_ways(), _model()))
    assert full["D2H"]["duration_ps"] == full["H2D"]["duration_ps"] == alone
    part = _by_dir(estimate_overlap(_both_ways(), _model(duplex_share=0.5)))
    # Both move the whole time at half rate: twice as long each.
    assert part["D2H"]["duration_ps"] == part["H2D"]["duration_ps"] == 2 * alone
    half = _by_dir(estimate_overlap(_both_ways(), _model(full_duplex=False)))
    # Half duplex: they take turns, in issue order.
    assert half["D2H"]["duration_ps"] == alone and half["H2D"]["duration_ps"] == 2 * alone
    assert half["H2D"]["queued_ps"] == alone and half["H2D"]["moving_ps"] == alone


def test_partial_duplex_only_while_the_other_direction_moves():
    # D2H of NB bytes; H2D of NB bytes issued later: the overlap runs at the shared rate only.
    text = _both_ways().replace(
        f"  %h2d = ({ACT}, {HOST}, u32[]) copy-start(%h)\n",
        f"  %w = {ACT} negate(%x)\n  %h2d = ({ACT}, {HOST}, u32[]) copy-start(%h)\n")
    est = _by_dir(estimate_overlap(text, _model(duplex_share=0.5)))
    neg = 2 * NB  # the negate reads and writes NB bytes at 1 B/ps; H2D is issued after it
    shared = NB - neg / 100  # D2H bytes left when H2D joins: both then move at 5 GB/s
    assert est["D2H"]["duration_ps"] == pytest.approx(neg + shared * 200, abs=2)
    # H2D moved `shared` bytes at the shared rate, then the rest (neg/100 bytes) alone.
    assert est["H2D"]["duration_ps"] == pytest.approx(shared * 200 + neg, abs=2)


def test_command_buffers_put_copies_on_the_compute_stream():
    between = f"  %w = {ACT} negate(%x)"
    off = estimate_overlap(_both_ways(between), _model())
    assert off["per_step"]["D2H"]["hidden_fraction"] > 0
    on = estimate_overlap(_both_ways(between), _model(copies_on_compute_stream=True))
    assert on["per_step"]["all"]["hidden_fraction"] == 0.0
    # Each copy holds the stream for its whole transfer: the step is both copies plus compute.
    assert on["step_ps"] == 2 * NB * 100 + 2 * NB + 3 * NB  # negate 2 NB, add 3 NB
    for r in on["ops"]:
        assert r["never_hides"] and "command buffers" in r["why_not"]
    assert any("command buffers on" in a for a in on["assumptions"])


def test_command_buffer_flag_is_read_as_xla_reads_it():
    assert command_buffers_from_flags("--xla_gpu_enable_command_buffer=") is False
    assert command_buffers_from_flags("--foo --xla_gpu_enable_command_buffer=FUSION") is True
    assert command_buffers_from_flags("--xla_gpu_enable_command_buffer=FUSION "
                                      "--xla_gpu_enable_command_buffer=") is False
    assert command_buffers_from_flags("") is None and command_buffers_from_flags(None) is None
    h100 = get_target("h100")
    assert command_buffers_for(h100, env={})[0] is True  # XLA's default: on
    assert command_buffers_for(h100, env={"XLA_FLAGS": "--xla_gpu_enable_command_buffer="}
                               )[0] is False
    assert command_buffers_for(h100, True, env={"XLA_FLAGS": ""})[0] is True
    assert command_buffers_for(get_target("v5e"), True)[0] is False  # no such thing on TPU


def test_h100_link_is_the_measured_one():
    model, info = roofline_for(get_target("h100"), command_buffers=False)
    assert model.link_Bps("D2H") == model.link_Bps("H2D") == 54.7e9
    assert 0.80 < model.duplex_share < 0.82 and info["nominal_link_Bps"] == 64e9
    assert "measured" in info["host_link"]


def _queued_three() -> str:
    """Three H2D copies issued together; the first's done comes next, the others' later."""
    copies = "\n".join(f"  %c{i} = ({ACT}, {HOST}, u32[]) copy-start(%h)" for i in range(3))
    return f"""HloModule m, is_scheduled=true

ENTRY %main (h: f32[256,256]) -> f32[256,256] {{
  %h = {HOST} parameter(0)
{copies}
  %d0 = {ACT} copy-done(%c0)
  %w = {ACT} negate(%d0)
  %d1 = {ACT} copy-done(%c1)
  %d2 = {ACT} copy-done(%c2)
  ROOT %out = {ACT} add(%d1, %d2)
}}
"""


def test_exposed_wall_time_never_exceeds_the_step():
    est = estimate_overlap(_queued_three(), _model())
    per = est["per_step"]["all"]
    # Queued copies overlap in time: their summed exposure counts the same wait up to 3 times...
    assert per["exposed_ps"] > est["step_ps"]
    # ...the wall time with a copy in flight and no compute counts it once.
    assert 0 < per["exposed_wall_ps"] <= est["step_ps"]
    assert per["exposed_wall_ps"] == est["stall_ps"]
    from overlap.analysis.plans import plan_row

    row = plan_row({"kind": "plan", "status": "ok", "policy": {"name": "p"},
                    "target": {"name": "x"}, "estimate": est})
    assert row["predicted_exposed_ps"] == per["exposed_wall_ps"]


def test_why_not_names_the_wait_during_the_setup():
    est = estimate_overlap(_queued_three(), _model(kernel_floor_ps=100_000))
    rows = {r["op"]: r for r in est["ops"]}
    assert rows["c0"]["why_not"] == "nothing scheduled beside it"
    # c1 and c2 have the negate beside them (5x their 0.1 us setup), but during their
    # setup the stream waits at d0: that, not "shorter than its setup", is why.
    for name in ("c1", "c2"):
        assert rows[name]["compute_ps"] >= 5 * 100_000
        assert "waits at d0" in rows[name]["why_not"], rows[name]["why_not"]


def test_xla_client_mem_fraction_is_read_first():
    h100 = get_target("h100")
    cap = h100.device_memory_bytes
    b = memory_budget(h100, env={"XLA_CLIENT_MEM_FRACTION": "0.5"})
    assert b.bytes == int(cap * 0.5) and "XLA_CLIENT_MEM_FRACTION" in b.source
    assert memory_budget(h100, env={"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.6"}).fraction == 0.6
    with pytest.raises(UsageError, match="both"):  # jaxlib refuses the pair
        memory_budget(h100, env={"XLA_CLIENT_MEM_FRACTION": "0.5",
                                 "XLA_PYTHON_CLIENT_MEM_FRACTION": "0.6"})
    with pytest.raises(UsageError, match="XLA_CLIENT_MEM_FRACTION"):
        memory_budget(h100, env={"XLA_CLIENT_MEM_FRACTION": "2"})


def test_target_mismatch_says_so():
    assert target_mismatch("h100", ["TPU v6 Lite"]) is not None
    assert "h100" in target_mismatch("h100", ["TPU v6 Lite"])
    assert target_mismatch("v6e", ["TPU v6 Lite"]) is None
    assert target_mismatch("h100", []) is None
    assert target_mismatch("h100", ["NVIDIA H100 80GB HBM3"]) is None


ARCHIVE = REPO / "tests" / "data" / "gpu-corpus" / "gpu-h100.tar.xz"


@pytest.fixture(scope="module")
def h100_transformer(tmp_path_factory) -> Path:
    if not ARCHIVE.is_file():
        pytest.skip("the H100 corpus archive is not in tests/data/gpu-corpus")
    root = tmp_path_factory.mktemp("cal")
    want = ("transformer-h100/full/", "transformer-h100/minimal/")
    with tarfile.open(ARCHIVE) as tf:
        members = [m for m in tf.getmembers()
                   if any(f"/{w}" in f"/{m.name}" for w in want) or m.name.endswith("bw.json")]
        tf.extractall(root, members=members, filter="data")
    found = next(root.rglob("transformer-h100"))
    return found


def test_calibration_on_the_real_h100_baseline(h100_transformer):
    from overlap.plan.calibrate import load_calibration
    from overlap.plan.estimate import estimate_for

    cal = load_calibration(h100_transformer / "full")
    assert cal.command_buffers is False  # captured with --xla_gpu_enable_command_buffer=
    assert cal.measured_share == 1.0 and cal.steps == 5
    # bw.json beside the runs: torch pinned copies, medians of the sizes >= 256 MiB.
    assert 54e9 < cal.link["D2H_Bps"] < 55.1e9 and 0.8 < cal.link["duplex_share"] < 0.85
    h100 = get_target("h100")
    text = next((h100_transformer / "full" / "hlo").glob("*.hlo.txt")).read_text()
    est = estimate_for(text, h100, calibration=cal)
    # Its own program: every kernel matched, and the walk gives back the measured step window.
    assert est["model"]["calibration_match"]["exact"] > 100
    assert est["step_ps"] == pytest.approx(cal.step_ps, rel=0.01)
    assert any("kernel times measured in" in a for a in est["assumptions"])
    # Another policy's program (different instruction names): matched by content; the
    # step-time difference lands near the measured -9.4% (profiled steps: -9.9%).
    other = next((h100_transformer / "minimal" / "hlo").glob("*.hlo.txt")).read_text()
    est2 = estimate_for(other, h100, calibration=cal)
    delta = est2["step_ps"] / est["step_ps"] - 1
    assert -0.12 < delta < -0.07
    sheet = estimate_for(other, h100, command_buffers=False)
    assert sheet["step_ps"] < 0.8 * est2["step_ps"]  # the sheet's peaks are far too fast


def test_calibrate_refuses_what_is_not_a_run(tmp_path):
    from overlap.errors import InputError
    from overlap.plan.calibrate import load_calibration

    with pytest.raises(InputError):
        load_calibration(tmp_path)


def _plan_run(tmp_path: Path, name: str, **changes) -> Path:
    """A plan run directory whose run.json is a plan of the hand-written module above, with
    `changes` forged into it (dotted keys into the estimate's per_step)."""
    import json

    est = estimate_overlap(_both_ways(f"  %w = {ACT} negate(%x)"), _model())
    m = {"schema_version": 1, "kind": "plan", "status": "ok", "label": name,
         "policy": {"name": "offload:x", "offloaded": ["x"]},
         "target": {"name": "h100", "device_memory_bytes": 1 << 30},
         "memory_analysis": {"temp_size_in_bytes": 1 << 20, "argument_size_in_bytes": 1 << 20,
                             "output_size_in_bytes": 0, "alias_size_in_bytes": 0},
         "device_peak_bytes": 2 << 20, "fits": True,
         "memory_budget": {"bytes": 1 << 30, "source": "test"},
         "offload_inventory": {"D2H": {"executed_bytes": NB, "executed_count": 1},
                               "H2D": {"executed_bytes": NB, "executed_count": 1}},
         "estimate": est}
    for k, v in changes.items():
        if k == "peak":
            m["device_peak_bytes"] = v
        else:
            m["estimate"]["per_step"]["all"][k] = v
    d = tmp_path / name
    d.mkdir()
    (d / "run.json").write_text(json.dumps(m))
    return d


def test_check_refuses_an_impossible_plan(tmp_path):
    from tests.conftest import run_cli

    ok = run_cli("check", str(_plan_run(tmp_path, "ok")))
    assert ok.returncode in (0, 1), ok.stderr  # a verdict, whichever
    for name, forged in (("hid", {"hidden_fraction": 7.0}), ("peak", {"peak": -1}),
                         ("neg", {"exposed_ps": -5})):
        p = run_cli("check", str(_plan_run(tmp_path, name, **forged)))
        assert p.returncode == 3, (name, p.stdout, p.stderr)
        assert "run.json" in p.stderr and "impossible plan" in p.stderr
        assert "Traceback" not in p.stderr
