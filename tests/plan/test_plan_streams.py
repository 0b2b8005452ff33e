"""Async-op streams on a plan's path (`overlap.plan.estimate.plan_streams`, `compile_one`,
`--calibrate`): a hand-written program whose streams, and so its step, depend only on the
HloProto's instruction order (known by construction); a real deviceless compile whose stream
assignment the data flow fixes; the calibration run's own streams where the programs match,
on the real H100 corpus; and `advise` from a shell without JAX_PLATFORMS."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from overlap.hlo.program import _COMMENT_RE, _parse_module
from overlap.hlo.schedule import Roofline, estimate_overlap
from overlap.hlo.streams import execution_streams, proto_order
from overlap.plan.estimate import estimate_for, plan_streams
from overlap.plan.targets import get_target
from tests.conftest import REPO

os.environ.setdefault("JAX_PLATFORMS", "cpu")

MODEL = Roofline(hbm_Bps=1e12, peak_flops_bf16=1e18, peak_flops_f32=1e18,
                 host_link_Bps=1e10)   # 1 byte = 1 ps on HBM, 100 ps on the link
ACT = "f32[256,256]{1,0}"
COPY_PS = 256 * 256 * 4 * 100           # the D2H copy of x on the link
SLICE = "f32[1,256,1024]{2,1,0}"
SLICE_PS = 2 * 256 * 1024 * 4 + 12      # a slice reads and writes 1 MiB, plus three s32
NEG_PS = 2 * 256 * 256 * 4              # negate(x)
FS = f"((f32[10,256,1024]{{2,1,0}}, s32[], s32[], s32[]), {SLICE}, u32[])"
H100 = get_target("h100")


def _program() -> str:
    """Three weight slices (each waited for at once), then a D2H copy of x, a fourth slice
    waited for at once, a negate, the copy's done. Five async ops on four streams: which two
    share a stream is the HloProto's order's business, not this (schedule) text's."""
    slices = "\n".join(
        f"  %fs{k} = {FS} fusion-start(%w, %i, %z, %z), kind=kLoop, calls=%fused_ds\n"
        f"  %fd{k} = {SLICE} fusion-done(%fs{k})" for k in (1, 2, 3))
    return f"""HloModule m, is_scheduled=true

%fused_ds (p0: f32[10,256,1024], p1: s32[], p2: s32[], p3: s32[]) -> f32[1,256,1024] {{
  %p0 = f32[10,256,1024]{{2,1,0}} parameter(0)
  %p1 = s32[] parameter(1)
  %p2 = s32[] parameter(2)
  %p3 = s32[] parameter(3)
  ROOT %ds = {SLICE} dynamic-slice(%p0, %p1, %p2, %p3), dynamic_slice_sizes={{1,256,1024}}
}}

ENTRY %main (x: f32[256,256], w: f32[10,256,1024]) -> f32[256,256] {{
  %x = {ACT} parameter(0)
  %w = f32[10,256,1024]{{2,1,0}} parameter(1)
  %i = s32[] constant(3)
  %z = s32[] constant(0)
{slices}
  %cs = (f32[256,256]{{1,0:S(5)}}, {ACT}, u32[]) copy-start(%x)
  %fs4 = {FS} fusion-start(%w, %i, %z, %z), kind=kLoop, calls=%fused_ds
  %fd4 = {SLICE} fusion-done(%fs4)
  %neg = {ACT} negate(%x)
  %cd = f32[256,256]{{1,0:S(5)}} copy-done(%cs)
  ROOT %out = {ACT} negate(%neg)
}}
"""


def _proto(main_order: list[str]) -> bytes:
    """An HloProto of the program above listing the entry's instructions in `main_order` (what
    XLA's stream assignment reads: names and order only)."""
    from overlap.trace.protos import HloProto

    h = HloProto()
    fused = h.hlo_module.computations.add(name="fused_ds")
    for n in ("p0", "p1", "p2", "p3", "ds"):
        fused.instructions.add(name=n, opcode="parameter" if n != "ds" else "dynamic-slice")
    main = h.hlo_module.computations.add(name="main")
    for n in main_order:
        main.instructions.add(name=n)
    return h.SerializeToString()


SCHEDULE = ["x", "w", "i", "z", "fs1", "fd1", "fs2", "fd2", "fs3", "fd3", "cs", "fs4", "fd4",
            "neg", "cd", "out"]


def test_the_plans_streams_follow_the_hloproto_order_not_the_texts():
    text = _program()
    # XLA listed the copy first: copy 1, three slices 2..4, the fourth slice wraps onto 1
    first = ["x", "w", "i", "z", "cs", "cd", "fs1", "fd1", "fs2", "fd2", "fs3", "fd3", "fs4",
             "fd4", "neg", "out"]
    st, src = plan_streams(text, _proto(first), H100)
    assert st == {"cs": 1, "fs1": 2, "fs2": 3, "fs3": 4, "fs4": 1}
    assert "plan's HloProto" in src
    est = estimate_overlap(text, MODEL, streams=st, streams_source=src)
    # fs4 queues behind the copy on stream 1; the compute stream waits for it at fd4
    assert est["step_ps"] == 4 * SLICE_PS + COPY_PS + 2 * NEG_PS
    assert est["ops"][0]["hidden_ps"] == 0
    # In the schedule's order (XLA's list order here too) the copy and fs4 are on 4 and 1:
    # nothing queues: the copy moves during fs4's wait and behind the negate (hidden: the
    # compute beside it, the negate), and the step is the copy's time, not copy + slice + 2 x
    # negate.
    st2, _ = plan_streams(text, _proto(SCHEDULE), H100)
    assert st2 == {"fs1": 1, "fs2": 2, "fs3": 3, "cs": 4, "fs4": 1}
    est2 = estimate_overlap(text, MODEL, streams=st2, streams_source="x")
    assert est2["step_ps"] == 3 * SLICE_PS + COPY_PS + NEG_PS
    assert est2["ops"][0]["hidden_ps"] == NEG_PS


def test_without_the_hloproto_the_plan_says_the_streams_are_not_known():
    text = _program()
    st, src = plan_streams(text, None, H100)
    assert st is None and "no HloProto" in src
    # a proto of another program (misses instructions): not XLA's order, no streams
    st, src = plan_streams(text, _proto(SCHEDULE[:-1]), H100)
    assert st is None and "does not list" in src
    est = estimate_for(text, H100, command_buffers=False, streams=st, streams_source=src)
    assert not est["streams"]["modelled"]
    assert any("does not list" in a for a in est["assumptions"])
    # a TPU target: no XLA:GPU streams
    assert plan_streams(text, _proto(SCHEDULE), get_target("v5e")) == (None, "")


def test_a_deviceless_plan_puts_its_copies_on_xla_gpu_streams():
    """scan:small offload:x compiled for h100 (XLA:GPU, no device): one D2H copy in the forward
    loop's body, one H2D copy in the backward loop's; the backward loop reads the forward's
    output, so XLA lists it after: D2H on stream 1, H2D on stream 2."""
    pytest.importorskip("jax_plugins.xla_cuda12")
    from overlap.plan.compile import plan_workload

    (plan,) = plan_workload("scan:small", ["offload:x"], "h100", command_buffers=False)
    assert plan.status == "ok" and plan.hlo_proto
    est = plan.manifest["estimate"]
    ops = {r["op"]: r["direction"] for r in est["ops"]}
    assert sorted(ops.values()) == ["D2H", "H2D"]
    st = est["streams"]
    assert st["modelled"] and "plan's HloProto" in st["source"]
    assert {ops[k]: v for k, v in st["ops"].items() if k in ops} == {"D2H": "1", "H2D": "2"}
    comps, entry = _parse_module(_COMMENT_RE.sub("", plan.hlo_text))
    assert {k: str(v) for k, v in execution_streams(
        comps, entry, proto_order(plan.hlo_proto)).items()} == st["ops"]
    assert any("async ops on 2 streams (XLA:GPU's assignment over the plan's HloProto" in a
               for a in est["assumptions"])


ARCHIVE = REPO / "tests" / "data" / "gpu-corpus" / "gpu-h100.tar.xz"
POLICIES = ("full", "qkv_proj_offloaded", "minimal_offloaded", "minimal")


@pytest.fixture(scope="module")
def transformer_h100(tmp_path_factory) -> Path:
    if not ARCHIVE.is_file():
        pytest.skip("the H100 corpus archive is not in tests/data/gpu-corpus")
    root = tmp_path_factory.mktemp("cal-streams")
    with tarfile.open(ARCHIVE) as tf:
        members = [m for m in tf.getmembers()
                   if any(f"/transformer-h100/{p}/" in f"/{m.name}" for p in POLICIES)
                   or m.name.endswith("bw.json")]
        tf.extractall(root, members=members, filter="data")
    return next(root.rglob("transformer-h100"))


def _text(run: Path) -> str:
    return next((run / "hlo").glob("*.hlo.txt")).read_text()


def _measured_delta(run: Path, base: Path) -> float:
    def med(p: Path) -> float:
        s = sorted(json.loads((p / "run.json").read_text())["step_ns"])
        return s[len(s) // 2]
    return med(run) / med(base) - 1


def test_calibration_uses_its_runs_streams_for_its_own_program(transformer_h100):
    from overlap.plan.calibrate import load_calibration

    full = transformer_h100 / "full"
    cal = load_calibration(full)
    # full's 23 async weight slices (fusion-start, device to device), over 4 streams
    assert cal.streams is not None and len(cal.streams) == 23
    assert set(cal.streams.values()) == {1, 2, 3, 4}
    assert cal.to_dict()["streams"] == {"count": 4, "ops": 23}
    text = _text(full)
    st, src = plan_streams(text, None, H100, calibration=cal)
    assert st == cal.streams and src.startswith(f"from the calibration run {full}")
    # the same program with other names: paired by position
    renamed = re.sub(r"%fusion-start\b", "%renamed-start", text)
    st2, _ = plan_streams(renamed, None, H100, calibration=cal)
    assert st2 == {k.replace("fusion-start", "renamed-start"): v for k, v in st.items()}
    # another program: the run's streams do not apply, and the plan says so
    st3, src3 = plan_streams(_text(transformer_h100 / "minimal"), None, H100, calibration=cal)
    assert st3 is None and "ran another program" in src3


def test_calibrated_step_deltas_with_streams_on_the_captured_programs(transformer_h100):
    """Calibrated on full, each captured program with its streams (XLA's rule over its own
    capture's HloProto, checked against its host copies' streams): the deltas move toward the
    measured ones (qkv +12.4%, minimal_offloaded +34.6%, minimal -9.4%), and rank alike."""
    from overlap.plan.calibrate import _parse, _run_streams, load_calibration
    from overlap.trace import read_trace

    full = transformer_h100 / "full"
    cal = load_calibration(full)
    base = estimate_for(_text(full), H100, calibration=cal,
                        streams=cal.streams, streams_source="its own")
    assert base["streams"]["modelled"]
    assert base["step_ps"] == pytest.approx(cal.step_ps, rel=0.01)
    got, before = {}, {}
    for pol in POLICIES[1:]:
        run = transformer_h100 / pol
        text = _text(run)
        comps, _, _, entry = _parse(text)
        st, src = _run_streams(read_trace(str(run)), text, "jit_train_step", comps, entry,
                               "h100")
        assert st and "HloProto" in src
        if pol != "minimal":  # host copies to check the rule by
            assert "its host copies ran on those streams in all 5 runs" in src
        est = estimate_for(text, H100, calibration=cal, streams=st, streams_source=src)
        got[pol] = est["step_ps"] / base["step_ps"] - 1
        old = estimate_for(text, H100, calibration=cal)
        before[pol] = old["step_ps"] / estimate_for(_text(full), H100, calibration=cal)[
            "step_ps"] - 1
        measured = _measured_delta(run, full)
        assert abs(got[pol] - measured) <= abs(before[pol] - measured) + 0.005, pol
    assert got["minimal"] < 0 < got["qkv_proj_offloaded"] < got["minimal_offloaded"]
    assert 0.07 < got["qkv_proj_offloaded"] < 0.16
    assert 0.25 < got["minimal_offloaded"] < 0.40
    assert -0.12 < got["minimal"] < -0.07


def test_advise_compiles_from_a_shell_without_jax_platforms(tmp_path):
    """`overlap advise --policy ...` checked the policies (importing jax) before setting
    JAX_PLATFORMS=cpu, so jax looked for a CUDA device and every compile failed ('no
    compile-only device ... topology not implemented for cuda')."""
    pytest.importorskip("jax_plugins.xla_cuda12")
    env = {k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"}
    env.setdefault("PYTHONPATH", str(REPO))
    out = tmp_path / "adv"
    p = subprocess.run([sys.executable, "-m", "overlap", "advise", "--target", "h100",
                        "--workload", "scan:small", "--policy", "offload:x", "--json",
                        "--command-buffers", "off",
                        "--quiet", "--out", str(out)], capture_output=True, text=True,
                       env=env, cwd=REPO, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    (row,) = json.loads(p.stdout)["rows"]
    assert row["status"] == "ok", row["reason"]
    assert row["streams"].startswith("XLA:GPU's assignment over the plan's HloProto")
