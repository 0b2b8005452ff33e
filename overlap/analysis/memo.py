"""Per-trace memory of the analysis' per-transfer tables.

`overlap report` builds the per-transfer table (`overlap.analysis.overlap.transfer_columns`)
and its exposure causes (`overlap.analysis.causes.transfer_causes`) once for the result, and
the per-name, first-use and prediction sections need the same rows again. Each of them
recomputing both cost as much as the analysis itself on a million-event capture (issue 32). So
the first answer is kept on the trace, for the tables it was computed from: a table set on the
trace afterwards (`trace.transfers = frame`) replaces the `_Stored` object the answer was keyed
by, and the next call computes anew; so does an edit of the hosts' vendor facts (compared by
value), which the labels of copies outside any program read.

Callers get a shallow copy of a kept dict (their own dict over the shared arrays): they may add
or replace columns, never modify an array in place (as with `Trace.columns`).
"""

from __future__ import annotations

import functools
from operator import itemgetter
from typing import Any, Callable

_ATTR = "_analysis_memo"


def per_trace(name: str, copy: Callable[[Any], Any],
              same: Callable[..., tuple] = lambda *a, **k: ()) -> Callable:
    """Decorate `fn(trace, *args, **kwargs)`: its answer is kept per (trace, name, hashable
    arguments) while the trace's transfers and compute tables, and the objects `same(*args,
    **kwargs)` names (arrays an unhashable argument holds), stay the same objects; `copy`
    turns the kept answer into what a caller gets."""
    def wrap(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def inner(trace: Any, *args: Any, **kwargs: Any) -> Any:
            d = getattr(trace, "__dict__", None)
            if d is None:
                return fn(trace, *args, **kwargs)
            key: Any = (name,) + tuple(a for a in args if _hashable(a)) + tuple(
                sorted((k, v) for k, v in kwargs.items() if _hashable(v)))
            deps = (d.get("transfers"), d.get("compute"), *same(*args, **kwargs))
            facts = _vendor_facts(d.get("capture"))
            memo = d.setdefault(_ATTR, {})
            hit = memo.get(key)
            if hit is not None and hit[1] == facts and len(hit[0]) == len(deps) and all(
                    a is b for a, b in zip(hit[0], deps)):
                return copy(hit[2])
            value = fn(trace, *args, **kwargs)
            memo[key] = (deps, _kept(facts), value)
            return copy(value)
        return inner
    return wrap


def _vendor_facts(capture: Any) -> Any:
    """What of the per-host facts the tables' labels read (each device's vendor names where a
    copy outside any program is told from an unknown one): per host (in order of its name)
    its `vendors` as they are now, compared by value (`==`) with those kept with an answer
    (`_kept`: a copy, since a caller may edit the facts in place). Why not their `repr`: a
    text of every device's vendor made at each call, ~13 ms per call for 100k devices, four
    calls a report."""
    if not isinstance(capture, dict):
        return None
    return tuple(sorted(((str(h), f.get("vendors") if isinstance(f, dict) else None)
                         for h, f in capture.items()), key=itemgetter(0)))


def _kept(facts: Any) -> Any:
    """`facts` (`_vendor_facts`) as kept with an answer: each host's vendors a copy (a
    device -> vendor name map: its texts are not edited in place, the map may be)."""
    if facts is None:
        return None
    return tuple((h, dict(v) if isinstance(v, dict) else v if v is None else _deep(v))
                 for h, v in facts)


def _deep(v: Any) -> Any:
    import copy  # (only for vendors that are no map: none the reader writes)

    return copy.deepcopy(v)


def _hashable(v: Any) -> bool:
    try:
        hash(v)
    except TypeError:
        return False
    return True
