"""Same answer, not only same speed (issue 33 item 5): real XLA:CPU sweeps record each policy's
loss and gradient fingerprint; `compare`, `check` and the dashboard's Compare flag a policy
whose gradients differ from the baseline's, and never a run that recorded none."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import jax
import numpy as np
import pytest

from overlap.analysis import answers
from overlap.analysis.compare import compare_dirs
from overlap.capture import answers as record
from overlap.capture.policies import CATEGORY_REMAT, Policy
from overlap.capture.sweep import sweep
from overlap.report.compare_text import render_text
from overlap.runs import rundir

pytestmark = pytest.mark.slow  # real JAX captures


class WrongResidual(Policy):
    """TEST ONLY: full remat, but the layer's backward pass runs on a residual scaled by
    1.1 (a custom_vjp that recomputes the layer's vjp at the wrong point)."""

    def wrap(self, fn, *, prevent_cse: bool = False):
        inner = super().wrap(fn, prevent_cse=prevent_cse)

        @jax.custom_vjp
        def layer(x, w):
            return inner(x, w)

        def fwd(x, w):
            return inner(x, w), (x * 1.1, w)  # the wrong residual

        def bwd(res, ct):
            x_res, w = res
            _, vjp = jax.vjp(inner, x_res, w)
            return vjp(ct)

        layer.defvjp(fwd, bwd)
        return layer


def _wrong() -> Policy:
    return WrongResidual("wrong_residual", CATEGORY_REMAT,
                         checkpoint_policy=jax.checkpoint_policies.nothing_saveable,
                         description="TEST ONLY: backward pass reads a residual scaled by 1.1")


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    root = tmp_path_factory.mktemp("answers")
    runs = sweep("scan", ["nothing_saveable", "offload:x", "everything_saveable", _wrong()],
                 root, steps=2, warmup=1)
    return root, runs


def test_every_policy_records_its_answer_on_the_same_inputs(swept):
    _, runs = swept
    ms = [json.loads((r / "run.json").read_text()) for r in runs]
    for m in ms:
        a = m["answer"]
        assert a["definition"] == record.DEFINITION and np.isfinite(a["loss"])
        assert [g["path"] for g in a["grads"]] == ["[0]", "[1]"]  # scan's (w1, w2)
        assert all(g["l2"] > 0 and g["abs_sum"] >= abs(g["sum"]) for g in a["grads"])
        assert a["global_l2"] == pytest.approx(np.hypot(*[g["l2"] for g in a["grads"]]))
        assert a["low_precision"] is False  # scan:tiny is float32
        assert m["env"] == {"XLA_PJRT_GPU_HOST_MEMORY_LIMIT_GB": None}
    assert len({m["answer"]["inputs"] for m in ms}) == 1
    # Forward untouched: the wrong residual changes the gradients, not the loss.
    assert len({m["answer"]["loss"] for m in ms}) == 1
    base, wrong = ms[0]["answer"], ms[3]["answer"]
    assert wrong["grads"][0]["l2"] != pytest.approx(base["grads"][0]["l2"], rel=3e-3)


def test_compare_flags_the_policy_that_differs_and_none_that_agree(swept):
    root, runs = swept
    res = compare_dirs([root])
    by = {r["label"]: r for r in res["runs"]}
    assert res["baseline"] == "nothing_saveable"
    assert res["answer_mismatch"] == ["wrong_residual"]
    assert by["nothing_saveable"]["answer_check"]["status"] == "baseline"
    for ok in ("offload_x", "everything_saveable"):
        chk = by[ok]["answer_check"]
        # XLA:CPU: bit-identical (remat and offload change when/where, not what)
        assert chk["status"] == "same" and chk["loss_diff"] == 0 and chk["grad_diff"] == 0
    bad = by["wrong_residual"]["answer_check"]
    assert bad["status"] == "differs" and bad["loss_diff"] == 0
    assert bad["grad_diff"] > 3e-3 and bad["tolerance"] == answers.F32_RTOL
    assert "ANSWER DIFFERS from nothing_saveable's" in by["wrong_residual"]["verdict"]
    text = render_text(res)
    assert "same answer?" in text
    assert "  !! wrong_residual: DIFFERS beyond tolerance 0.0001" in text
    assert "     offload_x: same loss and gradients within 0.0001" in text


def test_check_gates_on_the_answer(swept, tmp_path):
    root, _ = swept

    def check(run, *more):
        return subprocess.run([sys.executable, "-m", "overlap", "check", str(root / run),
                               "--allow-no-transfers", "--same-answer-as",
                               str(root / "nothing_saveable"), *more],
                              capture_output=True, text=True, timeout=300)

    ok = check("offload_x")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "PASS  same_answer: as " in ok.stdout
    bad = check("wrong_residual")
    assert bad.returncode == 1 and "FAIL  same_answer: loss or gradients differ" in bad.stdout
    assert "FAIL (same_answer)" in bad.stdout
    # A tolerance wide enough for a 10% residual error lets it through (and is said).
    loose = check("wrong_residual", "--max-grad-diff", "0.5")
    assert loose.returncode == 0 and "0.5 (given)" in loose.stdout
    # Usage: the tolerance alone means nothing; a baseline that is no run is bad input.
    alone = subprocess.run([sys.executable, "-m", "overlap", "check", str(root / "offload_x"),
                            "--max-grad-diff", "0.1"], capture_output=True, text=True,
                           timeout=300)
    assert alone.returncode == 2
    nowhere = subprocess.run(
        [sys.executable, "-m", "overlap", "check", str(root / "offload_x"), "--same-answer-as",
         str(tmp_path / "nope")], capture_output=True, text=True, timeout=300)
    assert nowhere.returncode == 3 and "Traceback" not in nowhere.stderr


def test_runs_without_an_answer_are_not_recorded_never_flagged(swept, tmp_path):
    """A run made before answers were recorded (its run.json without `answer`), and a copied
    run whose recorded fingerprint is edited (a unit test of the comparison only)."""
    root, _ = swept
    for name in ("nothing_saveable", "offload_x"):
        shutil.copytree(root / name, tmp_path / "old" / name)
    m = json.loads((tmp_path / "old/offload_x/run.json").read_text())
    del m["answer"]
    (tmp_path / "old/offload_x/run.json").write_text(json.dumps(m))
    res = compare_dirs([tmp_path / "old"])
    chk = {r["label"]: r["answer_check"] for r in res["runs"]}["offload_x"]
    assert chk["status"] == "not recorded" and res["answer_mismatch"] is None
    assert "run made before overlap recorded answers" in chk["text"]
    out = subprocess.run([sys.executable, "-m", "overlap", "check",
                          str(tmp_path / "old/offload_x"), "--allow-no-transfers",
                          "--same-answer-as", str(tmp_path / "old/nothing_saveable")],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 1 and "same_answer: cannot be checked" in out.stdout
    # Edited: the loss off by 1% -> flagged; other inputs -> not comparable, not flagged.
    shutil.copytree(root / "nothing_saveable", tmp_path / "ed" / "nothing_saveable")
    for name, edit in (("lossy", lambda a: a.update(loss=a["loss"] * 1.01)),
                       ("other_inputs", lambda a: a.update(inputs="0" * 16))):
        shutil.copytree(root / "offload_x", tmp_path / "ed" / name)
        m = json.loads((tmp_path / "ed" / name / "run.json").read_text())
        edit(m["answer"])
        m["label"] = name
        (tmp_path / "ed" / name / "run.json").write_text(json.dumps(m))
    res = compare_dirs([tmp_path / "ed"])
    chk = {r["label"]: r["answer_check"] for r in res["runs"]}
    assert chk["lossy"]["status"] == "differs" and "loss" in chk["lossy"]["text"]
    assert chk["other_inputs"]["status"] == "not comparable"
    assert res["answer_mismatch"] == ["lossy"]


def test_dashboard_compare_flags_the_policy(swept):
    """The dashboard's Compare card, from the same runs (no browser: the card's builder)."""
    from overlap.dashboard import app as dash_app

    root, runs = swept
    from overlap.dashboard import data as rundata

    found = rundata.discover_runs([str(root)])
    datas = [(r.name, rundata.load_run(r)) for r in found]
    card = dash_app.answer_card(datas, "nothing_saveable")
    text = str(card)
    assert card.className == "answer-mismatch-card"
    assert "wrong_residual" in text and "DIFFERS" in text
    same = dash_app.answer_card(datas[:3], "nothing_saveable")
    assert same.className == "answer-card" and "DIFFERS" not in str(same)
    assert "offload_x: same loss and gradients" in str(same)


def test_tolerance_follows_precision():
    f32 = {"loss": 1.0, "grads": [{"path": "[0]", "dtype": "float32", "size": 4, "sum": 1.0,
                                    "abs_sum": 2.0, "l2": 1.0, "nonfinite": 0}],
           "global_l2": 1.0, "low_precision": False, "inputs": "a"}
    near = json.loads(json.dumps(f32))
    near["grads"][0]["l2"] = near["global_l2"] = 1.005  # 0.5%: a bf16 rounding, not f32's
    assert answers.check(near, f32)["status"] == "differs"
    bf = {**near, "low_precision": True}
    assert answers.check(bf, f32)["status"] == "same"
    assert answers.tolerance_for(bf, f32)[0] == answers.LOW_PRECISION_RTOL
    nan = json.loads(json.dumps(f32))
    nan["grads"][0]["nonfinite"] = 1
    assert answers.check(nan, f32, rtol=1.0)["status"] == "differs"
    # run.json normalisation: a malformed answer is "not recorded", never a crash.
    m = rundir.normalize_manifest({"answer": {"grads": ["x"]}, "env": {"A": 1, "B": "2"}})
    assert "not_recorded" in m["answer"] and m["env"] == {"B": "2"}
    assert answers.check(m["answer"], f32)["status"] == "not recorded"
