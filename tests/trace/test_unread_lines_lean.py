"""A line of events no rule reads, held lean (issue 32, round 21): its events' positions
counted as int32 where every event is unread (`gpu._gpu_events`), its line code one
`repeated` value (`vendors.note_other_events`), one device and name factorized without a code
per row (`vendors._narrow_factorize`), and the groups' rows not sorted where their keys are
in order (`vendors._code_runs`). Each gives what its definition gives, and a report of such
lines is upb's. SYNTHETIC captures, labelled so."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from overlap.arrays import factorize, is_repeated, repeated
from overlap.trace import gpu, vendors, wire
from overlap.trace.values import object_array
from tests.trace.test_differential import _cli
from tests.trace.test_other_unknowns import DEVICES, LINES, NAMES, _definition

pytestmark = pytest.mark.skipif(wire._scan is None, reason="the compiled scanner is not built")


def _code_runs_definition(codes, uniqs) -> list[tuple[tuple, list[int]]]:
    """Per group of rows whose codes are equal (every code >= 0), in ascending order of the
    codes: its values and its rows, in order."""
    groups: dict[tuple, list[int]] = {}
    for r in range(len(codes[0])):
        k = tuple(int(c[r]) for c in codes)
        if min(k) >= 0:
            groups.setdefault(k, []).append(r)
    return [(tuple(u[j] for u, j in zip(uniqs, k)), rows) for k, rows in sorted(groups.items())]


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 40), st.data())
def test_code_runs_equal_the_definition(n, data):
    """Keys in order or not, every row grouped or some not (code -1)."""
    sizes = data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=3))
    low = data.draw(st.sampled_from([0, -1]))  # (-1: rows in no group)
    codes = [np.array(data.draw(st.lists(st.integers(low, k - 1), min_size=n, max_size=n)),
                      np.int8) for k in sizes]
    if data.draw(st.booleans()):  # (rows in key order, as one line's events are)
        order = np.lexsort(codes[::-1])
        codes = [c[order] for c in codes]
    uniqs = [object_array([f"v{j}" for j in range(k)]) for k in sizes]
    vals, rows, starts, ends, order = vendors._code_runs(codes, uniqs)
    want = _code_runs_definition(codes, uniqs)
    assert [(tuple(vals[i]), rows[a:b].tolist()) for i, (a, b) in
            enumerate(zip(starts.tolist(), ends.tolist()))] == want
    assert len(rows) == sum(len(g) for _, g in want)
    assert order == sorted(range(len(vals)), key=vals.__getitem__)


@pytest.mark.parametrize("value", ["GPU:0", "kernel_x", None, math.nan])
def test_narrow_factorize_of_one_repeated_value_is_factorize(value):
    n = 5
    codes, uniq = vendors._narrow_factorize(repeated(n, value))
    want_codes, want_uniq = factorize(object_array([value] * n))
    assert is_repeated(codes) and codes.dtype == np.int8
    assert codes.tolist() == want_codes.tolist() and uniq.tolist() == want_uniq.tolist()
    codes, uniq = vendors._narrow_factorize(object_array(["a", "b", "a", None]))
    assert codes.tolist() == [0, 1, 0, -1] and codes.dtype == np.int8


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(DEVICES), st.sampled_from(NAMES),
       st.lists(st.sampled_from(LINES), min_size=2, max_size=40))
def test_one_device_and_name_repeated_equal_the_definition(device, name, line_names):
    """A line read alone gives its unread events' device and name as one value each
    (`repeated`): the entries are those of the same values as rows."""
    n = len(line_names)
    rows = {"device": object_array([device] * n), "line": object_array(line_names),
            "name": object_array([name] * n)}
    other = {"device": repeated(n, device), "line": rows["line"], "name": repeated(n, name)}
    assert vendors._other_event_unknowns(other) == _definition(rows)


def _unread_lines(path, events: list[int], name: str = "Stream #1"):
    """SYNTHETIC: one GPU plane, a line per count of `events` (`name`, then `name` + its index)
    of `kernel_x` events without stats, which no rule reads."""
    from overlap.trace.protos import XSpace

    sp = XSpace()
    sp.warnings.append("SYNTHETIC")
    pl = sp.planes.add(id=1, name="/device:GPU:0")
    md = pl.event_metadata[1]
    md.id, md.name = 1, "kernel_x"
    for i, n in enumerate(events):
        ln = pl.lines.add(id=i, name=name if i == 0 else f"{name}{i}", timestamp_ns=1000)
        for j in range(n):
            ln.events.add(metadata_id=1, offset_ps=10 * j, duration_ps=5)
    sp.planes.add(id=2, name="/host:CPU")
    path.write_bytes(sp.SerializeToString())
    return path


@pytest.mark.parametrize("events", [[gpu._SMALL_LINE], [gpu._SMALL_LINE + 3, 2, 0, 40],
                                    [1] * 50])
def test_reports_of_unread_lines_are_upbs(tmp_path, events):
    """A line read alone (`gpu._SMALL_LINE` events or more) of unread events only, beside
    small lines merged in a segment: the report is upb's, and says how many events and lines
    it could not read."""
    p = _unread_lines(tmp_path / "unread.xplane.pb", events)
    got = _cli(["report", "--json", str(p)], wire._scan)
    assert got == _cli(["report", "--json", str(p)], None)
    assert f"{sum(events)} 'kernel_x' event(s)" in got[1]
