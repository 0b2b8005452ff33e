"""`overlap.trace.protos` adds each descriptor set's files to its pool as serialized bytes
(`_file_protos`), not through `descriptor_pb2`'s messages: the pool must hold the very files
the sets hold, and loading the module must not load `descriptor_pb2`."""

from __future__ import annotations

import subprocess
import sys

from google.protobuf import descriptor_pb2

from overlap.trace import protos
from tests.conftest import REPO


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


def test_messages_round_trip_and_no_descriptor_pb2_loaded():
    code = ("import sys\nfrom overlap.trace.protos import XSpace, HloProto\n"
            "x = XSpace(); x.planes.add().name = '/host:CPU'\n"
            "assert XSpace.FromString(x.SerializeToString()).planes[0].name == '/host:CPU'\n"
            "h = HloProto(); h.hlo_module.computations.add().instructions.add().name = 'c'\n"
            "assert HloProto.FromString(h.SerializeToString()) == h\n"
            "print('google.protobuf.descriptor_pb2' in sys.modules)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"
