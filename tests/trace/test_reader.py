"""Reader golden tests: tiny SYNTHETIC traces with known answers, a real CPU capture, odd files."""

from __future__ import annotations

import shutil

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from overlap.trace import read_trace
from overlap.trace.protos import XSpace
from overlap.trace.reader import (
    copy_start_direction,
    load_xspace,
    parse_details,
    read_xspace,
    shape_bytes,
)
from overlap.trace.synthetic import LINE_TIMESTAMP_NS, U64, SyntheticTrace, gpu_offload_scenario

US = 1_000_000  # picoseconds per microsecond


def _roundtrip(t: SyntheticTrace, host: str = "h") -> dict:
    return read_xspace(XSpace.FromString(t.to_bytes()), host=host)


# --- GPU ----------------------------------------------------------------------------------------

def test_gpu_golden_transfers_and_kernels():
    t = SyntheticTrace()
    gpu = t.gpu(0)
    gpu.kernel(10 * US, 40 * US, stream=7, hlo_op="fusion.3", name="loop_fusion_3")
    gpu.memcpy("D2H", 20 * US, 25 * US, 64 << 20, stream=20, hlo_op="copy-start.3")
    gpu.memcpy("H2D", 70 * US, 5 * US, 1 << 20, stream=20, hlo_op="copy-start.4",
               host_kind="pageable")
    gpu.memcpy("D2D", 80 * US, 1 * US, 4096, stream=7, hlo_op="copy.1")  # not a host transfer
    gpu.memset(90 * US, 1 * US, stream=7)  # not compute, not a transfer
    r = _roundtrip(t)
    assert r["backend"] == "gpu"
    tr = r["transfers"]
    assert list(tr["direction"]) == ["D2H", "H2D"]
    assert list(tr["start_ps"]) == [20 * US, 70 * US]
    assert list(tr["end_ps"]) == [20 * US + 25 * US, 70 * US + 5 * US]
    assert list(tr["bytes"]) == [64 * 1024 * 1024, 1024 * 1024]
    assert list(tr["src_kind"]) == ["device", "pageable"]
    assert list(tr["dst_kind"]) == ["pinned", "device"]
    assert list(tr["hlo_op"]) == ["copy-start.3", "copy-start.4"]
    assert list(tr["stream"]) == [20, 20]
    assert list(tr["hlo_module"]) == ["jit_train_step"] * 2
    assert list(tr["program_id"]) == [5, 5]
    assert tr["async"].tolist() == [True, True]
    co = r["compute"]
    assert list(co["name"]) == ["loop_fusion_3"]
    assert list(co["hlo_op"]) == ["fusion.3"]
    assert (list(co["start_ps"]), list(co["end_ps"])) == ([10 * US], [50 * US])
    dev = r["devices"].iloc[0]
    assert dev["device"] == "GPU:0" and dev["vendor"] == "Nvidia"
    assert dev["memory_size"] == 85_520_809_984 and dev["compute_capability"] == "9.0"


def test_gpu_classifies_per_event_not_by_line_name():
    # One stream line holding kernels and copies; its name lists kinds in scrambled order.
    t = SyntheticTrace()
    gpu = t.gpu(0)
    gpu.kernel(10 * US, 5 * US, stream=13)
    gpu.memcpy("D2H", 12 * US, 2 * US, 100, stream=13)
    gpu.memcpy("D2D", 20 * US, 2 * US, 100, stream=13)
    gpu.memset(30 * US, 1 * US, stream=13)
    r = _roundtrip(t)
    assert len(r["transfers"]) == 1 and len(r["compute"]) == 1
    line = r["lines"][r["lines"]["line_id"] == 13]["line"].item()
    assert line.startswith("Stream #13(") and "Compute" in line


def test_host_plane_memcpy_api_records_are_not_transfers():
    t = SyntheticTrace(host_memcpy_duplicates=True)
    t.gpu(0).memcpy("D2H", 10 * US, 2 * US, 100)
    xs = t.to_xspace()
    host = next(p for p in xs.planes if p.name == "/host:CPU")
    names = {md.name for md in host.event_metadata.values()}
    assert "MemcpyD2H" in names  # the duplicate is there...
    assert len(_roundtrip(t)["transfers"]) == 1  # ...and ignored


def test_several_gpus_and_hosts(tmp_path):
    session = "2026_11_22_10_00_00"
    for host in ("worker-0", "worker-1"):
        t = SyntheticTrace(host)
        for ordinal in (0, 1):
            g = t.gpu(ordinal)
            g.kernel(10 * US, 10 * US)
            g.memcpy("D2H", 12 * US, 3 * US, 1000 * (ordinal + 1))
        t.step(0, 5 * US, 30 * US)
        t.write_session(tmp_path, session)
    trace = read_trace(tmp_path)
    assert trace.hosts == ["worker-0", "worker-1"]
    assert len(trace.transfers) == 4
    per = trace.transfers.groupby(["host", "device"])["bytes"].sum().to_dict()
    assert per[("worker-0", "GPU:1")] == 2000 and per[("worker-1", "GPU:0")] == 1000
    assert len(trace.steps) == 2 and trace.synthetic


def test_newest_session_is_default_and_session_can_be_chosen(tmp_path):
    old = SyntheticTrace("h")
    old.gpu(0).memcpy("D2H", 10 * US, 1 * US, 1)
    old.write_session(tmp_path, "2026_01_01_00_00_00")
    new = SyntheticTrace("h")
    new.gpu(0).memcpy("H2D", 10 * US, 1 * US, 2)
    new.write_session(tmp_path, "2026_02_01_00_00_00")
    assert read_trace(tmp_path).transfers["direction"].tolist() == ["H2D"]
    assert read_trace(tmp_path, session="2026_01_01_00_00_00").transfers["bytes"].tolist() == [1]


# --- TPU ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("async_line", [True, False])
def test_tpu_transfers_from_async_line_or_start_done_pairs(async_line):
    t = SyntheticTrace()
    tpu = t.tpu(0, async_line=async_line)
    tpu.op(10 * US, 20 * US, name="fusion.1")
    d2h = tpu.async_copy("D2H", 12 * US, 40 * US, dims=(4, 1024, 1024), dtype="bf16")
    tpu.op(35 * US, 10 * US, name="fusion.2")
    h2d = tpu.async_copy("H2D", 50 * US, 60 * US, dims=(8, 128))
    r = _roundtrip(t)
    assert r["backend"] == "tpu"
    tr = r["transfers"]
    assert tr["direction"].tolist() == ["D2H", "H2D"]
    assert tr["hlo_op"].tolist() == [d2h, h2d] == ["copy-start.1", "copy-start.2"]
    assert tr["start_ps"].tolist() == [12 * US, 50 * US]
    assert tr["end_ps"].tolist() == [40 * US, 60 * US]
    assert tr["bytes"].tolist() == [4 * 1024 * 1024 * 2, 8 * 128 * 4]
    assert tr["line"].tolist() == ["Async XLA Ops" if async_line else "XLA Ops"] * 2
    # copy-start/copy-done ops are not compute; the fusions are.
    assert r["compute"]["name"].tolist() == ["fusion.1", "fusion.2"]


def test_copy_start_direction_parsing():
    text = ("%copy-start.5 = (f32[5,1024,1024,256]{3,2,1,0:T(8,128)S(5)}, "
            "f32[5,1024,1024,256]{3,2,1,0:T(8,128)}, u32[]{:S(2)}) copy-start(%p)")
    assert copy_start_direction(text) == ("D2H", 5 * 1024 * 1024 * 256 * 4)
    h2d = "%copy-start.2 = (bf16[2,3]{1,0}, bf16[2,3]{1,0:S(5)}, u32[]) copy-start(%p)"
    assert copy_start_direction(h2d) == ("H2D", 2 * 3 * 2)
    assert copy_start_direction("%copy-start = (f32[2]{0}, f32[2]{0}, u32[]) copy-start(%p)") \
        == (None, None)
    assert shape_bytes("pred[7]") == 7 and shape_bytes("f32[]") == 4


def _direction_by_search(text):
    """The rule `copy_directions` must keep, written the slow, obvious way: the tuple-head
    regex searched anywhere, used only where its match starts at the first " = "."""
    from overlap.trace.reader import _TUPLE_HEAD_RE, HOST_MEMORY_SPACE, _copy_start_direction_slow

    m = _TUPLE_HEAD_RE.search(text)
    if m is not None and m.start() == text.find(" = "):
        a, b = m.group("a"), m.group("b")
        if HOST_MEMORY_SPACE in a:
            return "D2H", shape_bytes(a)
        if HOST_MEMORY_SPACE in b:
            return "H2D", shape_bytes(b)
        return None, None
    return _copy_start_direction_slow(text)


_piece = st.sampled_from([" = ", "(", ")", ", ", "f32[8,128]", "bf16[2, 3]", "{1,0}",
                          "{1,0:S(5)}", "{:S(2)}", "u32[]", "S(5)", "%copy-start.1",
                          "copy-start", "[", "]", "{", "}", "x", "%p"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(_piece, max_size=14).map("".join), max_size=8))
def test_copy_directions_match_at_the_first_equals_as_the_search_rule(texts):
    from overlap.trace.reader import copy_directions

    texts += ["%copy-start.5 = (f32[4]{0:S(5)}, f32[4]{0}, u32[]) copy-start(%p)",
              "a = b = (f32[4]{0}, f32[4]{0:S(5)}, u32[]) copy-start(%p)",
              # heads shared with different tails, and heads the match runs past
              "%c.1 = (f32[4]{0}, f32[4]{0:S(5)}, u32[]) copy-start(%p.1)",
              "%c.2 = (f32[4]{0}, f32[4]{0:S(5)}, u32[]) copy-start(%p.2)",
              "%c.3 = (f32[4]{0}, f32[4]{0 copy-start(:S(5)}, u32[]) copy-start(%p)",
              "%c.4 = (f32[4]{0}, f32[4] copy-start(, u32[])",
              "%c.5 = (f32[4]{0}, f32[4] copy-start()",
              "%c.6 = (f32[4]{0}, f32[4] copy-start(,",
              "%c.7 = (f32[4]{0}, f32[4]{0 copy-start(}, u32[]) copy-start(%p)"]
    texts = texts + texts[::-1]  # each head met again, after the others
    assert copy_directions(texts) == [_direction_by_search(t) for t in texts]


_name_piece = st.sampled_from(["copy", "-start", "-done", "send", "recv", ".", "1", "23", "-",
                               "\n", "é", "٣", "x", "all-reduce", "start", "done", ""])


@settings(max_examples=400, deadline=None)
@given(st.lists(st.lists(_name_piece, max_size=6).map("".join), max_size=30))
def test_async_boundaries_by_bytes_equal_the_regexes(names):
    """Issue 15: boundaries are decided on the names' bytes; wherever that decides, it must
    say what `is_async_boundary` says, and it must decide every plain ASCII name."""
    import numpy as np

    from overlap.trace.reader import async_boundaries_by_bytes, is_async_boundary

    names += ["copy-start.12", "a-done", "-start", "x-start5", "send.3", "recv", "sendx",
              "copy-start.", "all-reduce-start.1.2"]
    raw = [n.encode() for n in names]
    b = np.frombuffer(b"".join(raw) + b"\0" * 8, np.uint8)[:sum(map(len, raw))]
    got = async_boundaries_by_bytes(b, np.array([len(r) for r in raw], np.int64))
    for n, g in zip(names, got.tolist()):
        if n and n.isascii() and "\n" not in n:
            assert g == int(is_async_boundary(n)), n
        else:
            assert g == -1, n


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(st.sampled_from(["%", " ", "=", "a", ".", "1", "\t"]), max_size=10)))
def test_instruction_names_equal_one_at_a_time(texts):
    from overlap.trace.reader import instruction_name, instruction_names

    assert instruction_names(texts) == [instruction_name(t) for t in texts]


# --- CPU (real capture) -------------------------------------------------------------------------

def test_real_cpu_capture(cpu_capture):
    trace = read_trace(cpu_capture)
    assert trace.backend == "cpu" and not trace.synthetic
    assert trace.transfers.empty  # XLA:CPU compiles offload away; not an error
    assert trace.steps["step"].tolist() == [0, 1, 2]
    assert (trace.steps["end_ps"] > trace.steps["start_ps"]).all()
    assert len(trace.compute) >= 3 and (trace.compute["device"] == "CPU:0").all()
    # every XLA:CPU op runs inside some step window (the steps block on the result)
    starts = trace.compute["start_ps"].to_numpy()
    inside = ((starts[:, None] >= trace.steps["start_ps"].to_numpy()) &
              (starts[:, None] < trace.steps["end_ps"].to_numpy())).any(axis=1)
    assert inside.sum() >= 3
    assert "jit_f" in set(trace.compute["hlo_module"])
    host = trace.hosts[0]
    cap = trace.capture[host]
    assert cap["profile_start_time_ns"] > 1_600_000_000 * 10**9  # Unix epoch ns
    assert cap["jax_version"]
    mods = trace.modules
    assert any(n.startswith("jit_f(") for n in mods["name"])
    assert all(isinstance(b, bytes) and len(b) > 0 for b in mods["hlo_proto"])


# --- robustness ---------------------------------------------------------------------------------

def test_stats_as_str_uint_on_metadata_repeated_and_unknown():
    """Hand-built plane: every odd-but-legal encoding of the stats a reader must handle."""
    xs = XSpace()
    p = xs.planes.add()
    p.id, p.name = 0, "/device:GPU:0"
    names = ["memcpy_details", "hlo_op", "program_id", "kernel_details", "mystery_stat",
             "kind_src:device kind_dst:pinned size:4096 dest:0 async:1", "copy-start.9"]
    for i, n in enumerate(names, start=1):
        p.stat_metadata[i].id = i
        p.stat_metadata[i].name = n
    md = p.event_metadata[1]
    md.id, md.name = 1, "MemcpyD2H"
    s = md.stats.add()  # hlo_op on the *metadata*, as TPU captures do
    s.metadata_id, s.str_value = 2, "copy-start.9"
    md2 = p.event_metadata[2]
    md2.id, md2.name = 2, "gemm_kernel"
    line = p.lines.add()
    line.id, line.name, line.timestamp_ns = 99, "Stream #99", 1000
    e = line.events.add(metadata_id=1, offset_ps=5, duration_ps=10)
    st = e.stats.add()
    st.metadata_id, st.ref_value = 1, 6  # interned details
    st = e.stats.add()
    st.metadata_id, st.uint64_value = 3, 2**63 + 5  # program id above int64
    st = e.stats.add()
    st.metadata_id, st.str_value = 5, "ignored"  # unknown stat
    st = e.stats.add()
    st.metadata_id, st.str_value = 1, "kind_src:device kind_dst:pageable size:1 async:0"
    k = line.events.add(metadata_id=2, offset_ps=0, duration_ps=0)  # zero-length kernel
    st = k.stats.add()
    st.metadata_id, st.str_value = 4, "regs:1"
    agg = line.events.add(metadata_id=2, num_occurrences=7, duration_ps=3)  # aggregated: skipped
    agg.stats.add().metadata_id = 4
    other = xs.planes.add()
    other.name = "/device:CUSTOM:0"  # unknown plane
    other.lines.add().name = "whatever"
    r = read_xspace(xs, host="h")
    tr = r["transfers"]
    assert tr["bytes"].tolist() == [4096]  # first of the repeated keys wins
    assert tr["dst_kind"].tolist() == ["pinned"]
    assert tr["program_id"].tolist() == [2**63 + 5]
    assert tr["start_ps"].tolist() == [1000 * 1000 + 5]
    assert tr["hlo_op"].tolist() == ["copy-start.9"]  # found on the event's metadata
    assert r["compute"]["start_ps"].tolist() == [1000 * 1000]
    assert r["compute"]["end_ps"].tolist() == [1000 * 1000]


def test_absolute_line_timestamps_are_put_on_the_profile_clock():
    t = SyntheticTrace(start_ns=1_000_000_000_000)
    t.gpu(0).memcpy("D2H", 10 * US, 1 * US, 1)
    xs = t.to_xspace()
    for plane in xs.planes:
        for line in plane.lines:
            line.timestamp_ns += 1_000_000_000_000  # as if never normalized
    r = read_xspace(xs, host="h")
    assert r["transfers"]["start_ps"].tolist() == [10 * US]


def test_parse_details():
    assert parse_details("kind_src:device kind_dst:pinned size:12 dest:0 async:1") == {
        "kind_src": "device", "kind_dst": "pinned", "size": "12", "dest": "0", "async": "1"}
    assert parse_details(None) == {} and parse_details("garbage") == {}


def test_steps_ignore_python_tracer_frames():
    t = gpu_offload_scenario(steps=2, layers=1)
    t.python_noise(3 * US, 2 * US)
    r = _roundtrip(t)
    assert r["steps"]["step"].tolist() == [0, 1]
    assert r["steps"]["name"].tolist() == ["train", "train"]


def test_allocator_events():
    t = SyntheticTrace()
    t.gpu(0).kernel(10 * US, 1 * US)
    t.allocation(2 * US, bytes_allocated=1000, requested_bytes=1000)
    t.allocation(3 * US, bytes_allocated=3000, requested_bytes=2000)
    t.allocation(4 * US, kind="free", bytes_allocated=1000, requested_bytes=2000)
    t.allocation(5 * US, allocator="xla_gpu_host_bfc", bytes_allocated=64)
    m = _roundtrip(t)["memory"]
    assert m["kind"].tolist() == ["alloc", "alloc", "free", "alloc"]
    assert m["bytes_allocated"].tolist() == [1000, 3000, 1000, 64]
    assert m["device"].tolist()[:3] == ["GPU:0"] * 3 and m["device"].tolist()[3] is None
    assert m["time_ps"].tolist() == [2 * US, 3 * US, 4 * US, 5 * US]


def test_line_timestamp_constant_is_not_zero():
    # Guards the builder itself: a zero line timestamp would hide readers that drop it.
    assert LINE_TIMESTAMP_NS > 0


def test_load_xspace_reads_a_copied_real_capture(cpu_capture, tmp_path):
    src = next(cpu_capture.rglob("*.xplane.pb"))
    dst = tmp_path / "copy.xplane.pb"
    shutil.copy(src, dst)
    xs = load_xspace(dst)
    assert any(p.name == "/host:CPU" for p in xs.planes)
    assert isinstance(U64(3), int)


@pytest.mark.parametrize("target", ["v5e", "h100"])
def test_batched_op_rules_on_real_compiler_output(target):
    """The batched TPU op rules (instruction names, async boundaries on bytes, copy directions
    once per head) on every instruction of an optimized module from the real XLA:TPU (v5e) and
    XLA:GPU (h100) compilers (tests/hlo/fixtures), against the one-at-a-time rules."""
    from pathlib import Path

    import numpy as np

    from overlap.trace.reader import (
        async_boundaries_by_bytes,
        copy_directions,
        instruction_name,
        instruction_names,
        is_async_boundary,
    )

    fix = Path(__file__).resolve().parents[1] / "hlo" / "fixtures"
    texts = [ln.strip() for ln in (fix / f"{target}_scan_offload_x.hlo.txt").read_text()
             .splitlines() if " = " in ln and ln.strip().startswith(("%", "ROOT"))]
    assert len(texts) > 100
    names = instruction_names(texts)
    assert names == [instruction_name(t) for t in texts]
    raw = [n.encode() for n in names]
    got = async_boundaries_by_bytes(np.frombuffer(b"".join(raw), np.uint8),
                                    np.array([len(r) for r in raw], np.int64))
    assert got.tolist() == [int(is_async_boundary(n)) for n in names]
    assert sum(got.tolist()) >= 4  # the offload's start/done pairs are there
    assert copy_directions(texts) == [_direction_by_search(t) for t in texts]
    if target == "v5e":  # its copy-starts move between HBM and VMEM (S(1)), not host memory
        starts = [t for t in texts if " copy-start(" in t]
        assert starts and all(d == (None, None) for d in copy_directions(starts))


def test_slice_offload_rule_equals_the_compiler_inventory():
    """XLA:TPU (v5e) offloads a scan's residuals with dynamic-(update-)slice-start on S(5), not
    copy-start: the reader's direction and bytes for every instruction of the real optimized
    module equal what offload_inventory plans from the same compiler output."""
    from pathlib import Path

    from overlap.hlo.program import offload_inventory
    from overlap.trace.reader import host_transfer_directions, instruction_name

    text = (Path(__file__).resolve().parents[1] / "hlo" / "fixtures" /
            "v5e_scan_offload_x.hlo.txt").read_text()
    texts = [ln.strip() for ln in text.splitlines()
             if " = " in ln and ln.strip().startswith(("%", "ROOT"))]
    got = {instruction_name(t): d for t, d in zip(texts, host_transfer_directions(texts))
           if d[0] is not None}
    want = {o.name: (o.direction, o.bytes) for o in offload_inventory(text).ops}
    assert got == want and {d for d, _ in want.values()} == {"D2H", "H2D"}


@pytest.mark.parametrize("async_line", [True, False])
def test_tpu_slice_offload_is_read_from_either_line(async_line):
    t = SyntheticTrace()
    tpu = t.tpu(0, async_line=async_line)
    tpu.op(10 * US, 20 * US, name="fusion.1")
    d2h = tpu.async_slice("D2H", 12 * US, 40 * US, dims=(256, 512), dtype="bf16")
    h2d = tpu.async_slice("H2D", 50 * US, 60 * US)
    tpu.async_copy("H2D", 70 * US, 80 * US, dims=(8, 128))
    r = _roundtrip(t)
    tr = r["transfers"]
    assert tr["hlo_op"].tolist() == [d2h, h2d, "copy-start.3"]
    assert d2h.startswith("dynamic-update-slice-start") and h2d.startswith("dynamic-slice-start")
    assert tr["direction"].tolist() == ["D2H", "H2D", "H2D"]
    assert tr["bytes"].tolist() == [256 * 512 * 2, 256 * 256 * 4, 8 * 128 * 4]
    assert tr["end_ps"].tolist() == [40 * US, 60 * US, 80 * US]
    assert r["compute"]["name"].tolist() == ["fusion.1"]
