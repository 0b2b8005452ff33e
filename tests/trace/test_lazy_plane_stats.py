"""The call-stack plane's own stats left out of the skeleton (`_scan._LAZY_STATS_PLANE`,
`PlaneView.stats`, issue 32): no rule reads them, a real 4000-step H200 capture holds 1.6M of
them (90 MiB as upb's messages). The split checks each one; a plain one stays in the file's
bytes, any other (a string upb would mend, a group, damage) stays in the skeleton for upb, as
before. Asked for, the plane's stats are upb's, in order, and every count and answer is the
one upb's whole parse gives."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from overlap.trace import wire
from overlap.trace.protos import XSpace
from overlap.trace.synthetic import SyntheticTrace
from tests.trace.test_differential import _cli
from tests.trace.wire_bytes import field, stat_value_bytes, stat_values, varint

pytestmark = pytest.mark.skipif(wire._scan is None, reason="the compiled scanner is not built")

SCOPE = "/host:__ScopeRangeCallStack__"
BAD_UTF8 = b"\xff\xfe"


def _stat(kind: str, i: int) -> bytes:
    """One XStat field (plane field 6) of a kind the split tells apart."""
    sid = field(1, 0, 1000 + i)
    body = {"int": sid + field(4, 0, i - 5),
            "str": sid + field(5, 2, f"frame {i}".encode()),
            "bad": sid + field(5, 2, BAD_UTF8),
            "bad_then_good": sid + field(5, 2, BAD_UTF8) + field(5, 2, b"ok"),
            "group": sid + field(9, 3, field(1, 0, 7)) + field(4, 0, i),
            "long_tag": varint(1 << 3 | 0, 3) + varint(1000 + i) + field(3, 0, i)}[kind]
    return field(6, 2, body)


def _space(kinds: list[str], name: str = SCOPE) -> bytes:
    """A SYNTHETIC capture (a GPU kernel and a copy, the host's steps) with a plane `name`
    whose stats are of `kinds`, in order."""
    t = SyntheticTrace()
    g = t.gpu(0)
    g.kernel(10_000_000, 5_000_000)
    g.memcpy("D2H", 12_000_000, 2_000_000, 4096)
    raw = t.to_bytes()
    plane = field(2, 2, name.encode()) + b"".join(_stat(k, i) for i, k in enumerate(kinds))
    return raw + field(1, 2, plane)


def _upb_stats(raw: bytes, name: str = SCOPE):
    before = wire.BAD_STRINGS[0]
    xs = wire._strict_or_sanitized(XSpace, raw)
    counted = wire.BAD_STRINGS[0] - before
    return next(p for p in xs.planes if p.name == name).stats, counted


def _split_read(raw: bytes, name: str = SCOPE):
    before = wire.BAD_STRINGS[0]
    _, planes, _ = wire.parse_space(wire.padded(raw), len(raw))
    counted = wire.BAD_STRINGS[0] - before
    return next(p for p in planes if p.name == name), counted


KINDS = ["int", "str", "bad", "bad_then_good", "group", "long_tag"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(KINDS), max_size=12))
def test_the_planes_stats_are_upbs_and_counted_once(kinds):
    raw = _space(kinds)
    want, want_bad = _upb_stats(raw)
    view, bad = _split_read(raw)
    assert bad == want_bad  # (counted by the skeleton's parse, not again when asked)
    got = view.stats
    assert [s.SerializeToString() for s in got] == [s.SerializeToString() for s in want]
    # a plain stat never reaches the skeleton; any other does
    skel = wire._scan.split_space(wire.padded(raw), len(raw))[0]
    kept = XSpace.FromString(skel) if not any(k.startswith("bad") for k in kinds) else None
    if kept is not None:
        sk = next(p for p in kept.planes if p.name == SCOPE)
        assert len(sk.stats) == sum(k == "group" for k in kinds)


def test_other_planes_keep_their_stats_in_the_skeleton():
    raw = _space(["int", "str"], name="/host:elsewhere")
    skel = XSpace.FromString(wire._scan.split_space(wire.padded(raw), len(raw))[0])
    assert len(next(p for p in skel.planes if p.name == "/host:elsewhere").stats) == 2
    view, _ = _split_read(raw, "/host:elsewhere")
    assert view._stats is True


@given(st.lists(stat_values(6, [1, 2]), min_size=1, max_size=6))
@settings(max_examples=40, deadline=None)
def test_values_of_every_kind_read_back(values):
    plane = field(2, 2, SCOPE.encode()) + b"".join(
        field(6, 2, field(1, 0, i + 1) + stat_value_bytes(v)) for i, v in enumerate(values))
    raw = field(1, 2, plane)
    want, _ = _upb_stats(raw)
    view, _ = _split_read(raw)
    assert isinstance(view._stats, np.ndarray)
    assert [s.SerializeToString() for s in view.stats] == [
        s.SerializeToString() for s in want]


def _report(path, scanner: bool) -> tuple[int, str]:
    return _cli(["report", "--json", str(path)], wire._scan if scanner else None)


@pytest.mark.parametrize("kinds", [["int"] * 50, ["int", "bad", "str", "group", "bad"]])
def test_one_report_either_decoder(tmp_path, kinds):
    f = tmp_path / "s.xplane.pb"
    f.write_bytes(_space(kinds))
    fast, slow = _report(f, True), _report(f, False)
    assert fast == slow and fast[0] == 0
    assert json.loads(fast[1])["replaced_strings"] == json.loads(slow[1])["replaced_strings"]


def test_a_damaged_stat_is_refused_as_upb_refuses_it(tmp_path):
    raw = _space(["int"])
    cut = raw[:-1]  # the last stat's last byte gone: its length runs past the file
    f = tmp_path / "d.xplane.pb"
    f.write_bytes(cut)
    fast, slow = _report(f, True), _report(f, False)
    assert fast[0] == slow[0] == 3


def test_real_call_stack_planes_read_back(gpu_corpus):
    """The real H100 captures' call-stack planes (hundreds to thousands of stats each)."""
    n = 0
    for xplane in sorted(gpu_corpus.glob("gpu-h100/transformer-h100*/*/plugins/profile/*/*.pb")):
        raw = xplane.read_bytes()
        want, _ = _upb_stats(raw)
        view, _ = _split_read(raw)
        assert isinstance(view._stats, np.ndarray) and len(want) > 100
        assert [s.SerializeToString() for s in view.stats] == [
            s.SerializeToString() for s in want]
        n += 1
    assert n >= 4
