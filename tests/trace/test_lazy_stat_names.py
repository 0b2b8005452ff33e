"""A large stat-metadata map left in the file's bytes (`statids.LazyStatNames`, made by the
scanner from `wire.LAZY_STAT_NAMES` entries) is the dict it stands for: the same ids in the
same order, the same name per id (decoded once, on demand, one by one or many at once), the
same ids per name (`StatIds`, found in the bytes), and the reader's tables from it are the
tables from the dict, on hand-written maps and on real captures read with every map lazy."""

from __future__ import annotations

import random

import numpy as np
import pandas as pd
import pytest

from overlap.trace import wire
from overlap.trace.protos import XSpace
from overlap.trace.reader import part_frames, read_host_file
from overlap.trace.statids import LazyStatNames, StatIds
from tests.conftest import SAMPLE_TRACES
from tests.trace.test_scanner import tables_equal
from tests.trace.wire_bytes import field

pytestmark = pytest.mark.skipif(wire._scan is None, reason="scanner not built")

_NAMES = ["bytes", "memcpy_details", "hlo_op", "", "é", "hlo_oq", "hlo_o", "ab\0cd", "日本",
          "kind_src:device kind_dst:pinned size:%d"]


def _plane(rng: random.Random, keys: list[int]) -> tuple[bytes, dict[int, str]]:
    """A plane's bytes with stat metadata entries for `keys` (as written), and the dict upb
    reads from them (an id written twice: its last name)."""
    want: dict[int, str] = {}
    entries = []
    for k in keys:
        name = rng.choice(_NAMES)
        name = name % k if "%d" in name else name
        want[k] = name
        value = field(1, 0, k) + field(2, 2, name.encode()) + field(3, 2, b"about")
        entries.append(field(5, 2, field(1, 0, k) + field(2, 2, value)))
    return field(1, 2, field(2, 2, b"/device:GPU:0") + b"".join(entries)), want


def _lazy(raw: bytes) -> LazyStatNames:
    got = wire._scan.split_space(wire.padded(raw), len(raw), None, 0)[5][0]
    assert isinstance(got, np.ndarray)  # (every entry plain, dense ids: left in the bytes)
    # (in any order, some written twice: three int32 rows, ids ascending, each id's last
    # entry, placed by the split; round 24: a shuffled million were sorted here as int64)
    assert got.dtype == np.int32 and got.shape[0] == 3
    assert (got[0][1:] > got[0][:-1]).all()
    return LazyStatNames(np.frombuffer(wire.padded(raw), np.uint8), got)


@pytest.mark.parametrize("shape", ["ascending", "shuffled", "repeats", "from zero"])
def test_lazy_map_is_the_dict(shape):
    rng = random.Random(hash(shape) & 0xFFFF)
    for n in (1, 2, 7, 300):
        keys = list(range(1, n + 1)) if shape != "from zero" else list(range(n))
        if shape == "shuffled":
            rng.shuffle(keys)
        elif shape == "repeats":
            keys += rng.sample(keys, min(n, 3))
            rng.shuffle(keys)
        raw, want = _plane(rng, keys)
        m = _lazy(raw)
        assert {k: v.name for k, v in XSpace.FromString(raw).planes[0].stat_metadata.items()} \
            == want
        order = sorted(want)  # upb iterates dense ids ascending
        assert list(m) == order and len(m) == len(want)
        # one by one, before and after many at once: each name decoded once, kept
        half = order[::2]
        assert [m[k] for k in half] == [want[k] for k in half]
        asked = np.array(order + [0, -1, n + 1, n + 5, 1 << 40] + order[:3], np.int64)
        exp = [want.get(k, "") for k in asked.tolist()]
        assert m.names_of(asked).tolist() == exp
        assert m.names_of(asked.astype(np.uint64)).tolist() == exp
        assert m.names_of(asked, default="?").tolist() == [want.get(k, "?")
                                                           for k in asked.tolist()]
        assert dict(m.items()) == want and list(m.items()) == [(k, want[k]) for k in order]
        for k in (0, -1, n + 1, 1 << 70, "1", 1.0, 1.5, float("nan"), float("inf"), None,
                  True, np.int64(1), np.uint8(2), np.float64(2.0), (1,)):
            assert (k in m) == (k in want), k  # (as the dict: equal keys match)
            assert m.get(k, "x") == want.get(k, "x")  # type: ignore[call-overload]
        with pytest.raises(KeyError):
            m[n + 1]


def test_stat_ids_of_lazy_map_are_the_dicts():
    """Ids per name found in the bytes: names of the same length differing late, repeated
    names, the empty name, non-ASCII, a NUL, names not there, no str at all."""
    rng = random.Random(7)
    keys = list(range(1, 400))
    rng.shuffle(keys)
    raw, want = _plane(rng, keys)
    lazy, eager = StatIds(_lazy(raw)), StatIds(dict(sorted(want.items())))
    for name in [*_NAMES, "kind_src:device kind_dst:pinned size:17", "missing", "hlo_op ",
                 "\ud800", None, 5]:
        assert lazy.get(name) == eager.get(name), name
        assert lazy.get(name, "d") == eager.get(name, "d")
    assert lazy.get("hlo_op") and len(lazy.get("hlo_op")) > 1  # (a name of several ids)
    # the whole index, where asked for, is the dict's
    assert dict(lazy.items()) == dict(eager.items())


def test_small_maps_stay_dicts_large_ones_lazy(monkeypatch):
    rng = random.Random(3)
    raw, want = _plane(rng, list(range(1, 51)))
    for threshold, kind in ((51, dict), (50, LazyStatNames), (-1, dict)):
        monkeypatch.setattr(wire, "LAZY_STAT_NAMES", threshold)
        _, planes, _ = wire.parse_space(wire.padded(raw), len(raw))
        got = wire.Plane(planes[0]).stat_names
        assert type(got) is kind and dict(got) == want


_REAL = ["gpu-h100/scan-h100/offload_x", "gpu-h200/scan-h100/offload_x",
         "gpu-h100/transformer-h100-command-buffers/qkv_proj_offloaded_cb",
         "gpu-v100-tf-multiworker", "rocm/mi300x-jax08-attention", "tpu-v6e-offload",
         "cpu-scan/offload_x"]


@pytest.mark.parametrize("name", _REAL)
def test_real_captures_read_alike_with_every_map_lazy(monkeypatch, name):
    """Every stat map of a real capture left in the bytes (threshold 1): the tables upb
    gives (`tables_equal`), which the default read gives too."""
    path = sorted((SAMPLE_TRACES / name).rglob("*.xplane.pb"))[0]
    default = part_frames(read_host_file(path))
    monkeypatch.setattr(wire, "LAZY_STAT_NAMES", 1)
    got = tables_equal(lambda: read_host_file(path))
    assert got is not None
    for k in ("transfers", "compute", "steps", "memory", "modules", "devices", "lines"):
        pd.testing.assert_frame_equal(got[k], default[k], check_exact=True)
    assert got["capture"] == default["capture"]
