"""`files.planes_named`: a capture's planes of one name read without the rest of the file, and
`hlo_protos_from_xspace(path)`, which reads the `/host:metadata` planes through it (issue 32:
it parsed the whole file with upb a second time), answering as from the whole file."""

from __future__ import annotations

from pathlib import Path

from overlap.hlo.program import hlo_protos_from_xspace
from overlap.trace.files import planes_named
from overlap.trace.protos import XPlane, XSpace


def _space(*planes: XPlane) -> XSpace:
    xs = XSpace()
    for p in planes:
        xs.planes.add().CopyFrom(p)
    xs.hostnames.append("h")
    return xs


def _meta_plane(name: str = "/host:metadata", proto: bytes = b"\x0a\x03abc") -> XPlane:
    p = XPlane(id=3, name=name)
    p.stat_metadata[1].id = 1
    p.stat_metadata[1].name = "Hlo Proto"
    em = p.event_metadata[7]
    em.id = 7
    em.name = "jit_step(5)"
    s = em.stats.add()
    s.metadata_id = 1
    s.bytes_value = proto
    return p


def test_real_capture_same_protos_as_the_whole_file(gpu_corpus: Path) -> None:
    f = next((gpu_corpus / "gpu-h100" / "transformer-h100" / "full").rglob("*.xplane.pb"))
    whole = hlo_protos_from_xspace(f.read_bytes())
    assert whole  # the capture carries its programs
    assert hlo_protos_from_xspace(f) == whole
    assert list(hlo_protos_from_xspace(f)) == list(whole)  # same order too
    part = planes_named(f, "/host:metadata")
    assert part is not None and len(part) < f.stat().st_size
    assert [p.name for p in XSpace.FromString(part).planes] == ["/host:metadata"]


def test_only_the_named_planes_and_those_whose_name_is_not_peekable(tmp_path: Path) -> None:
    big = XPlane(id=1, name="/device:GPU:0")
    big.lines.add(id=1, name="x" * 5000)
    # a plane whose name is written after a 5 kB line: not among its first bytes
    late = XPlane()
    late.lines.add(id=2, name="y" * 5000)
    raw_late = late.SerializeToString() + XPlane(name="/host:late").SerializeToString()
    xs = _space(big, _meta_plane())
    data = xs.SerializeToString() + b"\x0a" + bytes([len(raw_late) & 0x7F | 0x80,
                                                       len(raw_late) >> 7]) + raw_late
    assert len(raw_late) < 1 << 14
    f = tmp_path / "x.xplane.pb"
    f.write_bytes(data)
    got = XSpace.FromString(planes_named(f, "/host:metadata") or b"")
    assert [p.name for p in got.planes] == ["/host:metadata", "/host:late"]
    assert hlo_protos_from_xspace(f) == hlo_protos_from_xspace(data) == {
        "jit_step(5)": b"\x0a\x03abc"}


def test_no_metadata_plane_and_not_an_xspace(tmp_path: Path) -> None:
    f = tmp_path / "a.xplane.pb"
    f.write_bytes(_space(XPlane(id=1, name="/host:CPU")).SerializeToString())
    assert planes_named(f, "/host:metadata") == b""
    assert hlo_protos_from_xspace(f) == {}
    g = tmp_path / "b.xplane.pb"
    g.write_bytes(b"\x0f\xff\xff")  # a group tag: not the top level of an XSpace
    assert planes_named(g, "/host:metadata") is None
    assert planes_named(tmp_path / "missing.xplane.pb", "/host:metadata") is None
