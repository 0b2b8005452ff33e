"""The split answers a GPU plane's strip mode itself where its `strip_meta` says what it
answers for GPU planes (`_scan._GPU_MODE`, issue 32 round 26): for a name of
`/device:GPU:` and ASCII digits, without calling it; every other name is asked as before, and
the split's output is what the function alone gives. Inputs are SYNTHETIC, written here."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from overlap.trace import reader, wire

pytestmark = pytest.mark.skipif(wire.SCANNER is None, reason="the compiled scanner is not built")

NAMES = ["/device:GPU:0", "/device:GPU:123", "/device:GPU:", "/device:GPU:1x",
         "/device:GPU:\u0661\u0662",  # (Arabic-Indic digits: the regex's \d, not ASCII)
         "/device:GPU:7\n",  # (the regex's $ matches before a trailing newline)
         "/device:GPU:-1", "/device:TPU:0", "/host:CPU", "/device:GPU:00042"]


def _space(names: list[str], entries: int = 3) -> bytes:
    from overlap.trace.protos import XSpace

    sp = XSpace()
    for d, name in enumerate(names):
        pl = sp.planes.add(id=d, name=name)
        for k in range(1, entries + 1):
            md = pl.event_metadata[k]
            md.id, md.name = k, f"op{k}"
        ln = pl.lines.add(id=1, name="Stream #1", timestamp_ns=1000)
        ln.events.add(metadata_id=1, offset_ps=10, duration_ps=5)
    return sp.SerializeToString()


def _split(raw: bytes, strip):
    buf = np.zeros(len(raw) + wire.PAD, np.uint8)
    buf[:len(raw)] = np.frombuffer(raw, np.uint8)
    scanner: Any = wire.SCANNER
    return scanner.split_space(buf, len(raw), strip, wire.LAZY_STAT_NAMES, wire._LINE_PREFIXES)


@pytest.mark.parametrize("fn,mode", [(reader._strip_many, 2), (reader._strip_meta, 3)])
def test_gpu_names_answered_by_the_split_as_the_function_answers(fn, mode):
    assert fn.gpu_plane_mode == mode
    raw = _space(NAMES)
    asked: list[str] = []

    def counted(name: str):
        asked.append(name)
        return fn(name)
    counted.gpu_plane_mode = mode
    fast = _split(raw, counted)
    plain = _split(raw, lambda name: fn(name))  # (no attribute: every plane asked)
    assert fast[0] == plain[0]  # the skeleton
    assert [p[:2] for p in fast[1]] == [p[:2] for p in plain[1]]  # modes, bad strings
    for a, b in zip(fast[3], plain[3]):  # entry spans
        assert np.array_equal(a, b)
    for a, b in zip(fast[4], plain[4]):  # bounds
        assert np.array_equal(a, b)
    fast_names = {"/device:GPU:0", "/device:GPU:123", "/device:GPU:00042"}
    assert asked == [n for n in NAMES if n not in fast_names]
    # (mode 3 strips only planes of `META_STRIP_MIN` entries or more: these have three)
    assert [p[0] for p in fast[1]][:2] == [2 if mode == 2 else 0] * 2


def test_no_attribute_or_an_odd_one_asks_every_plane():
    raw = _space(NAMES[:3])
    for attr in (None, 1, "2", True, 5):
        asked: list[str] = []

        def counted(name: str, asked: list[str] = asked):
            asked.append(name)
            return reader._strip_many(name)
        if attr is not None:
            counted.gpu_plane_mode = attr
        _split(raw, counted)
        assert asked == NAMES[:3], attr


def test_gpu_device_names_as_the_regex_reads_them():
    """`reader._gpu_devices`: per plane `GPU:<n>` as `GPU_PLANE_RE` gives it, for every name
    here (the ASCII digits without the regex), and None for a plane already read (None)."""
    from types import SimpleNamespace

    from overlap.trace.names import GPU_PLANE_RE

    names = [*NAMES, "/device:GPU:", "/device:GPU:12 ", "/device:GPU:+1", "x/device:GPU:1",
             "/device:GPU:\u00b2",  # (superscript two: str.isdigit, not the regex's \d)
             "/device:GPU:\u0661",  # (Arabic-Indic one: the regex's \d, not ASCII)
             "/device:GPU:7\n", "/device:TPU:0", ""]  # ($ matches before a final newline)
    planes = [SimpleNamespace(name=n) for n in names] + [None]
    want = [f"GPU:{m.group(1)}" if (m := GPU_PLANE_RE.match(n)) else None for n in names]
    assert reader._gpu_devices(planes) == want + [None]
    assert "GPU:\u0661" in want and "GPU:7" in want  # (both read by the regex)
