"""Reading a file in chunks of whole planes (`files.read_chunks`, `reader._parse_file`) gives
exactly what one parse of the whole file gives, refuses damaged files with the same message,
and frees each plane's bytes once that plane is read."""

from __future__ import annotations

import mmap
import weakref
from pathlib import Path

import pandas as pd
import pytest

from overlap.errors import InputError
from overlap.trace import files, reader, wire
from overlap.trace.names import HOST_PLANE
from overlap.trace.reader import read_host_file
from overlap.trace.synthetic import TpuDevice, gpu_offload_scenario

US = 1_000_000
TABLES = ("transfers", "compute", "steps", "memory", "modules", "devices", "lines")


@pytest.fixture(autouse=True)
def _small_planes_alone(monkeypatch):
    """The test captures are small: let their planes have chunks of their own."""
    monkeypatch.setattr(files, "ALONE_MIN_BYTES", 0)


def _capture(tmp_path: Path, host_last: bool = False) -> Path:
    """Two GPUs, a TPU, allocator events, a program on /host:metadata, steps, a host name
    and a warning (XSpace's other repeated fields) between the planes; `host_last`: the host
    plane written after the device planes (as TPU captures do)."""
    t = gpu_offload_scenario(steps=2, layers=2)
    t.gpu(1).kernel(5 * US, 2 * US, hlo_op="fusion.9")
    tpu: TpuDevice = t.tpu(0)
    tpu.op(3 * US, 1 * US)
    t.allocation(2 * US, bytes_allocated=1000, requested_bytes=1000)
    t.python_noise(3 * US, 2 * US)
    t.module("jit_step", 7, b"\x08\x01")
    xs = t.to_xspace()
    xs.hostnames.append("second-name")
    xs.warnings.append("a second warning")
    # the repeated fields written between planes, as a concatenation of XSpaces would
    raw = xs.SerializeToString()
    if host_last:
        order = sorted(xs.planes, key=lambda pl: pl.name == HOST_PLANE)
        rest = type(xs)()
        rest.CopyFrom(xs)
        del rest.planes[:]
        raw = b"".join(type(xs)(planes=[pl]).SerializeToString() for pl in order) \
            + rest.SerializeToString()
    extra = type(xs)()
    extra.hostnames.append("third-name")
    extra.errors.append("an error")
    extra.planes.add(name="/device:CUSTOM:0")
    p = tmp_path / "h.xplane.pb"
    p.write_bytes(raw + extra.SerializeToString())
    return p


def _whole(monkeypatch, p: Path) -> dict:
    with monkeypatch.context() as m:
        m.setattr(reader, "read_chunks", lambda *a, **k: None)
        return read_host_file(p)


def _same(a: dict, b: dict) -> None:
    a, b = reader.part_frames(a), reader.part_frames(b)
    for k in TABLES:
        pd.testing.assert_frame_equal(a[k], b[k])
    assert a["capture"] == b["capture"] and a["backend"] == b["backend"]


ALONE = {"reader's": reader._read_alone, "none": lambda name: False,
         "all but GPU planes": lambda name: not name.startswith("/device:GPU")}


def _is_mapped(buf) -> bool:
    """Whether a chunk is the file's pages mapped (`files._mapped`), not bytes read."""
    base = getattr(buf, "base", None)
    return isinstance(base, memoryview) and isinstance(base.obj, mmap.mmap)


@pytest.mark.parametrize("alone", list(ALONE))
@pytest.mark.parametrize("scanner", [True, False])
@pytest.mark.parametrize("host_last", [False, True])
@pytest.mark.parametrize("mapped", [False, True])
def test_chunked_read_equals_whole_read(tmp_path, monkeypatch, alone, scanner, host_last,
                                        mapped):
    p = _capture(tmp_path, host_last)
    if not scanner:
        monkeypatch.setattr(wire, "SCANNER", None)
    # the test captures are small: map every chunk of one run, or none
    monkeypatch.setattr(files, "MAP_MIN_BYTES", 0 if mapped else 1 << 62)
    monkeypatch.setattr(files, "_MAPPING", [True])  # (a dashboard test may have turned it off)
    want = _whole(monkeypatch, p)
    monkeypatch.setattr(reader, "_read_alone", ALONE[alone])
    chunks = files.read_chunks(p, wire.PAD, ALONE[alone])
    assert chunks is not None
    raw = p.read_bytes()
    # every byte once; a plane read alone is its field's bytes, where the field lies
    assert sum(n for _, n, _, _ in chunks) == len(raw)
    assert all(bytes(c[:n]) == raw[o[0]:o[0] + n] for c, n, o, by_itself in chunks if by_itself)
    # read chunks are followed by the zero bytes asked for; mapped ones are the file's bytes
    # and nothing more (read-only: no rule may write into a capture's bytes)
    assert all(bytes(c[n:]) == bytes(wire.PAD) for c, n, _, _ in chunks if not _is_mapped(c))
    assert all(len(c) == n and not c.flags.writeable for c, n, _, _ in chunks if _is_mapped(c))
    # the planes read alone are one run each: mapped where asked
    assert all(_is_mapped(c) == mapped for c, *_, by_itself in chunks if by_itself)
    assert sum(by_itself for *_, by_itself in chunks) == {
        "reader's": 2, "none": 0, "all but GPU planes": 5}[alone]
    del chunks
    got = read_host_file(p)
    _same(got, want)
    assert got["capture"]["hostnames"] == ["synthetic-host", "second-name", "third-name"]
    assert got["capture"]["errors"] == ["an error"]


def _outcome(read, p: Path) -> object:
    try:
        return read(p)
    except InputError as e:
        return str(e)


def _same_outcome(monkeypatch, p: Path) -> None:
    got = _outcome(read_host_file, p)
    want = _outcome(lambda f: _whole(monkeypatch, f), p)
    if isinstance(want, str):
        assert got == want
    else:
        assert isinstance(got, dict) and isinstance(want, dict)
        _same(got, want)


@pytest.mark.parametrize("cut", ["tag", "length", "payload", "group", "gzip", "json", "empty"])
def test_damaged_top_level_is_refused_as_before(tmp_path, monkeypatch, cut):
    raw = _capture(tmp_path).read_bytes()
    bad = {"tag": raw + b"\x80", "length": raw + b"\x0a\xff", "payload": raw[:-3],
           "group": raw + b"\x0b\x0c", "gzip": b"\x1f\x8b" + raw, "json": b'  {"a": 1}',
           "empty": b""}[cut]
    p = tmp_path / "bad.xplane.pb"
    p.write_bytes(bad)
    _same_outcome(monkeypatch, p)
    if cut != "group":  # upb skips a group at the top level as an unknown field
        assert isinstance(_outcome(read_host_file, p), str)


@pytest.mark.parametrize("where", [0.2, 0.5, 0.8, 0.95])
def test_damaged_plane_is_refused_as_before(tmp_path, monkeypatch, where):
    raw = bytearray(_capture(tmp_path).read_bytes())
    raw[int(len(raw) * where)] ^= 0xFF
    p = tmp_path / "bad.xplane.pb"
    p.write_bytes(bytes(raw))
    _same_outcome(monkeypatch, p)


# (the scanner's planes hold their chunk; upb's are messages)
@pytest.mark.skipif(wire.SCANNER is None, reason="scanner not used (OVERLAP_SCANNER=0)")
@pytest.mark.parametrize("device", ["_read_gpu_planes", "_read_tpu_plane"])
def test_host_plane_bytes_are_freed_before_device_planes_are_read(tmp_path, monkeypatch,
                                                                   device):
    """The host plane is read first, wherever the file has it, and its chunk freed."""
    p = _capture(tmp_path, host_last=True)
    host_buf: list = []
    parse = reader._parse_file

    def parse_file(f):
        xs, planes = parse(f)
        names = [pl.name for pl in planes]
        assert names.index(HOST_PLANE) > names.index("/device:TPU:0")  # written after it
        host_buf.append(weakref.ref(next(pl for pl in planes if pl.name == HOST_PLANE).buf))
        return xs, planes

    seen = []
    read_device = getattr(reader, device)

    def spy(*a, **k):
        seen.append(host_buf[0]() is None)
        return read_device(*a, **k)

    monkeypatch.setattr(reader, "_parse_file", parse_file)
    monkeypatch.setattr(reader, device, spy)
    out = read_host_file(p)
    assert seen == [True]
    assert len(out["steps"]["start_ps"]) == 2 and len(out["memory"]["time_ps"]) == 1


@pytest.mark.parametrize("scanner", [True, False])
def test_a_plane_mapped_up_to_a_page_aligned_end_of_file(tmp_path, monkeypatch, scanner):
    """A mapped chunk has no bytes after it: with the host plane last and the file a whole
    number of pages, any read past the plane's end would fault (the process would die).
    The answers are the whole read's, and the host plane's mapping is freed with it."""
    if not scanner:
        monkeypatch.setattr(wire, "SCANNER", None)
    monkeypatch.setattr(files, "MAP_MIN_BYTES", 0)
    monkeypatch.setattr(files, "_MAPPING", [True])
    raw = _capture(tmp_path, host_last=True).read_bytes()
    xs = wire.space_message(raw)
    host = next(pl for pl in xs.planes if pl.name == HOST_PLANE)
    rest = type(xs)()
    rest.CopyFrom(xs)
    rest.ClearField("planes")
    rest.planes.extend(pl for pl in xs.planes if pl.name != HOST_PLANE)
    body = rest.SerializeToString()
    last = type(xs)(planes=[host]).SerializeToString()
    # a host name as filler (field 4) brings the file to a multiple of the page size
    page = mmap.PAGESIZE
    for k in range(page):
        fill = type(xs)(hostnames=["x" * k]).SerializeToString()
        if (len(fill) + len(body) + len(last)) % page == 0:
            break
    p = tmp_path / "aligned.xplane.pb"
    p.write_bytes(fill + body + last)
    assert p.stat().st_size % page == 0
    chunks = files.read_chunks(p, wire.PAD, reader._read_alone)
    assert chunks is not None
    end = [c for c, n, o, alone in chunks if alone and o[0] + n == p.stat().st_size]
    assert len(end) == 1 and _is_mapped(end[0])
    mapping = weakref.ref(end[0].base.obj)
    del chunks, end
    assert mapping() is None  # unmapped with its last view
    _same(read_host_file(p), _whole(monkeypatch, p))
