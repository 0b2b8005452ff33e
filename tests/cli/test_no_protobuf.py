"""`overlap report` of a capture the scanner reads whole never imports protobuf (issue 24).

With the compiled scanner, upb parses only a file's skeleton (plane names, stat metadata,
plane stats), which `overlap.trace.skeleton` decodes itself where it can: `import
google.protobuf` (~26 ms, ~3.5 MiB of RSS) is left to captures that need upb (HLO protos in
`/host:metadata`, whose map upb keys by program id, and planes the scanner refuses). The
capture here is the shape of the many-ops TPU benchmark (SYNTHETIC, labelled so): every copy
its own `copy-start` op, no HLO protos. The real samples all carry HLO protos, which are read
with upb (`overlap.trace.programs`): they are not cases for this test.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from overlap.trace import wire

REPO = Path(__file__).resolve().parents[2]
US = 1_000_000

pytestmark = pytest.mark.skipif(wire._scan is None, reason="the scanner was not built")

# Runs `overlap ARGS` as the console script does; at exit it says whether protobuf was loaded.
_RUN = """
import atexit, runpy, sys
def said():
    sys.stderr.write('\\nPROTOBUF ' + str('google.protobuf' in sys.modules) + '\\n')
atexit.register(said)
sys.argv = ['overlap'] + {args!r}
runpy.run_module('overlap', run_name='__main__')
"""


def _run(args: list[str], env: dict[str, str] | None = None) -> tuple[int, str, bool]:
    import os

    p = subprocess.run([sys.executable, "-c", _RUN.format(args=args)], capture_output=True,
                       text=True, cwd=REPO, env={**os.environ, **(env or {})})
    line = [x for x in p.stderr.splitlines() if x.startswith("PROTOBUF ")]
    assert line, p.stderr[-2000:]
    return p.returncode, p.stdout, line[-1] == "PROTOBUF True"


def _many_ops(path: Path, steps: int = 30) -> Path:
    from overlap.trace.synthetic import SyntheticTrace

    t = SyntheticTrace()
    tpu = t.tpu(0)
    for s in range(steps):
        t0 = (10 + 100 * s) * US
        t.step(s, t0, t0 + 95 * US)
        for k in range(12):
            tpu.op(t0 + k * 7 * US, 6 * US, name=f"fusion.{k}")
            tpu.async_copy("D2H" if k % 2 else "H2D", t0 + k * 7 * US,
                           t0 + k * 7 * US + 5 * US, dims=(8, 128))
    return t.write(path)


def test_report_of_a_many_ops_tpu_capture_imports_no_protobuf(tmp_path: Path) -> None:
    f = _many_ops(tmp_path / "synthetic_many_ops.xplane.pb")
    code, out, pb = _run(["report", "--json", str(f)])
    assert code == 0
    doc = json.loads(out)
    assert doc["schema_version"] >= 1
    assert not pb
    code, text, pb = _run(["report", str(f)])
    assert code == 0 and "hidden" in text
    assert not pb
    # upb reads the same file to the same report (the fallback where the scanner is not built)
    code, out_upb, pb = _run(["report", "--json", str(f)], {"OVERLAP_SCANNER": "0"})
    assert code == 0 and pb
    assert json.loads(out_upb) == doc


def test_a_capture_with_hlo_protos_still_reads_them(tmp_path: Path) -> None:
    # the v6e sample's programs are parsed by upb: protobuf loads there, and only there
    found = sorted((REPO / "sample_traces" / "tpu-v6e-offload").rglob("*.xplane.pb"))
    code, out, pb = _run(["report", "--json", str(found[0])])
    assert code == 0 and json.loads(out)["schema_version"] >= 1
    assert pb
