"""Cases for the clocked TPU Async joins, shared by tests/trace/test_join_rising.py,
test_async_pairs_by_time.py and test_async_pairs_fused.py: op names that stress the
`-start`/`-done` rules, the names' bytes side by side, the plain rule (every name coded by
`tpu._async_codes_py`, then `tpu._join_numpy`), and drawn boundary events with Async events
between them (times rising strictly, or with a time twice)."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from overlap.trace import tpu

_op_name = st.sampled_from(["copy-start", "copy-start.1", "copy-done.1", "copy-done",
                            "x-start-start.2", "x-start-done.2", "x-done-start.2",
                            "é-start", "é-done", "-start", "-done", "fusion.3", "a-startb",
                            "a-doneb", "é-start-é", "é-done-é"]) | \
    st.text(alphabet="-adeorstn.é1", min_size=1, max_size=9)


def _spans(op_names: list[str]) -> tuple[np.ndarray, ...]:
    """The names' UTF-8 bytes side by side in one buffer: (buffer, starts, ends)."""
    enc = [n.encode() for n in op_names]
    buf = np.frombuffer(b"".join(enc) + b"\0", np.uint8)
    ln = np.array([len(e) for e in enc], np.int64)
    hi = np.cumsum(ln)
    return buf, hi - ln, hi


def _plain(starts, ends, inv, names, boundaries, at, op_names):
    """(start event, done event) per Async event by the plain rule: -1 where none."""
    b0, b1, _, bop, u_names = boundaries
    s, d, at_code = tpu._async_codes_py(names.tolist(), op_names)
    op_code = np.full(len(u_names), -1, np.int64)
    op_code[at] = at_code
    bcode = op_code[bop]
    return (tpu._join_numpy(bcode, b0, s[inv], starts),
            tpu._join_numpy(bcode, b1, d[inv], ends))


@st.composite
def _case(draw, rising: bool = True):
    u = draw(st.lists(_op_name, min_size=1, max_size=10))
    nb = draw(st.integers(1, 24))
    bop = np.array(draw(st.lists(st.integers(0, len(u) - 1), min_size=nb, max_size=nb)),
                   np.int64)
    lo = 0 if rising else -1  # (a gap of 0 gives a time twice)
    b0 = np.cumsum(draw(st.lists(st.integers(lo + 1, 3), min_size=nb, max_size=nb)))
    b1 = b0 + 2 + np.cumsum(draw(st.lists(st.integers(lo, 2), min_size=nb, max_size=nb)))
    if not rising:
        b0 = np.sort(np.abs(b0))
    extra = draw(st.lists(st.integers(0, len(u) - 1), max_size=3))
    at = np.unique(np.concatenate([bop, np.array(extra, np.int64)]))
    u_names = np.array(u + [None], object)[:-1]
    asked = draw(st.lists(st.none() | st.just("") | _op_name | st.sampled_from(u),
                          min_size=1, max_size=12))
    names = np.array(asked + [None], object)[:-1]
    nq = draw(st.integers(0, 20))
    inv = np.array(draw(st.lists(st.integers(0, len(asked) - 1), min_size=nq, max_size=nq)),
                   np.int64)
    # each Async event begins at a start event's begin or between two, ends likewise
    pick = st.lists(st.integers(-1, nb - 1), min_size=nq, max_size=nq)
    j0, j1 = (np.array(draw(pick), np.int64) for _ in range(2))
    starts = np.where(j0 >= 0, b0[j0], b0[0] + 1 + 7 * nb)
    ends = np.where(j1 >= 0, b1[j1], -1)
    boundaries = (b0.astype(np.int64), b1.astype(np.int64), bop, bop, u_names)
    return starts, ends, inv, names, boundaries, at
