"""A host plane of many event-metadata entries kept out of upb's skeleton (`reader._strip_meta`'s
4, `_scan.SKELETON_STRIP_MIN`, issue 32 round 44): GPU captures' host planes hold 2,800-5,000
entries (CUPTI calls, Python frames), which took the skeleton past the pure-Python decoder, so
protobuf was imported to parse it (~20 ms and ~3-5 MiB of a report) where the host rules read
the entries through the plane's `MetaTable`. Stripped at the decoder's own budget, one fewer
not; every answer is upb's, also where a rule asks the plane's whole map (metadata-level
`hlo_op` stats: XLA:CPU ops on the host), which is then parsed from the same bytes."""

from __future__ import annotations

import json

import pytest

from overlap.trace import reader, skeleton, wire
from tests.trace.test_differential import _cli
from tests.trace.test_large_gpu_meta import three_steps

pytestmark = pytest.mark.skipif(wire._scan is None, reason="the compiled scanner is not built")


def test_the_threshold_is_the_skeleton_decoders_budget():
    assert wire._scan.SKELETON_STRIP_MIN == skeleton.MAX_ENTRIES
    assert reader._strip_meta(reader.HOST_PLANE) == 4 and reader._strip_many(reader.HOST_PLANE) == 4


def _capture(path, frames: int, cpu_ops: bool) -> None:
    """A SYNTHETIC GPU capture (steps, kernels, copies, allocations, host copy callbacks)
    whose host plane holds `frames` more entries (Python frames of distinct names); with
    `cpu_ops`, host events whose metadata carries `hlo_op` (a rule that asks the map)."""
    t, _ = three_steps()
    for s in range(3):
        t.allocation(10_500_000 + s * 20_000_000, bytes_allocated=1 << 20)
    for i in range(frames):
        t.python_noise(12_000_000 + i * 1_000, 500, fn=f"train.py:{i} f{i}")
    if cpu_ops:
        h = t._host
        line = h.line(77, "XLA:CPU ops")
        for i in range(3):
            mid = h.event_id(f"fusion.{i}", "", {"hlo_op": f"fusion.{i}", "hlo_module": "jit_f"})
            h.event(line, mid, 30_000_000 + i * 100_000, 50_000)
    t.write(path)


def _host_entries(path) -> int:
    from overlap.trace.protos import XSpace

    xs = XSpace.FromString(path.read_bytes())
    return len(next(p for p in xs.planes if p.name == reader.HOST_PLANE).event_metadata)


def _stripped(path) -> int:
    _, planes = reader._parse_file(path)
    return next(p for p in planes if p.name == reader.HOST_PLANE).meta_stripped


@pytest.mark.parametrize("cpu_ops", [False, True])
@pytest.mark.parametrize("short", [0, 1])
def test_a_host_plane_at_the_budget_is_stripped_one_answer(tmp_path, short, cpu_ops):
    n = wire._scan.SKELETON_STRIP_MIN
    p = tmp_path / "host.xplane.pb"
    _capture(p, 0, cpu_ops)
    base = _host_entries(p)
    _capture(p, n - short - base, cpu_ops)
    assert _host_entries(p) == n - short
    assert _stripped(p) == (0 if short else 1)
    for cmd in (["report", "--json"], ["inspect", "--json"], ["check"]):
        rc, scanned = _cli([*cmd, str(p)], wire._scan)
        rc_upb, upb = _cli([*cmd, str(p)], None)
        assert (rc, scanned) == (rc_upb, upb), cmd
    got = json.loads(_cli(["report", "--json", str(p)], wire._scan)[1])
    assert got["summary"]["transfers"] == 6 and len(got["steps"]) == 3


def test_damaged_stripped_host_planes_read_as_upb_reads_them(tmp_path):
    """Mutations of a capture whose host plane is stripped (its entries decoded and checked by
    the scanner, not upb's skeleton): the report, or its refusal, is upb's (the differential
    campaign's mutator; most of the nodes it picks here are the host plane's events and
    metadata entries)."""
    import random

    from tests.trace.test_differential import mutate, parse

    p = tmp_path / "host.xplane.pb"
    _capture(p, 0, True)
    _capture(p, wire._scan.SKELETON_STRIP_MIN - _host_entries(p), True)
    assert _stripped(p) == 1
    root = parse(p.read_bytes())
    rng = random.Random(44)
    seen = {"read": 0, "refused": 0}
    for case in range(40):
        data, what = mutate(root, rng)
        f = tmp_path / f"m{case}.xplane.pb"
        f.write_bytes(data)
        rc, js = _cli(["report", "--json", str(f)], wire._scan)
        assert (rc, js) == _cli(["report", "--json", str(f)], None), (case, what)
        seen["refused" if rc == 3 else "read"] += 1
    assert all(seen.values()), seen
