"""Errors that the command line turns into one-line messages and exit codes.

Exit codes (shared by every command): 0 pass, 1 a check failed, 2 usage error, 3 unreadable input,
4 internal error (a bug: any exception that is not one of these classes).

An output overlap cannot write (`report --html`, `check --json-out FILE`, `check --junit FILE`
into a missing directory, a directory, a read-only place or a full disk) is a usage error, exit
2: the argument names a place that cannot take the file, whatever the input was. Input that
cannot be read (a capture, a run's `run.json`, a baseline, any side file) is exit 3.
"""

from __future__ import annotations

import os

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_USAGE = 2
EXIT_INPUT = 3
EXIT_INTERNAL = 4


class OverlapError(Exception):
    """Base class: every error overlap raises on purpose carries an exit code."""

    exit_code = EXIT_INPUT


class InputError(OverlapError):
    """A file or directory that cannot be read as what it should be.

    The message always names the path and the problem, so the CLI can print it on one line.
    """

    exit_code = EXIT_INPUT

    def __init__(self, path: str | os.PathLike | None, problem: str):
        self.path = None if path is None else os.fspath(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}" if self.path else problem)

    def __reduce__(self):
        # Pickled by worker processes and Dask on the way back: rebuild from (path, problem),
        # not from the formatted message (`Exception.__reduce__` would pass one argument).
        return (type(self), (self.path, self.problem))


class UsageError(OverlapError):
    """Arguments that make no sense together (argparse handles the rest)."""

    exit_code = EXIT_USAGE


DISTRIBUTION = "overlap-jax"  # the PyPI name; the import package and the command are `overlap`

# What each extra enables, for the one-line message of a command whose extra is missing.
EXTRAS = {
    "capture": "capturing with JAX",
    "attach": "capturing from a running job (xprof)",
    "plan": "plan mode (the XLA:GPU and XLA:TPU compilers)",
    "dashboard": "the dashboard and HTML figures (plotly, dash)",
    "dask": "reading a pod on a Dask cluster",
    "demo": "the demo (capture, plan compilers and dashboard)",
}


def install_hint(extra: str) -> str:
    """`pip install 'overlap-jax[EXTRA]'`: the one install command every message names."""
    return f"pip install '{DISTRIBUTION}[{extra}]'"


class MissingExtra(UsageError):
    """A command needs an optional dependency that is not installed (exit 2, naming the extra)."""

    def __init__(self, extra: str, missing: str):
        self.extra = extra
        self.missing = missing
        super().__init__(f"{EXTRAS.get(extra, extra)} needs {missing}, which is not installed: "
                         f"{install_hint(extra)}")

    def __reduce__(self):  # rebuilt from its arguments, as InputError is
        return (type(self), (self.extra, self.missing))


def has_module(name: str) -> bool:
    """Whether `name` can be imported, without importing it; a missing parent package is False
    (`find_spec("jax_plugins.xla_cuda12")` raises when `jax_plugins` is absent)."""
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def require_extra(extra: str, *modules: str) -> None:
    """Raise `MissingExtra` naming `extra` unless every module in `modules` can be imported."""
    for name in modules:
        if not has_module(name):
            raise MissingExtra(extra, name.split(".")[0])
