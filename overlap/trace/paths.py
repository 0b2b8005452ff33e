"""Find the `.xplane.pb` files a user means by a path.

A path may be one `.xplane.pb` file, a capture session directory (`plugins/profile/<timestamp>/`
holding one `<host>.xplane.pb` per host), or a log/run directory holding `plugins/profile/`. The
newest session is read by default; `session=` names another. Every host file of the session is
returned, sorted by name.
"""

from __future__ import annotations

import os
from pathlib import Path

from overlap.errors import InputError

XPLANE_SUFFIX = ".xplane.pb"
# A capture still being written (or interrupted) lives in `<run>.partial-<random>`; see rundir.
PARTIAL_MARK = ".partial-"


def _hosts(session_dir: Path) -> list[Path]:
    try:
        return sorted(p for p in session_dir.iterdir() if p.name.endswith(XPLANE_SUFFIX)
                      and p.is_file())
    except OSError as e:
        raise InputError(session_dir, f"cannot list: {e.strerror or e}") from None


def list_sessions(logdir: Path) -> list[Path]:
    """Session directories under `logdir/plugins/profile`, oldest first (names are timestamps)."""
    root = logdir / "plugins" / "profile"
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and _hosts(p))


def find_xplane_files(path: str | os.PathLike, session: str | None = None) -> list[Path]:
    """The `.xplane.pb` files `path` means (see the module docstring), sorted by name.

    Raises `InputError` for a missing path, a directory without captures, an unknown session,
    or an unfinished (`.partial-`) capture.
    """
    if not str(path).strip():
        raise InputError(None, "empty path: name a capture file or directory")
    p = Path(path)
    for part in (p, *p.parents):
        if PARTIAL_MARK in part.name:
            raise InputError(p, "unfinished capture (a .partial- directory): it was interrupted "
                                "or is still being written")
    if not p.exists():
        raise InputError(p, "no such file or directory")
    if not p.is_file() and not p.is_dir():  # /dev/null, a FIFO, a socket: never a capture
        raise InputError(p, "not a regular file or directory (a device, FIFO or socket)")
    if p.is_file():
        if session:
            raise InputError(p, "--session applies to a run directory, not to a single file")
        return [p]
    hosts = _hosts(p)
    if hosts and not session:
        return hosts  # a session directory itself
    sessions = list_sessions(p)
    if not sessions:
        raise InputError(p, "no capture here: expected an .xplane.pb file or "
                            "plugins/profile/<timestamp>/<host>.xplane.pb below this directory")
    if session:
        match = [s for s in sessions if s.name == session]
        if not match:
            names = ", ".join(s.name for s in sessions)
            raise InputError(p, f"no capture session {session!r} (have: {names})")
        return _hosts(match[0])
    return _hosts(sessions[-1])
