"""Real H100 plans beside the real H100 capture of their program (issue 34, fuzz round 3):

* N5: a GPU plan joins a GPU capture. Plans name jax's platform ("cuda"), captures their trace
  backend ("gpu"); the join read them as two platforms and never joined an H100 plan to an H100
  capture of the same program.
* N6: a damaged plan (estimate.ops holding {} or a number where a copy record belongs, HLO
  text that is not UTF-8) is one line naming the file (exit 3) in `report RUN --plan PLAN`, and
  the dashboard's card for it says what is wrong (it raised KeyError 'direction')."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from overlap.analysis.plan_join import _same_platform
from overlap.cli.main import main as cli_main


def test_cuda_plans_are_gpu_runs_of_nvidia_devices_only():
    assert _same_platform("cuda", "gpu", "gpu (NVIDIA)")
    assert _same_platform("cuda", "gpu", "gpu")  # no vendor known: the other checks decide
    assert not _same_platform("cuda", "gpu", "gpu (AMD)")
    assert not _same_platform("cuda", "tpu", "tpu (Google)")
    assert not _same_platform("tpu", "gpu", "gpu (NVIDIA)")
    assert _same_platform("tpu", "tpu", "tpu (Google)")


def test_a_real_h100_plan_joins_the_real_h100_capture_of_its_program(gpu_corpus, h100_plan,
                                                                     capsys):
    capsys.readouterr()
    run = gpu_corpus / "gpu-h100" / "scan-small" / "offload_x"
    assert cli_main(["compare", "--json", str(run), str(h100_plan)]) == 0
    res = json.loads(capsys.readouterr().out)
    (row,) = res["runs"]
    assert row["backend"] == "gpu" and res["plans"][0]["target"] == "h100"
    notes = " ".join(map(str, res.get("prediction_notes") or []))
    assert "the run ran on gpu" not in notes
    assert (row.get("predicted") or {}).get("pairs"), (notes, sorted(row))
    # report --plan: each planned op joins the capture's copies (50 D2H + 50 H2D)
    assert cli_main(["report", "--json", str(run), "--plan", str(h100_plan)]) == 0
    pred = json.loads(capsys.readouterr().out)["prediction"]
    assert pred["joined"] is True
    assert (pred["copies_joined"], pred["copies_unjoined"]) == (100, 0)


def _damaged(src: Path, root: Path, name: str, ops=None, hlo_bytes: bytes | None = None) -> Path:
    d = root / name
    shutil.copytree(src, d)
    if ops is not None:
        m = json.loads((d / "run.json").read_text())
        m["estimate"]["ops"] = ops(m["estimate"]["ops"])
        (d / "run.json").write_text(json.dumps(m))
    if hlo_bytes is not None:
        (h,) = (d / "hlo").glob("*.after_optimizations.hlo.txt")
        h.write_bytes(h.read_bytes()[:50] + hlo_bytes + h.read_bytes()[50:])
    return d


@pytest.fixture(scope="module")
def damaged_plans(h100_plan, tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("damaged")
    return {
        "empty_record": _damaged(h100_plan, root, "empty_record", ops=lambda o: [{}, *o[1:]]),
        "number": _damaged(h100_plan, root, "number", ops=lambda o: [5, *o[1:]]),
        "no_direction": _damaged(h100_plan, root, "no_direction", ops=lambda o: [
            {k: v for k, v in o[0].items() if k != "direction"}, *o[1:]]),
        "ops_dict": _damaged(h100_plan, root, "ops_dict", ops=lambda o: {}),
        "hlo_not_utf8": _damaged(h100_plan, root, "hlo_not_utf8", hlo_bytes=b"\xff\xfe"),
    }


@pytest.mark.parametrize("name,says", [
    ("empty_record", "run.json: impossible plan: estimate.ops[0] has no op, direction"),
    ("number", "run.json: impossible plan: estimate.ops[0] is '5', not a copy record"),
    ("no_direction", "run.json: impossible plan: estimate.ops[0] has no direction"),
    ("ops_dict", "run.json: impossible plan: estimate.ops is a JSON dict, not a list"),
    ("hlo_not_utf8", ".after_optimizations.hlo.txt: not UTF-8 text (byte 50)"),
])
def test_report_plan_names_a_damaged_plan(gpu_corpus, damaged_plans, capsys, name, says):
    run = gpu_corpus / "gpu-h100" / "scan-small" / "offload_x"
    capsys.readouterr()
    assert cli_main(["report", str(run), "--plan", str(damaged_plans[name])]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0] and str(damaged_plans[name]) in err[0], err


def test_the_dashboard_card_of_a_damaged_plan_says_what_is_wrong(damaged_plans):
    from overlap.dashboard import data

    runs = {r.name: r for r in data.discover_runs([next(iter(damaged_plans.values())).parent])}
    for name in ("empty_record", "number", "no_direction", "ops_dict"):
        with pytest.raises(data.RunLoadError, match=f"{name}: run.json: impossible plan"):
            data.load_run(runs[name])
        assert data.safe_run_row(runs[name])["verdict"].startswith("ERROR: ")
