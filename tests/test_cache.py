"""overlap's on-disk cache (`overlap.cache`): an entry is made once per key and read back
as it was made; one that is damaged, edited, foreign or of another key is made again; a
directory that cannot be written, or the cache turned off, only means the value is made each
time; a new key's entry removes its kind's older ones."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from overlap import cache


@pytest.fixture
def where(tmp_path, monkeypatch) -> Path:
    d = tmp_path / "cache"
    monkeypatch.setenv("OVERLAP_CACHE_DIR", str(d))
    return d


class _Maker:
    def __init__(self, value: bytes) -> None:
        self.value, self.calls = value, 0

    def __call__(self) -> bytes:
        self.calls += 1
        return self.value


def _entries(d: Path, kind: str) -> list[str]:
    return sorted(p.name for p in d.glob(f"{kind}-*"))


def test_made_once_then_read_back(where):
    make = _Maker(b"\x00value\xff" * 1000)
    assert cache.derived("thing", "k1", make) == make.value
    assert cache.derived("thing", "k1", make) == make.value
    assert make.calls == 1
    names = _entries(where, "thing")
    assert len(names) == 2 and names[0].endswith(".bin") and names[1].endswith(".mac")
    assert (where / "key").stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("damage", ["flip", "truncate", "extend", "mac", "no-mac", "key"])
def test_a_damaged_or_foreign_entry_is_made_again(where, damage):
    make = _Maker(b"the value " * 100)
    cache.derived("thing", "k1", make)
    (entry,) = where.glob("thing-*.bin")
    mac = entry.with_suffix(".mac")
    raw = entry.read_bytes()
    if damage == "flip":
        entry.write_bytes(raw[:5] + bytes([raw[5] ^ 1]) + raw[6:])
    elif damage == "truncate":
        entry.write_bytes(raw[:-1])
    elif damage == "extend":
        entry.write_bytes(raw + b"x")
    elif damage == "mac":
        mac.write_text("0" * 64)
    elif damage == "no-mac":
        mac.unlink()
    else:  # another user's secret: the entry was not written under this one
        (where / "key").write_bytes(os.urandom(32))
    assert cache.derived("thing", "k1", make) == make.value
    assert make.calls == 2
    assert entry.read_bytes() == make.value  # made again and written whole
    assert cache.derived("thing", "k1", make) == make.value and make.calls == 2


def test_a_new_key_removes_its_kinds_older_entries_only(where):
    cache.derived("thing", "old", _Maker(b"1"))
    cache.derived("other", "x", _Maker(b"2"))
    new = _Maker(b"3")
    assert cache.derived("thing", "new", new) == b"3"
    assert len(_entries(where, "thing")) == 2  # the new entry and its checksum
    assert len(_entries(where, "other")) == 2
    assert cache.derived("thing", "new", new) == b"3" and new.calls == 1
    old = _Maker(b"1")
    assert cache.derived("thing", "old", old) == b"1" and old.calls == 1  # gone: made again


def test_turned_off_or_unwritable_the_value_is_made_each_time(tmp_path, monkeypatch):
    monkeypatch.setenv("OVERLAP_CACHE_DIR", "")
    make = _Maker(b"v")
    assert cache.derived("thing", "k", make) == b"v" == cache.derived("thing", "k", make)
    assert make.calls == 2
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("OVERLAP_CACHE_DIR", str(blocker / "cache"))
    assert cache.derived("thing", "k", make) == b"v" and make.calls == 3
    assert cache.derived("thing", "k", make) == b"v" and make.calls == 4
    assert blocker.read_text() == "not a directory"


def test_an_entry_larger_than_its_limit_is_a_miss(where):
    make = _Maker(b"y" * 100)
    cache.derived("thing", "k", make, limit=1000)
    assert cache.derived("thing", "k", make, limit=99) == make.value and make.calls == 2


def test_where_it_is(monkeypatch, tmp_path):
    monkeypatch.delenv("OVERLAP_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_dir() == tmp_path / "xdg" / "overlap" / "dashboard"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache.cache_dir() == tmp_path / "home" / ".cache" / "overlap" / "dashboard"
    monkeypatch.setenv("OVERLAP_CACHE_DIR", str(tmp_path / "c"))
    assert cache.cache_dir() == tmp_path / "c"


def test_processes_filling_an_empty_cache_at_once_agree_on_one_secret(where):
    """Many writers making the directory's secret at once all read the same one (each
    linking its own into place only where none is), so no entry is written under a secret
    that another then replaces."""
    import threading

    where.mkdir(parents=True)
    start = threading.Barrier(8)
    got: list = []

    def one() -> None:
        start.wait()
        got.append(cache._mac_key(where))

    threads = [threading.Thread(target=one) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 8 and got[0] is not None and len(set(got)) == 1
    assert (where / "key").read_bytes() == got[0]
    assert sorted(p.name for p in where.iterdir()) == ["key"]  # no temporary files left


def test_a_damaged_secret_is_replaced_and_hard_links_are_not_needed(where, monkeypatch):
    where.mkdir(parents=True)
    (where / "key").write_bytes(b"short")
    key = cache._mac_key(where)
    assert key is not None and len(key) == 32 and (where / "key").read_bytes() == key
    assert cache._mac_key(where) == key  # read, not made again
    (where / "key").unlink()

    def no_links(*_):
        raise PermissionError("no hard links here")

    monkeypatch.setattr(cache.os, "link", no_links)
    key = cache._mac_key(where)
    assert key is not None and len(key) == 32 and (where / "key").read_bytes() == key
    make = _Maker(b"v")
    assert cache.derived("thing", "k", make) == b"v" == cache.derived("thing", "k", make)
    assert make.calls == 1
