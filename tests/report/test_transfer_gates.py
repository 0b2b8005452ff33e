"""The opposite gate: transfers that should not be there (issue 12, section 6)."""

from __future__ import annotations

import json

import pytest

import overlap
from overlap.trace.synthetic import SyntheticTrace
from tests.conftest import run_cli

US = 1_000_000


def _loop(tmp_path, per_step: int, nbytes: int = 8):
    """3 annotated steps; each uploads `per_step` tiny scalars (`size:8`, as a Python scalar
    re-uploaded every step would) next to a kernel."""
    t = SyntheticTrace()
    g = t.gpu(0)
    for s in range(3):
        t0 = (10 + 100 * s) * US
        t.step(s, t0, t0 + 90 * US)
        g.kernel(t0 + 5 * US, 50 * US)
        for k in range(per_step):
            g.memcpy("H2D", t0 + 10 * US + k * US, US // 2, nbytes, hlo_op=f"scalar-upload.{k}")
    return t.write(tmp_path / "loop.xplane.pb")


def test_max_transfers_names_the_offending_copies(tmp_path):
    p = _loop(tmp_path, per_step=2)
    r = run_cli("check", str(p), "--max-transfers", "0", "--json",
                "--junit", str(tmp_path / "j.xml"))
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    chk = next(c for c in doc["check"]["checks"] if c["name"] == "max_transfers")
    assert chk["value"] == 2 and chk["limit"] == 0 and chk["status"] == "fail"
    assert {o["hlo_op"] for o in chk["offenders"]} == {"scalar-upload.0", "scalar-upload.1"}
    assert all(o["bytes"] == 8 and o["direction"] == "H2D" for o in chk["offenders"])
    assert "scalar-upload.0 H2D 8 B" in r.stderr  # the text report (stderr with --json)
    assert "scalar-upload.0" in (tmp_path / "j.xml").read_text()
    # min_overlap is not applied by default with the transfer gates
    assert not any(c["name"] == "min_overlap" for c in doc["check"]["checks"])


def test_limits_per_step_bytes_and_direction(tmp_path):
    p = _loop(tmp_path, per_step=2, nbytes=8)
    assert run_cli("check", str(p), "--max-transfers", "2").returncode == 0
    assert run_cli("check", str(p), "--max-transfer-bytes", "15").returncode == 1
    assert run_cli("check", str(p), "--max-transfer-bytes", "16").returncode == 0
    assert run_cli("check", str(p), "--max-transfers", "0",
                   "--transfer-direction", "D2H").returncode == 0
    assert run_cli("check", str(p), "--max-transfers", "-1").returncode == 2


def test_a_loop_without_transfers_passes(tmp_path):
    p = _loop(tmp_path, per_step=0)
    r = run_cli("check", str(p), "--max-transfers", "0")
    assert r.returncode == 0, r.stdout + r.stderr


def test_assert_no_transfers(tmp_path):
    assert overlap.assert_no_transfers(_loop(tmp_path / "a", per_step=0))["status"]
    with pytest.raises(AssertionError) as e:
        overlap.assert_no_transfers(_loop(tmp_path / "b", per_step=3), max_transfers=1)
    msg = str(e.value)
    assert "scalar-upload.0 H2D 8 B" in msg and msg.count("max_transfers") == 1


def test_assert_hidden_states_the_reason_once(tmp_path):
    t = SyntheticTrace()
    t.gpu(0).kernel(10 * US, 5 * US)
    p = t.write(tmp_path / "none.xplane.pb")
    with pytest.raises(AssertionError) as e:
        overlap.assert_hidden(p)
    reason = "host offload is not happening"
    assert str(e.value).count(reason) == 1
