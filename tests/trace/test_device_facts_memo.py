"""`_DeviceRows.add_many` (the devices table's facts of many GPU planes, equal stats read
once) gives each plane `_device_facts` of its own stats: equal values of other types (1, 1.0,
True, "1"), floats that are equal but print apart (-0.0, 0.0), NaN, bytes, planes without
stats; and equal facts are one tuple."""

from __future__ import annotations

import math
import random

from overlap.trace.reader import _FACT_STATS, _device_facts, _DeviceRows

_VALUES = [None, 1, 1.0, True, "1", -0.0, 0.0, math.nan, b"NVIDIA", "NVIDIA", 80, 80.0,
           "H100", b"\xff", 9, (1 << 63) - 1]


def test_add_many_is_device_facts_of_each_plane():
    rng = random.Random(28)
    stats = []
    for _ in range(400):
        if rng.random() < 0.1:
            stats.append({})
            continue
        if stats and stats[-1] and rng.random() < 0.4:
            stats.append(dict(stats[-1]))  # an equal plane
            continue
        ps = {k: rng.choice(_VALUES) for k in _FACT_STATS if rng.random() < 0.7}
        if rng.random() < 0.2:
            ps["other"] = 3  # a stat the facts do not read
        stats.append(ps)
    rows = _DeviceRows()
    rows.add_many([f"GPU:{i}" for i in range(len(stats))], ["p"] * len(stats), stats)
    want = [_device_facts(ps) for ps in stats]
    # (repr: NaN is not equal to itself, and -0.0 prints apart from 0.0)
    assert [repr(f) for f in rows.facts] == [repr(f) for f in want]
    assert [None if f is None else tuple(map(type, f)) for f in rows.facts] == \
        [None if f is None else tuple(map(type, f)) for f in want]
    equal = [f for f in rows.facts if f is not None and f == rows.facts[-1]]
    assert len({id(f) for f in rows.facts if f is not None and f == f}) == len(
        {f for f in rows.facts if f is not None and f == f})  # equal facts: one tuple
    assert equal


def test_float_zero_signs_and_number_types_are_told_apart():
    stats = [{"memory_size": 1, "device_vendor": 1}, {"memory_size": 1.0, "device_vendor": 1.0},
             {"memory_size": True, "device_vendor": True},
             {"device_vendor": -0.0}, {"device_vendor": 0.0}, {"device_vendor": -0.0}]
    rows = _DeviceRows()
    rows.add_many(["d"] * len(stats), ["p"] * len(stats), stats)
    assert [f[0] for f in rows.facts] == ["1", "1.0", "True", "-0.0", "0.0", "-0.0"]
