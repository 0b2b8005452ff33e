"""runs: run directories on disk (TensorBoard/xprof layout + `run.json`).

In: a path. Out: manifests, the list of complete runs, atomic writes of new runs. Capture and
plan write here; every reader of runs (analysis, report, dashboard) reads from here.
"""
