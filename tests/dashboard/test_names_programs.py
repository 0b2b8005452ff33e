"""The run view's names card (`overlap.dashboard.names_view`) shows a name's bytes per step as
the report does (`overlap.report.names_text`): one program's `executed_bytes`, or the range
over the programs that hold the name's copies where there are several (their sum is no
step's: `overlap.analysis.names`)."""

from __future__ import annotations

from overlap.analysis.overlap import DIRECTIONS
from overlap.dashboard.names_view import cards
from overlap.report.names_text import compiled_bytes


def _section(compiled: dict) -> dict:
    seen = {"count": 1, "bytes": 1, "span_ps": 1, "exposed_ps": 1, "hidden_ps": 0,
            "overlap_ratio": 0.0}
    return {"offload_by_name": {"names": [{
        "name": "act", "asked": None, "flag": None,
        "compiled": {d: dict(compiled) for d in DIRECTIONS},
        "seen": {d: dict(seen) for d in DIRECTIONS}}], "shared": [], "other": [], "notes": []}}


def _cells(result: dict) -> list[list[str]]:
    (card,) = cards(result, {})
    table = card.children[2]
    return [[td.children for td in tr.children] for tr in table.children[1:]]


def test_one_program_shows_its_bytes_and_several_their_range():
    one = {"ops": ["a"], "count": 1, "executed_bytes": 3 << 20}
    several = {"ops": ["a"] * 4, "count": 4, "executed_bytes": 40 << 20, "programs": 4,
               "executed_bytes_range": [4 << 20, 16 << 20]}
    assert [c[4] for c in _cells(_section(one))] == ["3.0 MiB"] * 2
    assert compiled_bytes(one) == "3.0 MiB"
    want = "4.0 MiB-16.0 MiB (4 programs)"
    assert [c[4] for c in _cells(_section(several))] == [want] * 2
    assert compiled_bytes(several) == want
    assert compiled_bytes({"count": 0, "executed_bytes": 0}) == "-"
