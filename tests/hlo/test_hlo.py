"""offload_inventory on hand-written GPU-style HLO; memory_timeline on synthetic and real protos."""

from __future__ import annotations

import re

import numpy as np
import pytest

from overlap.hlo import program as hlo
from overlap.trace.protos import HloProto

B, S, D = 2, 2048, 4096
ACT = f"bf16[{B},{S},{D}]"
ACT_BYTES = 2 * 2048 * 4096 * 2           # bf16 = 2 bytes
SLICE_BYTES = 1 * 256 * 256 * 4            # one f32 layer residual
STACK = "f32[10,256,256]"

# Entry: one D2H and one H2D copy-start of an activation; a scan (while, n=10) whose body
# offloads one layer residual per iteration with an async dynamic-update-slice and reads one back
# with an async dynamic-slice. Printed the way compiled.as_text() prints GPU programs.
GPU_HLO = f"""HloModule jit_step, is_scheduled=true, entry_computation_layout={{({ACT}{{2,1,0}})->{ACT}{{2,1,0}}}}

%body (param: (s32[], f32[256,256], {STACK})) -> (s32[], f32[256,256], {STACK}) {{
  %param = (s32[], f32[256,256]{{1,0}}, {STACK}{{2,1,0:S(5)}}) parameter(0)
  %gte.0 = s32[] get-tuple-element((s32[], f32[256,256]{{1,0}}, {STACK}{{2,1,0:S(5)}}) %param), index=0
  %gte.1 = f32[256,256]{{1,0}} get-tuple-element((s32[], f32[256,256]{{1,0}}, {STACK}{{2,1,0:S(5)}}) %param), index=1
  %gte.2 = {STACK}{{2,1,0:S(5)}} get-tuple-element((s32[], f32[256,256]{{1,0}}, {STACK}{{2,1,0:S(5)}}) %param), index=2
  %bitcast = f32[1,256,256]{{2,1,0}} bitcast(f32[256,256]{{1,0}} %gte.1)
  %c0 = s32[] constant(0)
  %dynamic-update-slice-start = (({STACK}{{2,1,0:S(5)}}, f32[1,256,256]{{2,1,0}}, s32[], s32[], s32[]), {STACK}{{2,1,0:S(5)}}, u32[]) dynamic-update-slice-start({STACK}{{2,1,0:S(5)}} %gte.2, f32[1,256,256]{{2,1,0}} %bitcast, s32[] %gte.0, s32[] %c0, s32[] %c0)
  %dynamic-update-slice-done = {STACK}{{2,1,0:S(5)}} dynamic-update-slice-done((({STACK}{{2,1,0:S(5)}}, f32[1,256,256]{{2,1,0}}, s32[], s32[], s32[]), {STACK}{{2,1,0:S(5)}}, u32[]) %dynamic-update-slice-start)
  %dynamic-slice-start = (({STACK}{{2,1,0:S(5)}}, s32[], s32[], s32[]), f32[1,256,256]{{2,1,0}}, u32[]) dynamic-slice-start({STACK}{{2,1,0:S(5)}} %dynamic-update-slice-done, s32[] %gte.0, s32[] %c0, s32[] %c0), dynamic_slice_sizes={{1,256,256}}
  %dynamic-slice-done = f32[1,256,256]{{2,1,0}} dynamic-slice-done((({STACK}{{2,1,0:S(5)}}, s32[], s32[], s32[]), f32[1,256,256]{{2,1,0}}, u32[]) %dynamic-slice-start)
  %one = s32[] constant(1)
  %next = s32[] add(s32[] %gte.0, s32[] %one)
  ROOT %tuple = (s32[], f32[256,256]{{1,0}}, {STACK}{{2,1,0:S(5)}}) tuple(s32[] %next, f32[256,256]{{1,0}} %gte.1, {STACK}{{2,1,0:S(5)}} %dynamic-update-slice-done)
}}

%cond (param.1: (s32[], f32[256,256], {STACK})) -> pred[] {{
  %param.1 = (s32[], f32[256,256]{{1,0}}, {STACK}{{2,1,0:S(5)}}) parameter(0)
  %i = s32[] get-tuple-element((s32[], f32[256,256]{{1,0}}, {STACK}{{2,1,0:S(5)}}) %param.1), index=0
  %ten = s32[] constant(10)
  ROOT %lt = pred[] compare(s32[] %i, s32[] %ten), direction=LT
}}

ENTRY %main (p: {ACT}) -> {ACT} {{
  %p = {ACT}{{2,1,0}} parameter(0)
  %copy-start = ({ACT}{{2,1,0:S(5)}}, {ACT}{{2,1,0}}, u32[]) copy-start({ACT}{{2,1,0}} %p), cross_program_prefetch_index=0
  %copy-done = {ACT}{{2,1,0:S(5)}} copy-done(({ACT}{{2,1,0:S(5)}}, {ACT}{{2,1,0}}, u32[]) %copy-start)
  %init = (s32[], f32[256,256]{{1,0}}, {STACK}{{2,1,0:S(5)}}) custom-call(), custom_call_target="init"
  %while = (s32[], f32[256,256]{{1,0}}, {STACK}{{2,1,0:S(5)}}) while((s32[], f32[256,256]{{1,0}}, {STACK}{{2,1,0:S(5)}}) %init), condition=%cond, body=%body, backend_config={{"known_trip_count":{{"n":"10"}},"known_init_step":{{"init":"0","step":"1"}}}}
  %copy-start.1 = ({ACT}{{2,1,0}}, {ACT}{{2,1,0:S(5)}}, u32[]) copy-start({ACT}{{2,1,0:S(5)}} %copy-done)
  ROOT %copy-done.1 = {ACT}{{2,1,0}} copy-done(({ACT}{{2,1,0}}, {ACT}{{2,1,0:S(5)}}, u32[]) %copy-start.1)
}}
"""


def test_inventory_gpu_style_text():
    inv = hlo.offload_inventory(GPU_HLO)
    d2h, h2d = inv.summary("D2H"), inv.summary("H2D")
    # Static: copy-start + dynamic-update-slice-start out; copy-start.1 + dynamic-slice-start in.
    assert d2h["count"] == 2 and h2d["count"] == 2
    assert d2h["bytes"] == ACT_BYTES + SLICE_BYTES
    assert h2d["bytes"] == ACT_BYTES + SLICE_BYTES
    # Executed: the loop ops run 10 times (known_trip_count n=10).
    assert d2h["executed_count"] == 1 + 10
    assert d2h["executed_bytes"] == ACT_BYTES + 10 * SLICE_BYTES
    assert h2d["executed_bytes"] == ACT_BYTES + 10 * SLICE_BYTES
    assert inv.in_loops and inv.trip_counts_known
    by_name = {o.name: o for o in inv.ops}
    assert by_name["copy-start"].direction == "D2H"
    assert by_name["copy-start.1"].direction == "H2D"
    assert by_name["dynamic-update-slice-start"].executions == 10
    assert by_name["dynamic-update-slice-start"].is_async
    d = inv.to_dict()
    assert d["D2H"]["executed_bytes"] == ACT_BYTES + 10 * SLICE_BYTES and len(d["ops"]) == 4


def test_inventory_without_percent_or_operand_shapes_and_unknown_trip_count():
    # Newer printers drop '%' and operand shapes; the loop here has no known_trip_count.
    text = f"""HloModule m

body (p: (s32[], {STACK})) -> (s32[], {STACK}) {{
  p = (s32[], {STACK}{{2,1,0:S(5)}}) parameter(0)
  s = {STACK}{{2,1,0:S(5)}} get-tuple-element(p), index=1
  i = s32[] get-tuple-element(p), index=0
  ds = f32[1,256,256]{{2,1,0}} dynamic-slice(s, i, i, i), dynamic_slice_sizes={{1,256,256}}
  ROOT t = (s32[], {STACK}{{2,1,0:S(5)}}) tuple(i, s)
}}

ENTRY main (a: {ACT}) -> {ACT} {{
  a = {ACT}{{2,1,0}} parameter(0)
  h = {ACT}{{2,1,0:S(5)}} copy(a)
  w = (s32[], {STACK}{{2,1,0:S(5)}}) while(a), condition=c, body=body
  ROOT back = {ACT}{{2,1,0}} copy(h)
}}
"""
    inv = hlo.offload_inventory(text)
    assert inv.summary("D2H") == {"count": 1, "bytes": ACT_BYTES, "executed_count": 1,
                                  "executed_bytes": ACT_BYTES}
    h2d = inv.summary("H2D")
    assert h2d["count"] == 2 and h2d["bytes"] == ACT_BYTES + SLICE_BYTES
    ds = next(o for o in inv.ops if o.opcode == "dynamic-slice")
    assert not ds.trip_count_known and not ds.is_async and ds.executions == 1
    assert not inv.trip_counts_known
    assert "lower bounds" in inv.to_dict()["note"]


def test_inventory_nested_loops_and_async_wrapper():
    # Outer loop n=3 around inner loop n=4 whose body offloads via a generic async-start.
    text = f"""HloModule m

%wrapped (a: {STACK}, b: f32[1,256,256], i: s32[]) -> {STACK} {{
  %a = {STACK}{{2,1,0:S(5)}} parameter(0)
  %b = f32[1,256,256]{{2,1,0}} parameter(1)
  %i = s32[] parameter(2)
  ROOT %dus = {STACK}{{2,1,0:S(5)}} dynamic-update-slice({STACK}{{2,1,0:S(5)}} %a, f32[1,256,256]{{2,1,0}} %b, s32[] %i, s32[] %i, s32[] %i)
}}

%inner (p: ({STACK}, f32[1,256,256], s32[])) -> ({STACK}, f32[1,256,256], s32[]) {{
  %p = ({STACK}{{2,1,0:S(5)}}, f32[1,256,256]{{2,1,0}}, s32[]) parameter(0)
  %x = {STACK}{{2,1,0:S(5)}} get-tuple-element(%p), index=0
  %y = f32[1,256,256]{{2,1,0}} get-tuple-element(%p), index=1
  %k = s32[] get-tuple-element(%p), index=2
  %as = (({STACK}{{2,1,0:S(5)}}, f32[1,256,256]{{2,1,0}}, s32[]), {STACK}{{2,1,0:S(5)}}, u32[]) async-start({STACK}{{2,1,0:S(5)}} %x, f32[1,256,256]{{2,1,0}} %y, s32[] %k), calls=%wrapped
  %ad = {STACK}{{2,1,0:S(5)}} async-done(%as)
  ROOT %t = ({STACK}{{2,1,0:S(5)}}, f32[1,256,256]{{2,1,0}}, s32[]) tuple(%ad, %y, %k)
}}

%outer (q: ({STACK}, f32[1,256,256], s32[])) -> ({STACK}, f32[1,256,256], s32[]) {{
  %q = ({STACK}{{2,1,0:S(5)}}, f32[1,256,256]{{2,1,0}}, s32[]) parameter(0)
  ROOT %w2 = ({STACK}{{2,1,0:S(5)}}, f32[1,256,256]{{2,1,0}}, s32[]) while(%q), condition=%c, body=%inner, backend_config={{"known_trip_count":{{"n":"4"}}}}
}}

ENTRY %main (r: ({STACK}, f32[1,256,256], s32[])) -> ({STACK}, f32[1,256,256], s32[]) {{
  %r = ({STACK}{{2,1,0:S(5)}}, f32[1,256,256]{{2,1,0}}, s32[]) parameter(0)
  ROOT %w1 = ({STACK}{{2,1,0:S(5)}}, f32[1,256,256]{{2,1,0}}, s32[]) while(%r), condition=%c, body=%outer, backend_config={{"known_trip_count":{{"n":"3"}}}}
}}
"""
    inv = hlo.offload_inventory(text)
    assert len(inv.ops) == 1  # the DUS inside %wrapped is counted once, at its async-start
    op = inv.ops[0]
    assert (op.name, op.direction, op.opcode, op.is_async) == ("as", "D2H", "dynamic-update-slice-start", True)
    assert op.bytes == SLICE_BYTES and op.executions == 3 * 4
    assert inv.summary("D2H")["executed_bytes"] == 3 * 4 * SLICE_BYTES


def test_inventory_ignores_device_only_programs():
    text = """HloModule m
ENTRY %main (a: f32[8]) -> f32[8] {
  %a = f32[8]{0} parameter(0)
  %c = f32[8]{0} copy(f32[8]{0} %a)
  %cs = (f32[8]{0}, f32[8]{0}, u32[]) copy-start(f32[8]{0} %c)
  ROOT %cd = f32[8]{0} copy-done(%cs)
}
"""
    inv = hlo.offload_inventory(text)
    assert inv.ops == [] and inv.summary("D2H")["count"] == 0


def test_inventory_from_proto():
    p = HloProto()
    comp = p.hlo_module.computations.add(name="main", id=1)
    a = comp.instructions.add(name="a", opcode="parameter", id=1)
    a.shape.element_type = 10  # BF16
    a.shape.dimensions.extend([B, S, D])
    cs = comp.instructions.add(name="copy-start", opcode="copy-start", id=2, operand_ids=[1])
    dest, src, ctx = (cs.shape.tuple_shapes.add() for _ in range(3))
    for t in (dest, src):
        t.element_type = 10
        t.dimensions.extend([B, S, D])
    dest.layout.memory_space = 5
    ctx.element_type = 8  # U32
    inv = hlo.offload_inventory(p.SerializeToString())
    assert inv.summary("D2H") == {"count": 1, "bytes": ACT_BYTES, "executed_count": 1,
                                  "executed_bytes": ACT_BYTES}
    assert inv.summary("H2D")["count"] == 0


def test_parse_shape_tpu_layout_and_dynamic_dims():
    s = hlo.parse_shape("bf16[8,<=128]{1,0:T(8,128)(2,1)S(5)}")
    assert s.dims == (8, 128) and s.memory_space == 5 and s.nbytes == 8 * 128 * 2
    t = hlo.parse_shape("(f32[2]{0}, (s8[3]{0}, pred[]))")
    assert [a.nbytes for a in hlo._flatten(t)] == [8, 3, 1]


# ------------------------------------------------------------------------------ memory timeline

def _proto(buffers, traces):
    """buffers: {id: (size, color, name)}; traces: list of [(kind, id, canonical)]."""
    p = HloProto()
    comp = p.hlo_module.computations.add(name="main", id=1)
    for bid, (size, color, name) in buffers.items():
        lb = p.buffer_assignment.logical_buffers.add(id=bid, size=size, color=color)
        comp.instructions.add(name=name, id=100 + bid)
        lb.defined_at.instruction_id = 100 + bid
    for events in traces:
        tr = p.buffer_assignment.heap_simulator_traces.add()
        for i, (kind, bid, canon) in enumerate(events):
            tr.events.add(kind=kind, buffer_id=bid, share_with_canonical_id=canon,
                          instruction_name=f"op{i}")
    return p.SerializeToString()


ALLOC, FREE, SHARE = 0, 1, 2


def test_memory_timeline_refcounts_shared_buffers():
    bufs = {0: (100, 0, "a"), 1: (50, 0, "b"), 2: (50, 0, "c"), 3: (999, 5, "host")}
    events = [(ALLOC, 0, 0), (ALLOC, 1, 0), (SHARE, 2, 1),  # c shares b: no new bytes
              (FREE, 1, 0),                                   # b freed but c still holds it
              (FREE, 2, 0),                                   # group freed: -50
              (SHARE, 1, 0),                                  # 'a' still live: no change
              (FREE, 0, 0), (FREE, 1, 0)]
    tl = hlo.memory_timeline(_proto(bufs, [events]))
    assert tl.frame["live_bytes"].tolist() == [100, 150, 150, 150, 100, 100, 100, 0]
    assert tl.peak_bytes == 150 and tl.peak_index == 1
    assert tl.peak_buffers == [("a", 100), ("b", 50)]
    assert tl.frame["instruction_name"].iat[1] == "op1"
    # the curve alone, as the HTML page draws it (no frame, no pandas)
    live = hlo.live_bytes(_proto(bufs, [events]))
    assert live.dtype == np.int64 and live.tolist() == tl.frame["live_bytes"].tolist()


def test_memory_timeline_share_after_canonical_freed_brings_bytes_back():
    bufs = {0: (64, 0, "a"), 1: (64, 0, "b")}
    events = [(ALLOC, 0, 0), (FREE, 0, 0), (SHARE, 1, 0), (FREE, 1, 0)]
    tl = hlo.memory_timeline(_proto(bufs, [events]))
    assert tl.frame["live_bytes"].tolist() == [64, 0, 64, 0]


def test_memory_timeline_picks_trace_by_color():
    bufs = {0: (10, 0, "d0"), 1: (20, 0, "d1"), 2: (1000, 5, "h0"), 3: (2000, 5, "h1"), 4: (5, 5, "h2")}
    device = [(ALLOC, 0, 0), (ALLOC, 1, 0), (FREE, 0, 0), (FREE, 1, 0)]
    host = [(ALLOC, 2, 0), (ALLOC, 3, 0), (ALLOC, 4, 0), (FREE, 2, 0), (FREE, 3, 0), (FREE, 4, 0)]
    b = _proto(bufs, [host, device])
    assert hlo.memory_timeline(b, color=0).peak_bytes == 30
    assert hlo.memory_timeline(b, color=0).trace_index == 1
    tl5 = hlo.memory_timeline(b, color=5)
    assert tl5.peak_bytes == 3005 and tl5.trace_index == 0
    with pytest.raises(ValueError):
        hlo.memory_timeline(b, color=7)


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["offload:x", "nothing_saveable", "none"])
def test_heap_simulator_peak_matches_temp_size(policy):
    """The heap-simulator peak (logical buffer bytes) is at most the temp allocation XLA sized
    (memory_analysis().temp_size_in_bytes) and differs only by alignment padding: XLA:CPU's
    heap simulator places buffers at 64-byte-aligned offsets, so a few hundred bytes on a
    27-49 MB heap. A difference of more than 1% would mean we replayed the wrong trace or
    miscounted shared buffers."""
    from overlap.capture.workloads import load_workload

    w = load_workload("scan", policy)
    compiled = w.step_fn.lower(w.init_state, w.batch).compile()
    temp = compiled.memory_analysis().temp_size_in_bytes
    tl = hlo.memory_timeline(hlo.hlo_proto_from_jitted(w.step_fn, w.init_state, w.batch))
    assert 0 < tl.peak_bytes <= temp
    assert temp - tl.peak_bytes <= temp // 100
    assert np.all(tl.frame["live_bytes"].to_numpy() >= 0)
    assert tl.frame["live_bytes"].iat[-1] >= 0
    # The residual stack of 10 layers x 256x256 f32 (10 MiB... per operand) dominates the peak.
    assert tl.peak_buffers[0][1] >= 10 * 256 * 256 * 4


def test_hlo_protos_from_profile(cpu_capture):
    from overlap.trace.paths import find_xplane_files

    protos = hlo.hlo_protos_from_xspace(find_xplane_files(cpu_capture)[0])
    name, proto = hlo.pick_module(protos, "jit_f")
    assert name.startswith("jit_f(")
    assert HloProto.FromString(proto).hlo_module.name == "jit_f"
    parsed = HloProto.FromString(proto)
    # Buffer assignment rides along (anatomy §8); a program this small gets no heap-simulator
    # trace on XLA:CPU, which memory_timeline reports as an error rather than a zero peak.
    assert len(parsed.buffer_assignment.logical_buffers) > 0
    if not parsed.buffer_assignment.heap_simulator_traces:
        with pytest.raises(ValueError, match="heap-simulator"):
            hlo.memory_timeline(proto)


@pytest.mark.slow
def test_real_compiled_text_parses_completely():
    """Every instruction of a real compiled scan program parses (tuple shapes with /*index=N*/
    comments included), and both the forward and the backward while bodies run 10 times."""
    from overlap.capture.workloads import load_workload

    w = load_workload("scan", "offload:x")
    text = w.step_fn.lower(w.init_state, w.batch).compile().as_text()
    assert "/*index=" in text  # the case this guards
    comps, entry = hlo._parse_module(text)
    n_lines = sum(1 for line in text.splitlines() if " = " in line and not line.startswith("HloModule"))
    assert sum(len(v) for v in comps.values()) == n_lines
    mult, known = hlo._multipliers(comps, entry)
    bodies = [i.attrs for instrs in comps.values() for i in instrs if i.opcode == "while"]
    assert len(bodies) == 2
    body_names = [re.search(r"body=%?([\w.\-]+)", a).group(1) for a in bodies]
    assert [mult[b] for b in body_names] == [10, 10] and all(known[b] for b in body_names)


def _eager_inventory(raw: bytes, monkeypatch) -> hlo.OffloadInventory:
    """The reference for `_inventory_from_proto`: every instruction a plain `_Instr` with its
    shape converted and its operands resolved up front (each message's operands and wrapper
    target given to the last instruction of its id, after the first pass), and `_classify`
    asked about every instruction (no opcode filter)."""
    from collections import defaultdict

    mod = HloProto.FromString(raw).hlo_module
    names = {c.id: c.name for c in mod.computations}
    comps: dict = {}
    by_id: dict = {}
    calls: dict = defaultdict(list)
    for c in mod.computations:
        comps[c.name] = []
        for i in c.instructions:
            ins = hlo._Instr(i.name, c.name, hlo._proto_shape(i.shape), i.opcode, [], [], "")
            by_id[i.id] = ins
            comps[c.name].append(ins)
            for k, cid in enumerate(i.called_computation_ids):
                calls[c.name].append((names.get(cid, ""), i.opcode if k == 0 else ""))
    for c in mod.computations:
        for i in c.instructions:
            by_id[i.id].operands = [by_id[o].name for o in i.operand_ids if o in by_id]
            if i.opcode == "async-start" and i.called_computation_ids:
                by_id[i.id].attrs = f"calls={names.get(i.called_computation_ids[0], '')}"
    unknown: set = set()
    todo = [e for es in calls.values() for e, opc in es if opc == "while"]
    while todo:
        c = todo.pop()
        if c not in unknown:
            unknown.add(c)
            todo += [e for e, _ in calls.get(c, ())]
    by_name = {i.name: i for i in by_id.values()}
    wrapped = {i.attrs[6:] for i in by_id.values() if i.opcode == "async-start"}

    class Everything:
        def __contains__(self, _):
            return True

    with monkeypatch.context() as m:
        m.setattr(hlo, "_CLASSIFIED", Everything())
        return hlo.OffloadInventory(hlo._collect_ops(comps, by_name, wrapped, lambda c: 1,
                                                     lambda c: c not in unknown))


def test_proto_inventory_read_lazily_matches_eager_on_real_captures(monkeypatch):
    """On every HloProto of the real GPU and TPU sample captures (host copies of every kind:
    copy-start, dynamic-(update-)slice wrappers, command buffers), the inventory with shapes
    and operands read on demand and only candidate opcodes classified equals the one with
    every instruction read and classified, field by field."""
    from pathlib import Path

    from overlap.trace.reader import read_host_file

    root = Path(__file__).resolve().parents[2] / "sample_traces"
    n_ops = n_protos = 0
    for rel in ("gpu-h100", "gpu-h200", "tpu-v6e-offload"):
        for f in sorted((root / rel).rglob("*.xplane.pb"))[:6]:
            mods = read_host_file(f)["modules"]
            for raw in mods["hlo_proto"]:
                if not raw:
                    continue
                got = hlo.offload_inventory(bytes(raw))
                want = _eager_inventory(bytes(raw), monkeypatch)
                assert got.to_dict() == want.to_dict()
                n_ops += len(got.ops)
                n_protos += 1
    assert n_protos > 10 and n_ops > 10


def test_proto_inventory_with_an_id_written_twice_matches_eager(monkeypatch):
    """Two instructions of one id (a damaged or odd proto): operands and the wrapper target
    go to the last of them, as the eager reference gives them, for copies whose operand is
    looked up through that id."""
    p = HloProto()
    comp = p.hlo_module.computations.add(name="main", id=1)
    for name, iid, ops in (("a", 1, []), ("b", 1, []), ("x", 3, [1])):
        ins = comp.instructions.add(name=name, opcode="parameter" if name != "x" else "copy",
                                    id=iid, operand_ids=ops)
        ins.shape.element_type = 10
        ins.shape.dimensions.extend([B, S, D])
        ins.shape.layout.memory_space = 5 if name in ("a", "x") else 0
    dus = comp.instructions.add(name="d", opcode="dynamic-update-slice", id=4,
                                operand_ids=[3, 1])
    dus.shape.element_type = 10
    dus.shape.dimensions.extend([B, S, D])
    dus.shape.layout.memory_space = 5
    raw = p.SerializeToString()
    got, want = hlo.offload_inventory(raw), _eager_inventory(raw, monkeypatch)
    assert got.to_dict() == want.to_dict()
    assert {o.name for o in got.ops} == {"x", "d"}
