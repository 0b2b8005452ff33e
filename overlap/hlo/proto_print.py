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

`report --predict` (and `--plan`) starts the child ahead (`prestart`), before the capture
is read: its imports (jaxlib, ~35 ms; protobuf) run on another core while this process reads
and analyses; as soon as the capture is read the child is handed the programs the prediction
will print (`hand_ahead`), and XLA prints them (~30-60 ms a 400 KB program) while this
process makes the report's other sections. The prediction's `print_protos` of the same protos
then collects what was printed instead of forking a child. The protos go through a file
without a name (`memfd_create`), their length through a pipe: this process never waits on
the child's import, and no thread is started. What is printed, and what is said of a proto
that cannot be, is the same either way; a call for other protos forks its own child, and one
that finds the child started ahead ended before printing goes on in a fresh one, as before.

The checks read a proto as the reader reads a capture's programs (`trace.programs.hlo_message`:
the compiled scanner's fields, upb's where the scanner refuses or is not built): no protobuf
import in this process for them (~12 ms), nor a second upb parse of each proto.
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
    """What makes a serialized HloProto (or a decoded one: upb's message, or the scanner's
    `hlo_message`, whose fields read alike) unprintable, in a few words; None when nothing
    found."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        from overlap.trace.programs import hlo_message

        try:
            msg = hlo_message(data)
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


def _child(conn: Any, items: list[tuple[Any, bytes]],
           out: tuple[int, int] | None = None) -> None:
    """Print each proto and send (key, text or None, error) as it is done; where `out` (a
    file and where in it) is given, written there, and only its length sent (`_Ahead.take`:
    a pipe holds ~64 KB, one or two programs' text, and a child that sends them waits there
    for this process to read, which the child started ahead is meant not to)."""
    import pickle

    from overlap.hlo.program import hlo_text_from_proto

    _quiet()
    for key, data in items:
        got: tuple[Any, str | None, str | None]
        try:
            got = (key, hlo_text_from_proto(data), None)
        except Exception as e:  # XLA's own checks (RET_CHECK, parse errors): an error, no abort
            got = (key, None, f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
                   if str(e) else type(e).__name__)
        if out is None:
            conn.send(got)
            continue
        blob = pickle.dumps(got, protocol=pickle.HIGHEST_PROTOCOL)
        _write_at(out[0], blob, out[1])
        out = (out[0], out[1] + len(blob))
        conn.send(len(blob))
    conn.close()


def _write_at(fd: int, blob: bytes, at: int) -> None:
    """`blob` written whole into the file `fd` from `at`."""
    import os

    view = memoryview(blob)
    done = 0
    while done < len(blob):
        done += os.pwrite(fd, view[done:], at + done)


def _read_at(fd: int, n: int, at: int) -> bytes:
    """`n` bytes of the file `fd` from `at` (fewer where it ends first)."""
    import os

    data = bytearray()
    while len(data) < n:
        got = os.pread(fd, n - len(data), at + len(data))
        if not got:
            break
        data += got
    return bytes(data)


def _quiet() -> None:
    """XLA logs what its checks find on file descriptor 2 before it raises (a RET_CHECK: its
    line and a 40-line native stack trace, fuzz N4), and the exception carries the same line:
    a child's descriptor 2 goes to /dev/null, so a report that names the program as
    unreadable does not also print XLA's trace (`OVERLAP_DEBUG=1` keeps it)."""
    import os

    if os.environ.get("OVERLAP_DEBUG", "") in ("", "0"):
        quiet = os.open(os.devnull, os.O_WRONLY)
        os.dup2(quiet, 2)
        os.close(quiet)


def _ahead_child(conn: Any, go: Any, fd: int, theirs: tuple[Any, ...]) -> None:
    """The child `prestart` starts: XLA's printer loaded first, then its items read where
    `hand` put them (the file `fd`, as many bytes as `go` says), and printed (`_child`); an
    end of `go` without them (the report ended first): nothing. `theirs`: the parent's ends
    of the two pipes, closed here (a copy of the end `go` reads from, held here, would keep
    that end from ever ending)."""
    import pickle

    for end in theirs:
        end.close()
    _quiet()
    try:  # (what the first print imports; one that fails here fails there, and is said there)
        from jaxlib import xla_client  # noqa: F401

        import overlap.trace.protos  # noqa: F401
    except Exception:  # noqa: BLE001
        pass
    try:
        n = go.recv()
    except EOFError:
        return
    # (its results written after them in the same file)
    _child(conn, pickle.loads(_read_at(fd, n, 0)), (fd, n))


class _Ahead:
    """The child `prestart` started: its process, its results' pipe end, the end of the pipe
    that says its items are there and the file that holds them, and its items once handed
    (`hand`; None before)."""

    def __init__(self, proc: Any, recv: Any, go: Any, fd: int) -> None:
        self.proc, self.recv, self.go, self.fd = proc, recv, go, fd
        self.items: list[tuple[Any, bytes]] | None = None
        self.at = 0  # (where in the file its next result is, once handed)
        # (the protos `hand_ahead` was given, and `_checked`'s answer for them: not found
        # again by the `print_protos` of the same protos)
        self.checked: tuple[dict, tuple[dict, list]] | None = None

    def hand(self, items: list[tuple[Any, bytes]]) -> None:
        """Give the child `items`: written to the file whole, then their length said on the
        pipe (a few bytes, never more than the pipe holds: this process never waits on the
        child's import, which reads them once done)."""
        import pickle

        blob = pickle.dumps(items, protocol=pickle.HIGHEST_PROTOCOL)
        _write_at(self.fd, blob, 0)
        self.items, self.at = items, len(blob)
        try:
            self.go.send(len(blob))
        except OSError:  # (the child has ended: it prints nothing, `_in_child` goes on)
            pass

    def take(self, n: int) -> tuple[Any, str | None, str | None]:
        """Its next result, of `n` bytes in the file (`_child`)."""
        import pickle

        blob = _read_at(self.fd, n, self.at)
        self.at += n
        return pickle.loads(blob)

    def end(self, now: bool = False) -> None:
        """Close its ends; it ends (`now`: killed at once, where no call is left to take what
        it prints, not waited for while it imports)."""
        import os

        self.go.close()  # (a child still waiting for its items ends)
        _stop(self.proc, self.recv, 0.0 if now else 1.0)
        os.close(self.fd)


# The child `prestart` started; at most one, taken by the `_in_child` of its items.
_AHEAD: list[_Ahead] = []


def prestart() -> None:
    """Start XLA's printer's child now (module docstring), for `hand_ahead` or this process'
    next `print_protos`: only where children are forked, jaxlib is installed and a file
    without a name can be made (Linux's `memfd_create`), one at a time. `release` ends it
    where nothing took it."""
    import importlib.util
    import multiprocessing as mp
    import os

    if _AHEAD or "fork" not in mp.get_all_start_methods() or \
            not hasattr(os, "memfd_create") or importlib.util.find_spec("jaxlib") is None:
        return
    try:
        fd = os.memfd_create("overlap-hlo-protos")
    except OSError:  # (a kernel or a sandbox without it: the child is forked when asked)
        return
    ctx = mp.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)  # its results
    wait, go = ctx.Pipe(duplex=False)  # its items' length
    proc = ctx.Process(target=_ahead_child, args=(send, wait, fd, (recv, go)), daemon=True)
    proc.start()
    send.close()
    wait.close()
    _AHEAD.append(_Ahead(proc, recv, go, fd))


def hand_ahead(protos: dict[Any, bytes]) -> None:
    """Hand the child `prestart` started the protos a later `print_protos(protos)` of this
    process will ask for, to be printed while this process does other work; that call
    collects them."""
    if _AHEAD and _AHEAD[0].items is None:
        ahead = _AHEAD[0]
        ahead.checked = (dict(protos), _checked(protos))
        if ahead.checked[1][1]:
            ahead.hand(ahead.checked[1][1])


def release() -> None:
    """End the child `prestart` started, where no `print_protos` took it."""
    while _AHEAD:
        _AHEAD.pop().end(now=True)


def _stop(proc: Any, recv: Any, wait_s: float) -> None:
    """Close a child's results pipe; the child given `wait_s` to end on its own (it has sent
    all, or it died), then killed."""
    recv.close()
    if wait_s:
        proc.join(wait_s)
    if proc.is_alive():
        proc.kill()
    proc.join()


def _fork(ctx: Any, todo: list[tuple[Any, bytes]]) -> tuple[Any, Any]:
    """A child printing `todo` (`_child`): (its process, its results' pipe end)."""
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(send, todo), daemon=True)
    proc.start()
    send.close()
    return proc, recv


def _checked(protos: dict[Any, bytes]) -> tuple[dict[Any, tuple[None, str]],
                                                 list[tuple[Any, bytes]]]:
    """(per key of a proto `proto_problem` refuses: (None, why); the others' (key, bytes), in
    order: what a child prints)."""
    out: dict[Any, tuple[None, str]] = {}
    ok: list[tuple[Any, bytes]] = []
    for key, data in protos.items():
        why = proto_problem(data)
        if why:
            out[key] = (None, why)
        else:
            ok.append((key, bytes(data)))
    return out, ok


def _in_child(items: list[tuple[Any, bytes]], timeout_s: float) -> dict[Any, tuple]:
    import multiprocessing as mp  # here: a report that prints nothing does not import it

    ctx = mp.get_context("fork")
    out: dict[Any, tuple] = {}
    todo = list(items)
    deadline = time.monotonic() + timeout_s
    while todo:
        # The child started ahead, where it was handed these protos or none yet (one handed
        # others is left to the call for them): it prints what the first child would.
        ahead = _AHEAD.pop() if _AHEAD and _AHEAD[0].items in (None, todo) else None
        if ahead is not None:
            if ahead.items is None:
                ahead.hand(todo)
            proc, recv = ahead.proc, ahead.recv
        else:
            proc, recv = _fork(ctx, todo)
        got = 0
        try:
            while got < len(todo):
                left = deadline - time.monotonic()
                if left <= 0 or not recv.poll(left):
                    break
                msg = recv.recv()
                key, text, err = ahead.take(msg) if ahead is not None else msg
                out[key] = (text, err)
                got += 1
        except EOFError:  # the child ended (an abort) before sending the next one
            pass
        if ahead is not None:
            ahead.end()
        else:
            _stop(proc, recv, 1.0)
        if got == len(todo):
            break
        if ahead is not None and not got and time.monotonic() < deadline:
            # (the child started ahead ended before it printed the first: maybe before it
            # read it, in its import; a fresh child prints it, or names it, as before)
            continue
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
    known = _AHEAD[0].checked if _AHEAD else None
    refused, ok = known[1] if known is not None and known[0] == protos else _checked(protos)
    out: dict[Any, tuple[str | None, str | None]] = dict(refused)
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
