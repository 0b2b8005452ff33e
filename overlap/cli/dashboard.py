"""`overlap dashboard [LOGDIR ...]`: browse runs, one run's steps, and comparisons in a browser.

With no LOGDIR it opens `./runs` when that exists, else the bundled `sample_traces/` (a clone's
real captures: TPU v6e, NVIDIA H100/H200 offload runs beside their remat baselines, V100, ROCm,
CPU). It binds to 127.0.0.1 unless `--host` says otherwise: the app serves whatever runs lie
under the logdirs, so exposing it on a network is a choice the user makes explicitly.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from overlap.errors import InputError, UsageError

REPO_SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"


def default_logdirs(cwd: Path | None = None) -> list[Path]:
    """`./runs` if it is a directory, else the bundled sample_traces/ (if present)."""
    runs = (cwd or Path.cwd()) / "runs"
    if runs.is_dir():
        return [runs]
    if REPO_SAMPLES.is_dir():
        return [REPO_SAMPLES]
    raise InputError(None, "no LOGDIR given, no ./runs directory and no bundled sample_traces/; "
                           "pass a log directory: overlap dashboard runs/")


def check_port_free(host: str, port: int) -> None:
    """UsageError (exit 2) when `host:port` cannot be bound, before anything slow runs."""
    import socket

    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(fam, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError as e:
            raise UsageError(f"cannot serve on {host}:{port}: {e.strerror or e} (pick another "
                             "--port)") from None


def register(sub) -> None:
    p = sub.add_parser("dashboard", help="browse runs and compare policies in a browser",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("logdirs", nargs="*", metavar="LOGDIR",
                   help="directories holding runs (default: ./runs, else sample_traces/)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8050, help="port (default 8050)")
    p.add_argument("--debug", action="store_true", help="Dash debug mode (reloader, dev tools)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from overlap.errors import require_extra

    # A missing extra is the first thing to fix, whatever else is wrong with the arguments.
    require_extra("dashboard", "dash", "plotly")
    logdirs = [Path(d) for d in args.logdirs] or default_logdirs()
    for d in logdirs:
        if not d.exists():
            raise InputError(d, "no such file or directory")
    if not 0 < args.port < 65536:
        raise UsageError(f"--port must be 1-65535, got {args.port}")
    loopback = args.host in ("127.0.0.1", "localhost", "::1")
    if args.debug and not loopback:
        # Debug mode serves Werkzeug's interactive console: code execution for anyone who
        # can reach the port.
        raise UsageError("--debug is only allowed with a loopback --host (it serves an "
                         "interactive console)")
    # With --debug, Werkzeug's reloader runs this command again in a child that inherits the
    # socket its parent already bound (WERKZEUG_RUN_MAIN=true there): only the parent checks.
    if os.environ.get("WERKZEUG_RUN_MAIN") != "true":
        check_port_free(args.host, args.port)
    from overlap.dashboard.app import create_app, prefetch  # local: Dash is slow to import

    app = create_app(logdirs, host=args.host)
    # The runs are read while the server starts, not after the user's first click; under
    # --debug only in the reloader's child, the process that serves.
    if not args.debug or os.environ.get("WERKZEUG_RUN_MAIN") == "true":
        prefetch(logdirs)
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        print(f"overlap dashboard: serving on {args.host}: anyone who can reach this address "
              "can read the runs under " + ", ".join(map(str, logdirs)), file=sys.stderr)
    print(f"overlap dashboard: http://{args.host}:{args.port}/ "
          f"({', '.join(map(str, logdirs))})", file=sys.stderr)
    app.run(host=args.host, port=args.port, debug=args.debug)
    return 0
