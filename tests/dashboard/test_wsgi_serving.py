"""The dashboard for a team (issue 33, items 1 and 2): a real gunicorn serves the app that
`dashboard/wsgi.py` exposes, configured from the environment, on a loopback port; the test
fetches the pages and a callback, checks the Host rule, that nothing under the read-only log
directory changed, and stops the server (bounded time throughout)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import SAMPLE_TRACES

REPO = Path(__file__).resolve().parents[2]
gunicorn = pytest.importorskip("gunicorn", reason="the [serve] extra (gunicorn) is not installed")


def test_top_level_dashboard_is_deployable_not_a_package():
    """The card's top-level dashboard/ holds the deployable part; no bare `dashboard` module
    can be installed from it (tests/test_packaging.py checks the built wheel)."""
    d = REPO / "dashboard"
    assert (d / "wsgi.py").is_file() and (d / "README.md").is_file()
    assert not (d / "__init__.py").exists()
    assert "server = wsgi()" in (d / "wsgi.py").read_text()


def test_environment_is_checked_in_one_line(tmp_path):
    from overlap.dashboard import serve

    with pytest.raises(serve.ConfigError, match="set OVERLAP_DASHBOARD_LOGDIRS"):
        serve.logdirs_from_env({})
    with pytest.raises(serve.ConfigError, match="nope: no such file"):
        serve.logdirs_from_env({serve.LOGDIRS_ENV: f"{tmp_path}{os.pathsep}{tmp_path}/nope"})
    assert serve.logdirs_from_env({serve.LOGDIRS_ENV: str(tmp_path)}) == [tmp_path]
    hosts = serve.hosts_from_env({serve.HOSTS_ENV: "Perf-Box.example.com:8050, [::1]"})
    assert "perf-box.example.com" in hosts and "127.0.0.1" in hosts
    with pytest.raises(serve.ConfigError, match="not '\\*'"):
        serve.hosts_from_env({serve.HOSTS_ENV: "*"})


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, host: str | None = None, body: dict | None = None) -> tuple[int, bytes]:
    req = urllib.request.Request(url, data=None if body is None else json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"} if body else {})
    if host:
        req.add_header("Host", host)
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(root.rglob("*"))}


@pytest.fixture
def readonly_logdir(tmp_path):
    logdir = tmp_path / "runs"
    shutil.copytree(SAMPLE_TRACES / "cpu-scan", logdir)
    for p in [logdir, *logdir.rglob("*")]:  # the team's runs, mounted read-only
        mode = p.stat().st_mode
        p.chmod(mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    yield logdir
    for p in [logdir, *logdir.rglob("*")]:
        p.chmod(p.stat().st_mode | stat.S_IWUSR)


def test_gunicorn_serves_the_dashboard(readonly_logdir, tmp_path):
    port = _free_port()
    before = _snapshot(readonly_logdir)
    env = {**os.environ, "OVERLAP_DASHBOARD_LOGDIRS": str(readonly_logdir),
           "OVERLAP_DASHBOARD_HOSTS": "perf-box.example.com",
           "OVERLAP_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(REPO)}
    log = open(tmp_path / "gunicorn.log", "w+")
    proc = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", str(REPO / "dashboard" / "gunicorn.conf.py"),
         "--chdir", str(REPO / "dashboard"), "--bind", f"127.0.0.1:{port}", "--workers", "1",
         "wsgi:server"], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 90
        while True:
            try:
                status, page = _get(base + "/")
                break
            except (urllib.error.URLError, ConnectionError):
                if proc.poll() is not None or time.time() > deadline:
                    log.seek(0)
                    pytest.fail("gunicorn did not start:\n" + log.read()[-3000:])
                time.sleep(0.3)
        assert status == 200 and b"overlap dashboard" in page
        status, layout = _get(base + "/_dash-layout")
        assert status == 200
        assert b"offload_x" in layout and b"nothing_saveable" in layout
        status, deps = _get(base + "/_dash-dependencies")
        assert status == 200
        # the Runs table's callback, as the browser calls it
        dep = next(d for d in json.loads(deps) if "runs-table.data" in d["output"])
        outputs = [{"id": o.split(".")[0], "property": o.split(".")[1]}
                   for o in dep["output"].strip(".").split("...")]
        status, body = _get(base + "/_dash-update-component", body={
            "output": dep["output"], "outputs": outputs,
            "inputs": [{"id": "refresh", "property": "n_clicks", "value": 1}],
            "changedPropIds": ["refresh.n_clicks"], "state": []})
        assert status == 200, body[:500]
        rows = json.loads(body)["response"]["runs-table"]["data"]
        assert sorted(r["run"] for r in rows) == ["nothing_saveable", "offload_x"]
        assert all(not r["error"] for r in rows) and rows[0]["backend"] == "cpu"
        # the Host rule: loopback and the team's name; any other host is refused
        assert _get(base + "/", host="perf-box.example.com:8050")[0] == 200
        assert _get(base + "/", host="evil.example.com")[0] == 403
        assert _get(base + "/_dash-layout", host="evil.example.com:%d" % port)[0] == 403
        assert proc.poll() is None
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # gunicorn's arbiter and its worker, ours only
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        log.close()
    assert proc.returncode is not None
    assert _snapshot(readonly_logdir) == before  # read-only: nothing written under the logdir
    assert (tmp_path / "cache").is_dir()  # the cache went where the environment said
