"""A captured HloProto printed as HLO text without letting a damaged one take the process down.

`report --predict` prints each captured program with XLA's own printer (through jaxlib,
`overlap.hlo.program.hlo_text_from_proto`). XLA checks much of a proto and returns an error,
but some damage reaches a CHECK inside the native code, which aborts the whole process
(fuzzing: one of 2,579 damaged v6e protos, an opcode changed to `recv` whose shape is not the
tuple a `recv` has: SIGABRT, exit 134, no Python exception to catch). Two guards:

* :func:`proto_problem` reads the proto with our own schema first and names what XLA would
  trip on: bytes that are no HloProto, an entry or root that is not there, operands, control
  predecessors or called computations that name nothing, a `get-tuple-element` of a
  non-tuple or past its end, an opcode whose result must be a tuple (`recv`, `send`,
  `copy-start`, async starts, ...) without one. Such a proto never reaches the printer.
* :func:`print_protos` prints the rest in a forked child process, one proto at a time, each
  text sent back as it is done, with a time limit: a native abort ends only the child, the
  proto it was printing is named (the signal said), and a new child goes on with the rest.
  Cost, measured on the real H100 `transformer qkv_proj_offloaded` capture (10 programs,
  ~2.7 MB of protos): 0.34 s in a child against 0.26 s in process (jaxlib's import included
  both ways; 0.22 s against 0.16 s with jaxlib already loaded). Where `fork` is not a start
  method of the platform, the checked protos are printed in process.
"""

from __future__ import annotations

import signal
import time
from typing import Any

# Opcodes whose result XLA requires to be a tuple (reading it as one is the CHECK that aborts).
_TUPLE_RESULT = {"recv", "send", "recv-done", "copy-start", "async-start", "async-update",
                 "batch-norm-training", "batch-norm-grad", "rng-bit-generator"}
_TUPLE = 13  # xla.PrimitiveType TUPLE
TIMEOUT_S = 120.0


def proto_problem(data: Any) -> str | None:
    """What makes a serialized HloProto (or a decoded one) unprintable, in a few words; None
    when nothing found."""
    from overlap.trace.protos import HloProto

    if isinstance(data, (bytes, bytearray, memoryview)):
        try:
            msg = HloProto.FromString(bytes(data))
        except Exception as e:  # DecodeError and the like: not an HloProto
            return f"not an HloProto ({type(e).__name__})"
    else:
        msg = data
    m = msg.hlo_module
    comps = {c.id: c for c in m.computations}
    if not comps:
        return "no computations"
    if m.entry_computation_id not in comps:
        return f"entry computation id {m.entry_computation_id} is not in the module"
    for c in m.computations:
        ins = {i.id: i for i in c.instructions}
        if c.root_id not in ins:
            return f"computation {c.name}: its root id {c.root_id} is not one of its instructions"
        for i in c.instructions:
            if not i.opcode:
                return f"{c.name}/{i.name}: no opcode"
            bad = [k for k in (*i.operand_ids, *i.control_predecessor_ids) if k not in ins]
            if bad:
                return f"{c.name}/{i.name}: operand id {bad[0]} is not in its computation"
            if any(k not in comps for k in i.called_computation_ids):
                return f"{c.name}/{i.name}: calls a computation that is not in the module"
            if i.opcode in _TUPLE_RESULT and i.shape.element_type != _TUPLE:
                return f"{c.name}/{i.name}: a {i.opcode} whose shape is not a tuple"
            if i.opcode == "get-tuple-element":
                if len(i.operand_ids) != 1:
                    return f"{c.name}/{i.name}: a get-tuple-element of {len(i.operand_ids)} " \
                           "operands"
                src = ins[i.operand_ids[0]].shape
                if src.element_type != _TUPLE or not 0 <= i.tuple_index < len(src.tuple_shapes):
                    return (f"{c.name}/{i.name}: a get-tuple-element index {i.tuple_index} of "
                            "a shape that has no such element")
    return None


def _child(conn: Any, items: list[tuple[Any, bytes]]) -> None:
    """Print each proto and send (key, text or None, error) as it is done.

    XLA logs what its checks find on file descriptor 2 before it raises (a RET_CHECK: its
    line and a 40-line native stack trace, fuzz N4), and the exception carries the same line:
    the child's descriptor 2 goes to /dev/null, so a report that names the program as
    unreadable does not also print XLA's trace (`OVERLAP_DEBUG=1` keeps it)."""
    import os

    from overlap.hlo.program import hlo_text_from_proto

    if os.environ.get("OVERLAP_DEBUG", "") in ("", "0"):
        quiet = os.open(os.devnull, os.O_WRONLY)
        os.dup2(quiet, 2)
        os.close(quiet)

    for key, data in items:
        try:
            conn.send((key, hlo_text_from_proto(data), None))
        except Exception as e:  # XLA's own checks (RET_CHECK, parse errors): an error, no abort
            conn.send((key, None, f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
                       if str(e) else type(e).__name__))
    conn.close()


def _in_child(items: list[tuple[Any, bytes]], timeout_s: float) -> dict[Any, tuple]:
    import multiprocessing as mp  # here: a report that prints nothing does not import it

    ctx = mp.get_context("fork")
    out: dict[Any, tuple] = {}
    todo = list(items)
    deadline = time.monotonic() + timeout_s
    while todo:
        recv, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_child, args=(send, todo), daemon=True)
        proc.start()
        send.close()
        got = 0
        try:
            while got < len(todo):
                left = deadline - time.monotonic()
                if left <= 0 or not recv.poll(left):
                    break
                key, text, err = recv.recv()
                out[key] = (text, err)
                got += 1
        except EOFError:  # the child ended (an abort) before sending the next one
            pass
        recv.close()
        proc.join(1.0)
        if proc.is_alive():
            proc.kill()
            proc.join()
        if got == len(todo):
            break
        key = todo[got][0]
        if time.monotonic() >= deadline:
            for k, _ in todo[got:]:
                out[k] = (None, f"XLA's printer took more than {timeout_s:g} s")
            break
        code = proc.exitcode
        why = (f"XLA's printer aborted on it ({signal.Signals(-code).name})"
               if code is not None and code < 0 and -code in signal.valid_signals()
               else f"XLA's printer ended with exit status {code}")
        out[key] = (None, why)
        todo = todo[got + 1:]
    return out


def print_protos(protos: dict[Any, bytes], timeout_s: float = TIMEOUT_S
                 ) -> dict[Any, tuple[str | None, str | None]]:
    """Per key: (HLO text, None), or (None, why it cannot be read). Never aborts the process
    where `fork` is available (module docstring)."""
    out: dict[Any, tuple[str | None, str | None]] = {}
    ok: list[tuple[Any, bytes]] = []
    for key, data in protos.items():
        why = proto_problem(data)
        if why:
            out[key] = (None, why)
        else:
            ok.append((key, bytes(data)))
    if not ok:
        return out
    import multiprocessing as mp

    if "fork" in mp.get_all_start_methods():
        out.update(_in_child(ok, timeout_s))
        return out
    from overlap.hlo.program import hlo_text_from_proto

    for key, data in ok:  # checked above; no child to print in on this platform
        try:
            out[key] = (hlo_text_from_proto(data), None)
        except Exception as e:
            out[key] = (None, type(e).__name__)
    return out
