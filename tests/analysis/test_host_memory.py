"""Host compute and pinned host memory against its cap (issue 33, items 3 and 4)."""

from __future__ import annotations

from overlap.analysis.host_memory import (
    CAP_ENV,
    cap_in_force,
    host_compute_ops,
    host_facts,
    pinned_host_peak,
)

# SYNTHETIC HLO text, written by hand in XLA's printed form: an add on host memory S(5), a
# host-annotated fusion, and the moves offload uses (which are not host compute).
HLO = """HloModule jit_step, entry_computation_layout={(f32[1024]{0})->f32[1024]{0}}

fused {
  p = f32[1024]{0} parameter(0)
  ROOT m = f32[1024]{0} multiply(p, p)
}

ENTRY main {
  x = f32[1024]{0} parameter(0)
  h = f32[1024]{0:S(5)} copy(x)
  a = f32[1024]{0:S(5)} add(f32[1024]{0:S(5)} h, f32[1024]{0:S(5)} h)
  f = f32[1024]{0} fusion(x), calls=fused, frontend_attributes={_xla_compute_type="host"}
  ROOT d = f32[1024]{0} copy(a)
}
"""


def test_host_compute_ops_are_listed_and_moves_are_not():
    got = host_compute_ops(HLO)
    assert got["count"] == 2
    by = {o["name"]: o for o in got["ops"]}
    assert set(by) == {"a", "f"}
    assert "S(5)" in by["a"]["why"] and "_xla_compute_type" in by["f"]["why"]
    plain = HLO.replace('frontend_attributes={_xla_compute_type="host"}', "")
    plain = plain.replace("add(f32[1024]{0:S(5)} h, f32[1024]{0:S(5)} h)", "copy(h)")
    assert host_compute_ops(plain)["count"] == 0


def test_cap_in_force():
    assert cap_in_force("gpu", None)["bytes"] == 64 << 30
    assert "not recorded" in cap_in_force("gpu", None)["source"]
    assert cap_in_force("gpu", {CAP_ENV: "16"})["bytes"] == 16 << 30
    assert cap_in_force("tpu", None)["bytes"] is None


def test_no_proto_is_said_not_guessed():
    f = host_facts(HLO, None, "gpu", None)
    ph = f["pinned_host"]
    assert ph["peak_bytes"] is None and ph["fraction_of_cap"] is None
    assert "no HLO proto" in ph["source"]
    assert pinned_host_peak(b"\xff\xff")["bytes"] is None


# The pinned host peak of real XLA:GPU output (a deviceless H100 compile, made in the test) is
# tests/plan/test_host_facts.py's: a skipped copy here read a plan from /tmp that CI never has.
