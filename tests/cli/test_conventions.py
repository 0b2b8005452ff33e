"""Command-line conventions shared by every command: `--json` is a flag, errors point to the
command that does what the user meant, jax commands keep stderr for what a user can act on,
and shell completion comes from the parser itself."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from overlap.errors import has_module
from overlap.trace.synthetic import gpu_offload_scenario
from tests.conftest import REPO, SAMPLE_TRACES, run_cli

SCAN = SAMPLE_TRACES / "cpu-scan"


@pytest.fixture(scope="module")
def half(tmp_path_factory):
    """SYNTHETIC: per step 8 copies of 200 us, half of each hidden (overlap 0.5)."""
    d = tmp_path_factory.mktemp("conventions")
    return gpu_offload_scenario(steps=2, hidden_fraction=0.5).write(d / "half.xplane.pb")


def test_check_json_is_a_flag_and_json_out_writes_the_file(half, tmp_path):
    out = tmp_path / "check.json"
    junit = tmp_path / "junit.xml"
    r = run_cli("check", str(half), "--json", "--json-out", str(out), "--junit", str(junit))
    assert r.returncode == 1, r.stderr  # overlap 0.5 < the default 0.9
    printed = json.loads(r.stdout)  # stdout is only the JSON
    assert printed["check"]["failed"] == ["min_overlap"]
    assert json.loads(out.read_text()) == printed
    assert "FAIL (min_overlap)" in r.stderr and "FAIL" not in r.stdout.split("{", 1)[0]
    assert ET.parse(junit).getroot().get("failures") == "1"
    # --json-out alone: the text report stays on stdout.
    r = run_cli("check", str(half), "--json-out", str(out))
    assert r.returncode == 1 and r.stdout.startswith("SYNTHETIC")
    assert json.loads(out.read_text())["check"]["failed"] == ["min_overlap"]


def test_check_json_no_longer_takes_a_file(half, tmp_path):
    r = run_cli("check", str(half), "--json", str(tmp_path / "x.json"))
    assert r.returncode == 2 and "unrecognized arguments" in r.stderr
    assert not (tmp_path / "x.json").exists()


def test_plan_list_targets_honours_json():
    r = run_cli("plan", "--list-targets", "--json")
    assert r.returncode == 0, r.stderr
    targets = {t["name"]: t for t in json.loads(r.stdout)}
    assert {"h100", "v5e"} <= set(targets)
    assert targets["h100"]["platform"] == "cuda" and targets["h100"]["device_memory_bytes"] > 0
    assert all(t["source"] for t in targets.values())  # every number says where it is from
    text = run_cli("plan", "--list-targets")
    assert text.returncode == 0 and text.stdout.startswith("target")


def test_report_on_a_directory_of_runs_points_to_compare():
    r = run_cli("report", str(SCAN))
    assert r.returncode == 3 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert "2 runs (nothing_saveable, offload_x)" in r.stderr
    assert f"overlap compare {SCAN}" in r.stderr


def test_unknown_session_is_named():
    run = SCAN / "offload_x"
    r = run_cli("report", str(run), "--session", "nosuch")
    assert r.returncode == 3 and "no capture session 'nosuch'" in r.stderr
    session = next((run / "plugins" / "profile").iterdir())
    assert session.name in r.stderr  # the sessions it has are listed
    r = run_cli("report", str(session), "--session", "nosuch")
    assert r.returncode == 3 and f"capture session {session.name!r} itself" in r.stderr
    r = run_cli("report", str(session), "--session", session.name)
    assert r.returncode == 0, r.stderr


NOISE = ("WARNING: All log messages before absl::InitializeLog() is called are written to "
         "STDERR\nI0000 00:00:1795438423.306458   26625 cudart_stub.cc:31] Could not find cuda "
         "drivers on your machine, GPU will not be used.\n")


def test_native_stderr_filter_drops_only_the_driver_lines():
    # Native writes (os.write on fd 2), Python's sys.stderr and a child process, interleaved.
    code = (
        "import os, subprocess, sys\n"
        "from overlap.env import native_stderr_filtered\n"
        f"noise = {NOISE!r}.encode()\n"
        "with native_stderr_filtered():\n"
        "    os.write(2, noise)\n"
        "    print('progress: step 1', file=sys.stderr, flush=True)\n"
        "    os.write(2, noise + b'E0000 real error from native code\\n')\n"
        "    subprocess.run([sys.executable, '-c', 'import os; os.write(2, ' + repr(noise) "
        "+ ' + b\"child line\\\\n\")'])\n"
        "    os.write(2, b'no newline at the end')\n"
        "print('after', file=sys.stderr)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=REPO, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ("progress: step 1\nE0000 real error from native code\nchild line\n"
                        "no newline at the endafter\n")


@pytest.mark.skipif(not has_module("jax_plugins.xla_cuda12"),
                    reason="the CUDA plugin (plan extra) prints the driver lines")
def test_jax_command_stderr_has_no_driver_lines(tmp_path):
    r = run_cli("plan", "--target", "h100", "--workload", "scan", "--policy", "offload:x",
                "--out", str(tmp_path / "plans"), timeout=300)
    assert r.returncode == 0, r.stderr
    assert "Could not find cuda drivers" not in r.stderr
    assert "absl::InitializeLog" not in r.stderr


@pytest.mark.skipif(not has_module("shtab"), reason="the [completion] extra is not installed")
@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_bash_completion_completes_commands_and_options(tmp_path):
    r = run_cli("completion", "bash")
    assert r.returncode == 0, r.stderr
    script = tmp_path / "overlap.bash"
    script.write_text(r.stdout)

    def complete(*words: str) -> list[str]:
        line = " ".join(words)
        probe = (f"source {script}; COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; "
                 f"COMP_LINE='{line}'; COMP_POINT={len(line)}; _shtab_overlap; "
                 "printf '%s\\n' \"${COMPREPLY[@]}\"")
        out = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, out.stderr
        return out.stdout.split()

    assert complete("overlap", "rep") == ["report"]
    assert set(complete("overlap", "check", "x", "--json")) == {"--json", "--json-out"}
    assert "completion" in complete("overlap", "")
    zsh = run_cli("completion", "zsh")
    assert zsh.returncode == 0 and zsh.stdout.startswith("#compdef overlap")


def test_completion_without_shtab_names_the_extra(tmp_path):
    # A sitecustomize that hides shtab, as on an install without the [completion] extra.
    (tmp_path / "sitecustomize.py").write_text(
        "import sys\n"
        "class _Hide:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'shtab' or name.startswith('shtab.'):\n"
        "            raise ModuleNotFoundError(name)\n"
        "sys.meta_path.insert(0, _Hide())\n")
    r = run_cli("completion", "bash", env={"PYTHONPATH": f"{tmp_path}:{REPO}"})
    assert r.returncode == 2
    assert "overlap-jax[completion]" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_ci_doc_check_command_runs_as_written(half, tmp_path):
    """docs/ci.md's `overlap check` step, on a SYNTHETIC run, writes what the workflow uploads."""
    text = (REPO / "docs" / "ci.md").read_text()
    step = text.split("      - run: >\n          overlap check ", 1)[1].split("\n      #", 1)[0]
    args = step.split()
    assert args[0] == "runs/qkv_proj_offloaded"
    summary = tmp_path / "summary.md"
    r = run_cli("check", str(half), *args[1:], env={"GITHUB_STEP_SUMMARY": str(summary)},
                cwd=tmp_path)
    assert r.returncode == 1, r.stderr  # overlap 0.5: the gate fails, as it should
    assert ET.parse(tmp_path / "overlap-junit.xml").getroot().get("failures") == "1"
    assert json.loads((tmp_path / "overlap-check.json").read_text())["check"]["passed"] is False
    assert "FAIL (min_overlap" in summary.read_text()
