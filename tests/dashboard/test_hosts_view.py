"""The dashboard's Run view and the HTML report draw the per-host straggler bars (issue 14)."""

from __future__ import annotations

from overlap.dashboard import data
from overlap.dashboard.app import create_app
from overlap.report import figures
from tests.analysis.test_hosts import pod
from tests.conftest import run_cli
from tests.dashboard.dashboard_support import RUN_VIEW, run_picked
from tests.dashboard.test_dashboard_security import _post


def test_run_view_and_html_show_the_straggler(tmp_path, monkeypatch):
    monkeypatch.setenv("OVERLAP_CACHE_DIR", str(tmp_path / "cache"))
    data.clear_cache()
    logdir = tmp_path / "logs"
    pod(logdir / "pod", slow="host-2")
    (run,) = data.discover_runs([logdir])
    d = data.load_run(run)
    fig = figures.hosts_figure(d.result)
    bar = fig.data[0]
    assert list(bar.x) == [f"host-{i}" for i in range(5)]
    assert max(bar.y) == bar.y[2] and bar.marker.color[2] == figures.COLORS["exposed"]
    client = create_app([logdir]).server.test_client()
    client.get("/")
    r = _post(client, RUN_VIEW, run_picked("pod"))
    assert r.status_code == 200 and "host host-2 exposes" in r.get_data(as_text=True)
    page = tmp_path / "r.html"
    assert run_cli("report", str(logdir / "pod"), "--html", str(page)).returncode == 0
    assert "straggler view" in page.read_text()
