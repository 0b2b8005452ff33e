"""Reading capture files: one `.xplane.pb`'s bytes (refused with one line naming the file when
it is missing, empty, not a regular file, too large for memory, gzip-compressed or a Chrome
trace), the check that parsed bytes are an XSpace capture, and finding a session's host files.
`overlap.trace.reader` decodes what this reads (and re-exports these names).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from google.protobuf.message import DecodeError

from overlap.errors import InputError
from overlap.trace.protos import XSpace

TASK_ENV_PLANE = "Task Environment"


def load_xspace(path: str | os.PathLike) -> Any:
    """Parse one `.xplane.pb` file; every failure is an `InputError` naming the file."""
    return _load(path, XSpace)


def _available_memory() -> int | None:
    """Bytes of memory available to this process (Linux MemAvailable), else None."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _read_file(p: Path, pad: int = 0) -> tuple[bytearray, int]:
    """The file's bytes followed by `pad` zero bytes (read in place, one copy), and its size."""
    from overlap.trace.paths import open_regular

    try:
        with open_regular(p, "capture file") as fh:  # a FIFO or device is refused, not read
            size = os.fstat(fh.fileno()).st_size
            avail = _available_memory()
            # The reader holds the file plus its tables (about 4-5x the file): refuse up front
            # what cannot fit, instead of dying of MemoryError half way.
            if avail is not None and size * 4 > avail:
                raise InputError(p, f"{size / 2**30:.1f} GiB file; reading it needs about "
                                    f"{4 * size / 2**30:.0f} GiB of memory and "
                                    f"{avail / 2**30:.1f} GiB is available")
            buf = bytearray(size + pad)
            mv = memoryview(buf)
            n = 0
            while n < size:
                got = fh.readinto(mv[n:size])
                if not got:
                    break
                n += got
            del mv
            if n < size:  # the file shrank while we read it
                del buf[n:size]
            elif fh.read(1):  # ...or grew: read it whole
                fh.seek(0)
                raw = fh.read()
                n = len(raw)
                buf = bytearray(raw) + bytearray(pad)
    except MemoryError:
        raise InputError(p, "not enough memory to read this file") from None
    except FileNotFoundError:
        raise InputError(p, "no such file") from None
    except IsADirectoryError:
        raise InputError(p, "is a directory, expected an .xplane.pb file") from None
    except OSError as e:
        raise InputError(p, f"cannot read: {e.strerror or e}") from None
    if not n:
        raise InputError(p, "empty file (a capture that was cut off before it was written?)")
    head = bytes(buf[:64]).lstrip()
    if p.name.endswith((".trace.json.gz", ".trace.json", ".json.gz")) or head[:1] in (b"{", b"["):
        # Only a regular file can be the capture to name (a directory can end in .xplane.pb).
        sib = sorted(f for f in p.parent.glob("*.xplane.pb") if f.is_file())
        raise InputError(p, "a Chrome-trace JSON (jax writes it beside the capture); overlap "
                            "reads the XSpace capture: "
                            + (f"use {sib[0]}" if sib else "use the .xplane.pb next to it"))
    if buf[:2] == b"\x1f\x8b":
        raise InputError(p, "gzip-compressed; decompress it first (gunzip)")
    return buf, n


def _corrupt(p: Path, e: Exception) -> InputError:
    return InputError(p, f"not a readable XSpace protobuf (truncated or corrupt): {e}")


def _check_space(p: Path, xs) -> None:
    if not xs.planes or not any(pl.name for pl in xs.planes):
        raise InputError(p, "not an XSpace capture: it holds no named planes")
    # Random bytes can parse as a protobuf full of unknown fields; a real XSpace names its planes
    # with the profiler's prefixes.
    if not any(pl.name.startswith(("/host:", "/device:", TASK_ENV_PLANE, "#")) for pl in xs.planes):
        raise InputError(p, "not an XSpace capture: no /host: or /device: planes")


def _load(path: str | os.PathLike, cls) -> Any:
    p = Path(path)
    data, n = _read_file(p)
    xs = cls()
    try:
        xs.ParseFromString(bytes(data))
    except (DecodeError, RuntimeError, ValueError) as e:
        raise _corrupt(p, e) from None
    _check_space(p, xs)
    return xs


def _find_files(path: str | os.PathLike, session: str | None) -> list[Path]:
    from overlap.trace.paths import find_xplane_files

    return find_xplane_files(path, session)
