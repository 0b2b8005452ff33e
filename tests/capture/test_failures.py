"""A policy that does not fit is a finding, not a crash (issue 34): real XLA:CPU steps under an
address-space limit the test sets (RLIMIT_AS, in a child process), where XLA:CPU's allocator
itself raises RESOURCE_EXHAUSTED for the 4 GiB output of `failing_steps.by_policy`'s
everything_saveable step; and a step that raises at run time (a host callback that throws)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from overlap.capture.failures import allocation_bytes, out_of_memory

REPO = Path(__file__).resolve().parents[2]
LIMIT = 3 << 30  # below the 4 GiB the everything_saveable step's output needs
WORKLOAD = "tests.capture.failing_steps:by_policy"

_CHILD = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))
from overlap.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def _overlap(*args: str, limit: int | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(REPO)}
    code = _CHILD.format(limit=limit) if limit else _CHILD.replace(
        "resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))", "")
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=300)


def _ours(stderr: str) -> list[str]:
    """overlap's own lines (jax logs the host callback's exception on its own)."""
    return [ln for ln in stderr.splitlines() if ln.startswith("overlap ")]


def test_the_allocation_that_failed_is_read_from_the_runtime_message():
    # The real H100 message of issue 34, and XLA:CPU's.
    assert allocation_bytes("RESOURCE_EXHAUSTED: Out of memory while trying to allocate "
                            "133.27GiB.") == round(133.27 * (1 << 30))
    assert allocation_bytes("RESOURCE_EXHAUSTED: Out of memory allocating 4294967296 bytes."
                            ) == 4294967296
    assert allocation_bytes("INTERNAL: something else") is None
    assert out_of_memory(RuntimeError("RESOURCE_EXHAUSTED: Out of memory allocating 8 bytes"))
    assert not out_of_memory(RuntimeError("INTERNAL: CpuCallback error"))


@pytest.fixture(scope="module")
def swept(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    out = tmp_path_factory.mktemp("failures") / "runs"
    r = _overlap("capture", "--workload", WORKLOAD, "--policy", "full", "--policy",
                 "everything_saveable", "--policy", "minimal", "--steps", "2", "--warmup", "1",
                 "--out", str(out), limit=LIMIT)
    return r, out


def test_a_sweep_writes_the_policy_that_does_not_fit_and_goes_on(swept):
    r, out = swept
    # `minimal` raised something other than out-of-memory: exit 3, never 4, after the others.
    assert r.returncode == 3, r.stderr[-2000:]
    assert "internal error" not in r.stderr and "Traceback" not in "\n".join(_ours(r.stderr))
    assert r.stdout.split() == [str(out / p) for p in ("full", "everything_saveable", "minimal")]
    lines = _ours(r.stderr)
    assert len(lines) == 2, lines
    assert lines[0].startswith("overlap capture: everything_saveable: does not fit while running "
                               "the warm-up steps: an allocation of 4.00 GiB failed, device "
                               "memory 3.00 GiB")
    assert "status does_not_fit" in lines[0]
    assert lines[1].startswith("overlap capture: minimal: failed while running the warm-up steps")
    # The policy that fits was captured as usual, timed alone once the others failed.
    assert list((out / "full").glob("plugins/profile/*/*.xplane.pb"))
    full = json.loads((out / "full" / "run.json").read_text())
    assert "status" not in full and len(full["step_ns"]) == 2
    m = json.loads((out / "everything_saveable" / "run.json").read_text())
    assert m["status"] == "does_not_fit" and "RESOURCE_EXHAUSTED" in m["error"]
    assert m["failure"]["allocation_bytes"] == 4 << 30
    assert m["failure"]["device_memory"]["bytes"] == LIMIT
    assert m["failure"]["phase"] == "running the warm-up steps"
    assert m["policy"]["name"] == "everything_saveable" and m["workload"]["name"] == WORKLOAD
    # What the compiler said the step needs: the 4 GiB output.
    assert m["memory_analysis"]["output_size_in_bytes"] >= 4 << 30
    assert not (out / "everything_saveable" / "plugins").exists()
    bad = json.loads((out / "minimal" / "run.json").read_text())
    assert bad["status"] == "failed" and "the user's host callback failed" in bad["error"]


def test_compare_report_and_dashboard_show_the_run_that_did_not_fit(swept):
    _, out = swept
    r = _overlap("compare", str(out))
    assert r.returncode == 0, r.stderr
    assert "did not run (no capture: the step did not complete):" in r.stdout
    row = next(ln for ln in r.stdout.splitlines() if ln.strip().startswith("everything_saveable"))
    assert "DOES NOT FIT" in row and "an allocation of 4.00 GiB failed" in row
    assert "device memory 3.00 GiB" in row
    j = json.loads(_overlap("compare", "--json", str(out)).stdout)
    assert [x["label"] for x in j["runs"]] == ["full"]
    assert {x["label"]: x["status"] for x in j["did_not_run"]} == {
        "everything_saveable": "does_not_fit", "minimal": "failed"}
    # Nothing to report on a run with no capture: one line naming it, exit 3.
    r = _overlap("report", str(out / "everything_saveable"))
    assert r.returncode == 3 and len(r.stderr.strip().splitlines()) == 1
    assert "did not fit the device" in r.stderr
    from overlap.dashboard import data

    runs = {x.name: x for x in data.discover_runs([out])}
    assert set(runs) == {"full", "everything_saveable", "minimal"}
    row = data.safe_run_row(runs["everything_saveable"])
    assert row["verdict"].startswith("DOES NOT FIT while running the warm-up steps")
    assert row["backend"] == "cpu"
    with pytest.raises(data.RunLoadError, match="DOES NOT FIT"):
        data.load_run(runs["everything_saveable"])
    assert data.safe_run_row(runs["minimal"])["verdict"].startswith("FAILED")


def test_a_policy_that_does_not_fit_alone_is_a_finding_exit_0(tmp_path):
    r = _overlap("capture", "--workload", WORKLOAD, "--policy", "full", "--policy",
                 "everything_saveable", "--steps", "1", "--warmup", "0", "--out", str(tmp_path),
                 limit=LIMIT)
    assert r.returncode == 0, r.stderr[-2000:]
    assert len(_ours(r.stderr)) == 1 and "does not fit" in _ours(r.stderr)[0]
    full = json.loads((tmp_path / "full" / "run.json").read_text())
    # Timed with the other policy until it failed, then alone: still one interleaved group.
    assert full["step_timing"]["mode"] == "interleaved"
