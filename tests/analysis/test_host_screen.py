"""The host-compute screen of a captured program (`overlap.analysis.host_memory.
lists_no_host_compute`, issue 32): a program whose proto holds nothing the text rules could list
is answered "0" without XLA's printer; any other goes to the printer as before. Tried on the
real H100 captures that carry their executed program, and on those programs changed so that
the screen must let them through."""

from __future__ import annotations

from pathlib import Path

import pytest

from overlap.analysis import host_memory
from overlap.analysis.host_memory import (
    NO_HOST_COMPUTE,
    capture_host_facts,
    host_compute_ops,
    lists_no_host_compute,
)
from overlap.analysis.memory import executed_program
from overlap.hlo import proto_print
from overlap.trace import read_trace
from overlap.trace.protos import HloProto

# Real captures whose executed program the capture carries (every one of the 38 that does).
CARRIED = ["gpu-h100/params-h100/full", "gpu-h100/user-script/balanced-remat",
           "gpu-h100/user-pageable/io"]


def _program(run: Path) -> dict:
    """The program `report FILE` finds in the capture file alone (with the run directory,
    `params`' run.json names a compile the capture does not carry)."""
    (xplane,) = run.glob("plugins/profile/*/*.xplane.pb")
    prog = executed_program(read_trace(str(xplane)), None)
    assert prog["proto"], prog["how"]
    return prog


def _printed_count(raw: bytes):
    pytest.importorskip("jaxlib")
    text, why = proto_print.print_protos({"p": raw})["p"]
    assert text is not None, why
    return host_compute_ops(text)


@pytest.mark.parametrize("rel", CARRIED)
def test_screened_program_is_not_printed_and_the_printer_agrees(gpu_corpus, rel, monkeypatch):
    prog = _program(gpu_corpus / rel)
    raw = prog["proto"]
    assert lists_no_host_compute(raw, HloProto.FromString(raw))

    def no_printer(*a, **k):
        raise AssertionError("the screened program went to the printer")

    monkeypatch.setattr(proto_print, "print_protos", no_printer)
    facts = capture_host_facts(None, {"backend": "gpu"}, None, prog)
    assert facts is not None and facts["host_compute"] == NO_HOST_COMPUTE
    monkeypatch.undo()
    assert _printed_count(raw)["count"] == 0  # what the printed text says: the same


def _on_host(shape) -> None:
    if shape.tuple_shapes:
        for t in shape.tuple_shapes:
            _on_host(t)
    else:
        shape.layout.memory_space = 5


def test_a_fusion_moved_to_host_memory_goes_to_the_printer(gpu_corpus):
    """The real params program with one fusion's result put in S(5): device compute in host
    memory space. The screen lets it through; XLA's printer and the text rule list it."""
    raw = _program(gpu_corpus / CARRIED[0])["proto"]
    msg = HloProto.FromString(raw)
    fusion = next(i for c in msg.hlo_module.computations for i in c.instructions
                  if i.opcode == "fusion")
    _on_host(fusion.shape)
    changed = msg.SerializeToString()
    assert not lists_no_host_compute(changed, HloProto.FromString(changed))
    got = _printed_count(changed)
    assert fusion.name in {o["name"] for o in got["ops"]}
    facts = capture_host_facts(None, {"backend": "gpu"}, None,
                               {"proto": changed, "name": "changed"})
    assert facts["host_compute"] == got


@pytest.mark.parametrize("marker", [b"HostExecute", b"_xla_compute_type",
                                    b"async_execution_thread", b"\x04host"])
def test_marker_bytes_anywhere_send_a_program_to_the_printer(gpu_corpus, marker):
    """The attribute rules' words can only come from the proto's bytes: any of them, even in a
    string no rule reads (here an op name), and the screen does not decide."""
    raw = _program(gpu_corpus / CARRIED[0])["proto"]
    msg = HloProto.FromString(raw)
    ins = msg.hlo_module.computations[0].instructions[0]
    ins.metadata.op_name = marker[1:].decode() if marker[0] == 4 else marker.decode()
    if marker[0] == 4:  # exactly "host": a length-4 string
        ins.metadata.op_name = "host"
    changed = msg.SerializeToString()
    assert marker in changed
    assert not lists_no_host_compute(changed, HloProto.FromString(changed))
    assert lists_no_host_compute(raw, HloProto.FromString(raw))


def test_async_wrappers_are_not_plumbing_for_the_screen():
    """XLA prints an async-start of a custom-call as `custom-call-start`, which the text rule
    judges by shape: the screen cannot count async-start, -update or -done as plumbing."""
    assert {"async-start", "async-update", "async-done"} <= host_memory._MOVES
    assert not {"async-start", "async-update", "async-done"} & host_memory._PLUMBING


# ------------------------------------------------------------- async ops under the printer's sugar

def _cb_program(h200_cb_run: Path) -> bytes:
    prog = _program(h200_cb_run)
    return bytes(prog["proto"])


def _async_computation(msg, name: str = "async_computation.3"):
    return next(c for c in msg.hlo_module.computations if c.name == name)


def test_one_fusion_async_starts_are_screened_as_the_printer_prints_them(h200_cb_run,
                                                                        monkeypatch):
    """The real H200 command-buffer run's host copies are async-starts of computations made of
    parameters and one fusion: XLA's printer leaves those computations out and prints the
    starts as `fusion-start`, plumbing. The screen answers 0 without printing; printed, the
    text rules list nothing either."""
    raw = _cb_program(h200_cb_run)
    msg = HloProto.FromString(raw)
    sugar = host_memory._async_sugar(host_memory.computations_of(msg))
    assert len(sugar.left_out) == 27
    assert set(sugar.opcode.values()) == {"fusion-start", "fusion-done"}
    # each async-done names no computation: found through its operand, back to the start
    dones = [i for c in msg.hlo_module.computations for i in c.instructions
             if i.opcode == "async-done"]
    assert dones and all(not i.called_computation_ids for i in dones)
    assert all(sugar.opcode[i.id] == "fusion-done" for i in dones)
    assert lists_no_host_compute(raw, msg)

    def no_printer(*a, **k):
        raise AssertionError("the screened program went to the printer")

    monkeypatch.setattr(proto_print, "print_protos", no_printer)
    facts = capture_host_facts(None, {"backend": "gpu"}, None,
                               {"proto": raw, "name": "jit_train_step"})
    assert facts is not None and facts["host_compute"] == NO_HOST_COMPUTE
    monkeypatch.undo()
    assert _printed_count(raw)["count"] == 0


def test_a_sugared_start_the_text_rule_judges_by_shape_goes_to_the_printer(h200_cb_run):
    """The same program with one async computation's root made a custom-call: the printer
    prints its start and done as `custom-call-start`/`-done`, which the text rule judges by
    shape (S(5) here) and lists. The screen sends it to the printer."""
    raw = _cb_program(h200_cb_run)
    msg = HloProto.FromString(raw)
    comp = _async_computation(msg)
    root = next(i for i in comp.instructions if i.id == comp.root_id)
    root.opcode = "custom-call"
    root.ClearField("called_computation_ids")
    changed = msg.SerializeToString()
    assert not lists_no_host_compute(changed, HloProto.FromString(changed))
    got = _printed_count(changed)
    assert got["count"] == 2 and {o["opcode"] for o in got["ops"]} == {
        "custom-call-start", "custom-call-done"}
    facts = capture_host_facts(None, {"backend": "gpu"}, None,
                               {"proto": changed, "name": "changed"})
    assert facts["host_compute"] == got


def test_an_async_computation_of_two_instructions_is_judged_in_full(h200_cb_run):
    """An async computation holding more than parameters and its root is printed by XLA (no
    sugar): its fusion, whose operand lies in S(5), is judged as any instruction, and so is the
    async op wrapping it: the screen does not decide."""
    raw = _cb_program(h200_cb_run)
    msg = HloProto.FromString(raw)
    comp = _async_computation(msg)
    param = next(i for i in comp.instructions if i.name == "param_5")
    param.opcode = "partition-id"
    param.ClearField("parameter_number")
    changed = msg.SerializeToString()
    cmsg = HloProto.FromString(changed)
    sugar = host_memory._async_sugar(host_memory.computations_of(cmsg))
    assert _async_computation(cmsg).id not in sugar.left_out and len(sugar.left_out) == 26
    assert not lists_no_host_compute(changed, cmsg)


def test_an_async_done_that_names_itself_is_judged_by_shape(h200_cb_run):
    """A damaged proto whose async-done (of a copy to host) is its own operand: the walk back
    to its start is bounded, the done keeps its own opcode (no sugar found) and is judged by
    its S(5) shape."""
    raw = _cb_program(h200_cb_run)
    msg = HloProto.FromString(raw)
    done = next(i for c in msg.hlo_module.computations for i in c.instructions
                if i.opcode == "async-done" and host_memory._shape_on_host(i.shape))
    done.operand_ids[0] = done.id
    changed = msg.SerializeToString()
    cmsg = HloProto.FromString(changed)
    sugar = host_memory._async_sugar(host_memory.computations_of(cmsg))
    assert done.id not in sugar.opcode and len(sugar.opcode) == 2 * 27 - 1
    assert not lists_no_host_compute(changed, cmsg)
