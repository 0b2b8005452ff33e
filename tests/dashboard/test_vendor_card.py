"""The dashboard's run view names the devices' vendor (issue 23): the real ROCm capture says
AMD, and a capture with a device shape the reader cannot read says CANNOT TELL."""

from __future__ import annotations

import shutil

from overlap.dashboard import data
from overlap.dashboard.app import create_app
from overlap.trace.synthetic import SyntheticTrace
from tests.conftest import SAMPLE_TRACES
from tests.dashboard.dashboard_support import RUN_VIEW, run_picked
from tests.dashboard.test_dashboard_security import _post


def _run_status(logdir, run_name: str) -> str:
    client = create_app([logdir]).server.test_client()
    client.get("/")
    r = _post(client, RUN_VIEW, run_picked(run_name))
    assert r.status_code == 200
    return r.get_data(as_text=True)


def test_run_view_names_amd_and_cannot_tell(tmp_path, monkeypatch):
    monkeypatch.setenv("OVERLAP_CACHE_DIR", str(tmp_path / "cache"))
    data.clear_cache()
    logdir = tmp_path / "logs"
    shutil.copytree(SAMPLE_TRACES / "rocm" / "mi300x-jax08-attention", logdir / "mi300x")
    st = SyntheticTrace()
    g = st.gpu(0, vendor="Intel")
    g.kernel(1_000_000, 10_000_000)
    st.write_session(logdir / "odd")
    body = _run_status(logdir, "mi300x")
    assert "vendor: AMD" in body and "CANNOT TELL" not in body
    body = _run_status(logdir, "odd")
    assert "CANNOT TELL" in body and "Intel" in body


def test_runs_table_names_the_vendor_when_no_device_model(tmp_path, monkeypatch):
    monkeypatch.setenv("OVERLAP_CACHE_DIR", str(tmp_path / "cache"))
    data.clear_cache()
    (run,) = data.discover_runs([SAMPLE_TRACES / "rocm" / "mi300x-jax08-attention"])
    assert data.run_row(run)["device"] == "AMD gpu"
