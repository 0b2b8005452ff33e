"""Message classes for the XSpace and HloProto wire schemas.

The schemas are the .proto files in this folder; the .desc files beside them are their compiled
FileDescriptorSets (tools/gen_protos.py). They load into a private descriptor pool so that they
never clash with xprof's or jaxlib's registrations of the same upstream messages in one process.
"""

from __future__ import annotations

from pathlib import Path

from google.protobuf import descriptor_pool, message_factory

_HERE = Path(__file__).resolve().parent
_POOL = descriptor_pool.DescriptorPool()


def _file_protos(raw: bytes) -> list[bytes] | None:
    """The serialized `FileDescriptorProto`s of a `FileDescriptorSet` (its only field, `file`
    = 1, length-delimited), as the pool takes them (`AddSerializedFile`); None for anything
    else in the set. Why: parsing the set into messages loads `descriptor_pb2`, ~3 ms of every
    process that loads protobuf (the capture's HloProtos, a skeleton upb decodes)."""
    out, i = [], 0
    while i < len(raw):
        if raw[i] != 0x0A:  # field 1, wire type 2
            return None
        n, shift, i = 0, 0, i + 1
        while i < len(raw) and shift < 35:
            b = raw[i]
            n |= (b & 0x7F) << shift
            i, shift = i + 1, shift + 7
            if b < 0x80:
                break
        else:
            return None
        if i + n > len(raw):
            return None
        out.append(raw[i:i + n])
        i += n
    return out


for _name in ("xplane", "hlo"):
    _raw = (_HERE / f"{_name}.desc").read_bytes()
    _files = _file_protos(_raw)
    if _files is None:  # (not a set `tools/gen_protos.py` writes: the message parser's way)
        from google.protobuf import descriptor_pb2

        _files = [f.SerializeToString() for f in
                  descriptor_pb2.FileDescriptorSet.FromString(_raw).file]
    for _fd in _files:
        _POOL.AddSerializedFile(_fd)


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
