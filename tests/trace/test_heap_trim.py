"""The reader gives its freed memory back to the system only where much of it lies at the
top of the heap (`reader._trim_heap`): below `TRIM_TOP_MIN` a trim cost page faults and no
peak memory on every shape measured (see its docstring)."""

from __future__ import annotations

import pytest

from overlap.trace import reader


@pytest.mark.parametrize("top, trims", [
    (0, False), (reader.TRIM_TOP_MIN - 1, False), (reader.TRIM_TOP_MIN, True),
    (reader.TRIM_TOP_MIN * 4, True), (None, True)])
def test_trims_only_a_large_heap_top(monkeypatch: pytest.MonkeyPatch, top: int | None,
                                     trims: bool) -> None:
    calls: list[int] = []
    monkeypatch.setattr(reader, "_malloc_trim", lambda: calls.append)
    # None: no call tells the heap's top (an older glibc): every read trims, as before
    monkeypatch.setattr(reader, "_heap_top", lambda: None if top is None else (lambda: top))
    reader._trim_heap()
    assert calls == ([0] if trims else [])


def test_no_trim_call_no_trim(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reader, "_malloc_trim", lambda: None)
    monkeypatch.setattr(reader, "_heap_top", lambda: pytest.fail("asked without a trim"))
    reader._trim_heap()


def test_this_system_tells_the_heap_top() -> None:
    """Where the C library is glibc 2.33+ (this project's CI), the top is read (an int >= 0),
    so the rule above decides; elsewhere there is no such call and reads trim as before."""
    import platform

    lib, ver = platform.libc_ver()
    got = reader._heap_top()
    if lib == "glibc" and tuple(int(x) for x in ver.split(".")[:2]) >= (2, 33):
        assert got is not None
        assert isinstance(got(), int) and got() >= 0
    else:
        assert got is None or got() >= 0
