"""`overlap dashboard` reads its runs as the server starts (`app.prefetch`, issue 32): the
page's first request then finds them in the run cache instead of reading them after the
click. The read is the one the page would do (same cache entry, read once even when the page
asks while the prefetch is still reading), and a run that cannot be read is left to the page."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest

pytest.importorskip("dash")

from overlap.dashboard import app as dash_app  # noqa: E402
from overlap.dashboard import data as rundata  # noqa: E402

SAMPLE = Path(__file__).resolve().parents[2] / "sample_traces" / "tpu-v6e-offload"


@pytest.fixture
def logdir(tmp_path, monkeypatch):
    if not SAMPLE.exists():
        pytest.skip("sample_traces/tpu-v6e-offload missing")
    monkeypatch.setenv("OVERLAP_CACHE_DIR", "")  # no disk cache: every load is a read
    rundata.clear_cache_memory()
    shutil.copytree(SAMPLE, tmp_path / "v6e")
    yield tmp_path
    rundata.clear_cache_memory()


def _counting_reads(monkeypatch, gate: threading.Event | None = None) -> list[str]:
    reads: list[str] = []
    real = rundata._load_uncached

    def load(run):
        reads.append(run.name)
        if gate is not None:
            gate.wait(30)
        return real(run)

    monkeypatch.setattr(rundata, "_load_uncached", load)
    return reads


def test_prefetch_fills_the_cache_the_page_reads(logdir, monkeypatch):
    reads = _counting_reads(monkeypatch)
    runs = rundata.discover_runs([logdir])
    assert runs
    thread = dash_app.prefetch([logdir])
    assert thread.daemon
    thread.join(60)
    assert not thread.is_alive()
    assert sorted(reads) == sorted(r.name for r in runs)
    # the page's load: every run answered from the cache, no read of its own
    first = [rundata.load_run(r) for r in runs]
    assert sorted(reads) == sorted(r.name for r in runs)
    assert [rundata.load_run(r) for r in runs] == first


def test_page_asking_during_the_prefetch_waits_for_the_same_read(logdir, monkeypatch):
    gate = threading.Event()
    reads = _counting_reads(monkeypatch, gate)
    run = rundata.discover_runs([logdir])[0]
    thread = dash_app.prefetch([logdir])
    got: list = []
    page = threading.Thread(target=lambda: got.append(rundata.load_run(run)))
    # the prefetch holds the run's lock inside its read before the page asks
    for _ in range(3000):
        if reads:
            break
        threading.Event().wait(0.01)
    assert reads
    page.start()
    gate.set()
    page.join(60)
    thread.join(60)
    assert reads.count(run.name) == 1
    assert got and got[0] is rundata.load_run(run)


def test_a_run_that_cannot_be_read_is_left_to_the_page(logdir):
    bad = logdir / "broken" / "plugins" / "profile" / "2026_01_01_00_00_00"
    bad.mkdir(parents=True)
    (bad / "host.xplane.pb").write_bytes(b"\xff\xff not a capture")
    thread = dash_app.prefetch([logdir])
    thread.join(60)
    assert not thread.is_alive()
    runs = rundata.discover_runs([logdir])
    names = {r.name for r in runs}
    assert any("v6e" in n for n in names)
    # the good run is cached; the broken one still raises its own error to the page
    for r in runs:
        if "broken" in r.name:
            with pytest.raises(rundata.RunLoadError):
                rundata.load_run(r)
