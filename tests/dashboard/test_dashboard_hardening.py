"""Dashboard findings of the fuzz campaign (issue 11): no outage from one bad run, a cache that
cannot be forged, no DNS rebinding, no debug console off loopback, malformed payloads."""

from __future__ import annotations

import socket

import numpy as np
import pytest

from overlap.cli.main import main as cli_main
from overlap.dashboard import data
from overlap.dashboard.app import create_app
from tests.dashboard.dashboard_support import write_run
from tests.dashboard.test_dashboard_security import _post


@pytest.fixture
def logdir(tmp_path, monkeypatch):
    monkeypatch.setenv("OVERLAP_CACHE_DIR", str(tmp_path / "cache"))
    data.clear_cache()
    d = tmp_path / "runs"
    write_run(d, "good", {"policy": {"name": "full", "category": "remat"}})
    return d


@pytest.mark.parametrize("bad", ["[" * 100000, '{"step_ns": ["a", 1e400]}',
                                 '{"step_ns": [1e30, -5], "label": [1], "policy": 7}'])
def test_one_bad_run_json_is_an_error_row_not_an_outage(logdir, bad):
    write_run(logdir, "bad", {"policy": "full"})
    (logdir / "bad" / "run.json").write_text(bad)
    client = create_app([logdir]).server.test_client()
    assert client.get("/").status_code == 200
    assert client.get("/_dash-layout").status_code == 200
    frame = data.runs_frame(data.discover_runs([logdir]))
    good = frame[frame["run"] == "good"]
    assert len(good) == 1 and good["verdict"].iloc[0] and "ERROR" not in good["verdict"].iloc[0]


def test_damaged_or_forged_cache_entries_are_misses(logdir):
    run = data.discover_runs([logdir])[0]
    first = data.load_run(run)
    entry = next((logdir.parent / "cache").glob("*.npz"))
    # Truncated: a miss, rewritten.
    entry.write_bytes(entry.read_bytes()[:100])
    data.clear_cache_memory()
    assert data.load_run(run).result["verdict"] == first.result["verdict"]
    assert np.load(entry, allow_pickle=False)  # rewritten whole
    # Forged: a valid entry with another verdict, written without our key.
    with np.load(entry, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    import json

    meta = json.loads(str(arrays["meta"]))
    meta["result"]["verdict"] = "FORGED"
    arrays["meta"] = np.asarray(json.dumps(meta))
    np.savez(entry, **arrays)
    data.clear_cache_memory()
    assert data.load_run(run).result["verdict"] != "FORGED"


def test_foreign_host_header_is_refused_on_loopback(logdir):
    client = create_app([logdir]).server.test_client()
    assert client.get("/", headers={"Host": "evil.example.com"}).status_code == 403
    assert client.get("/", headers={"Host": "evil.example.com:8050"}).status_code == 403
    assert client.get("/", headers={"Host": "127.0.0.1:8050"}).status_code == 200
    assert client.get("/", headers={"Host": "[::1]:8050"}).status_code == 200
    # Served on purpose to the network: the header is the user's business.
    open_client = create_app([logdir], host="0.0.0.0").server.test_client()
    assert open_client.get("/", headers={"Host": "box.lan:8050"}).status_code == 200


def test_debug_off_loopback_and_taken_port_are_usage_errors(logdir, capsys):
    assert cli_main(["dashboard", str(logdir), "--host", "0.0.0.0", "--debug"]) == 2
    assert "--debug" in capsys.readouterr().err
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert cli_main(["dashboard", str(logdir), "--port", str(port)]) == 2
        err = capsys.readouterr().err
        assert f"127.0.0.1:{port}" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("cell,rows", [(5, [{"run": "good"}]), ({"row": 0}, 3),
                                       ({"row": "x"}, []), ({"row": 0}, [{"no_run": 1}]),
                                       ({"row": 0}, [7])])
def test_malformed_callback_payloads_are_answered(logdir, cell, rows):
    app = create_app([logdir])
    client = app.server.test_client()
    client.get("/")
    r = _post(client, "..run-select.value...tabs.value..",
              [{"id": "runs-table", "property": "active_cell", "value": cell}],
              [{"id": "runs-table", "property": "derived_viewport_data", "value": rows},
               {"id": "run-select", "property": "value", "value": rows},
               {"id": "step-select", "property": "value", "value": cell},
               {"id": "run-status", "property": "children", "value": cell}])
    assert r.status_code in (200, 204)
    # The compare callback, whatever outputs it has now (a request naming no callback is a
    # 400 of its own: test_malformed_framework_requests_are_4xx).
    out = next(k for k in app.callback_map if k.startswith("..fig-memory.figure"))
    r = _post(client, out, [{"id": "compare-select", "property": "value", "value": 5},
                            {"id": "baseline", "property": "value", "value": ["x"]},
                            {"id": "tabs", "property": "value", "value": "compare"}],
              [{"id": "compare-drawn", "property": "data", "value": None}])
    assert r.status_code == 200


# ---------------------------------------------------------------------------------------------
# Second round (issue 25)

@pytest.mark.parametrize("kind", ["torn", "fifo", "array"])
def test_a_damaged_run_json_is_a_named_row(logdir, kind):
    import os

    run = write_run(logdir, "bad", None)
    if kind == "fifo":
        os.mkfifo(run / "run.json")
    else:
        (run / "run.json").write_text("{" if kind == "torn" else "[1]")
    client = create_app([logdir]).server.test_client()
    assert client.get("/").status_code == 200  # a FIFO run.json must not hang the page load
    assert client.get("/_dash-layout").status_code == 200
    frame = data.runs_frame(data.discover_runs([logdir]))
    bad = frame[frame["run"] == "bad"]
    assert len(bad) == 1 and bad["verdict"].iloc[0].startswith("ERROR: bad:")
    assert "run.json" in bad["verdict"].iloc[0]
    assert "ERROR" not in frame[frame["run"] == "good"]["verdict"].iloc[0]


def test_a_pod_with_a_damaged_host_shows_the_others_and_names_it(logdir):
    from tests.trace.test_hardening import pod

    pod(logdir / "pod")
    run = data.find_run(data.discover_runs([logdir]), "pod")
    row = data.safe_run_row(run)
    assert not row["error"] and "host-1.xplane.pb" in row["verdict"]
    assert "1 of 3 host file(s) unreadable" in row["verdict"]
    assert str(logdir) not in row["verdict"]  # the file's name, not the server's layout
    assert data.load_run(run).result["hosts"] == ["host-0", "host-2"]


def test_dropped_events_are_in_the_dashboard_verdict(logdir, tmp_path):
    from tests.trace.test_hardening import _drop

    f = _drop(tmp_path, "kernels")
    (logdir / "dropped.xplane.pb").write_bytes(f.read_bytes())
    run = data.find_run(data.discover_runs([logdir]), "dropped")
    row = data.safe_run_row(run)
    assert "1 invalid event(s) dropped" in row["verdict"], row["verdict"]
    assert data.load_run(run).result["dropped_events"]["count"] == 1


@pytest.mark.parametrize("method,path,body,code", [
    ("post", "/_dash-update-component", "not json", 400),
    ("post", "/_dash-update-component", "{}", 400),
    ("post", "/_dash-update-component", "[1, 2]", 400),
    ("post", "/_dash-update-component", '{"output": "x.y", "inputs": []}', 400),
    ("post", "/_dash-update-component",
     '{"output": "compare-select.value", "outputs": {}, "inputs": [5]}', 400),
    ("get", "/_dash-component-suites/dash/no-such-file.js", None, 404),
    ("get", "/_dash-component-suites/no_such_package/a.js", None, 404),
    ("get", "/_dash-component-suites/dash/deps/react@18.v1.js", None, 404),
])
def test_malformed_framework_requests_are_4xx(logdir, method, path, body, code):
    client = create_app([logdir]).server.test_client()
    client.get("/")
    kw = {} if body is None else {"data": body, "content_type": "application/json"}
    assert getattr(client, method)(path, **kw).status_code == code


def test_debug_starts_on_loopback(logdir, tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "OVERLAP_CACHE_DIR": str(tmp_path / "c")}
    out = open(tmp_path / "log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "overlap", "dashboard", str(logdir),
                             "--debug", "--port", str(port)], stdout=out, stderr=out, env=env,
                            start_new_session=True)  # the reloader's child is in the group
    try:
        deadline = time.monotonic() + 90
        status = None
        while time.monotonic() < deadline and status is None:
            assert proc.poll() is None, (tmp_path / "log").read_text()
            try:
                status = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5).status
            except OSError:
                time.sleep(0.5)
        assert status == 200, (tmp_path / "log").read_text()
        assert "Address already in use" not in (tmp_path / "log").read_text()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
        out.close()
