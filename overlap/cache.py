"""overlap's on-disk cache: where it is, and entries no one else can have written.

Two kinds of entries live in one directory (`cache_dir`):

* the dashboard's loaded runs (`overlap.dashboard.data`: an `.npz` per run, keyed on the
  capture's content);
* what a page is built from that depends only on the installed plotly (`derived`): plotly.js
  gzip-compressed for `report --html` (~2.7 MB; ~0.19 s of compression a page) and plotly's
  validated figure template (~7 KB; ~0.2 s of plotly.py validating the defaults it holds for
  every trace type). Keyed on plotly.js's own bytes and on plotly's version and place:
  an upgraded plotly makes new entries, and the old ones of that kind are removed then.

Every entry is written whole (a temporary file renamed into place) with a keyed checksum beside
it (HMAC-SHA256 under a secret made once per cache directory, mode 0600): an entry that is
truncated, edited or written by anyone else does not verify and is made again. A directory that
cannot be written (a read-only home) only costs speed: the value is made and not kept.

Where: `$OVERLAP_CACHE_DIR`, else `$XDG_CACHE_HOME/overlap/dashboard`, else
`~/.cache/overlap/dashboard`; `OVERLAP_CACHE_DIR=` (empty) turns the cache off.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

from overlap.errors import InputError
from overlap.trace.paths import read_side_file


def cache_dir() -> Path | None:
    """`$OVERLAP_CACHE_DIR`, else ~/.cache/overlap/dashboard; `OVERLAP_CACHE_DIR=` disables."""
    env = os.environ.get("OVERLAP_CACHE_DIR")
    if env is not None:
        return Path(env) if env else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "overlap" / "dashboard"


def _mac_key(d: Path) -> bytes | None:
    """This cache directory's secret for entry checksums (32 bytes, mode 0600), made once.

    Made whole in a temporary file and linked into place only where there is none, so that
    processes filling an empty cache at once agree on one secret (each writing its own, the
    last one's won and the others' entries no longer verified: made again, for nothing). A
    secret of any other length is damage: replaced."""
    key_file = d / "key"
    got = _read_key(key_file)
    if got is not None:
        return got
    tmp = d / f"key.tmp-{os.getpid()}-{threading.get_ident()}"
    try:
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(os.urandom(32))
        try:
            os.link(tmp, key_file)  # (fails where a secret is there: it is read below)
        except FileExistsError:
            got = _read_key(key_file)
            if got is not None:
                return got
            os.replace(tmp, key_file)  # damaged: this one replaces it
        except OSError:  # no hard links on this file system: put in place as it is
            os.replace(tmp, key_file)
        return _read_key(key_file)
    except OSError:
        return None
    finally:
        try:
            tmp.unlink()
        except OSError:
            pass


def _read_key(key_file: Path) -> bytes | None:
    """The secret in `key_file` where it is one (32 bytes), else None."""
    try:
        data = read_side_file(key_file, "cache key", limit=64)
    except (OSError, InputError):
        return None
    return data if len(data) == 32 else None


def _mac(d: Path, data: bytes) -> str | None:
    import hashlib
    import hmac

    key = _mac_key(d)
    return None if key is None else hmac.new(key, data, hashlib.sha256).hexdigest()


def put(path: Path, data: bytes) -> bool:
    """Write `data` to the entry `path` (in the cache directory) with its checksum beside it
    (`.mac`), each renamed into place: readers never see half an entry. False where it could
    not be written (nothing is raised)."""
    tag = f"{os.getpid()}-{threading.get_ident()}"
    tmp = path.with_suffix(f".tmp-{tag}{path.suffix}")
    mtmp = path.with_suffix(f".mac-tmp-{tag}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        mac = _mac(path.parent, data)
        if mac is None:
            return False
        tmp.write_bytes(data)
        mtmp.write_text(mac)
        os.replace(tmp, path)
        os.replace(mtmp, path.with_suffix(".mac"))
        return True
    except OSError:
        for p in (tmp, mtmp):
            try:
                p.unlink()
            except OSError:
                pass
        return False


def get(path: Path | None, limit: int) -> bytes | None:
    """The entry's bytes where its checksum verifies, else None (missing, larger than `limit`,
    not written by this user's cache, or changed since)."""
    if path is None or not path.is_file():
        return None
    try:
        import hmac

        raw = read_side_file(path, "cache entry", limit=limit)
        want = _mac(path.parent, raw)
        got = read_side_file(path.with_suffix(".mac"), "cache checksum", 1024).decode().strip()
        if want is None or not hmac.compare_digest(want, got):
            return None  # not written by us, or edited since: a miss, rewritten when made
    except (OSError, InputError, UnicodeDecodeError):
        return None
    return raw


def derived(kind: str, key: str, make: Callable[[], bytes], limit: int = 1 << 26) -> bytes:
    """`make()`, kept in the cache as `<kind>-<hash of key>.bin`: made once per `key` (what the
    value depends on, whole) on this machine (`lookup`, then `keep`). Without a cache
    directory, `make()` each time."""
    path, got = lookup(kind, key, limit)
    if got is not None:
        return got
    value = make()
    if path is not None:
        keep(path, value)
    return value


def lookup(kind: str, key: str, limit: int = 1 << 26) -> tuple[Path | None, bytes | None]:
    """(where `derived` keeps `key`'s value, or None without a cache directory; the value
    kept there where it verifies, else None)."""
    import hashlib

    d = cache_dir()
    if d is None:
        return None, None
    path = d / f"{kind}-{hashlib.sha256(key.encode()).hexdigest()[:32]}.bin"
    return path, get(path, limit)


def keep(path: Path, value: bytes) -> None:
    """`put` of a `derived` value at its place (`lookup`'s); once written, the other entries
    of its kind (the part of its name before the key's hash: the values of an older plotly)
    are removed."""
    if put(path, value):
        kind = path.stem.rsplit("-", 1)[0]
        for old in path.parent.glob(f"{kind}-*"):
            if old.name.split(".", 1)[0] != path.stem:
                try:
                    old.unlink()
                except OSError:
                    pass
