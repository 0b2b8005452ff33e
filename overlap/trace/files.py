"""Reading capture files: one `.xplane.pb`'s bytes (refused with one line naming the file when
it is missing, empty, not a regular file, too large for memory, gzip-compressed or a Chrome
trace), the check that parsed bytes are an XSpace capture, and finding a session's host files.
`overlap.trace.reader` decodes what this reads (and re-exports these names).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Iterator

from overlap.errors import InputError

TASK_ENV_PLANE = "Task Environment"


def load_xspace(path: str | os.PathLike) -> Any:
    """Parse one `.xplane.pb` file; every failure is an `InputError` naming the file."""
    from overlap.trace.protos import XSpace  # (protobuf loads where upb parses: not on import)

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


def _check_fits(p: Path, size: int) -> None:
    # The reader holds the file plus its tables (about 4-5x the file): refuse up front what
    # cannot fit, instead of dying of MemoryError half way.
    avail = _available_memory()
    if avail is not None and size * 4 > avail:
        raise InputError(p, f"{size / 2**30:.1f} GiB file; reading it needs about "
                            f"{4 * size / 2**30:.0f} GiB of memory and "
                            f"{avail / 2**30:.1f} GiB is available")


# What the reader holds per timeline line besides the file (its row in the lines table, its
# decoded events' arrays, a chunk of each table it feeds): measured ~0.9 KiB on a capture of a
# million one-event lines (fuzz round 3: 959 MiB for a 36 MB file), which the 4x-the-file
# estimate of `_check_fits` cannot see before the file's lines are known. The scanner's read
# needs ~0.5 KiB since a line keeps its payload as two ints (issue 32 round 13: 300k lines,
# 10.5 MB, 299 -> 182 MiB); 1 KiB still covers upb's, the fallback (~0.75 KiB, fuzz round 3).
_BYTES_PER_LINE = 1024


def check_lines_fit(p: Path, size: int, n_lines: int) -> None:
    """After the file's skeleton is read: refuse up front a capture whose line count, not its
    size, makes it too large to read (`_BYTES_PER_LINE`), as `_check_fits` does by size."""
    need = 4 * size + n_lines * _BYTES_PER_LINE
    avail = _available_memory()
    if avail is not None and need > avail:
        raise InputError(p, f"{n_lines} timeline lines in a {size / 2**20:.0f} MiB file; "
                            f"reading it needs about {need / 2**30:.1f} GiB of memory and "
                            f"{avail / 2**30:.1f} GiB is available")


def _read_file(p: Path, pad: int = 0) -> tuple[bytearray, int]:
    """The file's bytes followed by `pad` zero bytes (read in place, one copy), and its size."""
    from overlap.trace.paths import open_regular

    try:
        with open_regular(p, "capture file") as fh:  # a FIFO or device is refused, not read
            size = os.fstat(fh.fileno()).st_size
            _check_fits(p, size)
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
    if p.name.endswith((".trace.json.gz", ".trace.json", ".json.gz")) \
            or _json_text(buf[:min(n, 64)]):
        # Only a regular file can be the capture to name (a directory can end in .xplane.pb).
        # ... and never the refused file itself (a Chrome trace named *.xplane.pb)
        sib = sorted(f for f in p.parent.glob("*.xplane.pb") if f.is_file() and f != p)
        raise InputError(p, "a Chrome-trace JSON (jax writes it beside the capture); overlap "
                            "reads the XSpace capture: "
                            + (f"use {sib[0]}" if sib else "use the .xplane.pb next to it"))
    if buf[:2] == b"\x1f\x8b":
        raise InputError(p, "gzip-compressed; decompress it first (gunzip)")
    return buf, n


def _json_text(head: Any) -> bool:
    """Whether a file's first bytes read as JSON text opening an object or array: `{` or `[`
    after any whitespace, and no control byte but whitespace. Not the bracket alone: an
    XSpace opens with its first plane's tag, 0x0a (a newline), then its length, which is
    `[` or `{` for a plane of 91 or 123 bytes, and control bytes follow (field tags)."""
    head = bytes(head)
    text = head.lstrip()
    return text[:1] in (b"{", b"[") and not any(b < 0x20 and b not in b"\t\n\r" for b in head)


# Planes smaller than this share the common chunk, whatever `read_chunks(alone=)` says.
ALONE_MIN_BYTES = 1 << 20
# Chunks of at least this many bytes in one run of the file are mapped, not read (`_mapped`).
MAP_MIN_BYTES = 1 << 20
_MAPPING = [True]  # `use_mapping`


def use_mapping(on: bool) -> None:
    """Whether this process maps files at all (default: yes). A long-running server (the
    dashboard) turns it off: it reads files other processes may still rewrite, and a mapped
    file truncated under it would stop the whole server (SIGBUS, see `_mapped`), where a read
    notices the file shrink and says so (~1-2% of a read's time is the price)."""
    _MAPPING[0] = bool(on)


def _mapped(fd: int, a: int, b: int) -> Any:
    """The file's bytes [a, b) as a read-only uint8 array over a private mapping of them, or
    None where the system cannot map this file (then it is read).

    Why: reading copies every byte into fresh pages, each of which the kernel first faults in
    and zeroes: ~37 ms of CPU for a 58 MB file, against ~10 ms to map the file's cached pages
    and fault them in as the scanner walks them (the same bytes; peak memory alike: the pages
    count once they are touched, and go when the chunk does, as a read buffer's do). The array
    holds the mapping: it is unmapped when the last view of the chunk is freed, which is when
    the reader lets the plane go. No zero bytes follow a mapped chunk: the scanner reads
    nothing beyond the `n` bytes it is given (its every read is bounded by the end of the
    field it is in, and `split_space` refuses a buffer shorter than `n`).
    Blind spot: a file truncated by another process while it is mapped makes the system stop
    this process (SIGBUS) where a read would have noticed the file shrink."""
    import mmap

    import numpy as np

    off = a - a % mmap.ALLOCATIONGRANULARITY
    try:
        mm = mmap.mmap(fd, b - off, offset=off, access=mmap.ACCESS_READ)
    except (OSError, ValueError, OverflowError):  # a file system without mmap; the file shrank
        return None
    return np.frombuffer(mm, np.uint8, count=b - a, offset=a - off)


def read_chunks(p: Path, pad: int = 0, alone: Callable[[str], bool] = lambda name: False
                ) -> list[tuple[Any, int, list[int], bool]] | None:
    """The file's top-level XSpace fields in chunks: each plane whose name `alone` accepts (of
    `ALONE_MIN_BYTES` or more) in a buffer of its own, every other field (the other planes,
    host names, errors, warnings) together in one, in file order: (buffer (a uint8 ndarray),
    size, the file offsets of its planes in order, whether it is a plane read alone). A chunk
    of one run of the file (`MAP_MIN_BYTES` or more) is the file's pages mapped (`_mapped`:
    read-only, nothing after its bytes); any other is read, followed by `pad` zero bytes.

    Why: each chunk is itself an XSpace (all of XSpace's fields are repeated, so the chunks'
    planes put back in file order, with the other fields, are the whole file's), and the
    reader frees a plane's bytes once it has read the plane, while it reads the others; one
    buffer for the file would hold every byte until the last plane is done. Planes the
    reader reads together (GPU planes' small lines are decoded as one segment over one
    buffer) must not be `alone`. A plane's name is peeked from its first bytes, where
    producers write it (field 2, after the id); the caller checks what it parsed.

    No byte is copied twice: each field read is read from the file straight into its place.
    None where the top level is not a sequence of well-formed fields, or the file changed
    while it was read: the caller then reads the whole file with `_read_file`, which refuses
    what it must with the same message as before (a missing, empty, compressed or
    Chrome-trace file among them).
    """
    import numpy as np

    from overlap.trace.paths import open_regular

    if p.name.endswith((".trace.json.gz", ".trace.json", ".json.gz")):
        return None
    try:
        with open_regular(p, "capture file") as fh:
            fd = fh.fileno()
            size = os.fstat(fd).st_size
            _check_fits(p, size)
            if not size or _json_text(os.pread(fd, 64, 0)):
                return None
            fields = _fields(fd, size)
            if fields is None:
                return None
            starts, ends, plane = fields
            # a small plane alone would free next to nothing: its name is not looked at
            peek = np.flatnonzero(plane & (ends - starts >= ALONE_MIN_BYTES)).tolist()
            own = [i for i in peek
                   if (name := _plane_name(fd, int(starts[i]), int(ends[i]))) is not None
                   and alone(name)]
            shared = np.ones(len(starts), bool)
            shared[own] = False
            chunks = []
            for group, by_itself in ([(np.array([i]), True) for i in own]
                                     + [(g, False) for g in _shared_parts(
                                         fd, starts, ends, plane, np.flatnonzero(shared))]):
                n = int((ends[group] - starts[group]).sum())
                runs = _runs(starts[group], ends[group])
                buf = (_mapped(fd, *runs[0])
                       if _MAPPING[0] and len(runs) == 1 and n >= MAP_MIN_BYTES else None)
                if buf is None:
                    # not a bytearray: that zero-fills every page before the read writes it
                    # (0.17 s -> 0.10 s for a 110 MB file)
                    buf = np.empty(n + pad, np.uint8)
                    buf[n:] = 0
                    mv = memoryview(buf)  # type: ignore[arg-type]  # an ndarray is a buffer
                    at = 0
                    for a, b in runs:  # one read per run
                        if os.preadv(fd, [mv[at:at + b - a]], a) != b - a:
                            return None  # the file shrank while we read it
                        at += b - a
                    del mv
                chunks.append((buf, n, starts[group][plane[group]].tolist(), by_itself))
            if os.fstat(fd).st_size != size:
                return None  # ...or grew
            return chunks
    except MemoryError:
        raise InputError(p, "not enough memory to read this file") from None
    except InputError:
        raise
    except OSError:
        return None  # `_read_file` says what is wrong


def _shared_parts(fd: int, starts: Any, ends: Any, plane: Any, shared: Any) -> list[Any]:
    """The fields `read_chunks` does not read alone (`shared`: their indices into the fields'
    `starts`, `ends` and `plane` flags), as chunks (index arrays): one per run of adjacent
    fields where no device plane lies outside the largest run, else one chunk (device planes
    are read over one buffer: a GPU file's small lines of several planes are one segment).
    Why: the largest run (a GPU file's device planes, before its host plane) is then one run
    of the file, which is mapped, not read (`_mapped`); the rest (the metadata plane, host
    names: after the host plane) is a few hundred bytes, read."""
    import numpy as np

    if len(shared) < 2:
        return [shared] if len(shared) else []
    # a run ends where the next field does not start where it ends
    cut = np.flatnonzero(starts[shared[1:]] != ends[shared[:-1]]) + 1
    runs = np.split(shared, cut)
    if len(runs) < 2:
        return runs
    # (the first of the largest, as `max` picks)
    big = int(np.argmax([int(ends[r[-1]] - starts[r[0]]) for r in runs]))
    for i, run in enumerate(runs):
        if i == big:
            continue
        for j in run[plane[run]].tolist():
            name = _plane_name(fd, int(starts[j]), int(ends[j]))
            if name is None or name.startswith("/device:"):
                return [shared]
    return runs


def planes_named(p: Path, name: str) -> bytes | None:
    """The file's plane fields whose name is `name`, as an XSpace of those planes only (their
    bytes as written, in file order), read without the rest of the file; planes whose name is
    not among their first bytes are included (the caller checks what it parses). None where
    the top level does not parse as fields (the caller then reads the whole file).

    Why: `/host:metadata`'s HLO protos are a few MB of a file that can be 100 MB and more, and
    upb parsing the whole file again for them cost ~0.3 s and ~300 MiB on a 48 MB capture."""
    from overlap.trace.paths import open_regular

    try:
        with open_regular(p, "capture file") as fh:
            fd = fh.fileno()
            size = os.fstat(fd).st_size
            fields = _fields(fd, size) if size else None
            if fields is None:
                return None
            out = []
            starts, ends, plane = fields
            starts, ends = starts[plane].tolist(), ends[plane].tolist()
            for a, b, head in zip(starts, ends, _heads(fd, starts, ends)):
                got = _plane_name(fd, a, b, head)
                if got is None or got == name:
                    raw = os.pread(fd, b - a, a)
                    if len(raw) != b - a:
                        return None  # the file shrank while we read it
                    out.append(raw)
            return b"".join(out)
    except (OSError, InputError):
        return None


def _runs(starts: Any, ends: Any) -> list[tuple[int, int]]:
    """Adjacent [start, end) ranges (in order, as two arrays) joined."""
    import numpy as np

    if not len(starts):
        return []
    cut = np.flatnonzero(starts[1:] != ends[:-1])
    return list(zip(starts[np.r_[0, cut + 1]].tolist(), ends[np.r_[cut, len(ends) - 1]].tolist()))


def _fields(fd: int, size: int) -> tuple[Any, Any, Any] | None:
    """The top-level fields as arrays: (starts, ends (int64), whether each is a plane (bool)),
    or None where the top level does not parse as fields. By the scanner's `top_fields`
    where it is built (in Python ~1.3 us a field: 100k planes in a capture of small ones),
    else `_fields_py`; read ahead in blocks (a file of thousands of small planes costs few
    reads), each field's tag and length from its first 128 bytes."""
    import numpy as np

    from overlap.trace import wire

    fast = getattr(wire.SCANNER, "top_fields", None)
    if fast is None:
        got = _fields_py(fd, size)
        if got is None:
            return None
        st, en, pl = (np.array(c, np.int64) for c in zip(*got)) if got else \
            (np.zeros(0, np.int64),) * 3
        return st, en, pl.astype(bool)
    parts = []
    pos = 0
    while pos < size:
        out = fast(os.pread(fd, 1 << 16, pos), pos, size)
        if out is None or out[3] <= pos:  # (no step: the file shrank while it was read)
            return None
        parts.append(out[:3])
        pos = out[3]
    if not parts:
        return (np.zeros(0, np.int64),) * 2 + (np.zeros(0, bool),)
    st, en, pl = (np.concatenate(c) for c in zip(*parts))
    return st, en, pl.astype(bool)


def _fields_py(fd: int, size: int) -> list[tuple[int, int, bool]] | None:
    """`_fields` read in Python (no scanner): (start, end, is a plane) per field."""
    out = []
    pos = 0
    blk_at, blk = 0, b""
    while pos < size:
        if pos + 128 > blk_at + len(blk):
            blk_at, blk = pos, os.pread(fd, 1 << 16, pos)
        # a tag and a length (two varints of at most 10 bytes)
        head = blk[pos - blk_at:pos - blk_at + 128]
        tag, k = _varint(head, 0)
        if tag is None or not tag >> 3:
            return None
        wt = tag & 7
        if wt == 0:
            v, k = _varint(head, k)
            if v is None:
                return None
            end = pos + k
        elif wt == 1 or wt == 5:
            end = pos + k + (8 if wt == 1 else 4)
        elif wt == 2:
            n, k = _varint(head, k)
            if n is None:
                return None
            end = pos + k + n
        else:  # groups: no producer writes them in an XSpace
            return None
        if end > size:
            return None
        out.append((pos, end, tag == (1 << 3 | 2)))
        pos = end
    return out


def _heads(fd: int, starts: list[int], ends: list[int]) -> Iterator[bytes]:
    """The first bytes (up to 128) of each field [starts[i], ends[i]) (in file order), read
    ahead in blocks: a file of thousands of small planes costs few reads."""
    blk_at, blk = 0, b""
    for a, b in zip(starts, ends):
        n = min(b - a, 128)
        if a < blk_at or a + n > blk_at + len(blk):
            blk_at, blk = a, os.pread(fd, 1 << 16, a)
        yield blk[a - blk_at:a - blk_at + n]


def _plane_name(fd: int, start: int, end: int, head: bytes | None = None) -> str | None:
    """The name of the plane field at [start, end) if it is among the plane's first fields
    (id, then name, as producers write them), else None: from its first 128 bytes (`head`,
    else read here), read on (1 KiB) where the name does not end in them."""
    if head is None:
        head = os.pread(fd, min(end - start, 128), start)
    name = _name_in(head)
    if name is None and len(head) < min(end - start, 1024):
        name = _name_in(os.pread(fd, min(end - start, 1024), start))
    return name


def _name_in(head: bytes) -> str | None:
    _, i = _varint(head, 0)  # the field's tag
    n, i = _varint(head, i)  # and length
    while n is not None and i < len(head):
        tag, i = _varint(head, i)
        if tag is None:
            return None
        field, wt = tag >> 3, tag & 7
        if wt == 2:
            n, i = _varint(head, i)
            if n is None or i + n > len(head):
                return None
            if field == 2:
                try:
                    return head[i:i + n].decode("utf-8")
                except UnicodeDecodeError:
                    return None
            i += n
        elif wt == 0:
            n, i = _varint(head, i)
        elif wt == 1 or wt == 5:
            i += 8 if wt == 1 else 4
        else:
            return None
    return None


def _varint(b: bytes, i: int) -> tuple[int | None, int]:
    """(the varint at `b[i:]`, the index after it); None where it does not end in `b`."""
    if i < len(b) and b[i] < 0x80:  # one byte: most tags and short lengths
        return b[i], i + 1
    v = shift = 0
    while i < len(b) and shift < 70:
        c = b[i]
        v |= (c & 0x7F) << shift
        i += 1
        if not c & 0x80:
            return v, i
        shift += 7
    return None, i


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
    from google.protobuf.message import DecodeError

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
