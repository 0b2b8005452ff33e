"""trace: a capture on disk -> trace tables.

In: a `.xplane.pb` file, a `plugins/profile/<session>/` directory, or a run directory.
Out: `Trace` (tables of transfers, compute, steps, memory events, HLO modules, devices;
integer picoseconds), as pandas DataFrames built on first use or as numpy columns
(`Trace.columns`, no pandas). From the bottom up: `files` reads a capture file's bytes; `wire`
decodes the protobuf wire format (the compiled scanner `_scan`, or upb where it was not built)
and knows no semantics; `reader` applies the XSpace rules of docs/xspace.md to one host file,
one function per backend (with `hlotext` and `programs` for TPU ops, `vendors` for ROCm;
`tables` defines what comes out); `distributed` holds `read_trace`, which reads a session's
host files here, in worker processes or on Dask and combines them; `paths` finds capture
files; `synthetic`/`synthetic_bulk` write labelled test captures.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from overlap.trace.distributed import read_trace
    from overlap.trace.reader import Trace

__all__ = ["Trace", "read_trace"]

# Loaded on first use: `overlap.trace.protos` (the message classes alone, e.g. a bare decode
# for a benchmark's baseline) and the light submodules must not pull in numpy and pandas.
_API = {"Trace": "overlap.trace.reader", "read_trace": "overlap.trace.distributed"}


def __getattr__(name: str):
    if name in _API:
        import importlib

        value = getattr(importlib.import_module(_API[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
