"""Chips whose metadata is the same bytes share their per-op answers (`tpu_twins`, round 40
of issue 32):

* the public v6e sample's chips 1-3 are twins and chip 0 (its own ops) is not; its report is
  the one every chip read on its own gives;
* on SYNTHETIC chips the copy rules run once per group, not once per chip, and a chip whose
  ops differ is read on its own, even where every plane hashes alike (the bytes decide);
* an answer is handed out as a copy (a caller that fills it changes no other chip's), and
  the strings a rule replaced are counted for every chip that reuses it.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import numpy as np
import pytest

from overlap.cli.main import main
from overlap.trace import reader, tpu, tpu_twins, wire
from overlap.trace.planeview import BAD_STRINGS
from overlap.trace.synthetic import SyntheticTrace

V6E = Path(__file__).resolve().parents[2] / "sample_traces" / "tpu-v6e-offload"
US = 1_000_000
pytestmark = pytest.mark.skipif(wire.SCANNER is None, reason="the scanner was not built")


def _report(path: Path) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["report", "--json", str(path)]) in (0, None)
    return out.getvalue()


def _groups(monkeypatch, path: Path) -> list[list[str]]:
    """The twin groups the reader found in `path`, as lists of plane names."""
    seen: list[list[str]] = []

    def spy(views, is_tpu):
        got = tpu_twins.twins(views, is_tpu)
        by: dict[int, list[str]] = {}
        for i, facts in got.items():
            by.setdefault(id(facts), []).append(views[i].name)
        seen.extend(sorted(g) for g in by.values())
        return got

    monkeypatch.setattr(reader, "twins", spy)
    _report(path)
    return seen


def _alone(monkeypatch) -> None:
    monkeypatch.setattr(reader, "twins", lambda views, is_tpu: {})


def _chips(tmp_path: Path, n: int, odd: int | None = None) -> Path:
    """SYNTHETIC: `n` chips, each an op and a D2H copy beside it; chip `odd` names its op
    otherwise (other metadata bytes)."""
    t = SyntheticTrace()
    for c in range(n):
        d = t.tpu(c)
        d.op(10 * US, 5 * US, name="fusion.7" if c == odd else "fusion.1")
        d.async_copy("D2H", 11 * US, 14 * US, device_span=(11 * US + c, 14 * US + 2 * c))
    return t.write(tmp_path / f"chips{n}.xplane.pb")


def test_v6e_sample_chips_1_to_3_are_twins(monkeypatch):
    assert _groups(monkeypatch, V6E) == [["/device:TPU:1", "/device:TPU:2", "/device:TPU:3"]]


def test_v6e_sample_report_is_every_chip_read_alone(monkeypatch):
    shared = _report(V6E)
    _alone(monkeypatch)
    assert _report(V6E) == shared


def test_copy_rules_run_once_per_group(tmp_path, monkeypatch):
    path = _chips(tmp_path, 6, odd=4)
    calls = []
    real = tpu.copy_columns

    def counted(P, mids, programs=None):
        calls.append(P)
        return real(P, mids, programs)

    monkeypatch.setattr(tpu, "copy_columns", counted)
    shared = _report(path)
    assert len(calls) == 2  # the five alike, then the odd one
    assert _groups(monkeypatch, path) == [[f"/device:TPU:{c}" for c in (0, 1, 2, 3, 5)]]
    calls.clear()
    _alone(monkeypatch)
    assert _report(path) == shared
    assert len(calls) == 6
    got = __import__("json").loads(shared)
    assert got["summary"]["transfers"] == 6


def test_equal_hashes_are_confirmed_by_bytes(tmp_path, monkeypatch):
    path = _chips(tmp_path, 4, odd=2)
    expected = _report(path)
    real = tpu_twins._material

    class Alike(tuple):  # every plane's material hashes "alike": its bytes must decide
        def __hash__(self) -> int:
            return 0

    monkeypatch.setattr(tpu_twins, "_material",
                        lambda v: None if (m := real(v)) is None else Alike(m))
    assert _groups(monkeypatch, path) == [["/device:TPU:0", "/device:TPU:1", "/device:TPU:3"]]
    assert _report(path) == expected


def test_one_chip_or_none_located_has_no_twins():
    class View:
        def __init__(self, name, meta_pos=None):
            self.name, self.meta_pos, self.stat_names, self.buf = name, meta_pos, {}, None

    assert tpu_twins.twins([View("/device:TPU:0"), View("/host:CPU")], lambda n: "TPU" in n) == {}
    assert tpu_twins.twins([View("/device:TPU:0"), View("/device:TPU:1")],
                           lambda n: "TPU" in n) == {}


def test_answers_are_copies_and_replaced_strings_counted_each_time():
    facts = tpu_twins.OpFacts()
    facts.bind("plane")
    runs = []

    def rule(P, ops, flag):
        runs.append(P)
        BAD_STRINGS[0] += 2
        return np.array(["a", None], object), {"x": np.arange(2)}, (np.zeros(2, bool), flag)

    ops = np.array([3, 5], np.int64)
    before = BAD_STRINGS[0]
    names, cols, (mask, flag) = facts.get(rule, ops, True)
    names[1] = "filled"
    cols["x"][0] = 99
    mask[:] = True
    again, cols2, (mask2, flag2) = facts.get(rule, ops, True)
    assert runs == ["plane"] and flag2 is True
    assert again.tolist() == ["a", None] and cols2["x"].tolist() == [0, 1]
    assert not mask2.any()
    assert BAD_STRINGS[0] - before == 4
    facts.get(rule, ops.astype(np.int32), True)  # other ops' bytes: another question
    facts.get(rule, ops, False)
    assert len(runs) == 3
    BAD_STRINGS[0] = before


class _View:
    """What `twins` reads of a plane: its name, entries' spans in `buf`, stat names, and the
    split's decoded keys."""

    def __init__(self, name: str, entries: list[bytes], keys: list[int] | None,
                 reversed_: bool = False):
        self.name, self.stat_names = name, {1: "program_id"}
        self.buf = np.frombuffer(b"".join(entries), np.uint8)
        ln = np.array([len(e) for e in entries], np.int64)
        me = np.cumsum(ln)
        self.meta_pos = (me - ln, me)
        self.meta_decoded = None if keys is None else {
            "ok": True, "key": np.array(keys[::-1] if reversed_ else keys, np.int64),
            "reversed": reversed_}


def _named_groups(views: list) -> list[list[str]]:
    got = tpu_twins.twins(views, lambda n: n.startswith("/device:TPU"))
    by: dict[int, list[str]] = {}
    for i, facts in got.items():
        by.setdefault(id(facts), []).append(views[i].name)
    return sorted(sorted(g) for g in by.values())


def test_same_entries_in_any_order_are_twins_where_each_key_is_written_once():
    e = [b"\x08\x01AAAA", b"\x08\x02BB", b"\x08\x03C"]
    views = [
        _View("/device:TPU:0", e, [1, 2, 3]),
        _View("/device:TPU:1", e[::-1], [3, 2, 1], reversed_=True),  # newest first
        _View("/device:TPU:2", [e[1], e[0], e[2]], [2, 1, 3]),
        _View("/device:TPU:3", [e[0], e[1], b"\x08\x03D"], [1, 2, 3]),  # another entry
        _View("/device:TPU:4", e, None),  # keys not at hand: the file's order
        _View("/device:TPU:5", e, None),
        _View("/device:TPU:6", e[::-1], None),
    ]
    assert _named_groups(views) == [["/device:TPU:0", "/device:TPU:1", "/device:TPU:2"],
                                    ["/device:TPU:4", "/device:TPU:5"]]


def test_a_key_written_twice_keeps_the_file_order():
    a, b = b"\x08\x01old", b"\x08\x01new"  # the last of a key counts: (a, b) maps 1 -> new
    views = [_View("/device:TPU:0", [a, b], [1, 1]), _View("/device:TPU:1", [b, a], [1, 1]),
             _View("/device:TPU:2", [a, b], [1, 1])]
    assert _named_groups(views) == [["/device:TPU:0", "/device:TPU:2"]]
