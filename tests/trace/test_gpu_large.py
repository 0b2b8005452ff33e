"""The real H200 captures of many steps (tests/data/gpu-large, SOURCES.md there): the shapes the
38-capture corpus lacks (300 steps with command buffers on, 305,700 device events on one
stream and the executed program carried; a user's loop with the Python tracer on; 32 bucketed
programs offloading in one capture; eager dispatch with explicit pinned-host transfers). One answer
whichever decoder reads them, and the answers SOURCES.md records."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from overlap.trace import wire

RUNS = {
    # run: (transfers, bytes, span_ps, hidden_ps)
    "transformer_control_qkv_cb_300": (14_400, 483_183_820_800, 8_796_460_023_000, 0),
    "user_pytracer_700": (11_900, 757_491_302_400, 13_728_610_441_000, 0),
    "buckets_offload_32": (768, 12_683_575_296, 233_161_640_000, 0),
    "eager_transfers_60": (361, 145_164_128, 3_438_215_000, 0),
}
# the main cause each run's exposed time is given (`overlap.analysis.causes`)
CAUSES = {
    # command buffers: every copy shares the one stream with the graph's kernels
    "transformer_control_qkv_cb_300": {"shares_stream_with_compute"},
    "user_pytracer_700": {"shares_stream_with_compute", "unknown"},
    "buckets_offload_32": {"shares_stream_with_compute"},
    # eager dispatch: device_put's copies between programs, operands uploaded from pageable
    # memory; the device idle between them for no cause the capture shows (the host dispatching)
    "eager_transfers_60": {"unknown", "pageable_memory"},
}


def _report(path, scanner: bool) -> tuple[int, str]:
    env = {**os.environ, "OVERLAP_SCANNER": "1" if scanner else "0"}
    p = subprocess.run([sys.executable, "-m", "overlap", "report", "--json", str(path)],
                       capture_output=True, text=True, env=env, timeout=300)
    return p.returncode, p.stdout


@pytest.mark.skipif(wire._scan is None, reason="the compiled scanner is not built")
@pytest.mark.parametrize("run", sorted(RUNS))
def test_both_decoders_give_one_report_and_the_recorded_answers(gpu_large, run):
    (xplane,) = (gpu_large / run).glob("plugins/profile/*/*.xplane.pb")
    rc, fast = _report(xplane, True)
    assert rc == 0
    assert _report(xplane, False) == (0, fast)
    r = json.loads(fast)
    assert r["status"] == "OK" and r["transfer_status"]["status"] == "complete"
    s = r["summary"]
    assert (s["transfers"], s["bytes"], s["span_ps"], s["hidden_ps"]) == RUNS[run]
    assert s["hidden_ps"] <= s["span_ps"] and 0.0 <= s["overlap_ratio"] <= 1.0
    causes = {c["cause"] for d in r["by_direction"].values()
              for c in d.get("exposure_causes", [])}
    assert causes == CAUSES[run]


def test_bucketed_programs_each_name_their_copies_and_hold_only_inventories(gpu_large):
    """32 programs of one step jitted for 32 batch sizes: each program's copies named from its
    own HloProto's stack frames, and `names._programs` keeps each program's offload inventory,
    not its decoded message (32 messages held to the end were the report's peak)."""
    from overlap.analysis import names
    from overlap.hlo.program import OffloadInventory
    from overlap.trace.distributed import read_trace

    (xplane,) = (gpu_large / "buckets_offload_32").glob("plugins/profile/*/*.xplane.pb")
    trace = read_trace(xplane)
    programs = names.programs_of(xplane, trace)
    assert len(programs) == 32 and all(m == "jit_train_step" for m, _ in programs)
    assert all(isinstance(raw, OffloadInventory) for _, raw, _ in programs.values())
    assert all(where.startswith("the capture's HloProto jit_train_step(")
               for _, _, where in programs.values())
    inv = [raw for _, raw, _ in programs.values()]
    # each program offloads its activations once per layer's slice: one D2H, one H2D
    assert all(sorted(o.direction for o in i.ops) == ["D2H", "H2D"] for i in inv)
    # the batch sizes differ: so do the programs' bytes (no program read for another)
    assert len({tuple(o.bytes for o in i.ops) for i in inv}) == 32


def test_a_program_without_an_inventory_is_handed_on_as_its_message(gpu_large, monkeypatch):
    """A program whose inventory cannot be taken keeps its message for `op_names`, which
    raises on it as it did before the inventory was taken early."""
    from overlap.analysis import names
    from overlap.hlo import program as hlo_program
    from overlap.trace.distributed import read_trace

    def refuse(raw):
        raise ValueError("damaged")

    (xplane,) = (gpu_large / "buckets_offload_32").glob("plugins/profile/*/*.xplane.pb")
    trace = read_trace(xplane)
    monkeypatch.setattr(hlo_program, "offload_inventory", refuse)
    programs = names.programs_of(xplane, trace)
    assert len(programs) == 32
    assert all(hasattr(raw, "hlo_module") for _, raw, _ in programs.values())
