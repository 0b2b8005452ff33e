"""`vendors._other_event_unknowns` on integer codes gives what its definition gives: per
(device, event name, reason) group of the unread stream events, in the groups' value order,
the events, the distinct lines and the first line, where the reason is the line's
(`_stream_why`, or "neither a kernel nor a copy" for a plain stream line, whose device copies
and memsets by name are left out), and events with no device or name are in no group.
The definition below is that rule written plainly on object columns (`_groups`)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from overlap.arrays import factorize
from overlap.trace import vendors, wire
from overlap.trace.values import object_array


def _definition(other: dict[str, np.ndarray]) -> list[dict]:
    lcode, lines = factorize(other["line"])
    why = object_array([vendors._stream_why(ln) for ln in lines.tolist()] + [None])[lcode]
    plain = np.equal(why, None)  # type: ignore[call-overload]
    ncode, names = factorize(other["name"])
    skip = np.array([bool(vendors._NOT_HOST_COPY_RE.match(str(n))) for n in names.tolist()]
                    + [False], bool)
    keep = ~(plain & skip[ncode])
    why = np.where(plain, vendors._UNREAD, why)[keep]
    kept = {k: v[keep] for k, v in other.items()}
    lcode = lcode[keep]
    out = []
    for (dev, name, reason), g in vendors._groups(kept["device"], kept["name"], why):
        n_lines = len(np.unique(lcode[g]))
        first = kept["line"][g[0]]
        where = f"on {first}" if n_lines == 1 else f"on {n_lines} lines ({first}, ...)"
        out.append({"device": dev, "events": int(len(g)),
                    "reason": f"{len(g)} {name!r} event(s) {where}: {reason}"})
    return out


# (`Stream #x(Odd)` and `Stream #3(Odd)` share a kinds list, not a reason: the key of a
# line's reason is more than its kinds list)
LINES = ["Stream #1(Compute)", "Stream #2(Compute,Memset)", "Stream #3(Odd)", "Stream #4",
         "Stream #5(Compute,Odd,Weird)", "MemcpyD2H", "Stream #6(Compute)", None,
         "Stream #x(Odd)", "Stream #-7(Odd)", "Memcpy(Odd)"]
NAMES = ["kernel_x", "MemcpyD2D", "Memset 1", "MemsetD8", "other", None]
DEVICES = ["GPU:0", "GPU:1", "GPU:10", None]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(DEVICES), st.sampled_from(LINES),
                          st.sampled_from(NAMES)), min_size=1, max_size=60),
       st.booleans())
def test_groups_equal_the_definition(rows, scanner):
    other = {k: object_array([r[j] for r in rows])
             for j, k in enumerate(("device", "line", "name"))}
    saved = wire.SCANNER
    try:
        if not scanner:
            wire.SCANNER = None  # (the lines coded by `factorize`, not the scanner's table)
        got = vendors._other_event_unknowns(other)
    finally:
        wire.SCANNER = saved
    assert got == _definition(other)


def test_every_event_on_a_line_of_its_own_is_one_entry():
    """Every line its own name: one entry per (device, name, reason), the lines counted."""
    n = 20_000
    other = {"device": object_array(["GPU:0"] * n),
             "line": object_array([f"Stream #{i}" for i in range(n)]),
             "name": object_array(["kernel_x"] * n)}
    got = vendors._other_event_unknowns(other)
    assert got == _definition(other) and len(got) == 1
    assert got[0]["events"] == n and f"on {n} lines (Stream #0, ...)" in got[0]["reason"]


def test_stream_lines_in_c_equal_one_by_one():
    """`_stream_lines` (startswith in C) is `_is_stream_line` of each name, a name that is no
    `str` among them or not."""
    names = ["Stream #1(Compute)", "MemcpyD2H", "Streams", "stream #1", "", "Memcpy",
             "TensorFlow Ops", "Stream #"]
    for case in (names, names + [None], [3.5, "Stream #2"], []):
        got = vendors._stream_lines(case)
        assert got.dtype == bool
        assert got.tolist() == [vendors._is_stream_line(n) for n in case]
