"""The straggler view: the host that exposes the most transfer time is named (issue 14)."""

from __future__ import annotations

import json

from overlap.analysis import overlap as analysis
from overlap.trace import read_trace
from overlap.trace.synthetic import SyntheticTrace
from tests.conftest import run_cli

US = 1_000_000


def _host(name: str, slow: bool) -> SyntheticTrace:
    """3 steps; each: a kernel and a D2H copy beside it. The slow host copies through
    pageable memory (slower: 300 us instead of 200) next to shorter compute (100 us)."""
    t = SyntheticTrace(host=name)
    g = t.gpu(0)
    for s in range(3):
        t0 = (10 + 1000 * s) * US
        t.step(s, t0, t0 + 900 * US)
        g.kernel(t0 + 10 * US, (100 if slow else 400) * US)
        g.memcpy("D2H", t0 + 10 * US, (300 if slow else 200) * US, 8 << 20,
                 host_kind="pageable" if slow else "pinned", hlo_op="copy-start.1")
    return t


def pod(tmp_path, n=5, slow="host-3"):
    for i in range(n):
        _host(f"host-{i}", f"host-{i}" == slow).write_session(tmp_path)
    return tmp_path


def test_straggler_view_names_the_slow_host(tmp_path):
    r = analysis.analyze(read_trace(pod(tmp_path)))
    sv = r["stragglers"]
    assert sv["worst_host"] == "host-3" and len(sv["hosts"]) == 5
    row = next(h for h in sv["hosts"] if h["host"] == "host-3")
    assert row["exposed_per_step_ps"] == 200 * US  # 300 us copy, 100 us of it behind compute
    assert sv["median_exposed_per_step_ps"] == 0 and row["gap_to_median"] is None
    assert "host host-3 exposes 200 us per step" in sv["verdict"]
    others = [h for h in sv["hosts"] if h["host"] != "host-3"]
    assert all(h["overlap_d2h"] == 1.0 and h["exposed_per_step_ps"] == 0 for h in others)


def test_report_and_gate(tmp_path):
    p = pod(tmp_path, slow="host-1")
    r = run_cli("report", str(p))
    assert r.returncode == 0 and "hosts: host host-1 exposes" in r.stdout
    doc = json.loads(run_cli("report", str(p), "--json").stdout)
    assert doc["stragglers"]["worst_host"] == "host-1"


def test_skew_gate_against_the_median(tmp_path):
    # Every host exposes a little (the pinned copies outlast their kernels), one much more.
    for i in range(4):
        t = SyntheticTrace(host=f"h{i}")
        g = t.gpu(0)
        for s in range(3):
            t0 = (10 + 1000 * s) * US
            t.step(s, t0, t0 + 900 * US)
            g.kernel(t0 + 10 * US, 100 * US)
            g.memcpy("D2H", t0 + 10 * US, (400 if i == 2 else 150) * US, 1 << 20)
        t.write_session(tmp_path)
    r = analysis.analyze(read_trace(tmp_path))
    assert r["stragglers"]["worst_host"] == "h2"
    assert r["stragglers"]["max_skew"] == 300 / 50
    assert run_cli("check", str(tmp_path), "--min-overlap", "0",
                   "--max-host-skew", "7").returncode == 0
    r = run_cli("check", str(tmp_path), "--min-overlap", "0", "--max-host-skew", "3")
    assert r.returncode == 1 and "max_host_skew" in r.stdout and "6.0x the median" in r.stdout
