"""Why each exposed copy is exposed (`overlap.analysis.causes`).

Tiny SYNTHETIC GPU traces whose answer per cause is known by construction (times in us, the
arithmetic written out), invariants on random traces, the merge of host parts, the renderers,
the gate message, and the real H100/H200 captures (the archives in tests/data/gpu-corpus)."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import numpy as np
import pytest

from overlap.analysis import causes as C
from overlap.analysis.overlap import analyze, host_part, reduce_parts
from overlap.report import gate, text
from overlap.trace.synthetic import SyntheticTrace
from tests.analysis.test_analysis import make_trace, read

US = 1_000_000
REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "tests" / "data" / "gpu-corpus" / "gpu-h100.tar.xz"


T0 = 5000 * US  # the builders' times start here (a synthetic line begins at 1 us)


class _Shifted:
    """A synthetic GPU whose kernel/memcpy times count from T0 (the tests' 0)."""

    def __init__(self, g):
        self.g = g

    def kernel(self, start, dur, **kw):
        self.g.kernel(T0 + start, dur, **kw)

    def memcpy(self, direction, start, dur, nbytes, **kw):
        self.g.memcpy(direction, T0 + start, dur, nbytes, **kw)


def _analyze(tmp_path: Path, build) -> dict:
    t = SyntheticTrace("h")
    build(_Shifted(t.gpu(0)))
    return analyze(read(t.write(tmp_path / "t.xplane.pb")))


def _causes(result: dict, d: str) -> dict[str, int]:
    return {c["cause"]: c["exposed_ps"] for c in result["by_direction"][d]["exposure_causes"]}


def _evidence(result: dict, d: str, cause: str) -> dict:
    return next(c["evidence"] for c in result["by_direction"][d]["exposure_causes"]
                if c["cause"] == cause)


def test_copy_on_the_compute_stream(tmp_path):
    """kernel [0, 100) and [200, 300) on stream 7; D2H [100, 200) on stream 7 too: 100 us
    exposed, all because the copy shares the kernels' stream (command buffers' shape)."""
    def build(g):
        g.kernel(0, 100 * US, stream=7)
        g.memcpy("D2H", 100 * US, 100 * US, 5_000_000, stream=7)
        g.kernel(200 * US, 100 * US, stream=7)
    r = _analyze(tmp_path, build)
    assert _causes(r, "D2H") == {C.SHARES_STREAM: 100 * US}
    ev = _evidence(r, "D2H", C.SHARES_STREAM)
    assert [(s["device"], s["stream"], s["kernels"], s["copies"]) for s in ev["streams"]] == \
        [("GPU:0", 7, 2, 1)]
    assert ev["flag"] == C.COMMAND_BUFFER_FLAG and "+16.3%" in ev["measured"]
    assert r["top_exposed"]["records"][0]["cause"] == C.SHARES_STREAM


def test_the_flag_is_the_one_capture_sets():
    from overlap.capture.api import COMMAND_BUFFER_FLAG

    assert C.COMMAND_BUFFER_FLAG == COMMAND_BUFFER_FLAG


def test_pageable_copy(tmp_path):
    """A pageable H2D [100, 150) on its own stream next to nothing: 50 us, pageable (it is also
    a copy the device waited for; pageable comes first)."""
    def build(g):
        g.kernel(0, 100 * US, stream=7)
        g.memcpy("H2D", 100 * US, 50 * US, 1_000_000, stream=20, host_kind="pageable")
        g.kernel(150 * US, 10 * US, stream=7)
    r = _analyze(tmp_path, build)
    assert _causes(r, "H2D") == {C.PAGEABLE: 50 * US}
    assert _evidence(r, "H2D", C.PAGEABLE)["transfers"] == 1


def test_queued_behind_same_direction_and_device_waits(tmp_path):
    """kernel [0, 10); D2H a [10, 60) on stream 20; D2H b [62, 112) on stream 21, 2 us after a
    ended (queued); kernel again at 115. a: 50 us exposed, the device waited (compute resumed
    3 us after b, the copy in flight after a, ended). b: 50 us queued, 1 copy (1 MB) ahead."""
    def build(g):
        g.kernel(0, 10 * US, stream=7)
        g.memcpy("D2H", 10 * US, 50 * US, 1_000_000, stream=20, hlo_op="copy-start.1")
        g.memcpy("D2H", 62 * US, 50 * US, 3_000_000, stream=21, hlo_op="copy-start.2")
        g.kernel(115 * US, 10 * US, stream=7)
    r = _analyze(tmp_path, build)
    assert _causes(r, "D2H") == {C.DEVICE_WAITS: 50 * US, C.QUEUED: 50 * US}
    q = _evidence(r, "D2H", C.QUEUED)
    assert (q["transfers"], q["max_queue"], q["max_bytes_ahead"]) == (1, 2, 1_000_000)
    w = _evidence(r, "D2H", C.DEVICE_WAITS)
    # a's tail [10, 60) is exposed from its start: no compute after it started
    assert (w["stall_ps"], w["no_work_transfers"], w["needed_bandwidth_Bps"]) == \
        (50 * US, 1, None)
    ops = {x["hlo_op"]: x["exposure_causes"] for x in r["by_hlo_op"]["records"]}
    assert ops == {"copy-start.1": {C.DEVICE_WAITS: 50 * US},
                   "copy-start.2": {C.QUEUED: 50 * US}}


def test_device_waits_slack_stall_and_bandwidth(tmp_path):
    """kernel [0, 40); H2D [10, 110) of 6 MB; kernel at 115. Exposed [40, 110) = 70 us: the
    device ran out of work at 40 and resumed 5 us after the copy ended. stall 70 us, slack
    (compute beside) 30 us, ready 40 - 10 = 30 us: 6 MB / 30 us = 200 GB/s would have hidden
    it."""
    def build(g):
        g.kernel(0, 40 * US, stream=7)
        g.memcpy("H2D", 10 * US, 100 * US, 6_000_000, stream=20)
        g.kernel(115 * US, 10 * US, stream=7)
    r = _analyze(tmp_path, build)
    assert _causes(r, "H2D") == {C.DEVICE_WAITS: 70 * US}
    w = _evidence(r, "H2D", C.DEVICE_WAITS)
    assert (w["stall_ps"], w["slack_ps"], w["ready_ps"]) == (70 * US, 30 * US, 30 * US)
    assert w["needed_bandwidth_Bps"] == pytest.approx(6_000_000 / 30e-6)
    rec = r["top_exposed"]["records"][0]
    assert (rec["cause"], rec["stall_ps"], rec["ready_ps"]) == (C.DEVICE_WAITS, 70 * US, 30 * US)
    assert rec["needed_bandwidth_Bps"] == pytest.approx(2e11)


def test_unknown_says_why(tmp_path):
    """kernel [0, 10); D2H [10, 100) with a kernel [50, 60) beside it; H2D [20, 40); nothing
    after 100 but a kernel at 1000. D2H pieces: [10, 50) resumed at 50, 10 us after the H2D
    ended (device waits, 40 us); [60, 100) resumed at 1000, 900 us after the copies ended
    (unknown, late). H2D [20, 40): its piece is [10, 50)'s, same resume: device waits, 20 us.
    A second D2H [2000, 2030) after every kernel: unknown, no compute after it."""
    def build(g):
        g.kernel(0, 10 * US, stream=7)
        g.memcpy("D2H", 10 * US, 90 * US, 1_000_000, stream=20)
        g.memcpy("H2D", 20 * US, 20 * US, 1_000_000, stream=21)
        g.kernel(50 * US, 10 * US, stream=7)
        g.kernel(1000 * US, 10 * US, stream=7)
        g.memcpy("D2H", 2000 * US, 30 * US, 1_000_000, stream=20)
    r = _analyze(tmp_path, build)
    assert _causes(r, "D2H") == {C.DEVICE_WAITS: 40 * US, C.UNKNOWN: 70 * US}
    assert _causes(r, "H2D") == {C.DEVICE_WAITS: 20 * US}
    u = _evidence(r, "D2H", C.UNKNOWN)
    assert (u["late_resume_ps"], u["no_resume_ps"], u["not_copy_bound_ps"]) == \
        (40 * US, 30 * US, 0)


def test_unknown_when_compute_resumes_mid_copy_without_a_copy_ending(tmp_path):
    """kernel [0, 10); D2H [10, 100); kernel [50, 60) and [100, 110): the device idled
    [10, 50) and resumed while the copy flew, no copy having ended: 40 us unknown; [60, 100)
    ends with the copy and compute resumes at once: 40 us device waits."""
    def build(g):
        g.kernel(0, 10 * US, stream=7)
        g.memcpy("D2H", 10 * US, 90 * US, 1_000_000, stream=20)
        g.kernel(50 * US, 10 * US, stream=7)
        g.kernel(100 * US, 10 * US, stream=7)
    r = _analyze(tmp_path, build)
    assert _causes(r, "D2H") == {C.UNKNOWN: 40 * US, C.DEVICE_WAITS: 40 * US}
    assert _evidence(r, "D2H", C.UNKNOWN)["not_copy_bound_ps"] == 40 * US


def test_tpu_copies_never_share_a_stream():
    """Transfers and compute on the same stream id of a TPU: streams mean nothing there."""
    t = make_trace(transfers=[("TPU:0", "D2H", 100, 200, 10, "pinned")],
                   compute=[("TPU:0", 0, 100), ("TPU:0", 200, 300)])
    r = analyze(t)
    assert C.SHARES_STREAM not in _causes(r, "D2H")


def test_invariants_on_random_traces():
    """Random copies and kernels on 3 devices: per transfer the split sums to its exposed
    time, nothing negative; per direction, op, device and step the sums match."""
    rng = np.random.default_rng(7)
    for _ in range(20):
        tr, co = [], []
        for _ in range(int(rng.integers(1, 40))):
            s = int(rng.integers(0, 10_000))
            tr.append((f"GPU:{rng.integers(3)}", ["D2H", "H2D"][rng.integers(2)], s,
                       s + int(rng.integers(0, 800)), int(rng.integers(1, 1000)),
                       ["pinned", "pinned", "pageable"][rng.integers(3)]))
        for _ in range(int(rng.integers(0, 40))):
            s = int(rng.integers(0, 10_000))
            co.append((f"GPU:{rng.integers(3)}", s, s + int(rng.integers(1, 500))))
        r = analyze(make_trace(transfers=tr, compute=co, steps=[(0, 0, 5000), (1, 5000, 11_000)]))
        for d, b in r["by_direction"].items():
            rows = b["exposure_causes"]
            assert sum(x["exposed_ps"] for x in rows) == b["exposed_ps"], (d, rows)
            assert all(x["exposed_ps"] > 0 and x["cause"] in C.CAUSES for x in rows)
            assert len({x["cause"] for x in rows}) == len(rows)
        for row in r["by_hlo_op"]["records"] + r["by_device"] + r["steps"]:
            assert sum(row["exposure_causes"].values()) == row["exposed_ps"], row
            assert all(v > 0 for v in row["exposure_causes"].values())
        json.dumps(r, allow_nan=False)


def test_parts_merge_exactly(tmp_path):
    """Two hosts analysed apart and reduced: each direction's causes are the sums of the
    hosts', evidence counts too."""
    parts, alone = [], []
    for host, stream in (("a", 7), ("b", 20)):  # a: copy on the compute stream; b: beside it
        t = SyntheticTrace(host)
        g = _Shifted(t.gpu(0))
        g.kernel(0, 10 * US, stream=7)
        g.memcpy("D2H", 10 * US, 30 * US, 1_000_000, stream=stream)
        g.kernel(42 * US, 10 * US, stream=7)
        tr = read(t.write(tmp_path / f"{host}.xplane.pb"))
        parts.append(host_part(tr))
        alone.append(_causes(analyze(tr), "D2H"))
    merged = reduce_parts(parts)
    assert alone == [{C.SHARES_STREAM: 30 * US}, {C.DEVICE_WAITS: 30 * US}]
    assert _causes(merged, "D2H") == {C.SHARES_STREAM: 30 * US, C.DEVICE_WAITS: 30 * US}


def test_text_and_check_name_the_cause(tmp_path):
    def build(g):
        g.kernel(0, 100 * US, stream=7)
        g.memcpy("D2H", 100 * US, 100 * US, 5_000_000, stream=7)
        g.kernel(200 * US, 100 * US, stream=7)
    r = _analyze(tmp_path, build)
    out = text.text(r)
    assert "why exposed" in out and "shares_stream_with_compute" in out and "100.0%" in out
    outcome = gate.run_checks(r, gate.CheckConfig(min_overlap=0.5))
    c = next(c for c in outcome["checks"] if c["name"] == "min_overlap")
    assert c["status"] == "fail" and c["cause"] == C.SHARES_STREAM
    assert "exposed mostly shares_stream_with_compute (100% of 100 us)" in c["message"]
    assert C.COMMAND_BUFFER_FLAG in c["message"]
    ok = gate.run_checks(r, gate.CheckConfig(min_overlap=0.0))
    assert "cause" not in next(c for c in ok["checks"] if c["name"] == "min_overlap")


def test_dashboard_card(tmp_path):
    from overlap.dashboard import causes_view

    def build(g):
        g.kernel(0, 40 * US, stream=7)
        g.memcpy("H2D", 10 * US, 100 * US, 6_000_000, stream=20)
        g.kernel(115 * US, 10 * US, stream=7)
    r = _analyze(tmp_path, build)
    (card,) = causes_view.cards(r, {})
    assert card.id == "run-causes"
    table = card.children[-1]
    assert [td.children for td in table.children[1].children[:4]] == \
        ["H2D", C.DEVICE_WAITS, "70 us", "100%"]
    assert causes_view.cards({"by_direction": {}}, {}) == []


# ---------------------------------------------------------------------------------------------
# Real captures: the H100 archive shipped in tests/data/gpu-corpus


_MEMBERS = ("gpu-h100/transformer-h100/qkv_proj_offloaded/",
            "gpu-h100/transformer-h100-command-buffers/qkv_proj_offloaded_cb/",
            "gpu-h100/scan-h100/offload_x/", "gpu-h100/params-h100/full/")


@pytest.fixture(scope="module")
def h100(tmp_path_factory) -> Path:
    if not CORPUS.exists():
        pytest.skip(f"{CORPUS} not in this checkout")
    root = tmp_path_factory.mktemp("h100")
    with tarfile.open(CORPUS) as tf:
        tf.extractall(root, members=[m for m in tf.getmembers()
                                     if m.name.startswith(_MEMBERS) and "/hlo/" not in m.name],
                      filter="data")
    return root


def _shares(result: dict, d: str) -> dict[str, float]:
    b = result["by_direction"][d]
    return {c["cause"]: c["exposed_ps"] / b["exposed_ps"] for c in b["exposure_causes"]}


def test_real_command_buffers_share_the_stream(h100):
    """With command buffers every copy ran on stream 14 with all 3955 kernels: 100% of the
    exposed time (all of it: 0% hidden) is shares_stream_with_compute, both directions."""
    from overlap.trace import read_trace

    r = analyze(read_trace(h100 / _MEMBERS[1]))
    for d in ("D2H", "H2D"):
        assert _shares(r, d) == {C.SHARES_STREAM: 1.0}
        ev = _evidence(r, d, C.SHARES_STREAM)
        assert [(s["stream"], s["kernels"], s["copies"]) for s in ev["streams"]] == \
            [(14, 3955, 120)]


def test_real_streams_apart(h100):
    """Command buffers off: no copy shares a stream. The scan's H2D (the device idle through
    each, 0% hidden) is all device_waits; the transformer's and the parameter offload's
    copies queue at link rate (params: 68 copies a step, queues over 25 long)."""
    from overlap.trace import read_trace

    scan = analyze(read_trace(h100 / _MEMBERS[2]))
    assert _shares(scan, "H2D") == {C.DEVICE_WAITS: 1.0}
    assert _evidence(scan, "H2D", C.DEVICE_WAITS)["no_work_transfers"] == 50
    tr = analyze(read_trace(h100 / _MEMBERS[0]))
    params = analyze(read_trace(h100 / _MEMBERS[3]))
    for r in (scan, tr, params):
        for d in ("D2H", "H2D"):
            assert C.SHARES_STREAM not in _shares(r, d)
            assert C.PAGEABLE not in _shares(r, d)
    for d in ("D2H", "H2D"):
        assert max(_shares(tr, d), key=_shares(tr, d).get) == C.QUEUED
        assert _shares(params, d)[C.QUEUED] > 0.8
        assert _evidence(params, d, C.QUEUED)["max_queue"] > 25


def _doc_row(result: dict, name: str) -> str:
    """A row of docs/causes.md's corpus table, as the tool answers it."""
    cells = []
    for d in ("D2H", "H2D"):
        b = result["by_direction"][d]
        cells.append(f"{b['exposed_ps'] / 1e9:.1f} ms")
        cells.append(", ".join(f"{c['cause']} {c['exposed_ps'] / b['exposed_ps']:.0%}"
                               for c in b["exposure_causes"]))
    return f"| {name} | " + " | ".join(cells) + " |"


def test_docs_table_is_the_tools_answer(h100):
    """The corpus table of docs/causes.md, for the captures extracted here."""
    from overlap.trace import read_trace

    doc = (REPO / "docs" / "causes.md").read_text()
    for m in _MEMBERS:
        name = m.rstrip("/")
        assert _doc_row(analyze(read_trace(h100 / m)), name) in doc, name


@pytest.mark.parametrize("seed", range(40))
def test_pieces_around_equal_the_key_search(seed):
    """`_pieces_around` (the merged compute's own group layout) counts the same intervals
    before each copy as `_search` on `_Keys`, for copies of groups with and without compute,
    before, inside and after their group's intervals (random groups, gaps and overlaps)."""
    rng = np.random.default_rng(seed)
    ng = int(rng.integers(1, 5))
    n = int(rng.integers(0, 60))
    cg = np.sort(rng.integers(0, ng, n))
    cs = rng.integers(0, 1000, n)
    ce = cs + rng.integers(0, 50, n)  # some empty: dropped by the merge
    order = np.lexsort((cs, cg))
    comp = C.merged_groups(cg[order], cs[order], ce[order])
    m = int(rng.integers(1, 40))
    tg = rng.integers(0, ng + 1, m)  # group ng: never any compute
    s = rng.integers(-100, 1200, m)
    e = s + rng.integers(1, 300, m)
    keys = C._Keys(s, e, cs, ce, groups=ng + 1)
    want = (C._search(keys, comp.g, comp.e, tg, s, "right"),
            C._search(keys, comp.g, comp.s, tg, e, "left"))
    got = C._pieces_around(comp, keys, tg, s, e)
    assert comp.layout is not None or not len(comp.s)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


def _queues_by_rows(tg, direction, start, end, nbytes):
    """`_queues` one copy at a time: per (group, direction) in (start, row) order, a copy is
    queued when it starts within QUEUE_GAP_PS after the furthest end of the earlier copies of
    its queue; it counts the copies (and bytes) of its back-to-back chain before it."""
    n = len(start)
    q, ahead, bahead = [False] * n, [0] * n, [0] * n
    rows: dict[tuple, list[int]] = {}
    for i in range(n):
        rows.setdefault((int(tg[i]), direction[i]), []).append(i)
    for idx in rows.values():
        idx.sort(key=lambda i: (int(start[i]), i))
        reach, chain = None, []
        for i in idx:
            gap = None if reach is None else int(start[i]) - reach
            if gap is not None and 0 <= gap <= C.QUEUE_GAP_PS:
                q[i] = True
            else:
                chain = []
            ahead[i], bahead[i] = len(chain), sum(int(nbytes[j]) for j in chain)
            chain.append(i)
            reach = int(end[i]) if reach is None else max(reach, int(end[i]))
    return q, ahead, bahead


@pytest.mark.parametrize("seed", range(30))
def test_queues_equal_the_copy_by_copy_rule(seed, monkeypatch):
    """`_queues` (one sort, a running maximum of the ends lifted per queue by time, or by rank
    where time would not fit: `_LIFT_LIMIT`) gives the copy-by-copy answer, both ways, on
    times near 0 and near the int64 limit."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 30))
    base = 0 if seed % 2 else (1 << 62) - 10**9
    tg = rng.integers(0, 3, n).astype(np.int64)
    direction = np.array([("D2H", "H2D")[k] for k in rng.integers(0, 2, n)], object)
    start = base + rng.integers(0, 60, n).astype(np.int64) * US
    end = start + rng.integers(0, 20, n).astype(np.int64) * US
    nbytes = rng.integers(0, 1000, n).astype(np.int64)
    want = _queues_by_rows(tg, direction, start, end, nbytes)
    for limit in (C._LIFT_LIMIT, 0):
        monkeypatch.setattr(C, "_LIFT_LIMIT", limit)
        got = C._queues(tg, direction, start, end, nbytes)
        assert [v.tolist() for v in got] == [list(v) for v in want]


@pytest.mark.parametrize("seed", range(40))
def test_copies_without_exposed_time_add_no_piece(seed):
    """The exposed-time set of `transfer_columns` and the device-waits split of `_waits` are
    computed from the copies with exposed time only: the same answers as from every copy
    (random groups, compute with gaps, copies hidden, partly and wholly exposed, empty)."""
    from overlap.analysis.intervals import merge_grouped

    rng = np.random.default_rng(seed)
    ng = int(rng.integers(1, 4))
    n = int(rng.integers(0, 50))
    cg = np.sort(rng.integers(0, ng, n))
    cs = rng.integers(0, 1000, n) * US
    ce = cs + rng.integers(0, 80, n) * US
    order = np.lexsort((cs, cg))
    cg, cs, ce = cg[order], cs[order], ce[order]
    comp = C.merged_groups(cg, cs, ce)
    m = int(rng.integers(1, 40))
    tg = rng.integers(0, ng + 1, m)  # group ng: never any compute
    s = rng.integers(0, 1100, m) * US
    e = s + rng.integers(0, 60, m) * US
    exposed = (e - s) - comp.covered(tg, s, e)
    assert (exposed >= 0).all()
    every = comp.subtract_from(*merge_grouped(tg, s, e))
    some = comp.subtract_from(*merge_grouped(tg[exposed > 0], s[exposed > 0],
                                             e[exposed > 0]))
    for a, b in zip(every, some):
        np.testing.assert_array_equal(a, b)
    keys = C._Keys(s, e, cs, ce, groups=ng + 1)
    cols = ("cause_device_waits_ps", "cause_unknown_ps", "unknown_no_resume_ps",
            "unknown_late_resume_ps", "unknown_not_copy_bound_ps", "stall_ps", "ready_ps")
    outs = []
    for rest in (np.ones(m, bool), exposed > 0):
        out = {c: np.zeros(m, np.int64) for c in cols}
        out["ready_ps"][:] = -1
        C._waits(out, keys, tg, s, e, comp, rest, ng + 1)
        outs.append(out)
    for c in cols:
        np.testing.assert_array_equal(outs[0][c], outs[1][c], c)
