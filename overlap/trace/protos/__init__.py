"""Message classes for the XSpace and HloProto wire schemas.

The schemas are the .proto files in this folder; the .desc files beside them are their compiled
FileDescriptorSets (tools/gen_protos.py). They load into a private descriptor pool so that they
never clash with xprof's or jaxlib's registrations of the same upstream messages in one process.
"""

from __future__ import annotations

from pathlib import Path

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_HERE = Path(__file__).resolve().parent
_POOL = descriptor_pool.DescriptorPool()

for _name in ("xplane", "hlo"):
    _fds = descriptor_pb2.FileDescriptorSet.FromString((_HERE / f"{_name}.desc").read_bytes())
    for _fd in _fds.file:
        _POOL.Add(_fd)


def _cls(full_name: str):
    return message_factory.GetMessageClass(_POOL.FindMessageTypeByName(full_name))


XSpace = _cls("overlap.xspace.XSpace")
XPlane = _cls("overlap.xspace.XPlane")
XLine = _cls("overlap.xspace.XLine")
XEvent = _cls("overlap.xspace.XEvent")
XStat = _cls("overlap.xspace.XStat")
XEventMetadata = _cls("overlap.xspace.XEventMetadata")
XStatMetadata = _cls("overlap.xspace.XStatMetadata")

HloProto = _cls("overlap.hlo.HloProto")
HloModuleProto = _cls("overlap.hlo.HloModuleProto")
BufferAssignmentProto = _cls("overlap.hlo.BufferAssignmentProto")
ShapeProto = _cls("overlap.hlo.ShapeProto")

__all__ = [
    "XSpace", "XPlane", "XLine", "XEvent", "XStat", "XEventMetadata", "XStatMetadata",
    "HloProto", "HloModuleProto", "BufferAssignmentProto", "ShapeProto",
]
