"""Process environment the commands set before JAX starts (nothing here imports jax).

`choose_platforms()`: with the `[plan]` extra installed, libtpu and the CUDA plugin sit beside
jaxlib, and JAX tries every installed backend at start-up: on a machine without that hardware
each one fails loudly on stderr (cuInit errors, TPU metadata warnings) before JAX falls back to
the CPU. When `JAX_PLATFORMS` is unset, the capture commands pick the backend the machine can
actually have, from its device nodes: NVIDIA (`/dev/nvidia0`...) -> `cuda,cpu`; TPU
(`/dev/accel*`, `/dev/vfio/N`) -> `tpu,cpu`; neither -> `cpu`. A user's own `JAX_PLATFORMS`
always wins. The library API never touches the environment.
"""

from __future__ import annotations

import glob
import os


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
