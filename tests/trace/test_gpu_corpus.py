"""The 38 real NVIDIA H100/H200 captures of JAX host offload (tests/data/gpu-corpus/, made for this
project on 2026-11-24; SOURCES.md there says how): `overlap report --json` must give, per capture
and direction, the numbers an independent reader found (expected.csv, transcribed from SOURCES.md's
table): transfers, bytes, time in flight to the picosecond the table gives (ms, 3 decimals), hidden
share to its 0.1 %, the device compute ops; never CANNOT_TELL (XLA:GPU's `memcpy128` /
`memcpy32_post` kernels inside CUDA graphs are device-to-device copies, not host copies), and
NO_TRANSFERS where nothing was offloaded. `overlap check` with default gates passes a remat
baseline made with XLA's default flags (command buffers on).

The archives are unpacked once per session into a temporary directory (~2 s); each capture is
read serially through the library (~0.1-0.3 s each), and once through the CLI.
"""

from __future__ import annotations

import csv
import hashlib
import json
import tarfile
from decimal import Decimal
from pathlib import Path

import pytest

from tests.conftest import REPO, SAMPLE_TRACES, run_cli

CORPUS = REPO / "tests" / "data" / "gpu-corpus"
ARCHIVES = ("gpu-h100.tar.xz", "gpu-h200.tar.xz")
PS_PER_MS = 10**9
DIRECTIONS = ("D2H", "H2D")


def _expected() -> list[dict[str, str]]:
    with open(CORPUS / "expected.csv", newline="") as f:
        return list(csv.DictReader(ln for ln in f if not ln.startswith("#")))


EXPECTED = _expected()
BY_NAME = {row["capture"]: row for row in EXPECTED}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """Both archives unpacked (read-only data; members checked to stay inside the directory)."""
    root = tmp_path_factory.mktemp("gpu-corpus")
    for name in ARCHIVES:
        with tarfile.open(CORPUS / name) as tf:
            tf.extractall(root, filter="data")
    return root


def test_table_is_whole():
    """38 captures, none twice, each direction's numbers present (a truncated transcription
    would silently test less)."""
    assert len(EXPECTED) == 38 and len(BY_NAME) == 38
    assert sum(n.startswith("gpu-h100/") for n in BY_NAME) == 28
    for row in EXPECTED:
        for d in ("d2h", "h2d"):
            assert int(row[f"{d}_count"]) >= 0 and int(row[f"{d}_bytes"]) >= 0
            assert (row[f"{d}_hidden_pct"] == "") == (int(row[f"{d}_count"]) == 0)


def _span_ps(ms: str) -> int:
    return int(Decimal(ms) * PS_PER_MS)


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_report_equals_independent_reader(corpus, name):
    from overlap.analysis.pod import read_and_analyze

    row = BY_NAME[name]
    run = corpus / name
    assert run.is_dir(), f"{name} not in the archives"
    trace, result = read_and_analyze(run, jobs=1)
    total = sum(int(row[f"{d.lower()}_count"]) for d in DIRECTIONS)
    # Never CANNOT_TELL: every copy in these files is known to be a host copy or not.
    assert result["status"] == ("OK" if total else "NO_TRANSFERS"), result["reason"]
    assert result["transfer_status"]["status"] == "complete"
    assert not trace.unreadable
    for d in DIRECTIONS:
        got = result["by_direction"][d]
        k = d.lower()
        assert got["count"] == int(row[f"{k}_count"]), (d, got)
        assert got["bytes"] == int(row[f"{k}_bytes"]), (d, got)
        assert got["unknown_bytes"] == 0
        # The table gives ms to 3 decimals: within half a microsecond of it.
        assert abs(got["span_ps"] - _span_ps(row[f"{k}_span_ms"])) <= PS_PER_MS // 2000, (d, got)
        assert 0 <= got["hidden_ps"] <= got["span_ps"]
        assert got["hidden_ps"] + got["exposed_ps"] == got["span_ps"]
        if got["count"]:
            share = got["hidden_ps"] / got["span_ps"]
            assert got["overlap_ratio"] == pytest.approx(share)
            # The table gives % to one decimal: within 0.05 points of it.
            assert abs(100 * share - float(row[f"{k}_hidden_pct"])) <= 0.05 + 1e-9, (d, share)
            assert got["hidden"] + got["partial"] + got["exposed"] <= got["count"]
        else:
            assert got["span_ps"] == got["hidden_ps"] == 0 and got["overlap_ratio"] is None
    s = result["summary"]
    assert s["transfers"] == total
    assert s["bytes"] == sum(int(row[f"{d.lower()}_bytes"]) for d in DIRECTIONS)
    # Device compute ops as the independent reader counted them (its "other memcpy", the D2D
    # copies and memcpy128/memcpy32_post kernels, are neither compute nor transfers).
    assert len(trace.compute) == int(row["compute_ops"])
    assert trace.transfers["direction"].isin(DIRECTIONS).all()


def test_report_cli_json_equals_table(corpus):
    """The same numbers through the command a user runs (one capture; the library test covers
    all 38): a user's own script, default XLA flags, offload in CUDA graphs."""
    name = "gpu-h100/user-script/linkbound-offload"
    row = BY_NAME[name]
    r = run_cli("report", "--json", str(corpus / name))
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["status"] == "OK"
    for d in DIRECTIONS:
        k = d.lower()
        got = out["by_direction"][d]
        assert (got["count"], got["bytes"]) == (int(row[f"{k}_count"]), int(row[f"{k}_bytes"]))
        assert abs(got["span_ps"] - _span_ps(row[f"{k}_span_ms"])) <= PS_PER_MS // 2000


@pytest.mark.parametrize("name", ["gpu-h100/user-script/balanced-remat",
                                  "gpu-h100/transformer-h100-command-buffers/full_cb"])
def test_check_passes_default_flags_remat_baseline(corpus, name):
    """A remat baseline made with XLA's default flags (command buffers on, memcpy128 /
    memcpy32_post copy kernels in its graphs): `overlap check` with default gates exits 0."""
    r = run_cli("check", str(corpus / name))
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("PASS: NO_TRANSFERS")


def test_sample_traces_are_corpus_members(corpus):
    """sample_traces/gpu-h100 and gpu-h200 are byte-for-byte copies of members of the archives
    (their README says so)."""
    files = sorted(p for top in ("gpu-h100", "gpu-h200")
                   for p in (SAMPLE_TRACES / top).rglob("*") if p.is_file())
    assert len(files) >= 20
    runs = {p.parent.parent.parent.parent for p in files if p.name.endswith(".xplane.pb")}
    assert len(runs) >= 6
    for p in files:
        rel = p.relative_to(SAMPLE_TRACES)
        twin = corpus / rel
        assert twin.is_file(), rel
        assert hashlib.sha256(p.read_bytes()).digest() == \
            hashlib.sha256(twin.read_bytes()).digest(), rel
