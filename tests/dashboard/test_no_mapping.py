"""The dashboard never maps capture files (`overlap.trace.files.use_mapping`): a server reads
files other processes may rewrite, and a mapped file truncated under it stops the process
(SIGBUS) for every user, where a read notices the file shrink. A one-shot `overlap report`
maps them (issue 32: no copy of the file's bytes)."""

from __future__ import annotations

import mmap

from overlap.dashboard.app import create_app
from overlap.trace import files, reader, wire
from overlap.trace.synthetic import gpu_offload_scenario


def _mapped_chunks(path) -> list[bool]:
    chunks = files.read_chunks(path, wire.PAD, reader._read_alone)
    assert chunks is not None
    return [isinstance(c.base, memoryview) and isinstance(c.base.obj, mmap.mmap)
            for c, *_ in chunks]


def test_the_dashboard_reads_capture_files_without_mapping(tmp_path, monkeypatch):
    monkeypatch.setattr(files, "_MAPPING", [True])
    monkeypatch.setattr(files, "MAP_MIN_BYTES", 0)  # map even this small SYNTHETIC capture
    gpu_offload_scenario(steps=3, layers=1).write_session(tmp_path / "logs" / "run")
    path = next((tmp_path / "logs").rglob("*.xplane.pb"))
    assert any(_mapped_chunks(path))  # a report process maps
    create_app([tmp_path / "logs"])
    assert not any(_mapped_chunks(path))  # the server reads
