"""`PlaneView`: what the reader holds of each plane of a parse (`wire.parse_space`): its
skeleton message, or for a bare plane (`_scan.BARE_MODE`) its name and id alone, its lines,
and where its event metadata entries and plane stats lie in the file's bytes. One per plane
(100k in a capture of small planes): slots, and nothing per plane that can be shared or
read when asked.

Also here, as the view reads them: upb's reading of a piece of the file (a plane's fields,
its stats; a string with invalid UTF-8 read with replacement and counted in `BAD_STRINGS`,
the count the reader reports as `strings_replaced`). `wire` gives them under its own names;
apart from it to keep that module within its size (tests/test_architecture.py)."""

from __future__ import annotations

from typing import Any

import numpy as np

from overlap.trace.lenient import sanitize
from overlap.trace.lines import LineTable


class PlaneView:
    """A skeleton XPlane message (no lines) plus its lines (`LineTable`), and where its
    event_metadata map entries lie in the file's buffer (`buf`), for `MetaTable`: a range of
    a parse's span arrays, `meta_pos` their (starts, ends), sliced when read."""

    # (slots: one per plane, 100k in a capture of small planes; no instance dict)
    __slots__ = ("_msg", "_xs", "name", "lines", "buf", "_spans", "_at", "meta_decoded",
                 "meta_stripped", "stat_names", "_stats", "_sk")

    def __init__(self, msg, lines: LineTable, buf: np.ndarray | None = None,
                 spans: tuple[np.ndarray, np.ndarray, list[int]] | None = None, at: int = 0,
                 meta_stripped: int = 0, meta_decoded: dict | None = None,
                 stat_names: Any = None,
                 xs: Any = None, stats: "bool | np.ndarray" = True, sk: int | None = None):
        # `xs`: the skeleton whose plane `at` is `msg`: the message is then not kept but
        # asked of it when read (`msg`): upb's wrapper of each plane, kept, was ~0.1 KiB a
        # plane (10 MiB of 100k small planes), for a plane's stats read once
        # A bare plane (`_scan.BARE_MODE`, not in the skeleton): `msg` is its name and `xs`
        # the split's plane ids (`msg` makes its message when asked). `sk`: the plane's
        # place among the skeleton's planes where it is not its place in the parse (`at`)
        self._msg: Any = None if xs is not None else msg
        self._xs: Any = xs
        self._sk = at if sk is None else sk
        # False: the split saw no plane stat in the plane's bytes (upb's `stats` is then empty:
        # not asked of the message, 100k small planes); an array: its stat fields' spans in
        # `buf`, parsed when first asked (`_scan._LAZY_STATS_PLANE`: millions no rule reads)
        self._stats: Any = stats
        # (read once: the reader asks a plane's name several times, and the message's name is
        # a read of upb's message each time, ~1 us, 100k planes in a capture of small ones)
        self.name = msg if isinstance(msg, str) else msg.name
        # stat id -> name, in upb's order, where the scanner read the plane's stat metadata
        # (then never in `msg`: `Plane` reads this); None: `msg.stat_metadata` holds it
        self.stat_names = stat_names
        self.lines = lines
        self.buf = buf
        # the parse's (entry starts, entry ends, bounds): this plane's entries are
        # [bounds[at], bounds[at + 1]) (one tuple for all planes, not one a plane)
        self._spans, self._at = spans, at
        # the entries as `decode_meta` gives them, where `split_space` decoded them
        self.meta_decoded = meta_decoded
        # the entries are not in `msg` (upb never saw them; the split's mode, 1 decoded or 2
        # not, else 0): `Plane.meta` parses them on demand
        self.meta_stripped = meta_stripped

    @property
    def msg(self):
        """The skeleton's XPlane message (no lines)."""
        m = self._msg
        if m is not None:
            return m
        xs = self._xs
        if isinstance(xs, np.ndarray):  # (a bare plane: its id and name, nothing else)
            from overlap.trace.skeleton import PlaneMsg

            m = PlaneMsg()
            m.name, m.id = self.name, int(xs[self._at])
            return m
        return xs.planes[self._sk]

    @property
    def meta_pos(self) -> tuple[np.ndarray, np.ndarray] | None:
        if self._spans is None:
            return None
        ms, me, bounds = self._spans
        lo, hi = bounds[self._at], bounds[self._at + 1]
        return ms[lo:hi], me[lo:hi]

    # The message's other fields, as properties. No `__getattr__` passing any name on to the
    # message: a class that has one gives every attribute read of its objects the slower
    # lookup (the interpreter neither specializes a slot's read for it nor skips the hook),
    # ~1.7M reads of 100k small planes' views, ~5% of that report.
    @property
    def event_metadata(self):
        return self.msg.event_metadata

    @property
    def stat_metadata(self):
        return self.msg.stat_metadata

    @property
    def id(self):
        return self.msg.id

    @property
    def stats(self):
        s = self._stats
        if s is True:
            return self.msg.stats
        if s is False:
            return ()
        if isinstance(s, np.ndarray):
            s = self._stats = _plane_stats_at(self.buf, s)
        return s


# String fields read with invalid UTF-8 replaced (see `wire`'s docstring), counted as each
# decoder meets them; the reader resets and reads this per file, as `INVALID_EVENTS`.
BAD_STRINGS = [0]


def space_message(raw: bytes) -> Any:
    """The upb XSpace message of a whole file's bytes, string fields with invalid UTF-8 read
    with replacement (the rule above; not counted: for callers other than the reader)."""
    from overlap.trace.protos import XSpace

    return _strict_or_sanitized(XSpace, raw, count=False)


def _strict_or_sanitized(cls, raw: bytes, count: bool = True):
    """`cls.FromString(raw)`, or where upb refuses invalid UTF-8 only, the sanitized message
    (its replaced fields counted in `BAD_STRINGS` where `count`)."""
    from google.protobuf.message import DecodeError

    try:
        return cls.FromString(raw)
    except DecodeError:
        got = sanitize(raw, cls.DESCRIPTOR.name)
        if got is None:
            raise
        if count:
            BAD_STRINGS[0] += got[1]
        return cls.FromString(got[0])


def _upb_plane(fields: bytes, count: bool = True) -> Any:
    """upb's XPlane of a plane's fields (`_strict_or_sanitized`, `count` passed on)."""
    from overlap.trace.protos import XSpace

    return _strict_or_sanitized(XSpace, b"\x0a" + _enc_varint(len(fields)) + fields,
                                count).planes[0]


def _plane_stats_at(buf: np.ndarray, spans: np.ndarray) -> Any:
    """upb's `stats` of a plane whose stat fields (tag and length included) are `buf`'s
    [spans[2i], spans[2i + 1]): mended strings were counted with the skeleton, not again."""
    fields = b"".join(buf[a:b].tobytes() for a, b in spans.reshape(-1, 2).tolist())
    return _upb_plane(fields, count=False).stats


def _enc_varint(v: int) -> bytes:
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)
