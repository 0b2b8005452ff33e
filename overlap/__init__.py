"""overlap: does your JAX host offloading pay off?

Read a jax.profiler capture, find every device<->host transfer, and measure how much of it hides
behind compute; compare offload policies against remat baselines; gate CI on the result.

    >>> import overlap
    >>> trace = overlap.read_trace("runs/qkv_proj_offloaded")  # doctest: +SKIP
"""

from __future__ import annotations

__version__ = "0.1.0"

from overlap.errors import InputError, OverlapError, UsageError  # noqa: E402
from overlap.reader import Trace, read_trace  # noqa: E402
from overlap.check import assert_hidden  # noqa: E402

__all__ = ["__version__", "InputError", "OverlapError", "UsageError", "Trace", "read_trace",
           "assert_hidden"]
