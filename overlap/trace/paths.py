"""Find the `.xplane.pb` files a user means by a path.

A path may be one `.xplane.pb` file, a capture session directory (`plugins/profile/<timestamp>/`
holding one `<host>.xplane.pb` per host), or a log/run directory holding `plugins/profile/`. The
newest session is read by default; `session=` names another. Every host file of the session is
returned, sorted by name.
"""

from __future__ import annotations

import io
import os
import stat
from pathlib import Path
from typing import Any

from overlap.errors import InputError

XPLANE_SUFFIX = ".xplane.pb"
# A capture still being written (or interrupted) lives in `<run>.partial-<random>`; see rundir.
PARTIAL_MARK = ".partial-"


# The largest side file overlap reads whole: run.json, a baseline report, program_memory.json,
# HLO text. A real one is kilobytes to a few hundred MB (HLO text of a large model); anything
# bigger is not one, and reading it would only exhaust memory.
MAX_SIDE_FILE_BYTES = 1 << 30


def open_regular(path: str | os.PathLike, what: str = "file") -> io.BufferedReader:
    """Open `path` for reading in binary mode, only if it is a regular file.

    Every file overlap opens (a capture, run.json, a baseline, program_memory.json, HLO files)
    goes through here. The open never blocks (O_NONBLOCK: a FIFO without a writer would hang a
    plain open) and the check is made on the opened descriptor, so a path swapped between the
    check and the read cannot slip a device or FIFO in. Raises `InputError` naming the path.
    """
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise InputError(p, f"{what} not found (no such file)") from None
    except OSError as e:
        raise InputError(p, f"cannot read {what}: {e.strerror or e}") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise InputError(p, f"is a directory, expected a {what}")
        if not stat.S_ISREG(mode):
            raise InputError(p, f"not a regular file (a device, FIFO or socket), expected a "
                                f"{what}")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_side_file(path: str | os.PathLike, what: str = "file",
                   limit: int = MAX_SIDE_FILE_BYTES) -> bytes:
    """The bytes of a file read whole beside a capture (see `open_regular`), at most `limit`."""
    p = Path(path)
    with open_regular(p, what) as f:
        size = os.fstat(f.fileno()).st_size
        try:
            data = f.read(limit + 1) if size <= limit else b""
        except OSError as e:
            raise InputError(p, f"cannot read {what}: {e.strerror or e}") from None
    if size > limit or len(data) > limit:
        raise InputError(p, f"{max(size, len(data)) / 2**20:.0f} MiB: too large for a {what} "
                            f"(at most {limit / 2**20:.0f} MiB)")
    return data


def read_side_json(path: str | os.PathLike, what: str = "JSON file",
                   limit: int = MAX_SIDE_FILE_BYTES) -> Any:
    """`read_side_file` parsed as JSON; every failure is one `InputError` line naming `path`."""
    import json  # (here: a report of a capture file reads no JSON, ~1.5 ms of start-up)

    p = Path(path)
    data = read_side_file(p, what, limit)
    try:
        return json.loads(data)
    except UnicodeDecodeError:
        raise InputError(p, f"{what} is not UTF-8 text") from None
    except json.JSONDecodeError as e:
        raise InputError(p, f"{what} is not JSON ({e.msg} at line {e.lineno})") from None
    except RecursionError:
        raise InputError(p, f"{what} is nested too deeply to read") from None


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


def _runs_below(p: Path) -> list[Path]:
    """Subdirectories of `p` that are runs (a capture, or a plan's run.json), by name."""
    try:
        children = sorted(c for c in p.iterdir() if c.is_dir())
    except OSError:
        return []
    return [c for c in children if list_sessions(c) or (c / "run.json").is_file()]


def _failed_run(d: Path) -> str | None:
    """Why run directory `d` has no capture, when its run.json says its step did not complete
    (``status`` ``does_not_fit``/``failed``, overlap.capture.failures); None otherwise."""
    try:
        m = read_side_json(d / "run.json", "run manifest (run.json)")
    except InputError:
        return None
    if not isinstance(m, dict) or m.get("kind") == "plan" \
            or m.get("status") not in ("does_not_fit", "failed"):
        return None
    err = " ".join(str(m.get("error") or "").split())
    err = err if len(err) <= 200 else err[:100] + " ... " + err[-100:]
    what = "did not fit the device" if m["status"] == "does_not_fit" else "failed"
    return (f"no capture: this run's step {what} ({err}); run.json records what was asked "
            "and why, and `overlap compare` shows it as a row that did not run")


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
    if hosts and (not session or session == p.name):
        return hosts  # a session directory itself
    if hosts:
        raise InputError(p, f"this is capture session {p.name!r} itself; --session names one "
                            "of a run directory's plugins/profile/<timestamp> sessions")
    sessions = list_sessions(p)
    if not sessions:
        runs = _runs_below(p)
        if runs:
            shown = ", ".join(r.name for r in runs[:4]) + (", ..." if len(runs) > 4 else "")
            raise InputError(p, f"a directory of {len(runs)} runs ({shown}), not one capture: "
                                f"compare them with `overlap compare {p}`, or name one run")
        failed = _failed_run(p)
        if failed:
            raise InputError(p, failed)
        raise InputError(p, "no capture here: expected an .xplane.pb file or "
                            "plugins/profile/<timestamp>/<host>.xplane.pb below this directory")
    if session:
        match = [s for s in sessions if s.name == session]
        if not match:
            names = ", ".join(s.name for s in sessions)
            raise InputError(p, f"no capture session {session!r} (have: {names})")
        return _hosts(match[0])
    return _hosts(sessions[-1])
