"""The dashboard behind a real WSGI server (gunicorn), for a team on a shared machine.

`wsgi()` builds the Dash app from the environment and returns its Flask server (a WSGI
callable); `dashboard/wsgi.py` at the top of the repository exposes it as `server`:

    OVERLAP_DASHBOARD_LOGDIRS=/data/runs:/data/sweeps \\
    OVERLAP_DASHBOARD_HOSTS=perf-box.example.com \\
    gunicorn --bind 0.0.0.0:8050 --workers 2 "overlap.dashboard.serve:wsgi()"

Environment (read once, when a worker loads the app):

* `OVERLAP_DASHBOARD_LOGDIRS` (required): the log directories, separated by `os.pathsep`
  (`:`). Each must exist; a missing one stops the worker with one line naming it.
* `OVERLAP_DASHBOARD_HOSTS`: the host names (comma-separated, port ignored) that requests may
  carry in their `Host` header besides the loopback names. Requests naming any other host get
  403: the check `overlap dashboard` makes on loopback (no DNS rebinding), extended to the
  names the team uses. There is no wildcard: a server that answers any Host is a choice to
  make in the proxy in front, not here.
* `OVERLAP_CACHE_DIR`: where loaded runs and the plotly assets of pages are cached
  (`overlap.cache.cache_dir`); empty turns the disk cache off.

Read-only: the app only lists and reads the runs under the log directories (discovery,
`overlap.dashboard.data`); it writes nothing there, so the directories may be mounted read-only
and owned by another user. Dash's debug mode (an interactive console) is never on here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

LOGDIRS_ENV = "OVERLAP_DASHBOARD_LOGDIRS"
HOSTS_ENV = "OVERLAP_DASHBOARD_HOSTS"


class ConfigError(SystemExit):
    """A misconfigured environment: one line, the worker does not start."""


def logdirs_from_env(env: dict[str, str] | None = None) -> list[Path]:
    """The log directories `OVERLAP_DASHBOARD_LOGDIRS` names (see the module docstring)."""
    env = dict(os.environ) if env is None else env
    raw = env.get(LOGDIRS_ENV, "")
    dirs = [Path(p) for p in raw.split(os.pathsep) if p.strip()]
    if not dirs:
        raise ConfigError(f"overlap dashboard (WSGI): set {LOGDIRS_ENV} to the log directories "
                          f"to serve, separated by '{os.pathsep}'")
    for d in dirs:
        if not d.exists():
            raise ConfigError(f"overlap dashboard (WSGI): {d}: no such file or directory "
                              f"(from {LOGDIRS_ENV})")
    return dirs


def hosts_from_env(env: dict[str, str] | None = None) -> frozenset[str]:
    """The Host names allowed: the loopback names plus `OVERLAP_DASHBOARD_HOSTS`."""
    from overlap.dashboard.app import LOOPBACK_HOSTS, _host_name

    env = dict(os.environ) if env is None else env
    names = {_host_name(h) for h in env.get(HOSTS_ENV, "").split(",") if h.strip()}
    if "*" in names:
        raise ConfigError(f"overlap dashboard (WSGI): {HOSTS_ENV} takes host names, not '*'")
    return frozenset(LOOPBACK_HOSTS | names)


def wsgi(env: dict[str, str] | None = None) -> Any:
    """The WSGI application (the Dash app's Flask server) configured from the environment."""
    from overlap.dashboard.app import create_app

    app = create_app(logdirs_from_env(env), allowed_hosts=hosts_from_env(env))
    return app.server
