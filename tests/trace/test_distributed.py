"""Per-host map, then combine: worker processes and Dask give the serial read's result
(issue 14)."""

from __future__ import annotations

import json

import pytest

from overlap.analysis import overlap as analysis
from overlap.trace import read_trace
from tests.analysis.test_hosts import pod
from tests.conftest import run_cli


def _canon(trace) -> str:
    r = analysis.analyze(trace)
    r.pop("sources")
    return json.dumps(r, sort_keys=True, default=str)


@pytest.fixture(scope="module")
def capture(tmp_path_factory):
    return pod(tmp_path_factory.mktemp("pod"), n=4, slow="host-1")


def test_local_workers_equal_the_serial_read(capture):
    serial = read_trace(capture, jobs=1)
    pooled = read_trace(capture, jobs=2)
    for t in ("transfers", "compute", "steps"):
        assert getattr(serial, t).equals(getattr(pooled, t)), t
    assert _canon(serial) == _canon(pooled)


def test_dask_local_cluster_equals_the_local_path(capture):
    distributed = pytest.importorskip("dask.distributed")  # in the [test] extra via [dask]
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=None) as cluster:
        r = run_cli("report", str(capture), "--json", "--scheduler", cluster.scheduler_address,
                    timeout=300)
    assert r.returncode == 0, r.stderr
    local = run_cli("report", str(capture), "--json", "--jobs", "2")
    a, b = json.loads(r.stdout), json.loads(local.stdout)
    assert a == b and a["stragglers"]["worst_host"] == "host-1"


def test_missing_dask_or_scheduler_is_a_usage_error(capture, monkeypatch):
    import builtins

    from overlap.trace import distributed

    real = builtins.__import__

    def no_dask(name, *a, **k):
        if name.startswith("dask"):
            raise ImportError(name)
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_dask)
    from overlap.errors import UsageError

    with pytest.raises(UsageError, match=r"overlap-jax\[dask\]"):
        distributed.map_hosts_dask([capture], "tcp://127.0.0.1:1")


def test_default_jobs_reads_small_captures_here(tmp_path, monkeypatch):
    # a worker's start (~0.2 s of CPU) costs more than it saves below WORKERS_FROM_BYTES in
    # all (issue 32): such a capture is read in this process whatever the cores; a larger
    # one (sparse files here: sizes, no bytes) in a worker per core; a file gone counts 0
    from overlap.analysis import pod as pod_mod
    from overlap.trace import distributed

    cores = distributed.default_jobs()
    small = [tmp_path / f"h{i}.xplane.pb" for i in range(3)]
    for f in small:
        f.write_bytes(b"\0" * 1000)
    assert distributed.default_jobs(small) == 1
    big = tmp_path / "big.xplane.pb"
    with open(big, "wb") as fh:
        fh.truncate(distributed.WORKERS_FROM_BYTES - 1000 * len(small))
    assert distributed.default_jobs([*small, big]) == cores
    assert distributed.default_jobs([*small[1:], big]) == 1
    assert distributed.default_jobs([tmp_path / "gone.xplane.pb"]) == 1
    # `report`'s default (jobs None) asks it of the capture's files: a small pod's map runs
    # here, one given --jobs in that many workers
    seen = []
    real = distributed.map_hosts

    def spy(files, fn, *, jobs=1, scheduler=None):
        seen.append(jobs)
        return real(files, fn, jobs=jobs, scheduler=scheduler)

    monkeypatch.setattr(distributed, "map_hosts", spy)
    root = pod(tmp_path / "small", n=3, slow="host-1")
    serial = pod_mod.read_and_analyze(root, jobs=None)
    pooled = pod_mod.read_and_analyze(root, jobs=2)
    assert seen == [1, 2]
    assert json.dumps(serial[1], sort_keys=True, default=str) == \
        json.dumps(pooled[1], sort_keys=True, default=str)
