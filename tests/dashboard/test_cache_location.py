"""The suite's dashboard cache is a temporary directory (tests/conftest.py), never the user's
~/.cache/overlap: a test run neither reads stale entries from it nor leaves entries in it."""

from __future__ import annotations

import os
from pathlib import Path

from overlap.dashboard import data
from tests.dashboard.dashboard_support import write_run


def _entries(d: Path) -> set[Path]:
    return set(d.rglob("*")) if d.is_dir() else set()


def test_dashboard_cache_goes_to_the_sessions_temporary_directory(tmp_path, private_cache_dir):
    home = Path(os.path.expanduser("~")) / ".cache" / "overlap"
    xdg = Path(os.environ["XDG_CACHE_HOME"]) / "overlap" if os.environ.get(
        "XDG_CACHE_HOME") else home
    before = _entries(home) | _entries(xdg)
    assert data.cache_dir() == private_cache_dir
    logdir = tmp_path / "runs"
    write_run(logdir, "offload", {"policy": {"name": "offload", "category": "offload"}})
    data.clear_cache()
    run = data.find_run(data.discover_runs([logdir]), "offload")
    assert run is not None
    data.load_run(run)  # reads the SYNTHETIC capture and writes the disk cache entry
    assert list(private_cache_dir.glob("*.npz")), "the result was not cached where expected"
    assert _entries(home) | _entries(xdg) == before  # nothing new under the user's cache
