"""`overlap report` on one capture never imports pandas (issue 24: start-up and memory).

`import pandas` costs ~0.3 s and ~43 MiB of RSS, half of a whole `overlap report --json` process
on a 35 MB capture. The reader and the analysis hold their tables as numpy columns and build a
DataFrame only when something asks for one (`Trace.transfers`, `transfer_table`, the
dashboard). Each case runs the real command in a fresh interpreter on a real capture (GPU,
TPU, CPU, ROCm) and a synthetic one with steps, and checks what that process imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "sample_traces"

# Runs `overlap ARGS` as the console script does; at exit (the quick exit runs atexit hooks
# too) it says which of the heavy modules the process imported, on stderr.
_HEAVY = ("pandas", "pyarrow", "plotly", "dash", "jax", "google.protobuf")
# none of these on a report (protobuf: tests/cli/test_no_protobuf.py says where it loads)
_NEVER = {"pandas", "pyarrow", "plotly", "dash", "jax"}
_RUN = """
import atexit, runpy, sys
def said():
    heavy = sorted(m for m in {heavy!r} if m in sys.modules)
    sys.stderr.write('\\nIMPORTED ' + ','.join(heavy) + '\\n')
atexit.register(said)
sys.argv = ['overlap'] + {args!r}
runpy.run_module('overlap', run_name='__main__')
"""


def run_overlap(args: list[str], env: dict[str, str] | None = None
                ) -> tuple[int, str, list[str]]:
    """(exit code, stdout, which of `_HEAVY` it imported) of `overlap ARGS` in a fresh
    interpreter (also used by test_no_protobuf)."""
    p = subprocess.run([sys.executable, "-c", _RUN.format(heavy=_HEAVY, args=args)],
                       capture_output=True, text=True, cwd=REPO,
                       env={**os.environ, **(env or {})})
    line = [x for x in p.stderr.splitlines() if x.startswith("IMPORTED ")]
    assert line, p.stderr[-2000:]
    heavy = [m for m in line[-1][len("IMPORTED "):].split(",") if m]
    return p.returncode, p.stdout, heavy


def _capture(glob: str) -> Path:
    found = sorted(SAMPLES.glob(glob))
    assert found, glob
    return found[0]


@pytest.mark.parametrize("glob", [
    "tpu-v6e-offload/**/*.xplane.pb",
    "gpu-v100-tf-multiworker/**/*.xplane.pb",
    "cpu-scan/offload_x/**/*.xplane.pb",
    "rocm/mi300x-jax08-attention/**/*.xplane.pb",
    # host copies with HLO protos in the capture: offload_by_name reads the programs
    # (overlap.hlo.program imported pandas at module level: +0.3 s per report, issue 32)
    "gpu-h100/scan-h100/offload_x/**/*.xplane.pb",
])
def test_report_json_of_a_real_capture_imports_no_pandas(glob: str) -> None:
    code, out, heavy = run_overlap(["report", "--json", str(_capture(glob))])
    assert code == 0
    assert json.loads(out)["schema_version"] >= 1
    assert not set(heavy) & _NEVER


def test_text_report_with_steps_imports_no_pandas(tmp_path: Path) -> None:
    from overlap.trace.synthetic import gpu_offload_scenario

    # synthetic (labelled so in the report): steps, kernels and copies known by construction
    f = gpu_offload_scenario(steps=3, layers=2, hidden_fraction=0.5).write(
        tmp_path / "synthetic.xplane.pb")
    code, out, heavy = run_overlap(["report", str(f)])
    assert code == 0 and "hidden" in out
    assert not set(heavy) & _NEVER


def test_check_against_a_saved_baseline_imports_no_pandas(tmp_path: Path) -> None:
    # the CI gate: a capture checked against its own saved report (passes, exit 0; this real
    # capture hides 2% of its copies, so the default overlap gate is lowered) and with a gate
    # it fails (exit 1), both without pandas
    f = _capture("tpu-v6e-offload/**/*.xplane.pb")
    code, out, _ = run_overlap(["report", "--json", str(f)])
    assert code == 0
    base = tmp_path / "baseline.json"
    base.write_text(out)
    code, out, heavy = run_overlap(["check", str(f), "--baseline", str(base), "--min-overlap", "0",
                                    "--json"])
    assert code == 0 and json.loads(out)["check"]
    assert not set(heavy) & _NEVER
    code, _, heavy = run_overlap(["check", str(f), "--min-overlap", "0.99"])
    assert code == 1
    assert not set(heavy) & _NEVER


@pytest.mark.parametrize("args", [["inspect", "--json"], ["inspect"]])
@pytest.mark.parametrize("glob", [
    "tpu-v6e-offload/**/*.xplane.pb",
    "rocm/mi300x-jax08-attention/**/*.xplane.pb",
    "gpu-h100/scan-h100/offload_x",  # a run directory, programs beside the capture
])
def test_inspect_of_a_real_capture_imports_no_pandas(args: list[str], glob: str) -> None:
    # the first look at a capture: ~0.15 s and ~40 MiB of pandas for a handful of group-bys
    # (issue 32; `inspect_trace` reads the tables' columns)
    code, out, heavy = run_overlap([*args, str(_capture(glob))])
    assert code == 0 and out
    if "--json" in args:
        assert json.loads(out)["planes"]
    assert not set(heavy) & _NEVER


@pytest.mark.parametrize("json_out", [False, True])
def test_compare_of_real_runs_imports_no_pandas(json_out: bool) -> None:
    # offload against its remat baselines, the question a sweep asks; the peak memory, the
    # copies' programs and the device kinds are read from the tables' columns
    runs = [str(p) for p in sorted((SAMPLES / "cpu-transformer-tiny").iterdir())]
    code, out, heavy = run_overlap(["compare", *(["--json"] if json_out else []), *runs])
    assert code == 0
    if json_out:
        assert len(json.loads(out)["runs"]) == len(runs)
    assert not set(heavy) & _NEVER


@pytest.mark.parametrize("args", [["report", "--json"], ["report"], ["check"], ["inspect"]])
def test_a_pod_imports_no_pandas(tmp_path: Path, args: list[str]) -> None:
    # two real H100 host files laid out as one session of a two-host capture: per-host
    # workers, their parts combined; the analysed transfers the HTML page reads are kept as
    # columns (a DataFrame of them loaded pandas for every report of a pod, issue 32)
    session = tmp_path / "pod" / "plugins" / "profile" / "2026_01_01_00_00_00"
    session.mkdir(parents=True)
    for i, run in enumerate(("balanced-offload", "balanced-remat")):
        src = _capture(f"gpu-h100/user-script/{run}/**/*.xplane.pb")
        (session / f"host{i}.xplane.pb").write_bytes(src.read_bytes())
    code, out, heavy = run_overlap([*args, str(tmp_path / "pod")])
    assert code in (0, 1) and out  # (check: 1 where a copy is exposed)
    if "--json" in args:
        assert sorted(json.loads(out)["hosts"]) == ["host0", "host1"]
    assert not set(heavy) & _NEVER


def test_predict_of_a_real_run_imports_no_pandas() -> None:
    # the estimate beside the measured copies: the measured link (`link_throughput`), the
    # device kind and the programs' ids are read from the tables' columns (issue 32)
    run = SAMPLES / "gpu-h100" / "scan-h100" / "offload_x"
    code, out, heavy = run_overlap(["report", "--json", "--predict", str(run)])
    assert code == 0
    pred = json.loads(out)["prediction"]
    assert pred["predicted"] and pred["programs"][0]["measured_link"]
    assert not set(heavy) & _NEVER
