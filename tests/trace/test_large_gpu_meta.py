"""A GPU plane of many event-metadata entries kept out of upb's skeleton (`_scan.META_STRIP_MIN`,
`reader._strip_meta`'s 3, issue 32): the fuzz campaign's plane of a million distinct event
names was a upb map of 220 MiB and a million Python strings more (426 MiB for a 21 MB file).
Such a plane is decoded by the scanner and read through its `MetaTable`; every answer is the
one upb's map gives. Also the narrow codes of the unread events' grouping
(`vendors._lines_per_group`, `_code_runs`) and `per_mid(at=)` against their definitions."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from overlap.trace import gpu, reader, vendors, wire
from overlap.trace.synthetic import SyntheticTrace
from overlap.trace.values import per_mid
from tests.trace.test_differential import _cli
from tests.trace.wire_bytes import field

pytestmark = pytest.mark.skipif(wire._scan is None, reason="the compiled scanner is not built")


def three_steps() -> tuple[SyntheticTrace, Any]:
    """A SYNTHETIC GPU capture's writer and its GPU: three steps, each a kernel, a D2H and an
    H2D copy (the tests add what they are about)."""
    t = SyntheticTrace()
    g = t.gpu(0)
    for s in range(3):
        t0 = 10_000_000 + s * 20_000_000
        t.step(s, t0, t0 + 19_000_000)
        g.kernel(t0 + 1_000_000, 5_000_000)
        g.memcpy("D2H", t0 + 2_000_000, 2_000_000, 4096)
        g.memcpy("H2D", t0 + 8_000_000, 2_000_000, 4096)
    return t, g


def _capture(extra: int, path) -> bytes:
    """A SYNTHETIC GPU capture (kernels, a D2H and an H2D copy, host steps) whose GPU plane
    gets `extra` more entries: each its own name, a few named like copies and graphs, and a
    stream line of events of some of them (events no rule reads, graph launches)."""
    t, g = three_steps()
    for j, name in enumerate(["k_unread", "CudaGraphExec:7", "MemcpyD2H", "MemcpyD2Hx"]
                             + [f"k{i}" for i in range(extra - 4)]):
        g.w.event_id(name)
        if j < 40:  # (events of the first entries: unread ones, a graph, a copy without stats)
            g.event(name, 12_000_000 + j * 10_000, 5_000, stream=9, kind="Compute")
    t.write(path)
    return path.read_bytes()


def _entries(raw: bytes) -> int:
    from overlap.trace.protos import XSpace

    xs = XSpace.FromString(raw)
    return len(next(p for p in xs.planes if p.name == "/device:GPU:0").event_metadata)


def _stripped(path) -> int:
    _, planes = reader._parse_file(path)
    return next(p for p in planes if p.name == "/device:GPU:0").meta_stripped


@pytest.mark.parametrize("short", [0, 1])
def test_many_entries_stripped_one_answer(tmp_path, short):
    """At `META_STRIP_MIN` entries the plane is stripped (mode 1), one fewer it is not; the
    report is upb's either way."""
    n = wire._scan.META_STRIP_MIN
    p = tmp_path / "probe.xplane.pb"
    base = _entries(_capture(4, p))
    raw = _capture(n - short - (base - 4), p)
    assert _entries(raw) == n - short
    assert _stripped(p) == (0 if short else 1)
    rc, scanned = _cli(["report", "--json", str(p)], wire._scan)
    rc_upb, upb = _cli(["report", "--json", str(p)], None)
    assert (rc, scanned) == (rc_upb, upb)
    got = json.loads(scanned)
    # (six copies with details, and the `MemcpyD2H` event found by its entry's name)
    assert got["summary"]["transfers"] == 7
    # (the unread events are named by the table: their names and lines in the reason)
    assert any("'k_unread'" in u["reason"] for u in got["transfer_status"]["unknown"])


def _plane(entries: list[tuple[bytes, bool]], strip) -> wire.Plane:
    """A GPU plane of `entries` (name bytes, holds kernel_details at metadata level), ids
    1..n, read by the scanner with `strip_meta` answering `strip`."""
    kd = field(1, 0, 1) + field(2, 2, b"kernel_details")
    body = field(1, 0, 1) + field(2, 2, b"/device:GPU:0") + field(5, 2, field(1, 0, 1)
                                                                   + field(2, 2, kd))
    for i, (name, has_kd) in enumerate(entries, 1):
        md = field(1, 0, i) + field(2, 2, name)
        if has_kd:
            md += field(5, 2, field(1, 0, 1) + field(5, 2, b"regs:32"))
        body += field(4, 2, field(1, 0, i) + field(2, 2, md))
    raw = field(1, 2, body)
    buf = np.frombuffer(raw + b"\0" * 64, np.uint8)
    _, planes, _ = wire.parse_space(buf, len(raw), strip_meta=lambda name: strip)
    return wire.Plane(planes[0])


_NAMES = st.sampled_from([b"MemcpyD2H", b"MemcpyH2D", b"MemcpyD2", b"Memcpy", b"MemcpyH2DX",
                          b"CudaGraphExec", b"CudaGraphExe", b"CudaGraphExec\xff",
                          b"\xffMemcpyD2H", b"Memcpy\xffD2H", b"kern", b"", b"\xe2\x82\xac"])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(_NAMES, st.booleans()), min_size=1, max_size=40))
def test_kinds_from_the_table_are_the_maps(entries):
    """`_gpu_meta_kinds` of a plane read through its table (names tested as bytes, only the
    entries it acts on made strings) equals the same plane read through upb's map."""
    table, upb = _plane(entries, True), _plane(entries, False)
    assert table.plane.meta_stripped == 1 and upb.plane.meta_stripped == 0
    assert gpu._gpu_meta_kinds(table) == gpu._gpu_meta_kinds(upb)
    for i in range(len(entries) + 2):  # (an id without an entry: "")
        assert table.name(i) == upb.name(i)


def _lines_reference(lc, starts, ends) -> list[int]:
    return [len(set(lc[s:e].tolist())) for s, e in zip(starts.tolist(), ends.tolist())]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(1, 30), min_size=1, max_size=20), st.integers(1, 50),
       st.randoms())
def test_lines_per_group(sizes, span, rnd):
    """Both ways (the table, the sort) count each group's distinct lines."""
    ends = np.cumsum(sizes)
    starts = ends - np.array(sizes)
    lc = np.array([rnd.randrange(span) for _ in range(int(ends[-1]))], np.int32)
    want = _lines_reference(lc, starts, ends)
    # (the rows in order; each row's line code + 1 is `lc`: test_line_pieces has rows in
    # any order)
    rows = np.arange(len(lc))
    assert vendors._lines_per_group(lc - 1, rows, starts, ends, span) == want
    big = 10 * len(lc) + (1 << 20)  # (past the table's bound: sorted pairs)
    assert vendors._lines_per_group(lc - 1, rows, starts, ends, big) == want


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(-1, 3), st.integers(-1, 40), st.integers(-1, 2)),
                max_size=60),
       st.sampled_from([np.int8, np.int16, np.int64]))
def test_code_runs_narrow_key(rows, dt):
    """`_code_groups` of narrow codes: the groups, their rows and order a dict gives."""
    uniqs = [np.array([f"d{i}" for i in range(4)], object),
             np.array([f"n{i:02d}" for i in range(41)], object),
             np.array(["r0", "r1", "r2"], object)]
    codes = [np.array([r[j] for r in rows], dt) for j in range(3)]
    got = [(v, r.tolist()) for v, r in vendors._code_groups(codes, uniqs)]
    want: dict[tuple, list[int]] = {}
    for i, r in enumerate(rows):
        if min(r) >= 0:
            want.setdefault(tuple(u[c] for u, c in zip(uniqs, r)), []).append(i)
    assert got == sorted(want.items())


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 3000), min_size=1, max_size=3000), st.randoms())
def test_per_mid_at(mids, rnd):
    """`per_mid(at=)` is `per_mid` of the ids taken."""
    mids = np.array(mids, np.int64)
    at = np.array(sorted(rnd.sample(range(len(mids)), rnd.randrange(len(mids) + 1))), np.intp)
    def fn(m):
        return f"name{m % 7}"
    assert per_mid(mids, fn, at=at).tolist() == per_mid(mids[at], fn).tolist()
