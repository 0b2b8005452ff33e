"""The real NVIDIA H100/H200 samples (sample_traces/gpu-h100, gpu-h200) are what a new user sees
first (issue 30): the dashboard's default (no ./runs) lists them and groups the H100 offload run
with its remat baseline, `overlap demo` prints the H100 pair's answer and step-time verdict, and
the README's first look quotes what the tool really says about them."""

from __future__ import annotations

import json
import re

from overlap.cli import dashboard as dash_cli
from overlap.dashboard import data
from overlap.dashboard.app import create_app
from overlap.report import groups as rgroups
from tests.conftest import REPO, SAMPLE_TRACES, run_cli
from tests.dashboard.test_dashboard_security import _post

H100_PAIR = SAMPLE_TRACES / "gpu-h100" / "scan-h100"
OFFLOAD = "gpu-h100/scan-h100/offload_x"
BASELINE = "gpu-h100/scan-h100/nothing_saveable"


def test_dashboard_default_opens_with_the_h100_pair(tmp_path, monkeypatch):
    monkeypatch.setenv("OVERLAP_CACHE_DIR", str(tmp_path / "cache"))
    data.clear_cache()
    logdirs = dash_cli.default_logdirs(cwd=tmp_path)  # no ./runs here
    assert logdirs == [dash_cli.REPO_SAMPLES] == [SAMPLE_TRACES]
    runs = data.discover_runs(logdirs)
    names = {r.name for r in runs}
    assert {OFFLOAD, BASELINE, "gpu-h200/scan-h100/offload_x",
            "gpu-h100/transformer-h100-command-buffers/full_cb",
            "gpu-h100/user-script/balanced-remat"} <= names
    items = [(r.name, data.load_run(r), 0.0) for r in runs if r.name.startswith("gpu-h")]
    (pair,) = [g for g in rgroups.groups(items) if OFFLOAD in g["runs"]]
    assert sorted(pair["runs"]) == [BASELINE, OFFLOAD]
    assert "NVIDIA H100 80GB HBM3" in pair["label"]
    in_pair = [r for r in runs if r.name in pair["runs"]]
    assert data.default_baseline(in_pair) == BASELINE

    client = create_app(logdirs).server.test_client()
    assert client.get("/").status_code == 200
    layout = json.dumps(client.get("/_dash-layout").get_json(), ensure_ascii=False)
    assert f'"value": "{OFFLOAD}"' in layout  # a run to pick in the Run view
    assert "scan:h100 (jit_step) on gpu: NVIDIA H100 80GB HBM3" in layout  # a Compare group
    r = _post(client, "..step-select.options...step-select.value...run-status.children..",
              [{"id": "run-select", "property": "value", "value": OFFLOAD}])
    assert r.status_code == 200
    body = r.get_data(as_text=True)
    assert "vendor: NVIDIA" in body and "D2H 87% hidden, H2D 0% hidden" in body


def test_demo_prints_the_real_h100_pair(capsys):
    from overlap.cli import demo

    assert demo.REAL_GPU_PAIR == H100_PAIR
    assert demo._real_gpu_pair() is True
    out = capsys.readouterr().out
    assert "NVIDIA H100" in out
    assert "100 transfers, 12.5 GiB" in out and "D2H 87% hidden, H2D 0% hidden" in out
    assert "offload_x: 3.1% slower than nothing_saveable" in out


def _quoted_after(readme: str, command: str) -> list[str]:
    """The lines of the output block that follows `command`'s code block in the README."""
    m = re.search(re.escape(command) + r"\n```\n```\n(.*?)\n```", readme, re.S)
    assert m, command
    return [ln for ln in m.group(1).splitlines() if ln.strip()]


def test_readme_first_look_quotes_the_tool():
    readme = (REPO / "README.md").read_text()
    rel = H100_PAIR.relative_to(REPO).as_posix()
    for command in (f"overlap report {rel}/offload_x", f"overlap compare {rel}"):
        quoted = _quoted_after(readme, command)
        r = run_cli(*command.split()[1:])
        assert r.returncode == 0, r.stderr
        for line in quoted:
            assert line in r.stdout.splitlines(), (command, line)
    # The step-time story beside it is compare's own numbers.
    r = run_cli("compare", "--json", str(H100_PAIR))
    runs = {x["label"]: x for x in json.loads(r.stdout)["runs"]}
    assert runs["offload_x"]["step_ns_median"] == 290_756_394
    assert runs["nothing_saveable"]["step_ns_median"] == 282_127_472
    assert "(290.76 ms against 282.13 ms" in readme
