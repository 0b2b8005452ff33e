"""`overlap report`/`check` import no standard-library module they do not use (issue 32: start-up
is most of a small capture's report).

`shutil` (with zlib, bz2 and lzma, ~2 ms) came in through argparse, which reads the terminal's
width for every formatter it makes, also the one `add_argument` makes only to check a metavar;
`threading` (~1 ms) through the quick exit's thread count and Dask's connect. The command line
now reads the width only when it formats help or an error, and imports `threading` only where a
thread starts. Each case runs the real command in a fresh interpreter on a real capture; the
help and usage texts stay argparse's own, at any terminal width.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from overlap.cli import main as cli_main

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "sample_traces"
# Imported at the interpreter's start where the environment does (a site hook), they say nothing
# of overlap: only modules new after that count.
_RUN = """
import atexit, runpy, sys
at_start = set(sys.modules)
def said():
    new = set(sys.modules) - at_start
    sys.stderr.write('\\nIMPORTED ' + ','.join(m for m in {watch!r} if m in new) + '\\n')
atexit.register(said)
sys.argv = ['overlap'] + {args!r}
runpy.run_module('overlap', run_name='__main__')
"""
_WATCH = ("shutil", "bz2", "lzma", "threading", "concurrent.futures", "multiprocessing",
          "subprocess", "tempfile",
          # a plain np.unique asks numpy.ma whether its input is masked (~7 ms to import)
          "numpy.ma")


def _capture(glob: str) -> Path:
    found = sorted(SAMPLES.glob(glob))
    assert found, glob
    return found[0]


@pytest.mark.parametrize("glob, watch", [
    ("cpu-transformer-tiny/everything_saveable/**/*.xplane.pb", _WATCH),
    ("tpu-v6e-offload/**/*.xplane.pb", _WATCH),
    # this capture's file is decoded by protobuf, whose descriptor module imports threading
    ("gpu-h100/scan-h100/offload_x/**/*.xplane.pb", tuple(m for m in _WATCH if m != "threading")),
    ("gpu-v100-tf-multiworker/**/*.xplane.pb", tuple(m for m in _WATCH if m != "threading")),
    ("rocm/mi300x-jax08-attention/**/*.xplane.pb", _WATCH),
])
@pytest.mark.parametrize("command", [["report", "--json"], ["check"]])
def test_report_and_check_import_no_unused_stdlib(glob: str, watch: tuple[str, ...],
                                                  command: list[str]) -> None:
    p = subprocess.run(
        [sys.executable, "-c", _RUN.format(watch=watch, args=[*command, str(_capture(glob))])],
        capture_output=True, text=True, cwd=REPO, env=dict(os.environ))
    line = [x for x in p.stderr.splitlines() if x.startswith("IMPORTED ")]
    assert p.returncode in (0, 1) and line, p.stderr[-2000:]  # check: 1 where the gate fails
    assert line[-1] == "IMPORTED ", line[-1]


def _texts(capsys: pytest.CaptureFixture[str]) -> list[str]:
    """Every command's help, its usage error and the top level's help, as printed."""
    out = []
    for argv in [["--help"], *([c, "--help"] for c in cli_main.COMMANDS),
                 ["report"], ["check", "x", "--no-such-flag"], ["bogus"]]:
        with pytest.raises(SystemExit):
            cli_main.main(argv)
        got = capsys.readouterr()
        out.append(got.out + got.err)
    return out


@pytest.mark.parametrize("columns", ["30", "80", "157"])
def test_help_and_usage_are_argparse_own(columns: str, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    # The same texts as argparse's unchanged formatter and its own subcommand prog give.
    monkeypatch.setenv("COLUMNS", columns)
    ours = _texts(capsys)
    assert any("usage: overlap report" in t for t in ours)
    add_subparsers = argparse.ArgumentParser.add_subparsers

    def plain_add_subparsers(self, **kwargs):
        kwargs.pop("prog", None)  # argparse computes it from the parser's usage
        return add_subparsers(self, **kwargs)

    monkeypatch.setattr(argparse.ArgumentParser, "add_subparsers", plain_add_subparsers)
    monkeypatch.setattr(cli_main._Parser, "_get_formatter",
                        argparse.ArgumentParser._get_formatter)
    assert _texts(capsys) == ours


def test_add_argument_still_checks_the_metavar() -> None:
    # argparse's own check (a metavar tuple must match nargs) runs through the formatter that
    # `_Parser` hands `add_argument` without the terminal's width
    p = cli_main._Parser(prog="overlap")
    with pytest.raises(ValueError, match="metavar"):
        p.add_argument("--pair", nargs=2, metavar=("A",))
    assert not p._checking and p.formatter_class is argparse.HelpFormatter  # put back
