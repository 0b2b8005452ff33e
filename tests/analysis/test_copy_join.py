"""`report --predict`'s join of measured copies to HLO ops (overlap.analysis.copy_join) and the
one span definition on both sides (overlap.analysis.predict.as_captured), on real H100 and
TPU v6e captures and on inputs whose answers are known by construction."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from overlap.analysis.copy_join import ProgramOps, join_copies, kernel_name, wrapped_name
from overlap.analysis.predict import as_captured, per_step

REPO = Path(__file__).resolve().parents[2]
H100 = REPO / "sample_traces" / "gpu-h100"


def _join(path: Path):
    from overlap.hlo.program import hlo_text_from_proto
    from overlap.trace import read_trace

    t = read_trace(str(path))
    progs = {}
    for name, proto in zip(t.modules["name"], t.modules["hlo_proto"]):
        m = re.search(r"\((\d+)\)\s*$", str(name))
        if m and proto:
            progs[int(m.group(1))] = ProgramOps(hlo_text_from_proto(bytes(proto)))
    tr, co = dict(t.columns("transfers")), dict(t.columns("compute"))
    return tr, co, progs, join_copies(tr, co, progs)


def test_names():
    assert wrapped_name("wrapped_dynamic-slice_computation.1") == "wrapped_dynamic-slice.1"
    assert wrapped_name("wrapped_dynamic-update-slice_computation") == \
        "wrapped_dynamic-update-slice"
    assert wrapped_name("fused_dynamic_slice.6.clone") is None
    assert kernel_name("loop_add_fusion.2") == "loop_add_fusion_2"


def test_async_wrapper_names_join_on_a_real_h100_scan():
    """The trace says wrapped_dynamic-(update-)slice, the HLO dynamic-(update-)slice-start.1."""
    _, _, _, (pid, op, groups) = _join(H100 / "scan-h100" / "offload_x")
    assert groups == []
    names, counts = np.unique(op.astype(str), return_counts=True)
    assert dict(zip(names.tolist(), counts.tolist())) == {
        "dynamic-slice-start.1": 50, "dynamic-update-slice-start.1": 50}


@pytest.mark.parametrize("run,ops", [
    ("transformer-h100-command-buffers/qkv_proj_offloaded_cb",
     {"dynamic-update-slice-start.1.0", "dynamic-update-slice-start.2.0",
      "dynamic-update-slice-start.3", "dynamic-slice-start.1.0", "dynamic-slice-start.2.0",
      "dynamic-slice-start.3"}),
    ("user-script/balanced-offload", {"dynamic-update-slice-start.1", "dynamic-slice-start.1"}),
])
def test_command_buffer_copies_join_by_kernels_and_order(run, ops):
    """Copies inside CUDA graphs (trace: command_buffer_N) join every one, each op equally."""
    tr, _, _, (pid, op, groups) = _join(H100 / run)
    assert groups == [] and len(op) == len(tr["start_ps"])
    names, counts = np.unique(op.astype(str), return_counts=True)
    assert set(names.tolist()) == ops and len(set(counts.tolist())) == 1


def test_command_buffer_that_does_not_line_up_is_unjoined_with_its_reason():
    """One D2H copy of the graph dropped: 119 is not whole runs of its 3 ops; the H2D ones
    still join. Counts add up: joined + unjoined = transfers."""
    tr, co, progs, _ = _join(H100 / "transformer-h100-command-buffers" / "qkv_proj_offloaded_cb")
    d2h = np.flatnonzero(np.asarray(tr["direction"], object) == "D2H")
    keep = np.setdiff1d(np.arange(len(tr["start_ps"])), d2h[:1])
    tr2 = {k: np.asarray(v)[keep] for k, v in tr.items()}
    pid, op, groups = join_copies(tr2, co, progs)
    assert len(groups) == 1
    g = groups[0]
    assert g["direction"] == "D2H" and g["count"] == 119
    assert "not a whole number of runs of the 3 D2H copies" in g["reason"]
    assert int((~np.equal(op, None)).sum()) + g["count"] == len(keep)


def test_copies_outside_a_program_are_counted_with_a_reason():
    tr, _, _, (pid, op, groups) = _join(H100 / "user-pageable" / "io")
    assert all(o is None for o in op.tolist())
    assert sum(g["count"] for g in groups) == len(tr["start_ps"]) == 25
    assert all("names no HLO op" in g["reason"] for g in groups)


def test_tpu_v6e_copies_join_by_name():
    tr, _, _, (pid, op, groups) = _join(REPO / "sample_traces" / "tpu-v6e-offload")
    assert groups == [] and len(op) == 2400
    names, counts = np.unique(op.astype(str), return_counts=True)
    assert counts.tolist() == [400] * 6 and names[0] == "copy-start"


def test_one_span_definition_per_platform():
    """By construction: compute runs [0, 10) and [30, 40); a copy issued at 0 starts moving at
    5 (behind another), completes at 25, and its done is reached at 35. GPU (CUPTI: the bytes
    moving) spans [5, 25): 20, hidden 5; TPU (issue to the done's end) spans [0, 35): 35,
    hidden 15."""
    tl = [{"compute": [(0, 10), (30, 40)],
           "copies": [{"op": "c", "issue_ps": 0, "begin_ps": 5, "end_ps": 25, "done_ps": 35}]}]
    assert as_captured(tl, "gpu") == {"c": {"span_ps": 20, "hidden_ps": 5}}
    assert as_captured(tl, "tpu") == {"c": {"span_ps": 35, "hidden_ps": 15}}
    got = per_step(as_captured(tl, "tpu"), {"c": 3}, {"c": "D2H"})
    assert got["D2H"] == {"transfers": 3, "span_ps": 105, "hidden_ps": 45, "exposed_ps": 60,
                          "hidden_fraction": 45 / 105}
    assert got["H2D"]["transfers"] == 0 and got["H2D"]["hidden_fraction"] is None


def test_predict_text_says_what_joined_and_refuses_a_target_of_another_platform():
    from tests.conftest import run_cli

    p = run_cli("report", str(H100 / "scan-h100" / "offload_x"), "--predict", timeout=300)
    assert p.returncode == 0, p.stderr
    assert "joined 100 of 100 measured copies to an HLO op" in p.stdout
    assert "dynamic-update-slice-start.1" in p.stdout and "one definition on both sides" in p.stdout
    bad = run_cli("report", str(REPO / "sample_traces" / "tpu-v6e-offload"), "--predict",
                  "--target", "h100", timeout=300)
    assert bad.returncode == 2 and "cuda target; this capture ran on TPU" in bad.stderr
