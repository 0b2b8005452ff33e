"""trace: a capture on disk -> trace tables.

In: a `.xplane.pb` file, a `plugins/profile/<session>/` directory, or a run directory.
Out: `Trace` (pandas tables of transfers, compute, steps, memory events, HLO modules, devices;
integer picoseconds). From the bottom up: `files` reads a capture file's bytes; `wire`
decodes the protobuf wire format (the compiled scanner `_scan`, or upb where it was not built)
and knows no semantics; `reader` applies the XSpace rules of docs/xspace.md to one host file,
one function per backend (with `hlotext` and `programs` for TPU ops, `vendors` for ROCm;
`tables` defines what comes out); `distributed` holds `read_trace`, which reads a session's
host files here, in worker processes or on Dask and combines them; `paths` finds capture
files; `synthetic`/`synthetic_bulk` write labelled test captures.
"""

from overlap.trace.distributed import read_trace
from overlap.trace.reader import Trace

__all__ = ["Trace", "read_trace"]
