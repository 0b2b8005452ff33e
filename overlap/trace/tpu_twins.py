"""Chips of one host file whose op metadata is byte for byte the same: the per-op rules run
once for all of them (`OpFacts`).

Why: a TPU host's file holds a plane per chip, and each plane carries its own copy of the
programs' event metadata. A pod runs one SPMD program, so the copies are the same bytes (the
public v6e sample: chips 1-3 have identical maps; chip 0 differs by the ops only it ran).
Every per-op rule of `tpu._read_tpu_plane` (instruction names, async boundaries, the copy
facts from the HLO text or the program, the module and program columns) reads nothing of a
plane but its event metadata entries and its stat names. Those rules took ~0.35 of the ~0.8
ms a chip of a capture of many small chips (benchmarks/README.md, round 40).

The rule: planes are twins where their event metadata entries (each entry's bytes and
length, in key order where each key is written once, else in the file's order) and their
stat names (ids and names, in order) are equal; told by a hash, then confirmed byte by byte
against the group's first plane. A twin's per-op
answers are those of the first twin that asked the same question (the same ops, the same
arguments), handed out as copies (a caller may fill an array it got). Each chip's events
(times, device clock, pairing, per-event stats) are read from its own plane, as before.
Where a plane's entries were not located by the scanner (upb's map, no `meta_pos`), it has no
twin. Strings replaced while a rule ran (`BAD_STRINGS`) are counted again for each twin that
reuses the answer, so `strings_replaced` is what reading every plane gives.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from overlap.trace.metatable import MetaTable
from overlap.trace.planeview import BAD_STRINGS


def _material(view) -> tuple[bytes, bytes, tuple] | None:
    """What a plane's per-op rules read: (its entries' lengths as int64 bytes, their bytes
    side by side, (whether they are in key order, then its stat names as (id, name) pairs in
    order)); None where the entries were not located or the stat names are upb's. Bytes,
    so that hashing and comparing two are each one C call (thousands of chips: `np.
    array_equal` twice a chip was ~8 us of the ~14 a chip took here)."""
    pos = getattr(view, "meta_pos", None)
    names = getattr(view, "stat_names", None)
    if pos is None or not len(pos[0]) or names is None:
        return None
    ms, me = pos
    order = _key_order(getattr(view, "meta_decoded", None), len(ms))
    if order is not None:
        ms, me = ms[order], me[order]
    return (np.asarray(me - ms, np.int64).tobytes(),
            MetaTable.gather_spans(view.buf, ms, me).tobytes(),
            (order is not None, *names.items()))


def _key_order(decoded: dict | None, n: int) -> np.ndarray | None:
    """The entries' order by their keys, where the split decoded them (`decode_meta`'s keys,
    newest first reversed where it says so) and no key is written twice: a map of distinct
    keys is the same map in any order (chips write theirs in different orders: the v6e
    sample's chips 1-3). None where a key repeats (the last entry of it counts: the file's
    order decides) or the keys are not at hand."""
    if decoded is None or not decoded.get("ok") or len(decoded["key"]) != n:
        return None
    key = decoded["key"][::-1] if decoded.get("reversed") else decoded["key"]
    o = np.argsort(key, kind="stable")
    k = key[o]
    return None if bool((k[1:] == k[:-1]).any()) else o


class OpFacts:
    """The per-op answers of one group of twin planes. `plane`: the `Plane` the rules read
    (the first twin read binds it, `bind`)."""

    __slots__ = ("plane", "_got")

    def __init__(self) -> None:
        self.plane: Any = None
        # (rule, ops' dtype and bytes, other arguments) -> (answer, strings replaced)
        self._got: dict[tuple, tuple[Any, int]] = {}

    def bind(self, P) -> Any:
        """The plane the rules read for `P` (P itself for the group's first)."""
        if self.plane is None:
            self.plane = P
        return self.plane

    def get(self, rule: Callable, ops: np.ndarray, *args) -> Any:
        """`rule(plane, ops, *args)`, run once per distinct question in the group; a copy of
        the answer."""
        key = (rule, ops.dtype.str, ops.tobytes(), args)
        got = self._got.get(key)
        if got is None:
            before = BAD_STRINGS[0]
            answer = rule(self.plane, ops, *args)
            got = self._got[key] = (answer, BAD_STRINGS[0] - before)
            return _copied(answer)
        BAD_STRINGS[0] += got[1]
        return _copied(got[0])


def _copied(v: Any) -> Any:
    """A copy of an answer: its arrays copied (object arrays hold the same objects), tuples,
    lists and dicts rebuilt; anything else (a flag, None, a str) as it is."""
    if isinstance(v, np.ndarray):
        return v.copy()
    if isinstance(v, tuple):
        return tuple(_copied(x) for x in v)
    if isinstance(v, list):
        return list(v)
    if isinstance(v, dict):
        return {k: _copied(x) for k, x in v.items()}
    return v


def twins(views: list, is_tpu: Callable[[str], bool]) -> dict[int, OpFacts]:
    """Per index of a TPU plane in `views` that has a twin: its group's `OpFacts` (shared by
    the group). Empty where there are fewer than two TPU planes (no work)."""
    at = [i for i, v in enumerate(views) if v is not None and is_tpu(v.name)]
    if len(at) < 2:
        return {}
    # one pass: each plane's metadata (bytes, `_material`: hashed and compared in C by the
    # dict) looked up among its groups' first planes', the only bytes held (a plane's own are
    # dropped with it: thousands of small chips' held to the end were ~1 KiB each, +4 MiB of
    # RSS at 4k chips). Python's hash, not hashlib's: its import maps OpenSSL, ~4 MiB of RSS
    # in every report.
    first: dict[tuple, int] = {}  # a group's material -> its first plane
    out: dict[int, OpFacts] = {}
    for i in at:
        m = _material(views[i])
        if m is None:
            continue
        j = first.setdefault(m, i)
        if j != i:
            facts = out.get(j)
            if facts is None:
                facts = out[j] = OpFacts()
            out[i] = facts
    return out
