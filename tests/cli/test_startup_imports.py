"""`overlap report`/`check` of a capture file load only what that file needs (issue 32: a small
capture's report is mostly interpreter and imports, what CI pays per capture).

Imports the report of a bare capture file never needs: `overlap.runs.rundir` (a run
directory's manifest; its `secrets` import loads hashlib and OpenSSL, ~5 ms), `hashlib` itself
(`overlap.analysis.names` hashes source files only where names are tied to them) and `numpy.ma`
(numpy 2's `np.unique` imports it on a plain call, ~6 ms; the first-use section uses
`overlap.arrays.sorted_unique`). Each case runs the real command in a fresh interpreter on a
real capture and checks what that process imported; a run directory still reads its manifest.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "sample_traces"
_WATCH = ("overlap.runs.rundir", "numpy.ma", "hashlib")
_RUN = """
import atexit, runpy, sys
def said():
    sys.stderr.write('\\nIMPORTED ' + ','.join(m for m in {watch!r} if m in sys.modules) + '\\n')
atexit.register(said)
sys.argv = ['overlap'] + {args!r}
runpy.run_module('overlap', run_name='__main__')
"""


def imported(args: list[str]) -> tuple[int, set[str]]:
    p = subprocess.run([sys.executable, "-c", _RUN.format(watch=_WATCH, args=args)],
                       capture_output=True, text=True, cwd=REPO, env=dict(os.environ))
    line = [x for x in p.stderr.splitlines() if x.startswith("IMPORTED ")]
    assert line, p.stderr[-2000:]
    return p.returncode, {m for m in line[-1][len("IMPORTED "):].split(",") if m}


def _capture(glob: str) -> Path:
    found = sorted(SAMPLES.glob(glob))
    assert found, glob
    return found[0]


# host copies and HLO protos in the capture (programs, names and first-use sections run), and
# the TPU sample (device clock)
@pytest.mark.parametrize("glob", ["gpu-h100/scan-h100/offload_x/**/*.xplane.pb",
                                  "tpu-v6e-offload/**/*.xplane.pb"])
@pytest.mark.parametrize("command", [["report", "--json"], ["check"]])
def test_a_capture_file_loads_no_run_directory_code(glob: str, command: list[str]) -> None:
    code, mods = imported([*command, str(_capture(glob))])
    assert code in (0, 1)  # check: 1 where the gate fails, never an error
    assert not mods, mods


def test_a_run_directory_still_reads_its_manifest() -> None:
    run = _capture("gpu-h100/scan-h100/offload_x/**/*.xplane.pb").parents[3]
    assert (run / "plugins").is_dir()
    code, mods = imported(["report", "--json", str(run)])
    assert code == 0
    assert "overlap.runs.rundir" in mods  # (and hashlib, through its `secrets`)


def test_a_capture_without_programs_loads_no_hlo_rules_and_no_logging() -> None:
    # the TPU sample's copies name no program at hand: the rules that map trace ops to HLO
    # instructions (`overlap.hlo.trace_ops`, 7 regexes, ~2-3 ms) are imported only where a
    # program is read; `logging` only where the reader warns that the scanner is missing
    watch = ("overlap.hlo.trace_ops", "logging")
    p = subprocess.run([sys.executable, "-c", _RUN.format(
        watch=watch, args=["report", "--json", str(_capture("tpu-v6e-offload/**/*.xplane.pb"))])],
        capture_output=True, text=True, cwd=REPO, env=dict(os.environ))
    line = [x for x in p.stderr.splitlines() if x.startswith("IMPORTED ")]
    assert p.returncode == 0 and line, p.stderr[-2000:]
    assert line[-1] == "IMPORTED ", line[-1]
