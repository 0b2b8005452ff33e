"""When the program needed each copy (`overlap.analysis.first_use`): the copy's -done and first
user from the HLO, found in the trace, in the `device_waits` evidence.

SYNTHETIC GPU traces beside a small hand-written HLO module, whose answers are known by
construction (times in us, the arithmetic written out); the real H100 captures (text and the
capture's own HloProto give the same answer; the scan's reloads had no compute before their
use); the renderers (text, Markdown, JUnit) and the sums, which the HLO facts never change."""

from __future__ import annotations

import copy
import glob
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from overlap.analysis import causes as C
from overlap.analysis import first_use as F
from overlap.analysis.names import programs_of
from overlap.analysis.overlap import DIRECTIONS, analyze, transfer_columns
from overlap.hlo import trace_ops
from overlap.report import causes_text, text
from overlap.trace import read_trace
from overlap.trace.synthetic import SyntheticTrace

US = 1_000_000
T0 = 5000 * US  # synthetic lines begin after this; the tests count from it
REPO = Path(__file__).resolve().parents[2]
SCAN = REPO / "sample_traces" / "gpu-h100" / "scan-h100" / "offload_x"

# An H2D reload (copy-start.1 -> copy-done.1 -> bitcast.1 -> fusion.2), a kernel before it
# (fusion.1), and a D2H (copy-start.2) whose done no instruction reads but fusion.3 must follow
# (a control predecessor, as XLA orders the scan's D2H).
HLO = """HloModule jit_train_step

%fused_a (a: f32[1024]) -> f32[1024] {
  %a = f32[1024]{0} parameter(0)
  ROOT %n = f32[1024]{0} negate(%a)
}

ENTRY %main (p0: f32[1024], p1: f32[1024]) -> f32[1024] {
  %p0 = f32[1024]{0:S(5)} parameter(0)
  %p1 = f32[1024]{0} parameter(1)
  %copy-start.1 = (f32[1024]{0}, f32[1024]{0:S(5)}, u32[]) copy-start(%p0)
  %copy-start.2 = (f32[1024]{0:S(5)}, f32[1024]{0}, u32[]) copy-start(%p1)
  %fusion.1 = f32[1024]{0} fusion(%p1), kind=kLoop, calls=%fused_a
  %copy-done.1 = f32[1024]{0} copy-done(%copy-start.1)
  %copy-done.2 = f32[1024]{0:S(5)} copy-done(%copy-start.2)
  %bitcast.1 = f32[1024]{0} bitcast(%copy-done.1)
  %fusion.2 = f32[1024]{0} fusion(%bitcast.1), kind=kLoop, calls=%fused_a
  %fusion.3 = f32[1024]{0} fusion(%fusion.2), calls=%fused_a, control-predecessors={%copy-done.2}
  ROOT %tuple = (f32[1024]{0}, f32[1024]{0:S(5)}) tuple(%fusion.3, %copy-done.2)
}
"""


def _run(tmp_path: Path, build, hlo: str | None = HLO) -> tuple[dict, object]:
    """A run directory: the synthetic capture and (unless None) hlo/jit_train_step.hlo.txt;
    its analysis with the HLO facts added as `overlap report` adds them."""
    t = SyntheticTrace("h")
    g = t.gpu(0)
    build(g)
    session = tmp_path / "plugins" / "profile" / "s1"
    session.mkdir(parents=True)
    t.write(session / "h.xplane.pb")
    if hlo is not None:
        (tmp_path / "hlo").mkdir()
        (tmp_path / "hlo" / "jit_train_step.hlo.txt").write_text(hlo)
    trace = read_trace(str(tmp_path))
    result = analyze(trace)
    F.add_hlo_evidence(trace, result, {k: v[0] for k, v in programs_of(tmp_path, trace).items()})
    return result, trace


def _waits(result: dict, d: str) -> dict:
    return next(c["evidence"] for c in result["by_direction"][d]["exposure_causes"]
                if c["cause"] == C.DEVICE_WAITS)


def _reload(g) -> None:
    """fusion.1 [0, 100); H2D copy-start.1 [20, 150), 13 MB; fusion.2 [160, 200).
    The copy is hidden over [20, 100), exposed over [100, 150) (50 us): compute resumed 10 us
    after it ended, so device_waits. Its first user is fusion.2 (copy-done.1 -> bitcast.1):
    first use 160; before_use 160 - 20 = 140; needed 130; the device's last compute before the
    use ended at 100, so ready 100 - 20 = 80 and stall min(150, 160) - 100 = 50;
    13e6 B / 80 us = 162.5 GB/s would have hidden it."""
    g.kernel(T0, 100 * US, hlo_op="fusion.1")
    g.memcpy("H2D", T0 + 20 * US, 130 * US, 13_000_000, hlo_op="copy-start.1")
    g.kernel(T0 + 160 * US, 40 * US, hlo_op="fusion.2")


def test_first_user_of_a_reload_by_construction(tmp_path):
    r, _ = _run(tmp_path, _reload)
    assert {c["cause"]: c["exposed_ps"] for c in r["by_direction"]["H2D"]["exposure_causes"]} \
        == {C.DEVICE_WAITS: 50 * US}
    h = _waits(r, "H2D")["hlo"]
    assert (h["copies"], h["with_first_use"], h["unknown"]) == (1, 1, {})
    assert (h["before_use_ps"], h["needed_ps"], h["ready_ps"], h["stall_ps"]) == \
        (140 * US, 130 * US, 80 * US, 50 * US)
    assert h["needed_bandwidth_Bps"] == pytest.approx(13e6 / 80e-6)
    (op,) = h["ops"]
    assert (op["hlo_op"], op["instruction"], op["done"], op["first_users"]) == \
        ("copy-start.1", "copy-start.1", "copy-done.1", ["fusion.2"])
    assert "162.5 GB/s would have hidden it" in h["text"]
    rec = r["top_exposed"]["records"][0]["first_use"]
    assert (rec["first_user"], rec["first_use_ps"] - T0, rec["stall_ps"],
            rec["used_before_end"]) == ("fusion.2", 160 * US, 50 * US, False)


@pytest.mark.parametrize("with_hlo", [True, False])
def test_top_records_first_use_of_the_records_alone_equals_every_copys(tmp_path, with_hlo):
    """`top_exposed` records' `first_use` made from the matched copies' numbers alone (no
    direction needs every copy's: issue 32's many-ops shortcut) equal those read from every
    copy's `per_copy`: three reloads, two hidden (fusion.1 covers them), one exposed with a
    first user (fusion.2 at 160 us, after the copy)."""
    def build(g):
        g.kernel(T0, 100 * US, hlo_op="fusion.1")
        g.memcpy("H2D", T0 + 10 * US, 20 * US, 1_000_000, hlo_op="copy-start.1")
        g.memcpy("H2D", T0 + 40 * US, 20 * US, 2_000_000, hlo_op="copy-start.1")
        g.memcpy("H2D", T0 + 120 * US, 30 * US, 4_000_000, hlo_op="copy-start.1")
        for at in (160, 180, 200):
            g.kernel(T0 + at * US, 10 * US, hlo_op="fusion.2")
    _, trace = _run(tmp_path, build, HLO if with_hlo else None)
    result = analyze(trace)  # (no first_use yet: _run's result has add_hlo_evidence's)
    progs = {k: v[0] for k, v in programs_of(tmp_path, trace).items()}
    table, _ = transfer_columns(trace)
    fu = F.copy_first_use(trace, progs)
    start, end = np.asarray(table["start_ps"]), np.asarray(table["end_ps"])
    pc = F.per_copy(fu, start, end, np.asarray(table["bytes"], np.int64))
    alone = copy.deepcopy(result)
    F._top_records(alone, table, fu)
    recs = [r["first_use"] for r in alone["top_exposed"]["records"]]
    # each record's numbers as every copy's `per_copy` has them at its row
    every = []
    for _, i in F._matched(alone["top_exposed"]["records"], table, start, end):
        if not pc["known"][i]:
            every.append({"unknown": fu["why"][i]})
            continue
        nb = pc["needed_Bps"][i]
        every.append({"instruction": fu["instruction"][i], "done": fu["done"][i],
                      "first_user": fu["first_user"][i],
                      "first_use_ps": int(fu["first_use_ps"][i]),
                      **{k: int(pc[k][i]) for k in ("before_use_ps", "needed_ps", "ready_ps",
                                                     "stall_ps")},
                      "needed_Bps": None if nb != nb else float(nb),
                      "used_before_end": bool(pc["used_before_end"][i])})
    assert recs == every
    assert len(recs) == 3
    # every copy's numbers without the bandwidth are the same columns, less that one
    bare = F.per_copy(fu, start, end, None)
    assert set(pc) - set(bare) == {"needed_Bps"}
    assert all(np.array_equal(bare[k], pc[k]) for k in bare)
    if with_hlo:
        (known,) = [r for r in recs if "first_user" in r and r["first_use_ps"] - T0 == 160 * US]
        assert known["first_user"] == "fusion.2" and known["stall_ps"] >= 0
    else:
        assert all(set(r) == {"unknown"} and r["unknown"].startswith(F.NO_HLO) for r in recs)


def test_no_compute_before_the_use_says_issue_earlier(tmp_path):
    """H2D [0, 100) with no kernel until its user fusion.2 at 110: ready 0, stall 100 us, no
    bandwidth hides it (the scan's reloads)."""
    def build(g):
        g.memcpy("H2D", T0, 100 * US, 5_000_000, hlo_op="copy-start.1")
        g.kernel(T0 + 110 * US, 10 * US, hlo_op="fusion.2")
    r, _ = _run(tmp_path, build)
    h = _waits(r, "H2D")["hlo"]
    assert (h["ready_ps"], h["stall_ps"], h["no_ready"], h["needed_bandwidth_Bps"]) == \
        (0, 100 * US, 1, None)
    assert "only an earlier issue hides it" in h["text"]


def test_a_prefetch_is_paired_with_its_own_use(tmp_path):
    """Copies [0, 50) and [60, 150) of one op, uses (fusion.2) at [100, 110) and [200, 210):
    the second copy was issued before the first use; pairing by order gives it the use at
    200, not the one at 100 (which would start before the copy ended)."""
    def build(g):
        g.memcpy("H2D", T0, 50 * US, 1_000_000, hlo_op="copy-start.1")
        g.memcpy("H2D", T0 + 60 * US, 90 * US, 1_000_000, hlo_op="copy-start.1")
        g.kernel(T0 + 100 * US, 10 * US, hlo_op="fusion.2")
        g.kernel(T0 + 200 * US, 10 * US, hlo_op="fusion.2")
    _, trace = _run(tmp_path, build)
    progs = {k: v[0] for k, v in programs_of(tmp_path, trace).items()}
    fu = F.copy_first_use(trace, progs)
    assert (fu["first_use_ps"] - T0).tolist() == [100 * US, 200 * US]
    # the first kernel after each start instead: the second copy's "use" starts before it ends
    tr = trace.columns("transfers")
    assert F._paired(np.zeros(1, np.int64), np.asarray(tr["start_ps"][1:]),
                     np.zeros(1, np.int64), np.array([T0 + 100 * US])).tolist() == \
        [T0 + 100 * US]


def test_control_successor_is_the_first_user_of_a_d2h():
    """copy-done.2 has no reader but fusion.3 names it as a control predecessor."""
    prog = trace_ops.program_from_text(HLO)
    assert prog.instrs["fusion.3"].control_predecessors == ["copy-done.2"]
    assert F.first_users(prog, "copy-start.2", {"fusion.1", "fusion.2", "fusion.3"}) == \
        ("copy-done.2", ["fusion.3"], None)
    done, users, why = F.first_users(prog, "copy-start.2", {"fusion.1"})
    assert (done, users) == ("copy-done.2", []) and "carried out of its computation" in why
    assert F.first_users(prog, "fusion.1", set())[2] == "no -done reads fusion.1"


def test_without_the_program_says_no_hlo(tmp_path):
    r, _ = _run(tmp_path, _reload, hlo=None)
    h = _waits(r, "H2D")["hlo"]
    # the synthetic capture carries no HloProto either
    assert h["with_first_use"] == 0
    assert list(h["unknown"]) == [f"{F.NO_HLO}: program jit_train_step(5) is not at hand"]
    assert h["text"].startswith("first use unknown (1 no HLO")


def test_renderers_show_the_causes_and_the_hlo(tmp_path):
    r, _ = _run(tmp_path, _reload)
    assert "    HLO: 1 of 1 copies' first users found" in "\n".join(causes_text.lines(r))
    md = text.markdown(r)
    assert "| H2D | `device_waits` | 50 us | 100.0% |" in md and "<br>HLO: " in md
    outcome = {"verdict": "FAIL", "passed": False, "checks": [
        {"name": "min_overlap", "status": "fail", "message": "m"}]}
    suite = ET.fromstring(text.junit(r, outcome).split("\n", 1)[1])
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["exposure_causes.H2D"] == "device_waits 100.0%"
    assert "exposure_causes.D2H" not in props  # nothing exposed that way
    assert "why exposed" in suite.find("system-out").text


# ---------------------------------------------------------------------------------------------
# Real captures


def _first_use(run: Path, proto: bool = False):
    trace = read_trace(str(run))
    result = analyze(trace)
    if proto:
        from overlap.hlo.program import hlo_protos_from_xspace

        (f,) = glob.glob(str(run / "plugins" / "profile" / "*" / "*.xplane.pb"))
        tr = trace.columns("transfers")
        key = (tr["hlo_module"][0], tr["program_id"][0])
        progs = {key: trace_ops.program_from_proto(hlo_protos_from_xspace(f)[
            f"{key[0]}({key[1]})"])}
    else:
        progs = {k: v[0] for k, v in programs_of(run, trace).items()}
    F.add_hlo_evidence(trace, result, progs)
    return result


@pytest.mark.skipif(not SCAN.is_dir(), reason="sample_traces/gpu-h100 not present")
def test_scan_reloads_had_no_compute_before_their_use():
    """The H100 scan (offload_x): every one of its 50 H2D reloads is used by custom-call.5
    (dynamic-slice-start.1 -> dynamic-slice-done.1 -> bitcast.4.0 -> the GEMM) with no compute
    between the copy's start and that use: ready 0, the whole flight a stall. The text and the
    capture's own HloProto give the same facts."""
    text_r, proto_r = _first_use(SCAN), _first_use(SCAN, proto=True)
    h = _waits(text_r, "H2D")["hlo"]
    assert h == _waits(proto_r, "H2D")["hlo"]
    assert (h["copies"], h["with_first_use"], h["no_ready"], h["ready_ps"]) == (50, 50, 50, 0)
    assert h["stall_ps"] == h["needed_ps"] <= h["before_use_ps"]
    (op,) = h["ops"]
    assert (op["instruction"], op["done"], op["first_users"]) == \
        ("dynamic-slice-start.1", "dynamic-slice-done.1", ["custom-call.5"])


def _invariants(result: dict) -> None:
    for d in DIRECTIONS:
        b = result["by_direction"][d]
        causes = b["exposure_causes"]
        assert sum(c["exposed_ps"] for c in causes) == (b["exposed_ps"] if causes else 0)
        for c in causes:
            h = c["evidence"].get("hlo")
            if h is None:
                assert c["cause"] != C.DEVICE_WAITS
                continue
            assert h["with_first_use"] + sum(h["unknown"].values()) == h["copies"]
            assert 0 <= h["ready_ps"] <= h["before_use_ps"]
            assert 0 <= h["stall_ps"] <= h["needed_ps"]
            for o in h["ops"]:
                assert 0 <= o["ready_ps"] <= o["before_use_ps"] and o["stall_ps"] >= 0


@pytest.mark.parametrize("run", ["gpu-h100/transformer-h100/qkv_proj_offloaded",
                                 "gpu-h100/params-h100/full",
                                 "gpu-h100/user-pageable/io",
                                 "gpu-h200/transformer-h100/minimal_offloaded"])
def test_real_captures_keep_the_sums_and_say_what_waited(gpu_corpus, run):
    r = _first_use(gpu_corpus / run)
    _invariants(r)
    waits = {d: _waits(r, d)["hlo"] for d in DIRECTIONS
             if any(c["cause"] == C.DEVICE_WAITS
                    for c in r["by_direction"][d]["exposure_causes"])}
    if run.endswith("qkv_proj_offloaded"):
        # the D2H copies' first users ran long after them with compute before: none waited
        assert waits["D2H"]["with_first_use"] == 40 and waits["D2H"]["stall_ps"] == 0
        assert "none of their first users waited" in waits["D2H"]["text"]
    if run.endswith("full"):
        # the optimizer state written back to host: no kernel reads it
        assert waits["D2H"]["with_first_use"] == 0
        assert all("carried out of its computation" in w for w in waits["D2H"]["unknown"])
    if run.endswith("io"):
        # jax.device_put batches: no program
        assert list(waits["H2D"]["unknown"]) == [f"{F.NO_HLO}: the copy names no program"]


def test_check_names_device_put_copies_as_outside_any_program(gpu_corpus):
    """`overlap check --max-transfers 0` on the user's device_put script: the offenders are
    labelled as the report labels them, not "(unknown)"."""
    from overlap.analysis.overlap import OUTSIDE_PROGRAM_OP, UNKNOWN_OP
    from overlap.report.gate import CheckConfig, run_checks

    trace = read_trace(str(gpu_corpus / "gpu-h100" / "user-pageable" / "io"))
    result = analyze(trace)
    out = run_checks(result, CheckConfig(min_overlap=None, max_transfers=0), trace)
    (c,) = [c for c in out["checks"] if c["name"] == "max_transfers"]
    assert c["status"] == "fail" and c["offenders"]
    assert {o["hlo_op"] for o in c["offenders"]} == {OUTSIDE_PROGRAM_OP}
    assert OUTSIDE_PROGRAM_OP in c["message"] and UNKNOWN_OP not in c["message"]


def test_records_matched_to_the_first_copy_alike_by_start_span_and_names():
    """`_matched` (texts compared at once) against a comparison per copy: many copies start
    together and differ in span, host, device or direction; records name texts, None, an
    absent key, and values that are no text (compared one by one)."""
    rng = np.random.default_rng(5)
    n = 3000
    pick = lambda vals: np.array([vals[i] for i in rng.integers(0, len(vals), n)], object)  # noqa: E731
    table = {"host": pick(["h0", "h1", None]), "device": pick(["GPU:0", "GPU:1", "GPU:2"]),
             "direction": pick(["D2H", "H2D"])}
    start = np.sort(rng.integers(0, 4, n)).astype(np.int64) * 1000
    span = rng.integers(1, 4, n).astype(np.int64) * 10
    recs = [{"start_ps": int(s), "span_ps": int(sp), "host": h, "device": d, "direction": x}
            for s in (0, 1000, 3000, 7000) for sp in (10, 20, 40)
            for h in ("h0", "h1", None) for d in ("GPU:1", "GPU:9") for x in ("D2H",)]
    recs += [{"start_ps": 0, "span_ps": 10, "device": "GPU:0", "direction": "H2D"},
             {"start_ps": 0, "span_ps": 10, "host": 7, "device": "GPU:0", "direction": "H2D"},
             {"start_ps": 2000, "span_ps": 10.0, "host": "h1", "device": "GPU:2",
              "direction": "H2D"}]

    def per_copy(r):
        for i in range(n):
            if start[i] == r.get("start_ps", -1) and span[i] == r.get("span_ps", -1) and (
                    table["host"][i], table["device"][i], table["direction"][i]) == (
                    r.get("host"), r.get("device"), r.get("direction")):
                return i
        return None

    got = {id(r): i for r, i in F._matched(recs, table, start, start + span)}
    want = {id(r): per_copy(r) for r in recs}
    assert got == {k: v for k, v in want.items() if v is not None}
    assert 10 < len(got) < len(recs)


@pytest.mark.parametrize("known", ["none", "some", "all"])
def test_per_copy_is_the_docstrings_arithmetic_per_copy(known):
    """`per_copy` against the module docstring's formulas written out copy by copy, with
    copies whose first use is unknown (-1) mixed in, none of them, or all: uses before, at
    and after the copy's end, ready times before the start and at the use, zero bytes. Where
    no copy has a first use the columns are one value each, read-only (and still the same
    numbers)."""
    rng = np.random.default_rng({"none": 1, "some": 2, "all": 3}[known])
    n = 400
    start = rng.integers(0, 1000, n).astype(np.int64) * 1000
    end = start + rng.integers(0, 50, n).astype(np.int64) * 1000
    use = start + rng.integers(0, 80, n).astype(np.int64) * 1000
    ready = np.minimum(start + rng.integers(-5, 60, n).astype(np.int64) * 1000, use)
    if known != "all":
        lost = rng.random(n) < (1.0 if known == "none" else 0.4)
        use[lost], ready[lost] = -1, -1
    nbytes = rng.integers(0, 3, n).astype(np.int64) * 4096
    fu = {"first_use_ps": use, "ready_at_ps": ready}
    got = F.per_copy(fu, start, end, nbytes)
    assert list(got) == ["known", "before_use_ps", "needed_ps", "ready_ps", "stall_ps",
                         "used_before_end", "needed_Bps"]
    for i in range(n):
        u, r, s, e = int(use[i]), int(ready[i]), int(start[i]), int(end[i])
        ok = u >= 0
        rd = r - s if ok else -1
        want = {"known": ok, "before_use_ps": u - s if ok else -1, "needed_ps": e - s,
                "ready_ps": rd, "stall_ps": max(0, min(e, u) - r) if ok else 0,
                "used_before_end": ok and u < e}
        assert {k: got[k][i].item() for k in want} == want, i
        bw = got["needed_Bps"][i]
        if ok and rd > 0:
            assert bw == int(nbytes[i]) * 1e12 / rd
        else:
            assert bw != bw
    bare = F.per_copy(fu, start, end, None)
    assert list(bare) == list(got)[:-1]
    assert all(np.array_equal(bare[k], got[k]) for k in bare)
    one = [k for k in got if not got[k].flags.writeable]
    assert one == (["before_use_ps", "ready_ps", "stall_ps", "used_before_end", "needed_Bps"]
                   if known == "none" else [])
