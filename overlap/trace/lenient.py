"""Reading string fields with invalid UTF-8 through upb (overlap.trace.wire's rule for damaged
bytes): upb refuses a whole message when a `string` field is not UTF-8; `sanitize` parses the
same bytes with the XSpace schema where every `string` field is `bytes` (same field numbers,
same wire format, no UTF-8 check), replaces each invalid field's text with U+FFFD for each
invalid sequence (Python's "replace"), counts the fields replaced and re-encodes the message,
which upb then reads. Fields are taken as upb reads them (a field written twice: the last;
a map key written twice: the last entry), so the count is what the scanner counts.

Only damaged files come here: a file upb reads pays nothing.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any


@functools.cache
def _lenient() -> dict[str, Any]:
    """Message classes of the XSpace schema with every `string` field made `bytes` (same
    field numbers, so the same wire format; upb checks no UTF-8 in bytes), in a pool of
    their own: name -> class."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    from overlap.trace import protos

    fds = descriptor_pb2.FileDescriptorSet.FromString(
        (Path(protos.__file__).parent / "xplane.desc").read_bytes())
    pool = descriptor_pool.DescriptorPool()
    for fd in fds.file:
        for m in fd.message_type:
            for msg in [m, *m.nested_type]:
                for f in msg.field:
                    if f.type == f.TYPE_STRING:
                        f.type = f.TYPE_BYTES
        pool.Add(fd)
    return {n: message_factory.GetMessageClass(pool.FindMessageTypeByName(
        f"overlap.xspace.{n}")) for n in ("XSpace", "XPlane")}


def _fix(b: bytes) -> bytes | None:
    """`b` with invalid UTF-8 replaced, or None where it is valid."""
    if b.isascii():
        return None
    try:
        b.decode("utf-8")
        return None
    except UnicodeDecodeError:
        return b.decode("utf-8", "replace").encode("utf-8")


def _fix_stats(stats) -> int:
    n = 0
    for st in stats:
        if st.WhichOneof("value") == "str_value" and (f := _fix(st.str_value)) is not None:
            st.str_value = f
            n += 1
    return n


def _fix_plane(pl) -> int:
    n = 0
    for holder, fields in ((pl, ("name",)),):
        for f in fields:
            if (v := _fix(getattr(holder, f))) is not None:
                setattr(holder, f, v)
                n += 1
    for md in pl.stat_metadata.values():
        for f in ("name", "description"):
            if (v := _fix(getattr(md, f))) is not None:
                setattr(md, f, v)
                n += 1
    for em in pl.event_metadata.values():
        for f in ("name", "display_name"):
            if (v := _fix(getattr(em, f))) is not None:
                setattr(em, f, v)
                n += 1
        n += _fix_stats(em.stats)
    n += _fix_stats(pl.stats)
    for ln in pl.lines:
        for f in ("name", "display_name"):
            if (v := _fix(getattr(ln, f))) is not None:
                setattr(ln, f, v)
                n += 1
        for ev in ln.events:
            n += _fix_stats(ev.stats)
    return n


def sanitize(raw: bytes, kind: str = "XSpace") -> tuple[bytes, int] | None:
    """For bytes upb refuses: the same message with invalid UTF-8 in its string fields
    replaced, re-encoded, and how many fields were replaced; None where the bytes are
    damaged in another way (upb's refusal then stands)."""
    from google.protobuf.message import DecodeError

    try:
        msg = _lenient()[kind].FromString(raw)
    except DecodeError:
        return None
    if kind == "XPlane":
        n = _fix_plane(msg)
    else:
        n = 0
        for rep_field in (msg.errors, msg.warnings, msg.hostnames):
            for i, b in enumerate(rep_field):
                if (v := _fix(b)) is not None:
                    rep_field[i] = v
                    n += 1
        for pl in msg.planes:
            n += _fix_plane(pl)
    return msg.SerializeToString(), n
