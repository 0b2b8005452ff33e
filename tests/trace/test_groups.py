"""Many small GPU planes' metadata decoded at once (`groups.MetaRows`) against each plane's
upb map: the same `groupable` answer, names, kinds and kernel_details test per plane, and
the same tables read either way and through upb alone, on hand-written planes of every
shape the map allows (keys out of the group stride, negative keys, a key written twice,
entries newest first, no entries, kernel_details under a different stat id per plane,
non-ASCII and invalid UTF-8 names)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from overlap.trace import gpu, groups, wire
from overlap.trace.names import MEMCPY_DIRECTIONS
from overlap.trace.protos import XPlane, XSpace
from overlap.trace.synthetic import SYNTHETIC_WARNING
from tests.trace.test_scanner import tables_equal
from tests.trace.wire_bytes import field

pytestmark = pytest.mark.skipif(wire._scan is None, reason="the scanner was not built")

STRIDE = wire.GROUP_STRIDE
NAMES = ["kernel_x", "MemcpyD2H", "MemcpyH2D", "CudaGraphExec:7", "fusion.3", "ΔΣ-kernel",
         "", "Memcpy"]


def _entry(key: int, name: str | bytes, stats: list[tuple[int, int]] = ()) -> bytes:
    """An event_metadata map entry (XPlane field 4) as bytes: key, and a value holding the id,
    the name and ref stats (metadata id, ref)."""
    md = field(1, 0, key) + field(2, 2, name.encode() if isinstance(name, str) else name)
    for sid, ref in stats:
        md += field(5, 2, field(1, 0, sid) + field(7, 0, ref))
    return field(4, 2, field(1, 0, key) + field(2, 2, md))


def _plane(rng: random.Random, d: int) -> bytes:
    """A GPU plane of a few entries (one of many shapes), a line with an event per entry and
    one on an id without an entry."""
    pl = XPlane(id=d, name=f"/device:GPU:{d}")
    kd = rng.choice([0, 0, 3, 9, 1 << 20])  # kernel_details' stat id (0: none)
    if kd:
        pl.stat_metadata[kd].id, pl.stat_metadata[kd].name = kd, "kernel_details"
        pl.stat_metadata[kd + 1].id, pl.stat_metadata[kd + 1].name = kd + 1, "grid:1"
    shape = rng.choice(["plain", "plain", "descending", "twice", "empty", "big key",
                        "negative key", "stat out of stride"])
    if shape == "stat out of stride":
        pl.stat_metadata[1 << 33].id, pl.stat_metadata[1 << 33].name = 1 << 33, "x"
    keys = sorted(rng.sample(range(1, 50), rng.randint(1, 4)))
    if shape == "descending":
        keys = keys[::-1]
    elif shape == "big key":
        keys.append(1 << 40)
    elif shape == "negative key":
        keys.append(-3)
    elif shape == "empty":
        keys = []
    ln = pl.lines.add(id=1, name="Stream #1", timestamp_ns=1000)
    for j, k in enumerate(keys + [77]):
        ln.events.add(metadata_id=k, offset_ps=10 + 100 * j, duration_ps=50)
    raw = pl.SerializeToString()
    for k in keys:
        stats = [(kd, kd + 1)] if kd and rng.random() < 0.6 else []
        raw += _entry(k, rng.choice(NAMES), stats)
    if shape == "twice" and keys:  # the last entry of a key counts, as in upb's map
        raw += _entry(keys[0], rng.choice(NAMES), [(kd, kd + 1)] if kd else [])
    return raw


def _space(seed: int, n: int, bad_utf8: bool = False, odd: bool = False) -> bytes:
    rng = random.Random(seed)
    out = [field(1, 2, _plane(rng, d)) for d in range(n)]
    if odd:  # an entry with a field besides its key and value: upb keeps it as unknown,
        # `decode_meta` refuses the entries (each plane then through its map)
        raw = XPlane(id=n // 3, name=f"/device:GPU:{n // 3}").SerializeToString()
        body = field(1, 0, 2) + field(2, 2, field(1, 0, 2) + field(2, 2, b"MemcpyD2H"))
        out[n // 3] = field(1, 2, raw + field(4, 2, body + field(3, 0, 1)))
    if bad_utf8:
        out[n // 2] = field(1, 2, XPlane(id=n // 2, name=f"/device:GPU:{n // 2}")
                            .SerializeToString() + _entry(5, b"bad \xff name"))
    out.append(field(1, 2, XPlane(id=n, name="/host:CPU").SerializeToString()))
    return b"".join(out) + XSpace(warnings=[SYNTHETIC_WARNING]).SerializeToString()


def _planes(raw: bytes) -> list[wire.Plane]:
    _, pvs, _ = wire.parse_space(wire.padded(raw), len(raw))
    return [wire.Plane(pv) for pv in pvs if pv.name.startswith("/device:GPU")]


@pytest.mark.parametrize("seed", range(6))
def test_rows_answer_as_each_planes_map(seed):
    planes = _planes(_space(seed, 90))
    small, rows = groups.groupable_all(planes)
    assert rows is not None
    assert small == [groups.groupable(P) for P in planes]
    assert not all(small) and any(small)  # (the shapes above make both answers)
    used = np.flatnonzero(small)
    G = groups.PlaneGroup([planes[i] for i in used.tolist()], (rows, used))
    old = groups.PlaneGroup([planes[i] for i in used.tolist()])
    t = G.table()
    assert t is not None
    # every key of every plane's map that `_gpu_meta_kinds` takes (named like a copy or a
    # graph, or holding kernel_details), with its name, and the kernel_details test
    every = sorted((j * STRIDE + k, md.name, "kernel_details" in P.meta_stats(k))
                   for j, P in enumerate(G.planes) for k, md in P.meta.items())
    prefixes = (*MEMCPY_DIRECTIONS, "CudaGraphExec")
    want = [r for r in every if r[2] or r[1].startswith(prefixes)]
    assert 0 < len(want) < len(every)  # (the shapes above hold entries of both kinds)
    got = gpu._group_meta_rows(G)
    assert got is not None and list(got) == want
    # names of any key (absent ids, other planes' keys, negative keys: "")
    probe = np.array(sorted({k for k, _, _ in want} | {5, STRIDE + 77, -1, 3 * STRIDE + 2}))
    assert G.names(probe) == [old.name(int(k)) for k in probe]
    a, b = gpu._gpu_meta_kinds(G), gpu._gpu_meta_kinds(old)
    assert a[0] == b[0] and sorted(a[1]) == sorted(b[1])


def test_rows_refused_where_not_one_parse_or_few_planes():
    planes = _planes(_space(1, 90))
    assert groups.groupable_all(planes[:10])[1] is None  # few planes: each its map
    other = _planes(_space(2, 90))
    assert groups.MetaRows.of(planes[:40] + other[:40]) is None  # two parses


def test_rows_refused_where_an_entry_is_not_plain():
    assert groups.MetaRows.of(_planes(_space(1, 90, odd=True))) is None


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("bad_utf8, odd", [(False, False), (True, False), (False, True)])
def test_tables_equal_with_rows_without_and_through_upb(seed, bad_utf8, odd, tmp_path,
                                                        monkeypatch):
    p = tmp_path / "many.xplane.pb"
    p.write_bytes(_space(seed, 80, bad_utf8, odd))
    from overlap.trace.reader import part_frames, read_host_file

    monkeypatch.setattr(groups, "MANY_PLANES", 1 << 30)
    old = part_frames(read_host_file(p))
    monkeypatch.setattr(groups, "MANY_PLANES", 2)
    got = tables_equal(lambda: read_host_file(p))  # (and the same through upb)
    assert got is not None and len(got["compute"]) and len(got["transfers"])
    import pandas as pd

    for k in ("transfers", "compute", "devices", "lines"):
        pd.testing.assert_frame_equal(got[k], old[k], check_exact=True)
    assert got["capture"] == old["capture"]


def test_many_planes_kept_out_of_upb_and_read_alike(tmp_path, monkeypatch):
    """A file of many planes: its GPU planes' entries are stripped from upb's skeleton
    (`reader._strip_many`), checked by the split, and decoded at once; a plane read on its own
    (keys out of the stride) gets its map parsed when asked. The same tables as a file read
    with every map in the skeleton (few planes' path) and through upb."""
    from overlap.trace import reader
    from overlap.trace.reader import part_frames, read_host_file

    p = tmp_path / "many.xplane.pb"
    p.write_bytes(_space(3, 100))
    seen = []
    real = reader._parse_chunks

    def spy(chunks, strip_meta):
        got = real(chunks, strip_meta)
        if wire.SCANNER is not None:  # (a plane without entries has nothing to strip)
            seen.extend(pv.meta_stripped for pv in got[1]
                        if pv.name.startswith("/device:GPU") and len(pv.meta_pos[0]))
        return got

    monkeypatch.setattr(reader, "_parse_chunks", spy)
    got = tables_equal(lambda: read_host_file(p))
    assert seen and all(seen)
    monkeypatch.setattr(groups, "MANY_PLANES", 1 << 30)
    seen.clear()
    old = part_frames(read_host_file(p))
    assert seen and not any(seen)
    import pandas as pd

    for k in ("transfers", "compute", "devices", "lines"):
        pd.testing.assert_frame_equal(got[k], old[k], check_exact=True)
    assert got["capture"] == old["capture"]


def test_a_damaged_entry_is_refused_as_before(tmp_path, monkeypatch):
    """A damaged event-metadata entry in one of many GPU planes: refused with the message the
    file had when upb parsed every map in the skeleton."""
    from overlap.errors import InputError
    from overlap.trace.reader import read_host_file

    raw = _space(4, 90)
    plane = XPlane(id=7, name="/device:GPU:7").SerializeToString()
    bad = field(4, 2, field(1, 0, 3) + b"\x12\x05\x08\x03")  # a value cut short
    raw = field(1, 2, plane + bad) + raw
    p = tmp_path / "damaged.xplane.pb"
    p.write_bytes(raw)
    with pytest.raises(InputError) as many:
        read_host_file(p)
    monkeypatch.setattr(groups, "MANY_PLANES", 1 << 30)
    with pytest.raises(InputError) as few:
        read_host_file(p)
    assert str(many.value) == str(few.value)


def _stat_plane(rng: random.Random, d: int, lazy: bool) -> bytes:
    """A GPU plane whose stat metadata names some of the rules' stats (a name under two ids
    too, ids in any order), or none; `lazy`: a map of `LAZY_STAT_NAMES` entries (read from
    the file's bytes, not a dict)."""
    pl = XPlane(id=d, name=f"/device:GPU:{d}")
    pool = ["kernel_details", "memcpy_details", "hlo_op", "hlo_module", "program_id",
            "correlation_id", "other", "grid:1"]
    n = wire.LAZY_STAT_NAMES if lazy else rng.choice([0, 1, 3, 8])
    ids = rng.sample(range(1, 2 * n + 2), n) if not lazy else list(range(1, n + 1))
    for k in ids:
        pl.stat_metadata[k].id, pl.stat_metadata[k].name = k, rng.choice(pool)
    pl.lines.add(id=1, name="Stream #1", timestamp_ns=1000).events.add(
        metadata_id=1, offset_ps=10, duration_ps=5)
    return pl.SerializeToString()


@pytest.mark.parametrize("seed,lazy", [(0, False), (1, False), (2, True)])
def test_stat_ids_found_in_one_pass_as_plane_by_plane(seed, lazy):
    """`GroupStatIds(asked=)`: the asked names' keys found in one pass over the maps equal
    each plane's `stat_ids`, plane by plane, in order (a name under two ids, planes without
    a map; a map that is no dict: each name plane by plane), and names not asked too."""
    rng = random.Random(seed)
    out = [field(1, 2, _stat_plane(rng, d, lazy and d == 7)) for d in range(70)]
    planes = _planes(b"".join(out))
    asked = ("kernel_details", "hlo_op", "correlation_id", "absent")
    got = groups.PlaneGroup(planes, None, asked).stat_ids
    for name in (*asked, "other", "grid:1"):
        want = [i * STRIDE + k for i, P in enumerate(planes)
                for k in (P.stat_ids.get(name) or ())]
        assert got.get(name, []) == want
    assert got.get("absent") is None and got.get("absent", ()) == ()
