"""`read_trace`: a capture's host files read one by one, here, in local worker processes or on
Dask, and their tables combined. This module sits above the reader (`overlap.trace.reader`
reads one host file and never imports this one).

A pod capture holds one `.xplane.pb` per host (64 hosts x 100-500 MB). Each host file is read
on its own by `overlap.trace.reader.read_host_file`, in a worker, and only its tables come back
(a few times smaller than the file plus the decoder's temporaries); `read_trace` combines them
exactly as a serial read does. Workers are spawned, never forked (jax warns against fork in a
process that imported it), so a pool costs about a second to start: it pays from a few large
host files on, and `default_jobs` reads small captures here (`WORKERS_FROM_BYTES`).

Dask (`pip install 'overlap-jax[dask]'`): `scheduler` is a distributed scheduler address
(`tcp://10.0.0.5:8786`); the workers must see the files at the same paths (shared storage).
The address is checked before anything connects (`check_scheduler_address`: a usage error, exit
2), and connecting is bounded (`CONNECT_TIMEOUT_S` plus 5 s of grace) whatever answers there.

A damaged host file does not sink the other hosts: each map task returns its host's tables or
the `InputError` that refused the file (`map_hosts` returns both, in file order), and the caller
reports the readable hosts and names the damaged ones.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path
from typing import Any, Callable

from overlap.errors import InputError, UsageError, install_hint
from overlap.trace.files import _find_files
from overlap.trace.reader import Trace, combine_parts, read_host_file

DASK_EXTRA = install_hint("dask")
# Seconds to wait for a Dask scheduler to accept the client. Dask's own `timeout` bounds the
# TCP connect, not its handshake: a plain HTTP server at the address accepts the connection and
# then never answers, which would hang the command for minutes.
CONNECT_TIMEOUT_S = 10.0
SCHEDULER_SCHEMES = ("tcp", "tls", "ws", "wss", "ucx")
# A host name or IPv4 address (`check_scheduler_address`; compiled on first use by re's cache)
_HOST_PATTERN = r"[A-Za-z0-9._-]+"


def check_scheduler_address(address: str) -> str:
    """`address` as Dask takes it (`[scheme://]host:port`), or a UsageError saying what is
    wrong with it. Accepts the schemes in SCHEDULER_SCHEMES, a host name or IPv4 address, or an
    IPv6 address in brackets, and a port in 1-65535."""
    text = address.strip() if isinstance(address, str) else ""
    where = f"--scheduler {address!r}"
    if not text:
        raise UsageError(f"{where}: empty address; give host:port, e.g. tcp://10.0.0.5:8786")
    scheme, sep, rest = text.partition("://")
    if not sep:
        scheme, rest = "tcp", text
    if scheme not in SCHEDULER_SCHEMES:
        raise UsageError(f"{where}: a Dask scheduler address starts with "
                         f"{', '.join(s + '://' for s in SCHEDULER_SCHEMES)} (not {scheme}://)")
    if rest.startswith("["):
        host, close, after = rest[1:].partition("]")
        port: str | None = after[1:] if after.startswith(":") else None if after else ""
        ok_host = bool(close) and bool(host) and all(c in "0123456789abcdefABCDEF:." for c in host)
    else:
        host, colon, port = rest.rpartition(":")
        ok_host = bool(colon) and re.fullmatch(_HOST_PATTERN, host) is not None
    if not ok_host:
        raise UsageError(f"{where}: expected host:port (IPv6 in brackets: [::1]:8786)")
    if port is None or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"{where}: the port must be a number in 1-65535")
    return f"{scheme}://{rest}"


def _guarded(fn: Callable[[str], Any], f: str) -> Any:
    """`fn(f)`, or the InputError that refused `f` (returned, not raised: the other hosts'
    results survive, and the caller names this file)."""
    try:
        return fn(f)
    except InputError as e:
        return e


def map_hosts(files: list[Path], fn: Callable[[str], Any], *, jobs: int = 1,
              scheduler: str | None = None) -> list[Any]:
    """`fn` over `files` (on Dask with `scheduler`, else in `jobs` processes, else here), in
    file order; a file `fn` refuses gives its `InputError` in its place."""
    guarded = functools.partial(_guarded, fn)
    if scheduler:
        return map_hosts_dask(files, scheduler, guarded)
    if jobs > 1 and len(files) > 1:
        return map_hosts_local(files, jobs, guarded)
    return [guarded(str(f)) for f in files]


def split_readable(outs: list[Any], files: list[Path]
                   ) -> tuple[list[Any], list[Path], list[dict[str, str]]]:
    """`map_hosts` outcomes -> (results, their files, unreadable). `unreadable` holds one
    `{"path", "problem"}` per refused file. When no file could be read, the first file's
    error is raised: there is nothing to report."""
    good = [(o, f) for o, f in zip(outs, files) if not isinstance(o, InputError)]
    bad = [{"path": str(o.path or f), "problem": o.problem}
           for o, f in zip(outs, files) if isinstance(o, InputError)]
    if not good:
        raise next(o for o in outs if isinstance(o, InputError))
    return [o for o, _ in good], [f for _, f in good], bad


def _connect(Client: Any, address: str) -> Any:
    """A Dask client for `address`, or a UsageError when nothing answers in time."""
    box: dict[str, Any] = {}

    def connect() -> None:
        try:
            box["client"] = Client(address, timeout=f"{int(CONNECT_TIMEOUT_S)}s")
        except BaseException as e:  # noqa: BLE001 - handed to the waiting thread
            box["error"] = e

    import threading  # here: only Dask's connect starts a thread (~1 ms of every start-up)

    # A daemon thread: when the handshake never ends, the command still exits.
    t = threading.Thread(target=connect, name="overlap-dask-connect", daemon=True)
    t.start()
    t.join(CONNECT_TIMEOUT_S + 5)
    if "client" in box:
        return box["client"]
    e = box.get("error")
    if e is None:
        raise UsageError(f"no Dask scheduler answered at {address} within "
                         f"{CONNECT_TIMEOUT_S + 5:.0f} s (is that a Dask scheduler's port?)")
    if isinstance(e, (OSError, TimeoutError, ValueError)):
        raise UsageError(f"cannot reach the Dask scheduler at {address}: "
                         f"{' '.join(str(e).split())[:200]}") from None
    if isinstance(e, MemoryError):
        # Dask read the peer's first bytes as a frame length: something answered that does
        # not speak Dask's protocol (an HTTP proxy's "HTTP/1.1 400" read as a length of
        # petabytes). Said as what it is, not as the input being too large.
        what = "an HTTP server" if _speaks_http(address) else "something"
        raise UsageError(f"{address} is not a Dask scheduler: {what} answered there in "
                         "another protocol (is that the scheduler's port, e.g. 8786?)") from None
    raise e


def _speaks_http(address: str) -> bool:
    """Whether the peer at `address` (tcp://host:port) answers an HTTP request with HTTP."""
    import socket
    from urllib.parse import urlsplit

    try:
        u = urlsplit(address if "://" in address else f"tcp://{address}")
        with socket.create_connection((u.hostname or "", u.port or 0), timeout=2) as c:
            c.settimeout(2)
            c.sendall(b"HEAD / HTTP/1.0\r\n\r\n")
            return c.recv(5) == b"HTTP/"
    except (OSError, ValueError):
        return False


# Host files under this size in all are read faster in this process than in workers: each
# spawned worker starts its own interpreter, numpy and overlap (~0.2 s of CPU) and sends its
# tables back (~1 ms/MB), which the read (~3.4 ms/MB) repays only on larger captures.
# Measured (whole `report --json` processes, medians, 2 cores): four real 0.7 MB H100 host
# files 0.16 s here against 0.40 s in two workers; two of 41 and 27 MB 0.33 s against
# 0.49 s; six of 195 MB in all 0.91 s against 0.81 s (issue 32).
WORKERS_FROM_BYTES = 128 << 20


def default_jobs(files: list[Path] | None = None) -> int:
    """Worker processes for a read: the machine's cores, or 1 where `files` (when given) hold
    less than `WORKERS_FROM_BYTES` in all."""
    if files is not None and sum(_size(f) for f in files) < WORKERS_FROM_BYTES:
        return 1
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
               else (os.cpu_count() or 1))


def _size(f: Path) -> int:
    try:
        return os.stat(f).st_size
    except OSError:  # (its read says what is wrong with it)
        return 0


def map_hosts_local(files: list[Path], jobs: int, fn: Callable[[str], Any] | None = None
                    ) -> list[Any]:
    """`fn` (default `read_host_file`) over `files` in `jobs` spawned processes, in file order.

    `fn` must be picklable (a module-level function or a `functools.partial` of one).
    """
    if fn is None:
        fn = read_host_file
    # imported here: a single-file read (most reports) never starts a pool (~10 ms of imports)
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(jobs, len(files)), mp_context=ctx) as pool:
        return list(pool.map(fn, [str(f) for f in files]))


def map_hosts_dask(files: list[Path], scheduler: str, fn: Callable[[str], Any] | None = None
                   ) -> list[Any]:
    """`fn` (default `read_host_file`) over `files` on a Dask distributed cluster, in file
    order; whatever combines the results runs here, on the client."""
    address = check_scheduler_address(scheduler)
    try:
        from dask.distributed import Client
    except ImportError:
        raise UsageError(f"--scheduler needs Dask distributed: {DASK_EXTRA}") from None
    if fn is None:
        fn = read_host_file
    client = _connect(Client, address)
    try:
        futures = client.map(fn, [str(f) for f in files], pure=False)
        return client.gather(futures)
    finally:
        client.close()


def read_trace(path: str | os.PathLike, session: str | None = None, *, jobs: int = 1,
               scheduler: str | None = None) -> Trace:
    """Read a capture into trace tables. `path` is one `.xplane.pb`, a
    `plugins/profile/<timestamp>/` directory, or a run directory (see `overlap.trace.reader`).

    A session holds one file per host. `jobs` > 1 reads host files in that many worker
    processes (spawned, not forked: jax warns against fork); `scheduler` (a Dask distributed
    address) reads them on a cluster instead. Either way each host file is read on its own
    (`read_host_file`) and the tables are combined here, so the result is the same as a serial
    read and a worker's memory is bounded by the largest host file, not the capture's total.
    """
    files = [Path(f) for f in _find_files(path, session)]
    outs = map_hosts(files, read_host_file, jobs=jobs, scheduler=scheduler)
    # A damaged host file leaves the others readable: they are read, it is named
    # (`Trace.unreadable`); with no readable file its error is raised.
    parts, readable, unreadable = split_readable(outs, files)
    trace = combine_parts(parts, readable)
    trace.unreadable = unreadable
    return trace
