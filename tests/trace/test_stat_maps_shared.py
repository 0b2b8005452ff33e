"""Planes whose stat metadata reads as the same map share one map object (`_scan._Seen.
same_map`, issue 32 round 41: a TPU host file's 4,096 chips each held a 12-name dict, 2.4 MiB
of the split's answer). Each plane's map is still upb's map of that plane, in upb's order;
a map is shared only with planes whose map is equal, in the same order."""

from __future__ import annotations

from pathlib import Path

import pytest

from overlap.trace import reader, wire
from overlap.trace.protos import XSpace
from overlap.trace.synthetic import SyntheticTrace

V6E = next((Path(__file__).resolve().parents[2] / "sample_traces" / "tpu-v6e-offload")
           .rglob("*.xplane.pb"))
US = 1_000_000
pytestmark = pytest.mark.skipif(wire.SCANNER is None, reason="the scanner was not built")


def _maps(path: Path) -> list[tuple[str, object, list]]:
    """Per plane: its name, the map the reader's split gave it, and upb's map's items."""
    _, views = reader._parse_file(path)
    xs = XSpace()
    xs.ParseFromString(path.read_bytes())
    upb = {p.name: [(k, v.name) for k, v in p.stat_metadata.items()] for p in xs.planes}
    return [(v.name, v.stat_names, upb[v.name]) for v in views]


def _check(maps) -> None:
    for name, got, want in maps:
        assert list(got.items()) == want, name
    for (_, a, wa), (_, b, wb) in zip(maps, maps[1:]):
        if a is b:
            assert wa == wb


def test_v6e_chips_share_their_stat_names_and_read_as_upb():
    maps = _maps(V6E)
    _check(maps)
    chips = [m for n, m, _ in maps if n.startswith("/device:TPU:")]
    assert len(chips) == 4 and all(m is chips[0] for m in chips)


def test_synthetic_chips_share_one_map_and_another_stat_set_has_its_own(tmp_path):
    """SYNTHETIC: eight chips of one stat set, then one whose events carry another stat."""
    t = SyntheticTrace()
    for c in range(9):
        d = t.tpu(c)
        d.op(10 * US, 5 * US, name="fusion.1")
        if c == 8:
            d.async_copy("D2H", 11 * US, 14 * US, device_span=(11 * US, 14 * US))
    maps = _maps(t.write(tmp_path / "chips.xplane.pb"))
    _check(maps)
    chips = {n: m for n, m, _ in maps if n.startswith("/device:TPU:")}
    first = chips["/device:TPU:0"]
    assert all(chips[f"/device:TPU:{c}"] is first for c in range(8))
    assert chips["/device:TPU:8"] is not first
    assert dict(chips["/device:TPU:8"]) != dict(first)
