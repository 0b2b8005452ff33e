"""The map step of `read_trace` over many host files: local worker processes or Dask.

A pod capture holds one `.xplane.pb` per host (64 hosts x 100-500 MB). Each host file is read
on its own by `overlap.trace.reader.read_host_file`, in a worker, and only its tables come back
(a few times smaller than the file plus the decoder's temporaries); `read_trace` combines them
exactly as a serial read does. Workers are spawned, never forked (jax warns against fork in a
process that imported it), so a pool costs about a second to start: it pays from a few large
host files on.

Dask (`pip install 'overlap-jax[dask]'`): `scheduler` is a distributed scheduler address
(`tcp://10.0.0.5:8786`); the workers must see the files at the same paths (shared storage).
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, Callable

from overlap.errors import UsageError, install_hint

DASK_EXTRA = install_hint("dask")


def default_jobs() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
               else (os.cpu_count() or 1))


def map_hosts_local(files: list[Path], jobs: int, fn: Callable[[str], Any] | None = None
                    ) -> list[Any]:
    """`fn` (default `read_host_file`) over `files` in `jobs` spawned processes, in file order.

    `fn` must be picklable (a module-level function or a `functools.partial` of one).
    """
    if fn is None:
        from overlap.trace.reader import read_host_file as fn

    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(jobs, len(files)), mp_context=ctx) as pool:
        return list(pool.map(fn, [str(f) for f in files]))


def map_hosts_dask(files: list[Path], scheduler: str, fn: Callable[[str], Any] | None = None
                   ) -> list[Any]:
    """`fn` (default `read_host_file`) over `files` on a Dask distributed cluster, in file
    order; whatever combines the results runs here, on the client."""
    try:
        from dask.distributed import Client
    except ImportError:
        raise UsageError(f"--scheduler needs Dask distributed: {DASK_EXTRA}") from None
    if fn is None:
        from overlap.trace.reader import read_host_file as fn

    try:
        client = Client(scheduler, timeout="10s")
    except (OSError, TimeoutError) as e:
        raise UsageError(f"cannot reach the Dask scheduler at {scheduler}: {e}") from None
    try:
        futures = client.map(fn, [str(f) for f in files], pure=False)
        return client.gather(futures)
    finally:
        client.close()
