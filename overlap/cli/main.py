"""The `overlap` command line: one subcommand per module in `overlap/cli/`.

Each command module defines `register(subparsers)` (adds its parser and sets `func`) and keeps
its imports inside the handler, so `overlap --help` starts fast and JAX is imported only by the
commands that capture.

Exit codes: 0 pass, 1 a check failed, 2 usage, 3 unreadable input. Errors raised on purpose
(`overlap.errors.OverlapError`) print one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from overlap import __version__
from overlap.errors import EXIT_USAGE, OverlapError

# Order is the order `overlap --help` lists them in.
COMMANDS = ("inspect", "report", "check", "capture", "plan", "compare", "demo", "dashboard")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse exits 2 already; keep it one line
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        sys.exit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="overlap",
        description="Does your JAX host offloading pay off? Reads jax.profiler captures and "
        "measures how much of each device<->host transfer hides behind compute.",
    )
    parser.add_argument("--version", action="version", version=f"overlap {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"overlap.cli.{name}")
        except ModuleNotFoundError as e:
            if e.name == f"overlap.cli.{name}":
                continue  # a command not built yet in this checkout
            raise
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(args.func(args) or 0)
    except OverlapError as e:
        print(f"overlap {args.command}: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print(f"overlap {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


def run() -> None:
    sys.exit(main())
