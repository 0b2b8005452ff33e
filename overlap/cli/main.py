"""The `overlap` command line: one subcommand per module in `overlap/cli/`.

Each command module defines `register(subparsers)` (adds its parser and sets `func`) and keeps
its imports inside the handler, so `overlap --help` starts fast and JAX is imported only by the
commands that capture.

Exit codes: 0 pass, 1 a check failed, 2 usage, 3 unreadable input, 4 internal error (a bug in
overlap: one line on stderr; the traceback with `--debug` or `OVERLAP_DEBUG=1`). Errors raised
on purpose (`overlap.errors.OverlapError`) print one line on stderr, never a traceback, so CI
can always tell a crash (4) from a failed gate (1).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import functools
import importlib
import os
import sys
from pathlib import Path
from typing import NoReturn

from overlap import __version__
from overlap.errors import EXIT_INTERNAL, EXIT_USAGE, OverlapError

# Order is the order `overlap --help` lists them in.
COMMANDS = ("inspect", "report", "check", "capture", "plan", "advise", "compare", "demo",
            "dashboard", "completion")
# Commands that import jax: their stderr passes through `overlap.env.native_stderr_filtered`.
JAX_COMMANDS = ("capture", "plan", "demo", "advise")


class _Parser(argparse.ArgumentParser):
    _checking = False  # inside `add_argument` (see `_get_formatter`)

    def error(self, message: str) -> NoReturn:  # argparse exits 2 already; keep it one line
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        sys.exit(EXIT_USAGE)

    def add_argument(self, *args, **kwargs):
        self._checking = True
        try:
            return super().add_argument(*args, **kwargs)
        finally:
            self._checking = False

    def _get_formatter(self) -> argparse.HelpFormatter:
        """A formatter; inside `add_argument` one given a width. Why: `add_argument` makes a
        formatter only to check a metavar's form (`_format_args`, which reads no width), and
        a formatter without a width reads the terminal's through `shutil`, whose import
        (zlib, bz2, lzma: ~2.5 ms) every `report`/`check` paid for nothing. Help, usage and
        error text are formatted as before, at the terminal's width."""
        if not self._checking:
            return super()._get_formatter()
        # argparse's own construction (whatever its version sets up), with a width given
        cls = self.formatter_class
        self.formatter_class = functools.partial(cls, width=80)  # type: ignore[call-arg]
        try:
            return super()._get_formatter()
        finally:
            self.formatter_class = cls


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line, or with `only` that one subcommand (what `main` parses a
    command's arguments with: importing and registering the other nine costs start-up time
    and changes nothing in that command's parsing, usage lines or errors)."""
    parser = _Parser(
        prog="overlap",
        description="Does your JAX host offloading pay off? Reads jax.profiler captures and "
        "measures how much of each device<->host transfer hides behind compute.",
    )
    parser.add_argument("--version", action="version", version=f"overlap {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="print the traceback of an internal error (also OVERLAP_DEBUG=1)")
    # `prog` given: argparse would format the usage of the parser's positionals (it has none:
    # the result is its prog) with a formatter that reads the terminal's width (`shutil`).
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser,
                                prog=parser.prog)
    for name in COMMANDS if only is None else (only,):
        try:
            module = importlib.import_module(f"overlap.cli.{name}")
        except ModuleNotFoundError as e:
            if e.name == f"overlap.cli.{name}":
                continue  # a command not built yet in this checkout
            raise
        module.register(sub)
    parser.set_defaults(_subparsers=sub.choices)
    return parser


def _stderr_for(command: str | None, debug: bool) -> contextlib.AbstractContextManager:
    """Drop the CUDA stub libraries' driver lines for the jax commands (not with --debug)."""
    if debug or command not in JAX_COMMANDS:
        return contextlib.nullcontext()
    from overlap.env import native_stderr_filtered

    return native_stderr_filtered()


def _command_of(argv: list[str]) -> str | None:
    """The subcommand `argv` names where nothing before it asks for the whole parser (help,
    version, or anything but `--debug`); None otherwise."""
    for a in argv:
        if a != "--debug":
            return a if a in COMMANDS else None
    return None


def main(argv: list[str] | None = None) -> int:
    command = _command_of(sys.argv[1:] if argv is None else list(argv))
    parser = build_parser(command)
    if command is not None and command not in parser.get_default("_subparsers"):
        parser = build_parser()  # a command not built in this checkout: the full message
    args, extra = parser.parse_known_args(argv)
    if extra:  # an unknown flag belongs to the subcommand's usage, not the top level's
        subs = getattr(args, "_subparsers", {}) or {}
        (subs.get(args.command) or parser).error(f"unrecognized arguments: {' '.join(extra)}")
    debug = bool(getattr(args, "debug", False)) or os.environ.get("OVERLAP_DEBUG", "") not in (
        "", "0")
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        with _stderr_for(args.command, debug):
            return int(args.func(args) or 0)
    except OverlapError as e:
        print(f"overlap {args.command}: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print(f"overlap {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except RecursionError:
        print(f"overlap {args.command}: error: input nested too deeply to read", file=sys.stderr)
        return 3
    except MemoryError:
        print(f"overlap {args.command}: error: out of memory reading the input", file=sys.stderr)
        return 3
    except Exception as e:  # noqa: BLE001 - the last line of defence: never a bare traceback
        if debug:
            import traceback  # here: ~3 ms of every run's start-up (tokenize, textwrap)

            traceback.print_exc()
        where = ""
        tb = e.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        if tb is not None:
            where = f" at {Path(tb.tb_frame.f_code.co_filename).name}:{tb.tb_lineno}"
        msg = " ".join(str(e).split())[:300]
        print(f"overlap {args.command}: internal error ({type(e).__name__}{where}): {msg}"
              + ("" if debug else " [--debug or OVERLAP_DEBUG=1 for the traceback; please "
                 "report it]"), file=sys.stderr)
        return EXIT_INTERNAL


# Commands that only read inputs and write stdout or files they close themselves: their process
# ends without the interpreter's teardown (`run`).
QUICK_EXIT_COMMANDS = ("inspect", "report", "check", "compare")
# What handlers hand to `keep_until_exit` in such a process (set by `run`; None in-process).
_EXIT_KEEP: list | None = None


def keep_until_exit(*objects: object) -> None:
    """Keep a handler's big results (a trace's tables, the result) alive to the end of a
    process that ends without teardown: freeing a 1M-event trace object by object when the
    handler returns costs ~15-20 ms for nothing. In-process callers (tests) keep nothing."""
    if _EXIT_KEEP is not None:
        _EXIT_KEEP.append(objects)


_BLAS_THREAD_VARS = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")


def _one_blas_thread() -> None:
    """Load numpy's OpenBLAS with one thread in the reading commands, unless the user chose.

    Why: OpenBLAS starts a thread per core, with its buffers, when numpy is imported: ~50 ms
    of a 0.2 s report on 2 cores, more on a many-core CI runner. These commands do no linear
    algebra (integer picoseconds, sorts and searches), so no answer depends on it; they run
    no user code, and the only processes that inherit it are their own `--jobs` workers."""
    if not any(v in os.environ for v in _BLAS_THREAD_VARS) and "numpy" not in sys.modules:
        os.environ["OPENBLAS_NUM_THREADS"] = "1"


# Commands that read one capture, print and end: they run without the cyclic collector (`run`),
# unless an option loads a library that makes reference cycles in bulk (plotly's figures for
# --html, jax for --predict, --plan and --same-answer-as).
NO_COLLECTOR_COMMANDS = ("report", "check")
COLLECTOR_OPTIONS = ("--html", "--predict", "--plan", "--same-answer-as")


def run() -> None:
    global _EXIT_KEEP
    if _command_of(sys.argv[1:]) in QUICK_EXIT_COMMANDS:
        _EXIT_KEEP = []
        _one_blas_thread()
    if _command_of(sys.argv[1:]) in NO_COLLECTOR_COMMANDS and not any(
            a.startswith(COLLECTOR_OPTIONS) for a in sys.argv[1:]):
        # Why: the collector ran ~50 times per report, mostly while modules were imported
        # (numpy's and ours: objects that live to the end), 7-10 ms of a 0.25 s many-ops
        # report that freed nothing. The read and the per-host analysis already hold it off
        # (`overlap.trace.reader.gc_paused`: they make no reference cycles); the rest makes
        # a few. Reference counting frees everything else as before; a cycle made meanwhile
        # waits for the end of the process, which follows at once (no teardown, see below).
        import gc

        gc.disable()
    code = main()
    # Not under a profiler or tracer (`python -m cProfile -m overlap ...`, coverage): they
    # write their results after `run` returns, which `os._exit` would never reach.
    watched = sys.getprofile() is not None or sys.gettrace() is not None
    # `threading` only where something imported it (~1 ms of start-up otherwise): a thread
    # started without it (`_thread`) is not one these commands make.
    threading = sys.modules.get("threading")
    if (_command_of(sys.argv[1:]) in QUICK_EXIT_COMMANDS and not watched
            and (threading is None or threading.active_count() == 1)):
        # Tearing the interpreter down (freeing every module of pandas and numpy, object by
        # object) takes ~70 ms after the work is done, 8% of a 1M-event report. What a
        # normal exit does that matters is done here: streams flushed, atexit handlers run
        # (coverage, multiprocessing, a caller's hooks); no other thread is left to join.
        # A failed flush (a closed pipe) takes the normal path, which reports it as before.
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (OSError, ValueError):
            sys.exit(code)
        atexit._run_exitfuncs()
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (OSError, ValueError):
            sys.exit(code)
        os._exit(code)
    sys.exit(code)
