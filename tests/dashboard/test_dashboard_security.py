"""The dashboard serves only complete runs under its logdirs, and survives broken ones.

Driven through Dash's HTTP callback endpoint with Flask's test client (no browser): whatever
run name a client sends, only names from the discovered-runs table resolve.
"""

from __future__ import annotations

import json

import pytest

from overlap.dashboard import data
from overlap.dashboard.app import create_app
from tests.dashboard.dashboard_support import RUN_VIEW, make_logdir, run_picked, write_run


@pytest.fixture
def logdir(tmp_path):
    data.clear_cache()
    return make_logdir(tmp_path)


def test_sec001_discovery_lists_complete_runs_inside_logdir_only(logdir):
    names = [r.name for r in data.discover_runs([logdir])]
    # Not: late.partial-1234, link_out (symlink out of logdir). half_written has a capture and
    # no run.json: a plain jax.profiler log directory, listed as a run of its own.
    assert names == ["broken_capture", "half_written", "qkv_offloaded", "remat_full"]
    root = logdir.resolve()
    for r in data.discover_runs([logdir]):
        assert all(root in f.resolve().parents for f in r.files)


def test_sec002_half_written_manifest_and_symlinked_file_refused(tmp_path):
    logdir = tmp_path / "runs"
    run = write_run(logdir, "torn", None)
    (run / "run.json").write_text('{"policy": "fu')  # torn
    outside = write_run(tmp_path / "else", "x", {"policy": "full"})
    target = next(outside.rglob("*.xplane.pb"))
    (logdir / "stolen.xplane.pb").symlink_to(target)
    # run.json is written last and atomically, so a torn one is damage: listed, and named as
    # the run's error (issue 25), never read as a plain log directory. The symlink is not.
    runs = data.discover_runs([logdir])
    assert [r.name for r in runs] == ["torn"]
    with pytest.raises(data.RunLoadError, match="run.json"):
        data.load_run(runs[0])
    # A symlink that stays inside the logdir is followed, and a run reached twice is listed once.
    good = write_run(logdir, "good", {"policy": "full"})
    (logdir / "alias").symlink_to(good, target_is_directory=True)
    assert [r.name for r in data.discover_runs([logdir])] == ["good", "torn"]


@pytest.mark.parametrize("name", ["../elsewhere/secret_run", "/etc", "link_out",
                                  "late.partial-1234", None, 7,
                                  "remat_full/../../elsewhere/secret_run"])
def test_sec003_find_run_only_resolves_discovered_names(logdir, name):
    assert data.find_run(data.discover_runs([logdir]), name) is None


def _post(client, output: str, inputs: list[dict], state: list[dict] | None = None):
    # Dash's wire format: "..a.b...c.d.." names the outputs; "outputs" spells them out.
    outputs = [dict(zip(("id", "property"), o.rsplit(".", 1)))
               for o in output.strip(".").split("...")]
    body = {"output": output, "outputs": outputs, "inputs": inputs, "state": state or [],
            "changedPropIds": [f"{inputs[0]['id']}.{inputs[0]['property']}"]}
    return client.post("/_dash-update-component", data=json.dumps(body),
                       content_type="application/json")


def test_sec004_callback_with_foreign_run_name_gets_error_card(logdir):
    app = create_app([logdir])
    client = app.server.test_client()
    assert client.get("/").status_code == 200  # layout runs discovery
    for name in ("../elsewhere/secret_run", str(logdir.parent / "elsewhere" / "secret_run")):
        r = _post(client, RUN_VIEW, run_picked(name))
        assert r.status_code == 200
        text = r.get_data(as_text=True)
        assert "Unknown run" in text and "secret" in text  # echoed name, nothing read
        assert '"options":[]' in text.replace(" ", "") or '"options": []' in text


def test_sec005_broken_run_error_card_then_app_keeps_working(logdir):
    app = create_app([logdir])
    client = app.server.test_client()
    client.get("/")
    r = _post(client, RUN_VIEW, run_picked("broken_capture"))
    text = r.get_data(as_text=True)
    assert r.status_code == 200 and "could not be read" in text
    assert str(logdir) not in text  # the card does not leak the server's paths
    r = _post(client, RUN_VIEW, run_picked("remat_full"))
    assert r.status_code == 200 and "Verdict" in r.get_data(as_text=True)


def test_sec006_no_static_file_route_into_logdir(logdir):
    client = create_app([logdir]).server.test_client()
    for url in ("/runs/remat_full/run.json", "/assets/../run.json",
                "/_dash-component-suites/../../etc/passwd"):
        # Dash answers unknown paths with its index page; it must never be a run's file.
        assert "synthetic-mlp" not in client.get(url).get_data(as_text=True)


def test_sec007_cli_binds_localhost_by_default():
    from overlap.cli.main import build_parser

    args = build_parser().parse_args(["dashboard", "runs"])
    assert args.host == "127.0.0.1" and args.port == 8050


def test_sec008_cache_follows_file_changes(tmp_path):
    data.clear_cache()
    logdir = tmp_path / "runs"
    write_run(logdir, "r", {"policy": "full"}, hidden_fraction=1.0)
    run = data.discover_runs([logdir])[0]
    first = data.load_run(run)
    assert data.load_run(run) is first  # unchanged files: cached object
    write_run(logdir, "r", {"policy": "full"}, hidden_fraction=0.5, steps=2)  # rewritten
    again = data.load_run(data.discover_runs([logdir])[0])
    assert again is not first and len(again.result["steps"]) == 2
