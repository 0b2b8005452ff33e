"""Objects the reader shares between planes or values instead of a copy each (issue 32 round
16), and that sharing them changes no answer: one empty map for every plane without stat
metadata or stats of its own (never written to by a read), one object per stat name the
planes of a file have alike, one object per distinct text `per_mid` gives, and values that
are equal but of other types (1, 1.0, True) kept as they are."""

from __future__ import annotations

import numpy as np

from overlap.trace import wire
from overlap.trace.reader import read_host_file
from overlap.trace.synthetic import SyntheticTrace
from overlap.trace.values import per_mid

US = 1_000_000


def test_per_mid_shares_equal_texts_and_keeps_types():
    names = {1: "kernel_x", 2: "kernel_x", 3: 1, 4: True, 5: 1.0, 6: None, 7: "copy"}
    # each call a new str, as upb gives a name
    got = per_mid(np.array([7, 1, 2, 3, 4, 5, 6, 2], np.int64),
                  lambda k: "".join(names[k]) if isinstance(names[k], str) else names[k])
    assert got.tolist() == ["copy", "kernel_x", "kernel_x", 1, True, 1.0, None, "kernel_x"]
    assert [type(v) for v in got.tolist()[3:6]] == [int, bool, float]
    assert got[1] is got[2] is got[7]


def test_planes_share_empty_maps_and_equal_names(tmp_path):
    t = SyntheticTrace()
    for d in range(3):
        g = t.gpu(d)
        g.kernel(10 * US, US)
        g.memcpy("D2H", 12 * US, US, 4096)
    path = t.write(tmp_path / "shared.xplane.pb")
    raw = path.read_bytes()
    _, planes, _ = wire.parse_space(wire.padded(raw), len(raw))
    gpus = [wire.Plane(pv) for pv in planes if pv.name.startswith("/device:GPU")]
    named = [P.stat_names for P in gpus]
    # the same names, one object each across the planes
    first = {v: v for v in named[0].values()}
    for m in named[1:]:
        for v in m.values():
            if v in first:
                assert v is first[v]
    # a plane of no stats: the one shared empty map, still empty after a whole read
    bare = [wire.Plane(pv) for pv in planes if not len(pv.stats)]
    assert bare and all(P.plane_stats() is wire._EMPTY for P in bare)
    read_host_file(path)
    assert wire._EMPTY == {}


def test_planes_without_stat_metadata_share_one_empty_map():
    from overlap.trace.protos import XSpace

    sp = XSpace()
    for d in range(3):
        sp.planes.add(id=d, name=f"/device:GPU:{d}")
    raw = sp.SerializeToString()
    _, planes, _ = wire.parse_space(wire.padded(raw), len(raw))
    assert all(wire.Plane(pv).stat_names is wire._EMPTY for pv in planes)


def test_a_line_named_as_the_one_before_shares_its_name():
    """Consecutive lines of one name: one object; a name of other bytes, an invalid one
    (replaced and counted, as upb reads it) and display names read as before."""
    from tests.trace.wire_bytes import field

    def line(name: bytes, display: bytes | None = None) -> bytes:
        body = field(1, 0, 1) + field(2, 2, name) + (field(11, 2, display) if display else b"")
        return field(3, 2, body)

    lines = [line(b"Stream #1"), line(b"Stream #1", b"d"), line(b"Stream #1", b"d"),
             line(b"Stream #1\xff"), line(b"Stream #1\xff"), line(b"Stream #2"),
             line(b"Stream #1")]
    raw = b"".join(field(1, 2, field(2, 2, b"/device:GPU:%d" % d) + b"".join(lines))
                   for d in range(2))
    before = wire.BAD_STRINGS[0]
    _, planes, _ = wire.parse_space(wire.padded(raw), len(raw))
    block = planes[0].lines.block
    want = ["Stream #1"] * 3 + ["Stream #1\ufffd"] * 2 + ["Stream #2", "Stream #1"]
    assert block.names == want * 2
    assert block.displays == (["", "d", "d", "", "", "", ""]) * 2
    n = block.names
    assert n[0] is n[1] is n[2] and n[5] is not n[6] and n[7] is n[6]
    assert block.displays[1] is block.displays[2]
    assert wire.BAD_STRINGS[0] - before == 4  # (each invalid name counted, as upb counts)


def test_views_keep_no_wrapper_and_read_their_planes(tmp_path):
    """A view of a scanned plane keeps no upb wrapper of its message (`PlaneView.msg` is asked
    of the skeleton when read: 100k small planes kept 10 MiB of them); what it reads through
    it is its own plane's, as upb's parse of the whole file has it."""
    from overlap.trace.protos import XSpace

    t = SyntheticTrace()
    for d in range(4):
        g = t.gpu(d)
        g.kernel(10 * US, US)
    path = t.write(tmp_path / "views.xplane.pb")
    raw = path.read_bytes()
    _, views, _ = wire.parse_space(wire.padded(raw), len(raw))
    whole = XSpace.FromString(raw)
    assert views and all(pv._msg is None for pv in views)
    for pv, pl in zip(views, whole.planes):
        assert pv.msg.name == pv.name == pl.name and pv.id == pl.id
        assert list(pv.stats) == list(pl.stats)
        assert dict(pv.event_metadata) == dict(pl.event_metadata)


def test_a_plane_without_stats_is_not_asked_for_them():
    """The split says which planes write a plane stat (field 6 of the length-delimited wire
    type): the others' `stats` is empty without asking upb; a stat of the wrong wire type
    (upb keeps it as an unknown field) or an empty one (upb reads a default XStat) read as
    upb reads them."""
    from overlap.trace.protos import XPlane, XSpace
    from tests.trace.wire_bytes import field

    stat = field(1, 0, 3) + field(3, 0, 7)
    planes = {"none": b"", "one": field(6, 2, stat), "empty": field(6, 2, b""),
              "wrong type": field(6, 0, 5), "two": field(6, 2, stat) + field(6, 2, stat)}
    raw = b"".join(field(1, 2, XPlane(id=i, name=f"/device:GPU:{i}").SerializeToString() + extra)
                   for i, extra in enumerate(planes.values()))
    _, views, _ = wire.parse_space(wire.padded(raw), len(raw))
    whole = XSpace.FromString(raw)
    assert [pv._stats for pv in views] == [False, True, True, False, True]
    for pv, pl in zip(views, whole.planes):
        assert len(pv.stats) == len(pl.stats) and list(pv.stats) == list(pl.stats)
        assert wire.Plane(pv).plane_stats() == wire.Plane(pl).plane_stats()


def test_vendors_named_once_per_value_as_per_device(tmp_path):
    """Each device's vendor and the "cannot tell" entries of odd ones, with vendors named
    once per distinct value (`_gpu_vendor_facts`) and tested once per distinct name
    (`shape_unknowns`): as the rule per device gives them, in device order."""
    from overlap.trace import vendors

    raws = ["Intel", "NVIDIA", "", "Intel", " acme ", "amd", "", "Intel", "Acme"]
    t = SyntheticTrace()
    for d, v in enumerate(raws):
        g = t.gpu(d, vendor=v)
        if d != 7:  # (a device without events: named, never "cannot tell")
            g.kernel(10 * US, US)
    got = read_host_file(t.write(tmp_path / "vendors.xplane.pb"))["capture"]
    want = {f"GPU:{d}": vendors.plane_vendor(v if v else None) for d, v in enumerate(raws)}
    assert got["vendors"] == dict(sorted(want.items()))
    odd = [u["device"] for u in got["transfer_unknowns"] if "device_vendor" in u["reason"]]
    assert odd == sorted(d for d, v in want.items()
                         if d != "GPU:7" and not vendors.is_known_vendor(v))
    assert odd  # (Intel and acme)


def test_adjacent_runs_with_numpy_as_one_by_one():
    """`lines.adjacent_runs` of many ranges (numpy) as the step per range gives them: a run
    continues only with the same key object and the next range starting where it ended."""
    import random

    from overlap.trace.lines import adjacent_runs

    rng = random.Random(2)
    blocks = [object(), object(), object()]
    for n in (0, 1, 63, 64, 65, 500):
        keys, a, b, at = [], [], [], 0
        for _ in range(n):
            k = rng.choice(blocks) if rng.random() < 0.1 else (keys[-1] if keys else blocks[0])
            at = at if rng.random() < 0.8 else at + rng.randint(-3, 3)
            keys.append(k)
            a.append(at)
            at += rng.randint(0, 3)
            b.append(at)
        want: list[list] = []
        for key, x, y in zip(keys, a, b):
            if want and want[-1][0] is key and want[-1][2] == x:
                want[-1][2] = y
            else:
                want.append([key, x, y])
        got = adjacent_runs(keys, a, b)
        assert [[id(k), x, y] for k, x, y in got] == [[id(k), x, y] for k, x, y in want]
        assert all(type(x) is int and type(y) is int for _, x, y in got)
