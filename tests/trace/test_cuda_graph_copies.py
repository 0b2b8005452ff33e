"""CUDA graph device copies (`overlap.trace.vendors.graph_device_copies`) and baselines without
offload (`overlap.analysis.planned`): a capture made with XLA's default command buffers and no
offload reads NO_TRANSFERS, not CANNOT_TELL, and `overlap check` passes it; copy-like kernels
the rule does not cover stay "cannot tell".

Synthetic traces (labelled so) whose answers are known by construction; the real H100/H200
corpus is checked in tests/trace/test_gpu_corpus.py."""

from __future__ import annotations

import pytest

from overlap.analysis.overlap import STATUS_CANNOT_TELL, STATUS_NO_TRANSFERS, STATUS_OK, analyze
from overlap.analysis.planned import is_baseline, planned_host_copies, planned_reason
from overlap.cli.main import main
from overlap.report import gate
from overlap.trace import read_trace
from overlap.trace.synthetic import U64, Ref, SyntheticTrace

US = 1_000_000
KD = Ref("regs:16 static_shared:0 dynamic_shared:0 grid:1,1,1 block:256,1,1 occ_pct:100")


def _graph_kernel(g, name: str, start: int, dur: int, graph_id: int | None = 198) -> None:
    """A kernel as CUPTI records a CUDA graph node (command buffers): `cuda_graph_id` set."""
    stats = {"kernel_details": KD, "correlation_id": U64(1), "hlo_op": Ref("command_buffer_1"),
             "hlo_module": Ref("jit_train_step"), "program_id": 5}
    if graph_id is not None:
        stats["cuda_graph_id"] = graph_id
    g.event(name, start, dur, stream=14, kind="Compute", stats=stats)


def _code(argv) -> int:
    try:
        return main(argv) or 0
    except SystemExit as e:  # argparse
        return int(e.code or 0)


@pytest.mark.parametrize("name", ["memcpy128", "memcpy32_post", "memcpy64"])
def test_graph_copy_kernels_are_device_copies_not_cannot_tell(name, tmp_path):
    st = SyntheticTrace()
    g = st.gpu(0)
    g.kernel(1 * US, 10 * US, stream=14)
    _graph_kernel(g, name, 20 * US, 5 * US)
    _graph_kernel(g, name, 30 * US, 5 * US)
    t = read_trace(st.write(tmp_path / "s.xplane.pb"))
    r = analyze(t)
    assert r["transfer_status"]["status"] == "complete"
    assert r["status"] == STATUS_NO_TRANSFERS
    # a copy kernel runs on the SMs: device work, as the independent reader counts it
    assert len(t.compute) == 3 and len(t.transfers) == 0


@pytest.mark.parametrize("case", ["no_graph_id", "other_name"])
def test_copy_like_kernels_outside_the_rule_stay_cannot_tell(case, tmp_path):
    st = SyntheticTrace()
    g = st.gpu(0)
    g.kernel(1 * US, 10 * US, stream=14)
    if case == "no_graph_id":  # a driver-named copy kernel launched outside any graph
        _graph_kernel(g, "memcpy128", 20 * US, 5 * US, graph_id=None)
    else:  # a graph kernel named like a copy, but not the driver's
        _graph_kernel(g, "my_memcpy_kernel", 20 * US, 5 * US)
    r = analyze(read_trace(st.write(tmp_path / "s.xplane.pb")))
    assert r["status"] == STATUS_CANNOT_TELL
    assert r["transfer_status"]["status"] == "cannot_tell"


def test_host_copies_in_a_graph_are_measured_beside_graph_copy_kernels(tmp_path):
    """Command buffers with offload: the graph's host copies are CUPTI memcpy records (read as
    transfers), its device copies kernels (device work, which covers the copy)."""
    st = SyntheticTrace()
    g = st.gpu(0)
    _graph_kernel(g, "memcpy128", 10 * US, 10 * US)
    g.memcpy("D2H", 15 * US, 10 * US, 1 << 20, stream=14, hlo_op="command_buffer_1")
    r = analyze(read_trace(st.write(tmp_path / "s.xplane.pb")))
    assert r["status"] == STATUS_OK and r["transfer_status"]["status"] == "complete"
    d2h = r["by_direction"]["D2H"]
    assert (d2h["count"], d2h["span_ps"], d2h["hidden_ps"]) == (1, 10 * US, 5 * US)


def test_planned_copies_decide_what_no_transfers_means():
    base = {"count": 0, "asked": None, "source": "the capture's 1 compiled program(s)"}
    assert is_baseline(base) and "baseline without offload" in planned_reason(base)
    asked = dict(base, asked=True)
    assert not is_baseline(asked) and "compiled away" in planned_reason(asked)
    lost = dict(base, count=4)
    assert not is_baseline(lost) and "4 host copies were planned" in planned_reason(lost)
    unknown = dict(base, count=None)
    assert not is_baseline(unknown) and planned_reason(unknown) is None


def test_check_on_a_capture_without_programs_still_fails(tmp_path):
    """No transfers and no compiled program in the capture: nothing says it is a baseline, so
    the default `no_transfers` gate fails as before (exit 1)."""
    st = SyntheticTrace()
    st.gpu(0).kernel(1 * US, 10 * US)
    path = st.write(tmp_path / "s.xplane.pb")
    t = read_trace(path)
    planned = planned_host_copies(path, t)
    assert planned["count"] is None and "no compiled program" in planned["source"]
    r = analyze(t)
    r["planned_host_copies"] = planned
    assert "no_transfers" in gate.run_checks(r, gate.CheckConfig(), t)["failed"]
    assert _code(["check", str(path)]) == 1


def test_check_passes_a_capture_whose_program_plans_no_host_copy(tmp_path, capsys):
    """A program is there and plans no S(5) copy: a baseline; `check` exits 0, `report` says so."""
    from overlap.trace.protos import HloProto

    proto = HloProto()
    proto.hlo_module.name = "jit_train_step"
    st = SyntheticTrace()
    st.gpu(0).kernel(1 * US, 10 * US)
    st.module("jit_train_step", 5, proto.SerializeToString())
    path = st.write(tmp_path / "s.xplane.pb")
    assert _code(["check", str(path)]) == 0
    assert "baseline without offload" in capsys.readouterr().out
    assert _code(["report", str(path)]) == 0
    assert "baseline without offload" in capsys.readouterr().out


def test_the_graph_id_is_decoded_with_the_line_not_in_a_second_pass(tmp_path, monkeypatch):
    """`cuda_graph_id` is one of the stats the GPU rules read (`gpu._GPU_STATS`): a line's
    events are decoded once, with it. (Read after the decode, the rule re-decoded the whole
    line for it: on the real H200 command-buffer run, 305,700 events and 4.07M stats, ~60 ms
    of a 0.33 s report.) The answer is the same either way."""
    from overlap.trace import gpu, wire

    st = SyntheticTrace()
    g = st.gpu(0)
    g.kernel(1 * US, 10 * US, stream=14)
    _graph_kernel(g, "memcpy128", 20 * US, 5 * US)
    _graph_kernel(g, "memcpy32_post", 30 * US, 5 * US, graph_id=None)
    f = st.write(tmp_path / "s.xplane.pb")
    decodes: list[object] = []
    orig = wire.LineEvents._decode

    def counted(self, want, groups=None):
        decodes.append(want)
        return orig(self, want, groups)

    monkeypatch.setattr(wire.LineEvents, "_decode", counted)
    t = read_trace(f)
    assert len(decodes) == 1  # the one GPU line, once
    monkeypatch.setattr(gpu, "_GPU_STATS", tuple(n for n in gpu._GPU_STATS
                                                 if n != "cuda_graph_id"))
    decodes.clear()
    t2 = read_trace(f)
    assert len(decodes) == 2  # the rule asked again for what the decode left out
    assert len(t2.compute) == len(t.compute) == 3
    # the copy kernel without a graph id stays "cannot tell" both ways
    status = analyze(t)["transfer_status"]
    assert status["status"] != "complete" and status == analyze(t2)["transfer_status"]
