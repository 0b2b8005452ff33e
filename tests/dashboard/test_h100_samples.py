"""The real NVIDIA H100/H200 samples (sample_traces/gpu-h100, gpu-h200) are what a new user sees
first (issue 30): the dashboard's default (no ./runs) lists them and groups the H100 offload run
with its remat baseline, `overlap demo` prints the H100 pair's answer and step-time verdict, and
every output the README quotes (first look, why exposed, names, check, compare, plan check,
--predict) is what the tool prints now."""

from __future__ import annotations

import json
import re

import pytest

from overlap.cli import dashboard as dash_cli
from overlap.dashboard import data
from overlap.dashboard.app import create_app
from overlap.report import groups as rgroups
from tests.conftest import REPO, SAMPLE_TRACES, run_cli
from tests.dashboard.dashboard_support import RUN_VIEW, run_picked
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
    r = _post(client, RUN_VIEW, run_picked(OFFLOAD))
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


# A shell block whose last line is an `overlap` command, followed at once by a plain block:
# the plain block is that command's output as the README quotes it. No backtick inside either
# block, so one match never spans two blocks.
QUOTE = re.compile(r"```bash\n([^`]*?)\n```\n```\n([^`]*?)\n```")


def readme_quotes(readme: str) -> list[tuple[list[str], list[str]]]:
    """(commands, quoted lines) for every command the README shows with its output; '...' marks
    a cut and is not a quoted line."""
    out = []
    for m in QUOTE.finditer(readme):
        commands = [c for c in m.group(1).splitlines() if c.strip()]
        lines = [ln for ln in m.group(2).splitlines() if ln.strip() and ln.strip() != "..."]
        out.append((commands, lines))
    return out


def test_readme_quotes_are_found():
    """The parser sees every quoted output (it must not silently find none): the first look's
    report and compare, why exposed, names, check (failing and baseline), like-with-like
    compare, the plan check and --predict."""
    quotes = readme_quotes((REPO / "README.md").read_text())
    shown = {cmds[-1] for cmds, _ in quotes}
    for expected in ("overlap report sample_traces/gpu-h100/scan-h100/offload_x",
                     "overlap compare sample_traces/gpu-h100/scan-h100",
                     "overlap check sample_traces/gpu-h100/scan-h100/offload_x --no-host-compute",
                     "overlap compare sample_traces/gpu-h100",
                     "overlap report sample_traces/gpu-h100/scan-h100/offload_x --predict"):
        assert expected in shown, expected
    assert len(quotes) >= 9
    assert all(lines for _, lines in quotes)


def test_readme_quotes_the_tool(tmp_path):
    """Every output the README quotes is what the tool prints now, line for line (a cut with
    '...' aside), from a fresh checkout's point of view: commands run in an empty folder that
    sees only sample_traces/, so a quote that needs anything else (a plan compiled on the spot)
    runs the commands shown before it in its block."""
    readme = (REPO / "README.md").read_text()
    (tmp_path / "sample_traces").symlink_to(SAMPLE_TRACES)
    for commands, quoted in readme_quotes(readme):
        r = None
        for command in commands:
            args = command.split()
            assert args[0] == "overlap", command
            if args[1] == "plan":
                pytest.importorskip("jax_plugins.xla_cuda12", reason="overlap plan needs [plan]")
            r = run_cli(*args[1:], cwd=tmp_path, timeout=300)
            expected_rc = (0, 1) if args[1] == "check" else (0,)
            assert r.returncode in expected_rc, (command, r.returncode, r.stderr[-2000:])
        assert r is not None
        printed = (r.stdout + "\n" + r.stderr).splitlines()
        for line in quoted:
            assert line in printed, (commands[-1], line)


def test_readme_first_look_step_times():
    readme = (REPO / "README.md").read_text()
    # The step-time story beside it is compare's own numbers.
    r = run_cli("compare", "--json", str(H100_PAIR))
    runs = {x["label"]: x for x in json.loads(r.stdout)["runs"]}
    assert runs["offload_x"]["step_ns_median"] == 290_756_394
    assert runs["nothing_saveable"]["step_ns_median"] == 282_127_472
    assert "(290.76 ms against 282.13 ms" in readme
