"""`overlap completion SHELL`: print a tab-completion script for bash, zsh or tcsh.

The script is generated from the command line's own parser (with the `shtab` library, the
`[completion]` extra), so it completes every command and option this version has; paths
complete as files. Install it once per shell:

    overlap completion bash > ~/.local/share/bash-completion/completions/overlap
    overlap completion zsh > ~/.zfunc/_overlap     # a directory on your $fpath
"""

from __future__ import annotations

import argparse
from typing import Any

SHELLS = ("bash", "zsh", "tcsh")
# Arguments that name files or directories: completed as paths.
PATH_DESTS = frozenset({"path", "runs", "logdirs", "out", "baseline", "junit", "json_out",
                        "html", "logdir"})


def register(sub) -> None:
    p = sub.add_parser("completion", help="print a shell completion script (bash, zsh, tcsh)",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("shell", choices=SHELLS, help="the shell to complete in")
    p.set_defaults(func=run)


def _mark_paths(parser: argparse.ArgumentParser, path_complete: Any) -> None:
    """Tell shtab which arguments are paths, in `parser` and every subcommand's parser."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                _mark_paths(child, path_complete)
        elif action.dest in PATH_DESTS:
            action.complete = path_complete  # type: ignore[attr-defined]


def run(args: argparse.Namespace) -> int:
    from overlap.errors import require_extra

    require_extra("completion", "shtab")
    import shtab

    from overlap.cli.main import build_parser

    parser = build_parser()
    _mark_paths(parser, shtab.FILE)
    print(shtab.complete(parser, shell=args.shell))
    return 0
