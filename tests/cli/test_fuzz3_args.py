"""Argument handling found by the third fuzz round (issue 34, N7 and compare --baseline ""):
each bad value is a usage error (exit 2, one line) before anything is compiled or read."""

from __future__ import annotations

import pytest

from overlap.cli.main import main as cli_main


def _one_line_usage(capsys, argv) -> str:
    assert cli_main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


@pytest.mark.parametrize("policy,says", [
    ("offload:", "no tensor names after the colon"),
    ("nope", "unknown policy 'nope'"),
    ("", "unknown policy ''"),
    # `plan` refuses it; advise used to rank one compile_error row and exit 0
    ("offload:no_such_name", "names 'no_such_name', which workload 'scan' never tags"),
])
def test_advise_refuses_a_bad_policy_before_compiling(capsys, tmp_path, policy, says):
    out = tmp_path / "adv"
    line = _one_line_usage(capsys, ["advise", "--target", "v5e", "--workload", "scan",
                                    "--out", str(out), "--policy", policy])
    assert says in line
    assert not out.exists()  # nothing compiled, nothing written


def test_advise_refuses_an_empty_out(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = _one_line_usage(capsys, ["advise", "--target", "v5e", "--workload", "scan",
                                    "--out", ""])
    assert "--out is empty" in line
    assert list(tmp_path.iterdir()) == []  # no advice or plan runs in the current directory


def test_advise_refuses_a_topology_the_compiler_has_no_device_for(capsys, tmp_path):
    pytest.importorskip("libtpu")
    out = tmp_path / "adv"
    line = _one_line_usage(capsys, ["advise", "--target", "v5e", "--workload", "scan",
                                    "--out", str(out), "--topology", "garbage"])
    assert "no compile-only device for topology 'garbage'" in line
    assert not out.exists()


@pytest.mark.parametrize("baseline", ["", "   "])
def test_compare_refuses_an_empty_baseline(capsys, baseline):
    from pathlib import Path

    runs = Path(__file__).resolve().parents[2] / "sample_traces" / "cpu-scan"
    line = _one_line_usage(capsys, ["compare", str(runs), "--baseline", baseline])
    assert "--baseline is empty" in line
