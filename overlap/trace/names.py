"""The XSpace names the reader's rules match (planes, lines, event names), and CUPTI's
`*_details` stat format. Stable strings across profiler versions."""

from __future__ import annotations

import re

GPU_PLANE_RE = re.compile(r"^/device:GPU:(\d+)$")
# TensorCore planes only; SparseCore planes are folded into their chip's compute below.
TPU_PLANE_RE = re.compile(r"^/device:TPU:(\d+)(?: SparseCore.*)?$")
HOST_PLANE = "/host:CPU"
METADATA_PLANE = "/host:metadata"

# Lines whose events are a GPU stream's work (the CUPTI/ROCm tracers' `Stream #<n>...` and
# `Memcpy...` lines); derived lines (`TensorFlow Ops`, `Steps`) hold none of their own.
STREAM_LINE_PREFIXES = ("Stream #", "Memcpy")

TPU_OPS_LINES = frozenset({"XLA Ops", "Sparse Core Ops"})
TPU_ASYNC_LINE = "Async XLA Ops"

MEMCPY_DIRECTIONS = {"MemcpyD2H": "D2H", "MemcpyH2D": "H2D"}
MEMORY_EVENT_KINDS = {"MemoryAllocation": "alloc", "MemoryDeallocation": "free"}

SYNTHETIC_MARK = "overlap-synthetic"

def parse_details(text: str | None) -> dict[str, str]:
    """Parse a CUPTI `*_details` stat, `"kind_src:device kind_dst:pinned size:64 ..."`.

    Split on spaces, then on the first `:`; xprof's own helper looks for `num_bytes` and misses
    `size`, so we parse it ourselves.
    """
    out: dict[str, str] = {}
    if not text:
        return out
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    for tok in str(text).split():
        key, sep, val = tok.partition(":")
        if sep:
            out[key] = val
    return out
