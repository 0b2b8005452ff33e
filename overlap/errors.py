"""Errors that the command line turns into one-line messages and exit codes.

Exit codes (shared by every command): 0 pass, 1 a check failed, 2 usage error, 3 unreadable input,
4 internal error (a bug: any exception that is not one of these classes).
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


class UsageError(OverlapError):
    """Arguments that make no sense together (argparse handles the rest)."""

    exit_code = EXIT_USAGE
