"""Process environment the commands set before JAX starts (nothing here imports jax).

`choose_platforms()`: with the `[plan]` extra installed, libtpu and the CUDA plugin sit beside
jaxlib, and JAX tries every installed backend at start-up: on a machine without that hardware
each one fails loudly on stderr (cuInit errors, TPU metadata warnings) before JAX falls back to
the CPU. When `JAX_PLATFORMS` is unset, the capture commands pick the backend the machine can
actually have, from its device nodes: NVIDIA (`/dev/nvidia0`...) -> `cuda,cpu`; TPU
(`/dev/accel*`, `/dev/vfio/N`) -> `tpu,cpu`; neither -> `cpu`. A user's own `JAX_PLATFORMS`
always wins. The library API never touches the environment.

`native_stderr_filtered()`: the CUDA stub libraries that jaxlib and the CUDA plugin load print
"Could not find cuda drivers on your machine, GPU will not be used." (with absl's "All log
messages before absl::InitializeLog()" preamble) from native code, once per library, on every
machine without an NVIDIA driver, whatever `JAX_PLATFORMS` says. Nothing in it is for the user
to act on, so the commands that import jax drop exactly those lines from file descriptor 2;
everything else on stderr passes through unchanged, as it is written. `--debug` keeps them.
"""

from __future__ import annotations

import contextlib
import glob
import os
import re
import sys
import threading
from collections.abc import Iterator

# Lines native libraries print that say nothing a user can act on (see the module docstring).
NATIVE_NOISE = re.compile(
    rb"^(WARNING: All log messages before absl::InitializeLog\(\) is called are written to "
    rb"STDERR|I\d{4} [\d:.]+ +\d+ cudart_stub\.cc:\d+\] Could not find cuda drivers on your "
    rb"machine, GPU will not be used\.)\r?$")


def choose_platforms() -> str | None:
    """Set `JAX_PLATFORMS` from the device nodes if the user did not; returns the value used."""
    if os.environ.get("JAX_PLATFORMS"):
        return os.environ["JAX_PLATFORMS"]
    if glob.glob("/dev/nvidia[0-9]*"):
        value = "cuda,cpu"
    elif glob.glob("/dev/accel[0-9]*") or glob.glob("/dev/vfio/[0-9]*"):
        value = "tpu,cpu"
    else:
        value = "cpu"
    os.environ["JAX_PLATFORMS"] = value
    return value


@contextlib.contextmanager
def native_stderr_filtered(noise: re.Pattern[bytes] = NATIVE_NOISE) -> Iterator[None]:
    """Pass file descriptor 2 through a pipe that drops whole lines matching `noise`.

    A thread forwards every other line as soon as it is complete (progress output is not held
    back); native code, Python's `sys.stderr` and child processes all write to fd 2, so all
    are filtered alike. On exit fd 2 is restored and whatever is left is forwarded.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    r, w = os.pipe()
    os.dup2(w, 2)
    os.close(w)

    def forward() -> None:
        pending = b""
        while True:
            try:
                chunk = os.read(r, 65536)
            except OSError:
                chunk = b""
            if not chunk:
                break
            pending += chunk
            *lines, pending = pending.split(b"\n")
            out = b"".join(ln + b"\n" for ln in lines if not noise.match(ln))
            if out:
                os.write(saved, out)
        if pending and not noise.match(pending):
            os.write(saved, pending)

    t = threading.Thread(target=forward, name="overlap-stderr-filter", daemon=True)
    t.start()
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)  # closes the pipe's last write end held here: the reader sees EOF
        t.join(timeout=5)  # a child still holding the pipe keeps it open: do not wait forever
        if not t.is_alive():
            os.close(r)
            os.close(saved)
