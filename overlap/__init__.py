"""overlap: does your JAX host offloading pay off?

Read a jax.profiler capture, find every device<->host transfer, and measure how much of it hides
behind compute; compare offload policies against remat baselines; gate CI on the result.

    >>> import overlap
    >>> trace = overlap.read_trace("runs/qkv_proj_offloaded")  # doctest: +SKIP
"""

from __future__ import annotations

__version__ = "0.1.0"

from overlap.errors import InputError, OverlapError, UsageError  # noqa: E402
from overlap.report.gate import assert_hidden, assert_no_transfers  # noqa: E402
from overlap.trace.reader import Trace, read_trace  # noqa: E402

__all__ = ["__version__", "InputError", "OverlapError", "UsageError", "Trace", "read_trace",
           "assert_hidden", "assert_no_transfers"]

# Subpackages load on first use (`import overlap; overlap.capture.profile_steps(...)`): capture
# and plan import jax, which `overlap report` never needs.
_SUBPACKAGES = ("analysis", "capture", "cli", "hlo", "plan", "report", "runs", "trace")


def __getattr__(name: str):
    if name in _SUBPACKAGES:
        import importlib

        return importlib.import_module(f"overlap.{name}")
    raise AttributeError(f"module 'overlap' has no attribute {name!r}")
