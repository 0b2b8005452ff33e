"""XLA's printer started ahead (`overlap.hlo.proto_print.prestart` / `hand_ahead`): what it
prints, and what is said of a proto it cannot print, equal what a child forked at the call
gives; the child started ahead is the one that prints (no second fork); a child handed other
protos is left to the call for them; one that ended before printing is followed by a fresh
one that names nothing it did not abort on; one never handed anything ends as soon as it is
released. And the checks (`proto_problem`) read a proto through the reader's decoder
(`trace.programs.hlo_message`) exactly as through upb, on every program of the real corpus
and on damaged ones."""

from __future__ import annotations

import os
import random
import sys
import time
from pathlib import Path

import pytest

from overlap.hlo import proto_print
from overlap.hlo.proto_print import print_protos, proto_problem
from overlap.trace.protos import HloProto, XSpace

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "sample_traces" / "tpu-v6e-offload"

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="no fork")


def _protos_of(xplane: Path) -> dict[str, bytes]:
    """The HloProtos a capture carries, by program name."""
    out = {}
    for p in XSpace.FromString(xplane.read_bytes()).planes:
        if p.name != "/host:metadata":
            continue
        for md in p.event_metadata.values():
            for s in md.stats:
                if s.bytes_value:
                    out[md.name] = bytes(s.bytes_value)
    return out


def _sample() -> dict[str, bytes]:
    return _protos_of(next(SAMPLE.rglob("*.xplane.pb")))


def _upb_problem(data: bytes) -> str | None:
    """`proto_problem` as it read bytes before: upb's message."""
    try:
        msg = HloProto.FromString(data)
    except Exception as e:  # noqa: BLE001
        return f"not an HloProto ({type(e).__name__})"
    return proto_problem(msg)


def _recv(data: bytes) -> bytes:
    """The fuzz case XLA's printer aborts on: an instruction's opcode made `recv`."""
    h = HloProto.FromString(data)
    h.hlo_module.computations[0].instructions[-1].opcode = "recv"
    return h.SerializeToString()


@pytest.fixture(autouse=True)
def _nothing_left_ahead():
    proto_print.release()
    yield
    proto_print.release()


def test_the_checks_read_every_corpus_program_as_upb_does(gpu_corpus):
    seen: set[bytes] = set()
    for f in sorted(gpu_corpus.rglob("*.xplane.pb")):
        for data in _protos_of(f).values():
            if data in seen:
                continue
            seen.add(data)
            assert proto_problem(data) == _upb_problem(data)
            assert proto_problem(data) == proto_problem(HloProto.FromString(data))
    assert len(seen) > 20


def test_the_checks_read_damaged_programs_as_upb_does():
    """Truncations, flipped bytes and edits the checks exist for, on the sample's programs:
    each answer (a reason, None, or "not an HloProto (<upb's error>)") is upb's."""
    rng = random.Random(7)
    said = set()
    for data in _sample().values():
        cases = [data[:n] for n in range(0, len(data), max(1, len(data) // 40))]
        for _ in range(150):
            b = bytearray(data)
            for _ in range(rng.randint(1, 3)):
                b[rng.randrange(len(b))] = rng.randrange(256)
            cases.append(bytes(b))
        cases.append(_recv(data))
        h = HloProto.FromString(data)
        h.hlo_module.computations[0].instructions[-1].operand_ids.append(10**9)
        cases.append(h.SerializeToString())
        h = HloProto.FromString(data)
        h.hlo_module.entry_computation_id = 10**6
        cases.append(h.SerializeToString())
        for c in cases:
            got = proto_problem(c)
            assert got == _upb_problem(c), c[:40]
            said.add(got is None or got.split(" ")[0])
    # (the cases reach the checks' answers of every kind: printable, not a proto, a reason)
    assert True in said and "not" in said and len(said) >= 4


def _prestarted() -> None:
    """`prestart`, or the test skipped where no child can be started ahead here."""
    proto_print.prestart()
    if not proto_print._AHEAD:
        pytest.skip("no child started ahead here (jaxlib, fork or memfd_create missing)")


def _forks(monkeypatch) -> list:
    """Every fresh child `print_protos` forks (the one started ahead is not one)."""
    made: list = []
    real = proto_print._fork

    def fork(ctx, todo):
        made.append([k for k, _ in todo])
        return real(ctx, todo)

    monkeypatch.setattr(proto_print, "_fork", fork)
    return made


def _fake_printer(monkeypatch, abort_on: bytes | None = None) -> None:
    """A printer that answers at once (and aborts on `abort_on`), set before any child is
    forked: the children inherit it."""
    import overlap.hlo.program as program

    def printer(proto):
        if proto == abort_on:
            os.abort()
        return f"text of {len(proto)} bytes"

    monkeypatch.setattr(program, "hlo_text_from_proto", printer)


def test_the_child_started_ahead_prints_what_a_fresh_one_does(monkeypatch):
    pytest.importorskip("jaxlib")
    protos = {"bad": b"\xff\xff\xff", **_sample()}
    fresh = print_protos(protos)
    made = _forks(monkeypatch)
    proto_print.prestart()
    assert proto_print._AHEAD
    proto_print.hand_ahead(protos)
    assert print_protos(dict(protos)) == fresh
    assert made == [] and not proto_print._AHEAD  # (taken: no other child was forked)
    assert fresh["bad"][0] is None and fresh["bad"][1].startswith("not an HloProto")
    assert all(t is not None and "ENTRY" in t for k, (t, _) in fresh.items() if k != "bad")


def test_a_child_started_ahead_and_not_handed_prints_the_first_call(monkeypatch):
    _fake_printer(monkeypatch)
    data = next(iter(_sample().values()))
    _prestarted()
    made = _forks(monkeypatch)
    assert print_protos({"a": data, "b": data}) == {
        "a": (f"text of {len(data)} bytes", None), "b": (f"text of {len(data)} bytes", None)}
    assert made == []


def test_a_call_for_other_protos_leaves_the_child_ahead_to_the_call_for_its_own(monkeypatch):
    _fake_printer(monkeypatch)
    data, other = list(_sample().values())[:2]
    _prestarted()
    made = _forks(monkeypatch)
    proto_print.hand_ahead({"mine": data})
    assert print_protos({"other": other}) == {"other": (f"text of {len(other)} bytes", None)}
    assert made == [["other"]] and proto_print._AHEAD  # a fresh child for those
    assert print_protos({"mine": data}) == {"mine": (f"text of {len(data)} bytes", None)}
    assert made == [["other"]] and not proto_print._AHEAD


def test_an_abort_in_the_child_ahead_names_that_proto_and_the_rest_are_printed(monkeypatch):
    data = next(iter(_sample().values()))
    bad = _recv(data)
    _fake_printer(monkeypatch, abort_on=bad)
    _prestarted()
    # (the `recv` edit would be refused by the checks: they are passed here, as a proto
    # whose damage they cannot foresee would pass them)
    monkeypatch.setattr(proto_print, "proto_problem", lambda d: None)
    made = _forks(monkeypatch)
    protos = {"a": data, "b": bad, "c": data}
    proto_print.hand_ahead(protos)
    got = print_protos(protos)
    assert got["a"] == got["c"] == (f"text of {len(data)} bytes", None)
    assert got["b"][0] is None and "aborted on it (SIGABRT)" in got["b"][1]
    assert made == [["c"]]  # (the rest, in a fresh child)


def test_a_child_ahead_that_ended_before_printing_blames_nothing(monkeypatch):
    _fake_printer(monkeypatch)
    data = next(iter(_sample().values()))
    _prestarted()
    proto_print._AHEAD[0].proc.kill()  # (as a child whose import aborted)
    proto_print._AHEAD[0].proc.join()
    made = _forks(monkeypatch)
    assert print_protos({"a": data, "b": data}) == {
        "a": (f"text of {len(data)} bytes", None), "b": (f"text of {len(data)} bytes", None)}
    assert made == [["a", "b"]]


def test_a_child_ahead_never_handed_anything_ends_when_released(monkeypatch):
    _fake_printer(monkeypatch)
    _prestarted()
    proc = proto_print._AHEAD[0].proc
    t = time.monotonic()
    proto_print.release()
    # it ends at once (nothing is left to take what it would print): not waited for
    assert not proc.is_alive() and proc.exitcode is not None and time.monotonic() - t < 0.5
    assert not proto_print._AHEAD


def test_the_child_ahead_prints_everything_before_it_is_asked(monkeypatch):
    """Its texts go to the file, not the pipe (which holds ~64 KB, a program or two): it
    prints every program while this process is busy elsewhere, and ends, before the call
    that collects them."""
    import overlap.hlo.program as program

    monkeypatch.setattr(program, "hlo_text_from_proto", lambda proto: "x" * 300_000)
    data = next(iter(_sample().values()))
    _prestarted()
    protos = {f"p{i}": data for i in range(8)}
    proto_print.hand_ahead(protos)
    proc = proto_print._AHEAD[0].proc
    proc.join(60)  # (2.4 MB of text: a pipe would have stopped it at the first)
    assert proc.exitcode == 0
    got = print_protos(protos)
    assert got == {k: ("x" * 300_000, None) for k in protos}


def test_no_child_ahead_where_the_file_cannot_be_made(monkeypatch):
    """A kernel or a sandbox that refuses `memfd_create`: nothing started ahead, the protos
    printed by a child forked when asked, as before."""
    _fake_printer(monkeypatch)

    def refused(name):
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(os, "memfd_create", refused, raising=False)
    proto_print.prestart()
    assert not proto_print._AHEAD
    data = next(iter(_sample().values()))
    proto_print.hand_ahead({"a": data})  # (nothing to hand: no child)
    made = _forks(monkeypatch)
    assert print_protos({"a": data}) == {"a": (f"text of {len(data)} bytes", None)}
    assert made == [["a"]]
