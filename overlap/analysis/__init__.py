"""analysis: pure functions from trace tables (and manifests) to one result.

In: a `Trace`, run manifests. Out: plain dicts/DataFrames; no I/O and no rendering.
`overlap` owns exposed/hidden time, overlap ratios and steps; `memory` owns peak memory;
`compare` lines runs up against a baseline.
"""
