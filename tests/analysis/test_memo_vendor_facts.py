"""The analysis' per-trace memory (`overlap.analysis.memo`) keeps an answer while the hosts'
vendor facts are equal to those it was made with, compared by value against a copy kept
with it (not by a text of every device's vendor made at each call: ~13 ms a call for 100k
devices): an edit in place, a device added or removed, another host's facts, all answer
anew; equal facts, in another order or as other objects, answer from memory."""

from __future__ import annotations

from overlap.analysis import memo


class _Trace:
    """What `memo.per_trace` reads of a trace: its tables and its capture facts."""

    def __init__(self, capture) -> None:
        self.transfers, self.compute, self.capture = object(), object(), capture


def _counted():
    calls = []

    @memo.per_trace("t", lambda v: v)
    def answer(trace):
        calls.append(1)
        return object()
    return answer, calls


def test_equal_facts_answer_from_memory_and_edits_anew():
    vendors = {f"GPU:{i}": "NVIDIA" for i in range(1000)}
    trace = _Trace({"h1": {"vendors": vendors}, "h0": {"vendors": {"GPU:0": "AMD"}},
                    "h2": None})
    answer, calls = _counted()
    first = answer(trace)
    assert answer(trace) is first and len(calls) == 1
    # equal facts as other objects, in another order: the same answer
    trace.capture = {"h2": None, "h0": {"vendors": {"GPU:0": "AMD"}},
                     "h1": {"vendors": dict(reversed(list(vendors.items())))}}
    assert answer(trace) is first and len(calls) == 1
    vendors = trace.capture["h1"]["vendors"]
    vendors["GPU:7"] = "AMD (inferred)"  # an edit in place
    second = answer(trace)
    assert second is not first and len(calls) == 2
    assert answer(trace) is second and len(calls) == 2  # (kept as a copy: still equal)
    vendors["GPU:1000"] = "NVIDIA"  # a device added
    assert answer(trace) is not second and len(calls) == 3
    del vendors["GPU:1000"], vendors["GPU:3"]  # removed
    assert len({id(answer(trace)), id(second)}) == 2 and len(calls) == 4
    trace.capture["h3"] = {"vendors": {}}  # another host
    answer(trace)
    assert len(calls) == 5


def test_hosts_named_alike_and_facts_of_no_map():
    """Two hosts whose names print alike are kept in order (no comparison of their facts);
    facts that are no map are kept as a copy."""
    listed = ["NVIDIA"]
    trace = _Trace({1: {"vendors": {"GPU:0": "NVIDIA"}}, "1": {"vendors": listed}})
    answer, calls = _counted()
    first = answer(trace)
    assert answer(trace) is first
    listed.append("AMD")
    assert answer(trace) is not first and len(calls) == 2
    trace.capture = None
    answer(trace)
    answer(trace)
    assert len(calls) == 3
