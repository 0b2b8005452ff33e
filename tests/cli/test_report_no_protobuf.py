"""A report whose programs come from the run directory's HLO text never loads protobuf (issue
32, round 27): the HLO modules import `HloProto` only where a proto is parsed. Before, half
of the real corpus' run directories loaded it (~10 ms and ~2 MiB of every such report's
start-up) for a proto they never read."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from overlap.analysis.names import capture_protos

# prints, after a whole `report --json` in this process, whether protobuf was loaded
CODE = ("import sys, io, contextlib\n"
        "from overlap.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    code = main(['report', '--json', sys.argv[1]])\n"
        "print(code, len(out.getvalue()) > 0, 'google.protobuf' in sys.modules)\n")


@pytest.mark.parametrize("run", ["gpu-h100/transformer-h100-command-buffers/qkv_proj_offloaded_cb",
                                 "gpu-h200/transformer-h100/qkv_proj_offloaded"])
def test_hlo_text_programs_load_no_protobuf(gpu_corpus, run):
    d = gpu_corpus / run
    assert list(d.glob("hlo/*.hlo.txt")), "the run directory carries its programs' text"
    got = subprocess.run([sys.executable, "-c", CODE, str(d)], capture_output=True, text=True,
                         check=True).stdout.split()
    assert got == ["0", "True", "False"]


def test_proto_programs_still_parse(gpu_corpus, tmp_path):
    """Without the HLO text, the capture's HloProto is read (protobuf loaded where needed)."""
    import shutil

    from overlap.analysis.names import programs_of
    from overlap.trace.distributed import read_trace

    src = gpu_corpus / "gpu-h100/transformer-h100-command-buffers/qkv_proj_offloaded_cb"
    d = tmp_path / "run"
    shutil.copytree(src, d, ignore=shutil.ignore_patterns("hlo"))
    trace = read_trace(d)
    assert capture_protos(trace)
    progs = programs_of(d, trace)
    assert progs and all(where.startswith("the capture's HloProto") for _, _, where in
                         progs.values())


# prints, for each capture, whether its `report --json` loaded protobuf; the captures read in
# one process (each a fresh report: `main`), none allowed to load it before the next
MANY = ("import sys, io, contextlib\n"
        "from overlap.cli.main import main\n"
        "for f in sys.argv[1:]:\n"
        "    with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "        code = main(['report', '--json', f])\n"
        "    print(code, len(out.getvalue()) > 0, 'google.protobuf' in sys.modules, f)\n"
        "    if 'google.protobuf' in sys.modules:\n"
        "        break\n")


def test_no_real_capture_loads_protobuf(gpu_corpus, gpu_large):
    """Every real capture here, by its capture file (no HLO text beside it), reports without
    protobuf where the scanner is built (round 44): the host plane's thousands of event
    metadata entries stripped from the skeleton, read through its `MetaTable`
    (`reader._strip_meta`), and the executed program's heap simulation read by the scanner
    (`host_memory.capture_host_facts`). 17 of them loaded it for one or the other (~20 ms and
    ~3-5 MiB of each report)."""
    from overlap.trace import wire

    if wire._scan is None:
        pytest.skip("the compiled scanner is not built")
    samples = Path(__file__).resolve().parents[2] / "sample_traces"
    files = sorted(gpu_corpus.glob("**/*.xplane.pb")) + sorted(gpu_large.glob("**/*.xplane.pb")) \
        + sorted(samples.glob("**/*.xplane.pb"))
    assert len(files) >= 60
    lines = subprocess.run([sys.executable, "-c", MANY, *map(str, files)], capture_output=True,
                           text=True, check=True).stdout.splitlines()
    got = [line.split(" ", 3) for line in lines]
    assert [g[3] for g in got] == list(map(str, files))
    assert all(g[:3] == ["0", "True", "False"] for g in got), [g for g in got if g[2] != "False"]
