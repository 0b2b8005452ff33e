"""`overlap.trace.protos` adds each descriptor set's files to its pool as serialized bytes
(`_file_protos`), not through `descriptor_pb2`'s messages, and on upb takes the pool and the
message metaclass as protobuf hands them out there, without loading `descriptor_pool` (and
with it `python_message`, `text_format` ...). Checked: the pool holds the very files the sets
hold; the classes are the ones `message_factory` makes (it finds them made, same metaclass)
and read real captures and their HloProtos into messages that write the same bytes and text
as classes made the public way; the module loads neither `descriptor_pb2` nor
`python_message` on upb, and takes the public path on the pure-Python backend."""

from __future__ import annotations

import os
import subprocess
import sys

from google.protobuf import descriptor_pb2

from overlap.trace import protos
from tests.conftest import REPO, SAMPLE_TRACES


def test_the_pool_holds_the_sets_files():
    for name in ("xplane", "hlo"):
        raw = (REPO / "overlap" / "trace" / "protos" / f"{name}.desc").read_bytes()
        want = list(descriptor_pb2.FileDescriptorSet.FromString(raw).file)
        got = protos._file_protos(raw)
        assert got is not None and [descriptor_pb2.FileDescriptorProto.FromString(g)
                                    for g in got] == want
        for fd in want:
            in_pool = descriptor_pb2.FileDescriptorProto()
            protos._POOL.FindFileByName(fd.name).CopyToProto(in_pool)
            assert in_pool == fd


def test_file_protos_of_other_bytes():
    fds = descriptor_pb2.FileDescriptorSet()
    for n in ("a.proto", "b.proto"):
        fds.file.add().name = n
    raw = fds.SerializeToString()
    assert [descriptor_pb2.FileDescriptorProto.FromString(g).name
            for g in protos._file_protos(raw) or ()] == ["a.proto", "b.proto"]
    assert protos._file_protos(b"") == []
    assert protos._file_protos(raw[:-1]) is None  # a file cut short
    assert protos._file_protos(b"\x12\x00") is None  # another field
    assert protos._file_protos(b"\x0a\xff\xff\xff\xff\xff\xff") is None  # a varint too long


_ROUND_TRIP = """
import sys
from overlap.trace import protos
from overlap.trace.protos import XSpace, HloProto
x = XSpace(); x.planes.add().name = '/host:CPU'
assert XSpace.FromString(x.SerializeToString()).planes[0].name == '/host:CPU'
h = HloProto(); h.hlo_module.computations.add().instructions.add().name = 'c'
assert HloProto.FromString(h.SerializeToString()) == h
print(protos._FAST is not None, 'google.protobuf.descriptor_pb2' in sys.modules,
      'google.protobuf.internal.python_message' in sys.modules)
"""


def _run(env: dict[str, str]) -> str:
    r = subprocess.run([sys.executable, "-c", _ROUND_TRIP], capture_output=True, text=True,
                       cwd=REPO, env={**os.environ, **env})
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_loads_without_descriptor_pb2_or_python_message():
    from google.protobuf.internal import api_implementation

    env = {k: v for k, v in os.environ.items() if k != "PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION"}
    upb = api_implementation.Type() == "upb"
    r = subprocess.run([sys.executable, "-c", _ROUND_TRIP], capture_output=True, text=True,
                       cwd=REPO, env=env)
    assert r.returncode == 0, r.stderr
    fast, pb2, python_message = r.stdout.split()
    assert (fast, pb2, python_message) == (("True", "False", "False") if upb else
                                           ("False", pb2, "True"))


def test_the_pure_python_backend_takes_the_public_path():
    # (that backend parses serialized files with descriptor_pb2 itself)
    fast, _, python_message = _run({"PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION": "python"}).split()
    assert (fast, python_message) == ("False", "True")


def _public_classes() -> dict:
    """The same schemas the public way: `descriptor_pool` and `message_factory`."""
    from google.protobuf import descriptor_pool, message_factory

    pool = descriptor_pool.DescriptorPool()
    for name in ("xplane", "hlo"):
        raw = (REPO / "overlap" / "trace" / "protos" / f"{name}.desc").read_bytes()
        for fd in descriptor_pb2.FileDescriptorSet.FromString(raw).file:
            pool.Add(fd)
    return {n: message_factory.GetMessageClass(pool.FindMessageTypeByName(n))
            for n in ("overlap.xspace.XSpace", "overlap.hlo.HloProto")}


def test_classes_are_message_factorys_and_read_alike():
    from google.protobuf import message_factory, text_format

    public = _public_classes()
    for cls in (protos.XSpace, protos.XPlane, protos.XEvent, protos.HloProto,
                protos.HloModuleProto, protos.BufferAssignmentProto, protos.ShapeProto):
        assert message_factory.GetMessageClass(cls.DESCRIPTOR) is cls
        assert type(cls) is type(public["overlap.hlo.HloProto"])
        assert cls.__module__ == public["overlap.hlo.HloProto"].__module__
    files = [next((SAMPLE_TRACES / "tpu-v6e-offload").rglob("*.xplane.pb")),
             next((SAMPLE_TRACES / "gpu-h100" / "scan-h100").rglob("*.xplane.pb"))]
    blobs = 0
    for f in files:
        raw = f.read_bytes()
        mine = protos.XSpace.FromString(raw)
        theirs = public["overlap.xspace.XSpace"].FromString(raw)
        assert mine.SerializeToString() == theirs.SerializeToString()
        assert text_format.MessageToString(mine) == text_format.MessageToString(theirs)
        for p in mine.planes:
            for m in p.event_metadata.values():
                for s in m.stats:
                    if s.WhichOneof("value") != "bytes_value" or not s.bytes_value:
                        continue
                    h = protos.HloProto.FromString(s.bytes_value)
                    g = public["overlap.hlo.HloProto"].FromString(s.bytes_value)
                    assert h.SerializeToString() == g.SerializeToString()
                    assert text_format.MessageToString(h) == text_format.MessageToString(g)
                    blobs += 1
    assert blobs > 5
