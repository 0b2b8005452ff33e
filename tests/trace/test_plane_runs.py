"""Many GPU planes read a run at a time (issue 32, round 18) read as one plane at a time.

* `gpu._read_gpu_planes` over at least `MANY_PLANES` planes walks every plane's lines at
  once (`_every_line`): the report equals the one read plane by plane (the module's
  `MANY_PLANES` raised past the file's planes), on SYNTHETIC files whose planes mix small
  and large lines (merged, and read alone at `_SMALL_LINE` events), empty lines, kernels,
  copies, memsets and unread events, and devices with and without stats.
* `reader._gpu_run` (a run of consecutive GPU planes' rows) gives the rows the per-plane
  `add`s give, and `lines.events_of` each table's events.
* More planes than the skeleton decoder's budget are read by upb without asking it.
"""

from __future__ import annotations

import contextlib
import io
import types

import numpy as np
import pytest

from overlap.cli.main import main
from overlap.trace import gpu, lines, reader, skeleton, wire
from overlap.trace.protos import XSpace
from overlap.trace.synthetic import SyntheticTrace
from overlap.trace.wire import Plane

US = 1_000_000


def _file(tmp_path, n: int, seed: int):
    """SYNTHETIC: `n` GPU planes; plane d holds d % 5 + 1 streams of mixed events, every
    seventh plane a line of `gpu._SMALL_LINE` kernels (read alone), every third plane no
    stats of its own and the next no vendor stat, and one in eleven an event no rule
    reads."""
    rng = np.random.default_rng(seed)
    t = SyntheticTrace()
    for d in range(n):
        g = t.gpu(d, vendor=None if d % 3 == 1 else "Nvidia")
        for s in range(d % 5 + 1):
            for k in range(int(rng.integers(1, 4))):
                at = (10 + 7 * k + s) * US
                g.kernel(at, US, stream=7 + s)
                if (d + k) % 2:
                    g.memcpy("D2H" if k % 2 else "H2D", at, US, 4096 + d, stream=20 + s)
                if (d + k) % 4 == 0:
                    g.memset(at, US, stream=7 + s)
        if d % 7 == 0:
            for k in range(gpu._SMALL_LINE):
                g.kernel((100 + k) * US, US // 2, stream=40)
        if d % 11 == 0:
            g.event("odd_thing", 50 * US, US, stream=9, kind="Compute")
    path = t.write(tmp_path / f"planes{n}_{seed}.xplane.pb")
    xs = XSpace.FromString(path.read_bytes())
    for pl in xs.planes:
        if (m := reader.GPU_PLANE_RE.match(pl.name)) and int(m.group(1)) % 3 == 0:
            del pl.stats[:]
    path.write_bytes(xs.SerializeToString())
    return path


def _report(path) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["report", "--json", str(path)]) in (0, None)
    return out.getvalue()


@pytest.mark.parametrize("n,seed", [(64, 1), (90, 2)])
def test_many_planes_read_at_once_read_as_one_at_a_time(tmp_path, monkeypatch, n, seed):
    path = _file(tmp_path, n, seed)
    calls = []
    every = gpu._every_line
    monkeypatch.setattr(gpu, "_every_line", lambda planes: calls.append(1) or every(planes))
    at_once = _report(path)
    assert calls  # (the path under test was taken)
    monkeypatch.setattr(gpu, "MANY_PLANES", 10 ** 9)
    calls.clear()
    assert _report(path) == at_once and not calls


def _views(path):
    raw = path.read_bytes()
    _, planes, _ = wire.parse_space(wire.padded(raw), len(raw))
    return [pv for pv in planes if reader.GPU_PLANE_RE.match(pv.name)]


def test_a_run_of_gpu_planes_gives_the_rows_one_plane_at_a_time_gives(tmp_path):
    views = _views(_file(tmp_path, 70, 3))
    matches = [reader.GPU_PLANE_RE.match(pv.name) for pv in views]
    got = (reader._LineRows(), reader._DeviceRows(), reader._RawVendors(), [], [])
    reader._gpu_run(views, [f"GPU:{m.group(1)}" for m in matches], *got)
    want = (reader._LineRows(), reader._DeviceRows(), reader._RawVendors())
    for pv, m in zip(views, matches):
        P, device = Plane(pv), f"GPU:{m.group(1)}"
        want[0].add(pv.name, pv.lines.block.cols, pv.lines.a, pv.lines.b)
        want[1].add(device, pv, P)
        want[2].add(device, P.plane_stats().get("device_vendor"), pv.lines.events(), False)
    got_lines, want_lines = got[0].table("h").columns(), want[0].table("h").columns()
    assert got_lines.keys() == want_lines.keys()
    for k, v in want_lines.items():
        assert got_lines[k].tolist() == v.tolist()
    assert got[1].columns("h") == want[1].columns("h")
    assert got[1].facts.count(None) == want[1].facts.count(None) > 0  # (planes without stats)
    # (round 25: equal facts one tuple; the run's planes keep no stats dict, read once)
    facts = [f for f in got[1].facts if f is not None]
    assert len({id(f) for f in facts}) == len(set(facts)) < len(facts)
    assert all(P._plane_stats is None for P in got[3])
    assert [P.plane_stats() for P in got[3]] == [Plane(pv).plane_stats() for pv in views]
    assert None in got[2].vendor and "Nvidia" in got[2].vendor
    for k in ("device", "vendor", "events", "tpu"):
        assert getattr(got[2], k) == getattr(want[2], k)
    assert got[4] == [f"GPU:{m.group(1)}" for m in matches]
    assert [P.plane for P in got[3]] == views


def test_events_of_many_tables_equal_each_tables_events(tmp_path):
    views = _views(_file(tmp_path, 70, 4))
    tables = [pv.lines for pv in views]
    assert lines.events_of(tables) == [t.events() for t in tables]
    assert lines.events_of(tables[:5]) == [t.events() for t in tables[:5]]
    # tables of two blocks: each on its own
    other = _views(_file(tmp_path, 3, 5))
    mixed = tables + [pv.lines for pv in other]
    assert lines.events_of(mixed) == [t.events() for t in mixed]


def test_vendors_of_gpu_and_tpu_planes_read_as_per_device(tmp_path):
    """`_gpu_vendor_facts` from the vendor columns: each device named by the rule per
    device, a TPU never "cannot tell" for its vendor, an odd GPU vendor is (SYNTHETIC)."""
    from overlap.trace import vendors

    t = SyntheticTrace()
    t.gpu(0, vendor="Intel").kernel(10 * US, US)
    t.gpu(1, vendor="Nvidia").kernel(10 * US, US)
    t.tpu(0).op(10 * US, US, name="fusion.1")
    got = reader.read_host_file(t.write(tmp_path / "mixed.xplane.pb"))["capture"]
    assert got["vendors"] == {"GPU:0": vendors.plane_vendor("Intel"),
                              "GPU:1": vendors.plane_vendor("Nvidia"),
                              "TPU:0": vendors.plane_vendor(None, tpu=True)}
    odd = [u["device"] for u in got["transfer_unknowns"] if "device_vendor" in u["reason"]]
    assert odd == ["GPU:0"]


@pytest.mark.parametrize("n,asked", [(40, True), (skeleton.MAX_FIELDS + 1, False)])
def test_more_planes_than_the_skeleton_decoders_budget_go_to_upb(monkeypatch, n, asked):
    """`_parse_scanned` asks the pure-Python skeleton decoder (before protobuf is loaded) only
    for at most `skeleton.MAX_FIELDS` planes, each of which spends a field of its budget (a
    name): more would walk the budget to give up. The space read either way is upb's."""
    raw = XSpace(planes=[{"id": d, "name": f"/device:GPU:{d}"} for d in range(n)]
                 ).SerializeToString()
    calls = []
    decode = wire.decode_space
    monkeypatch.setattr(wire, "decode_space", lambda *a: calls.append(1) or decode(*a))
    monkeypatch.setattr(wire, "sys", types.SimpleNamespace(modules={}))  # (as at start-up)
    xs, views, _ = wire.parse_space(wire.padded(raw), len(raw))
    assert bool(calls) == asked
    assert [pv.name for pv in views] == [f"/device:GPU:{d}" for d in range(n)]
    assert [p.id for p in xs.planes] == list(range(n))
