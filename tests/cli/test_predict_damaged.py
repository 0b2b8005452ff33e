"""`report --predict` on a capture whose program cannot be read (fuzz N4): the measured report
goes on (exit 0) with a note in text and JSON, and a proto that would abort XLA's native
printer never takes the process down (overlap.hlo.proto_print). The damaged captures are made
here from the real v6e sample, as the fuzz campaign made its repros."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from overlap.hlo.proto_print import print_protos, proto_problem
from overlap.trace.protos import HloProto, XSpace

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "sample_traces" / "tpu-v6e-offload"
PROG = "jit_f"  # the program of the sample's 2,400 copies


def _xplane() -> Path:
    return next(SAMPLE.rglob("*.xplane.pb"))


def _damaged(tmp_path: Path, mutate) -> Path:
    """The sample with `mutate(bytes) -> bytes` applied to jit_f's HloProto."""
    xs = XSpace.FromString(_xplane().read_bytes())
    done = 0
    for p in xs.planes:
        if p.name != "/host:metadata":
            continue
        for md in p.event_metadata.values():
            if not md.name.startswith(PROG + "("):
                continue
            for s in md.stats:
                if s.bytes_value:
                    s.bytes_value = mutate(bytes(s.bytes_value))
                    done += 1
    assert done == 1
    out = tmp_path / "run" / "plugins" / "profile" / "x"
    out.mkdir(parents=True)
    (out / "damaged.xplane.pb").write_bytes(xs.SerializeToString())
    return tmp_path / "run"


def _recv_opcode(data: bytes) -> bytes:
    """One instruction's opcode changed to `recv` (its shape stays an array): the fuzz case
    that aborted the process inside XLA's printer (exit 134)."""
    h = HloProto.FromString(data)
    for c in h.hlo_module.computations:
        for i in c.instructions:
            if c.name == "fused_computation.1" and i.name == "broadcast.8":
                i.opcode = "recv"
                return h.SerializeToString()
    raise AssertionError("broadcast.8 not found")


def _unscheduled(data: bytes) -> bytes:
    """The entry computation's schedule reversed: an instruction before its operands, which
    XLA's printer refuses with a RET_CHECK (the fuzz case `predict_retcheck_schedule`)."""
    h = HloProto.FromString(data)
    seq = h.hlo_module.schedule.sequences[h.hlo_module.entry_computation_id].instruction_ids
    order = list(seq)[::-1]
    del seq[:]
    seq.extend(order)
    return h.SerializeToString()


def _report(run: Path, *extra: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    return subprocess.run([sys.executable, "-m", "overlap", "report", str(run), "--predict",
                           *extra], capture_output=True, text=True, env=env, timeout=300)


@pytest.mark.parametrize("mutate, why", [
    (lambda b: b"\xff\xff\xff" + b[3:], "not an HloProto"),
    (_recv_opcode, "a recv whose shape is not a tuple"),
    (_unscheduled, "RET_CHECK failure"),
])
def test_an_unreadable_program_is_said_and_the_measured_report_goes_on(tmp_path, mutate, why):
    pytest.importorskip("jaxlib")
    run = _damaged(tmp_path, mutate)
    txt = _report(run)
    assert txt.returncode == 0, txt.stderr[-2000:]
    assert "Aborted" not in txt.stderr
    # the note says it; XLA's own log of it (its line and a native stack trace) is not printed
    assert "RET_CHECK" not in txt.stderr and "stack trace" not in txt.stderr, txt.stderr
    assert "nothing predicted: the program(s) whose copies the capture measured cannot be " \
           "read" in txt.stdout
    assert "its HloProto cannot be read (" in txt.stdout and why in txt.stdout
    js = _report(run, "--json")
    assert js.returncode == 0, js.stderr[-2000:]
    doc = json.loads(js.stdout)
    pred = doc["prediction"]
    assert pred["predicted"] is False and pred["programs"] == []
    assert any(why in n for n in pred["notes"])
    # every measured copy is still counted: unjoined, with the reason
    assert pred["copies_joined"] == 0 and pred["copies_unjoined"] == pred["transfers"] == 2400
    assert doc["summary"]["transfers"] == 2400


def test_a_proto_is_checked_before_the_printer_sees_it():
    data = next(bytes(s.bytes_value)
                for p in XSpace.FromString(_xplane().read_bytes()).planes
                if p.name == "/host:metadata"
                for md in p.event_metadata.values() if md.name.startswith(PROG + "(")
                for s in md.stats if s.bytes_value)
    assert proto_problem(data) is None
    assert "a recv whose shape is not a tuple" in proto_problem(_recv_opcode(data))
    h = HloProto.FromString(data)
    c = h.hlo_module.computations[0]
    c.instructions[-1].operand_ids.append(10**9)
    assert "operand id 1000000000 is not in its computation" in proto_problem(
        h.SerializeToString())
    assert proto_problem(b"\xff\xff\xff").startswith("not an HloProto")


@pytest.mark.skipif(sys.platform == "win32", reason="no fork")
def test_xla_really_aborts_on_the_recv_proto_and_only_the_child_dies():
    """Past the check (as a proto it cannot foresee would be): jaxlib's printer aborts on the
    fuzz case, in the child; the good proto beside it is printed."""
    pytest.importorskip("jaxlib")
    from overlap.hlo.proto_print import _in_child

    data = next(bytes(s.bytes_value)
                for p in XSpace.FromString(_xplane().read_bytes()).planes
                if p.name == "/host:metadata"
                for md in p.event_metadata.values() if md.name.startswith(PROG + "(")
                for s in md.stats if s.bytes_value)
    got = _in_child([("bad", _recv_opcode(data)), ("good", data)], 120)
    assert got["bad"][0] is None and "aborted on it (SIGABRT)" in got["bad"][1]
    assert got["good"][1] is None and "ENTRY" in got["good"][0]


@pytest.mark.skipif(sys.platform == "win32", reason="no fork")
def test_a_native_abort_in_the_printer_ends_only_the_child(monkeypatch):
    """What the check cannot foresee: a printer that aborts (SIGABRT) on one proto. The process
    lives on, the proto is named, the others are printed by a fresh child."""
    import overlap.hlo.program as program

    data = next(bytes(s.bytes_value)
                for p in XSpace.FromString(_xplane().read_bytes()).planes
                if p.name == "/host:metadata"
                for md in p.event_metadata.values() if md.name.startswith(PROG + "(")
                for s in md.stats if s.bytes_value)
    calls = {"n": 0}

    def printer(proto):  # runs in a forked child (each starts from n = 0): its second aborts
        calls["n"] += 1
        if calls["n"] == 2:
            os.abort()
        return f"text of {len(proto)} bytes"

    monkeypatch.setattr(program, "hlo_text_from_proto", printer)
    got = print_protos({"a": data, "b": data, "c": data})
    assert got["a"] == (f"text of {len(data)} bytes", None)
    assert got["b"][0] is None and "aborted on it (SIGABRT)" in got["b"][1]
    assert got["c"] == (f"text of {len(data)} bytes", None)
