"""`overlap report` of a capture the scanner reads whole never imports protobuf (issue 24).

With the compiled scanner, upb parses only a file's skeleton (plane names, stat metadata,
plane stats), which `overlap.trace.skeleton` decodes itself where it can: `import
google.protobuf` (~26 ms, ~3.5 MiB of RSS) is left to captures that need upb (HLO protos in
`/host:metadata`, whose map upb keys by program id, and planes the scanner refuses). The
capture here is the shape of the many-ops TPU benchmark (SYNTHETIC, labelled so): every copy
its own `copy-start` op, no HLO protos. The real samples all carry HLO protos, read by the
scanner (`overlap.trace.programs.hlo_message`) without protobuf: a TPU capture's small
programs and a GPU capture's large ones (~400 KB, read for the names of its host copies);
without the scanner, by upb.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from overlap.trace import wire
from overlap.trace.synthetic import many_ops_scenario
from tests.cli.test_no_pandas import REPO, run_overlap

pytestmark = pytest.mark.skipif(wire._scan is None, reason="the scanner was not built")

def _run(args: list[str], env: dict[str, str] | None = None) -> tuple[int, str, bool]:
    code, out, heavy = run_overlap(args, env)
    return code, out, "google.protobuf" in heavy


def _many_ops(path: Path) -> Path:
    return many_ops_scenario(30).write(path)


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


def test_programs_small_and_large_are_read_without_protobuf(tmp_path: Path) -> None:
    # the v6e sample's programs (a few KB each) and an H100 capture's (~400 KB, read for the
    # names of its host copies) by the scanner (`hlo_message`); by upb without it, to the
    # same report
    found = sorted((REPO / "sample_traces" / "tpu-v6e-offload").rglob("*.xplane.pb"))
    for cmd in (["report", "--json"], ["check"]):
        code, out, pb = _run([*cmd, str(found[0])])
        assert code in (0, 1) and not pb, cmd
    code, out, pb = _run(["report", "--json", str(found[0])], {"OVERLAP_SCANNER": "0"})
    assert code == 0 and pb
    cb = REPO / "sample_traces" / "gpu-h100" / "transformer-h100-command-buffers"
    # the remat run: its program read for the host copies it planned (none ran); the offload
    # run: its program read for the names of its copies
    for run, key in (("full_cb", "planned_host_copies"), ("qkv_proj_offloaded_cb",
                                                          "offload_by_name")):
        (f,) = sorted((cb / run).rglob("*.xplane.pb"))
        code, out, pb = _run(["report", "--json", str(f)])
        assert code == 0 and json.loads(out)[key], run
        assert not pb, run
        code, out_upb, pb = _run(["report", "--json", str(f)], {"OVERLAP_SCANNER": "0"})
        assert code == 0 and pb
        assert json.loads(out_upb) == json.loads(out)
