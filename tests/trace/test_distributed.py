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
