"""Two per-group products of the analysis made a column at a time or when asked (issue 32,
round 28), against the per-group forms they replaced, kept here as the reference:
`group_records.records_of` (a record per device or op: keys, `bucket`'s fields, class counts,
`exposure_causes`) and `intervals.GroupCoverages` (per device with copies, its compute and
exposed coverages, made when first asked)."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from overlap.analysis import causes as exposure
from overlap.analysis.group_records import EXPOSED, HIDDEN, PARTIAL, bucket, records_of
from overlap.analysis.intervals import Coverage, GroupCoverages


def _records_reference(df, keys):
    """`records_of` as it was: a dict and a `bucket` call per group."""
    c = {k: df[k].tolist() for k in (*keys, "count", "bytes", "span_ps", "hidden_ps",
                                      HIDDEN, PARTIAL, EXPOSED)}
    n = len(c["count"])
    unknown = df["unknown_bytes"].tolist() if "unknown_bytes" in df else [0] * n
    duration = df["duration_ps"].tolist() if "duration_ps" in df else c["span_ps"]
    causes = {k: df[k].tolist() if k in df else [0] * n for k in exposure.CAUSE_COLUMNS}
    rows = []
    for i in range(n):
        row = {k: c[k][i] for k in keys}
        row.update(bucket(c["count"][i], c["bytes"][i], c["span_ps"][i], c["hidden_ps"][i],
                          unknown[i], duration[i]))
        row.update({label: int(c[label][i]) for label in (HIDDEN, PARTIAL, EXPOSED)})
        row["exposure_causes"] = exposure.cause_dict({k: v[i] for k, v in causes.items()})
        rows.append(row)
    return rows


def _groups(rng: random.Random, n: int, with_optional: bool) -> dict:
    ints = lambda lo, hi: np.array([rng.randint(lo, hi) for _ in range(n)], np.int64)  # noqa
    span = ints(0, 3)  # zero spans: no ratio, no bandwidth
    df = {"host": np.array([f"h{rng.randint(0, 2)}" for _ in range(n)], object),
          "device": np.array([rng.choice(["GPU:0", "GPU:1", None]) for _ in range(n)], object),
          "count": ints(1, 5), "bytes": ints(0, 1 << 40), "span_ps": span,
          "hidden_ps": np.minimum(ints(0, 3), span), HIDDEN: ints(0, 2), PARTIAL: ints(0, 2),
          EXPOSED: ints(0, 2)}
    if with_optional:
        df["unknown_bytes"] = ints(0, 1) * ints(0, 1)
        df["duration_ps"] = ints(0, 4)
        for k in exposure.CAUSE_COLUMNS[::2]:  # some causes given, some not
            df[k] = ints(0, 2) * ints(0, 1)
    return df


@pytest.mark.parametrize("with_optional", [False, True])
def test_records_of_equals_a_record_per_group(with_optional):
    rng = random.Random(28)
    for n in (0, 1, 2, 7, 300):
        df = _groups(rng, n, with_optional)
        for keys in (["host", "device"], ["device"]):
            got, want = records_of(df, keys), _records_reference(df, keys)
            assert got == want
            # the same fields in the same order, the same types (a JSON text alike)
            assert [list(r) for r in got] == [list(r) for r in want]
            assert json.dumps(got) == json.dumps(want)
            assert all(type(a[k]) is type(b[k]) for a, b in zip(got, want) for k in a)


def test_group_coverages_are_each_groups_stretch():
    # three groups' merged intervals (group 1 has none of either kind), group 3 absent
    ms, me = np.array([0, 5, 20, 30]), np.array([3, 8, 25, 31])
    xs, xe = np.array([3, 40]), np.array([5, 41])
    cb = np.searchsorted(np.array([0, 0, 2, 2]), np.arange(5))
    xb = np.searchsorted(np.array([0, 2]), np.arange(5))
    keys = [("h", "GPU:0"), ("h", "GPU:1"), ("h", "GPU:2"), ("h", "GPU:3")]
    cov = GroupCoverages(keys, [0, 1, 2], ms, me, cb, xs, xe, xb)
    assert list(cov) == keys[:3] and len(cov) == 3 and keys[3] not in cov
    with pytest.raises(KeyError):
        cov[keys[3]]
    want = {keys[0]: ((ms[0:2], me[0:2]), (xs[0:1], xe[0:1])),
            keys[1]: ((ms[2:2], me[2:2]), (xs[1:1], xe[1:1])),
            keys[2]: ((ms[2:4], me[2:4]), (xs[1:2], xe[1:2]))}
    for k, (c, x) in want.items():
        got = cov[k]
        assert got is cov[k]  # made once, kept
        assert all(isinstance(g, Coverage) for g in got)
        for g, (s, e) in zip(got, (c, x)):
            assert g.starts.tolist() == s.tolist() and g.ends.tolist() == e.tolist()
    assert [k for k, _ in sorted(cov.items())] == keys[:3]
    assert cov[keys[2]][0].covered(np.array([0]), np.array([100])).tolist() == [6]
