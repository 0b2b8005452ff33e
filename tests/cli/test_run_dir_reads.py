"""What `overlap report` of a run directory does at most once, and what it never loads
(issue 32: on the real H100 transformer run directories the report took 0.19-0.21 s and
~50 MB, against 0.10-0.12 s for the capture file alone).

* its HLO text is parsed once: the program (`trace_ops.program_from_text`) and the offload
  inventory the per-name table reads (`names.op_names`) share one `program.ParsedHlo`;
* reading run.json loads neither `secrets` (hashlib and OpenSSL: ~4 MiB) nor `shutil` (bz2,
  lzma): only writing a run directory needs them.

Each case runs the real command in a fresh interpreter on a real run directory.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys

from tests.conftest import REPO

# `overlap ARGS` as the console script runs it, counting `_parse_module` calls by text; at
# exit (the quick exit runs atexit hooks) it says the counts and the modules loaded.
_RUN = """
import atexit, collections, runpy, sys
from overlap.hlo import program
parses = collections.Counter()
_orig = program._parse_module
def counted(text):
    parses[hash(text)] += 1
    return _orig(text)
program._parse_module = counted
def said():
    mods = sorted(m for m in ("secrets", "hashlib", "_hashlib", "shutil", "lzma", "bz2")
                  if m in sys.modules)
    sys.stderr.write("\\nSAID " + repr((sorted(parses.values()), mods)) + "\\n")
atexit.register(said)
sys.argv = ["overlap"] + {args!r}
runpy.run_module("overlap", run_name="__main__")
"""


def _run(args: list[str]) -> tuple[int, str, list[int], list[str]]:
    p = subprocess.run([sys.executable, "-c", _RUN.format(args=args)], capture_output=True,
                       text=True, cwd=REPO)
    line = [x for x in p.stderr.splitlines() if x.startswith("SAID ")]
    assert line, p.stderr[-2000:]
    counts, mods = ast.literal_eval(line[-1][5:])  # our own repr: two lists
    return p.returncode, p.stdout, counts, mods


def test_a_run_directorys_hlo_text_is_parsed_once_and_no_writer_module_loads():
    run = REPO / "sample_traces" / "gpu-h100" / "scan-h100" / "offload_x"
    assert (run / "hlo" / "jit_step.hlo.txt").is_file() and (run / "run.json").is_file()
    code, out, counts, mods = _run(["report", "--json", str(run)])
    assert code == 0, out
    doc = json.loads(out)
    # the text was read: the per-name table names its programs' source
    assert doc["offload_by_name"]["programs"] == {"jit_step(5973)": "hlo/jit_step.hlo.txt"}
    assert counts == [1]
    assert mods == []


def test_one_parse_gives_what_two_gave(gpu_corpus):
    """`ParsedHlo` read by both readers: the same program and inventory as the text read by
    each (the real H100 transformer qkv_proj_offloaded run's HLO text: 3,638 instructions)."""
    from overlap.hlo import trace_ops
    from overlap.hlo.program import ParsedHlo, offload_inventory

    text = (gpu_corpus / "gpu-h100" / "transformer-h100" / "qkv_proj_offloaded" / "hlo"
            / "jit_train_step.hlo.txt").read_text()
    parsed = ParsedHlo(text)
    a, b = trace_ops.program_from_text(parsed, "m"), trace_ops.program_from_text(text, "m")
    assert (a.name, a.instrs, a.roots, a.frames) == (b.name, b.instrs, b.roots, b.frames)
    inv = offload_inventory(parsed)
    assert inv == offload_inventory(text) and len(inv.ops) > 0
