"""overlap: does your JAX host offloading pay off?

Read a jax.profiler capture, find every device<->host transfer, and measure how much of it hides
behind compute; compare offload policies against remat baselines; gate CI on the result.

    >>> import overlap
    >>> trace = overlap.read_trace("runs/qkv_proj_offloaded")  # doctest: +SKIP
"""

from __future__ import annotations

__version__ = "0.1.0"

from typing import TYPE_CHECKING  # noqa: E402

from overlap.errors import InputError, OverlapError, UsageError  # noqa: E402

if TYPE_CHECKING:  # loaded on first use (below): `overlap --help` needs neither pandas nor numpy
    from overlap.report.gate import assert_hidden, assert_no_transfers
    from overlap.trace.distributed import read_trace
    from overlap.trace.reader import Trace

__all__ = ["__version__", "InputError", "OverlapError", "UsageError", "Trace", "read_trace",
           "assert_hidden", "assert_no_transfers"]

# Subpackages load on first use (`import overlap; overlap.capture.profile_steps(...)`): capture
# and plan import jax, which `overlap report` never needs.
_SUBPACKAGES = ("analysis", "capture", "cli", "hlo", "plan", "report", "runs", "trace")
# The public API's names and the module each lives in, imported on first use: the reader and
# the gates pull in numpy and pandas (~0.9 s), which `overlap --help` and the command line's
# start never need.
_API = {"Trace": "overlap.trace.reader", "read_trace": "overlap.trace.distributed",
        "assert_hidden": "overlap.report.gate", "assert_no_transfers": "overlap.report.gate"}


def __getattr__(name: str):
    import importlib

    if name in _SUBPACKAGES:
        return importlib.import_module(f"overlap.{name}")
    if name in _API:
        value = getattr(importlib.import_module(_API[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'overlap' has no attribute {name!r}")
