"""`overlap COMMAND ...` parses with a parser holding that command only (start-up time): its
help, usage and errors must be those of the full parser."""

from __future__ import annotations

import pytest

from overlap.cli import main as cli_main


def _sub(parser, name):
    return parser.get_default("_subparsers")[name]


@pytest.mark.parametrize("name", cli_main.COMMANDS)
def test_one_command_parser_equals_full(name: str) -> None:
    full, one = cli_main.build_parser(), cli_main.build_parser(name)
    if name not in full.get_default("_subparsers"):
        pytest.skip(f"{name} is not built in this checkout")
    assert list(one.get_default("_subparsers")) == [name]
    assert _sub(one, name).format_help() == _sub(full, name).format_help()
    assert _sub(one, name).format_usage() == _sub(full, name).format_usage()


@pytest.mark.parametrize("argv, want", [
    (["report", "x"], "report"), (["--debug", "report"], "report"),
    (["--debug", "--debug", "check"], "check"), (["--help", "report"], None),
    (["--version"], None), (["-h"], None), ([], None), (["bogus"], None),
    (["--deb", "report"], None), (["report-x"], None),
])
def test_command_of(argv: list[str], want: str | None) -> None:
    assert cli_main._command_of(argv) == want


def _usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as e:
        cli_main.main(argv)
    assert e.value.code == 2
    return capsys.readouterr().err


def test_errors_same_as_full_parser(capsys: pytest.CaptureFixture[str]) -> None:
    # a missing argument: the subcommand's usage and message
    err = _usage_error(["report"], capsys)
    assert err.startswith("usage: overlap report ")
    assert "overlap report: error: the following arguments are required: path" in err
    # an unknown flag after a command: the subcommand's usage line
    err = _usage_error(["report", "f.xplane.pb", "--no-such-flag"], capsys)
    assert err.startswith("usage: overlap report ")
    assert "unrecognized arguments: --no-such-flag" in err
    # an unknown command: the full parser lists every command
    err = _usage_error(["--debug", "bogus"], capsys)
    assert "invalid choice: 'bogus'" in err and "'completion'" in err
