"""Regression tests for values no profiler writes, each found by the fuzz campaign (issue 11):
the file is read with sane numbers (the event dropped and counted) or refused with one line."""

from __future__ import annotations

import pytest

from overlap.analysis import overlap as analysis
from overlap.errors import InputError
from overlap.trace import gpu, read_trace
from overlap.trace.protos import XSpace
from overlap.trace.reader import shape_bytes
from overlap.trace.synthetic import SyntheticTrace
from overlap.trace.wire import as_int
from tests.conftest import run_cli

US = 1_000_000


def _gpu(tmp_path, edit=None, nbytes=4096):
    t = SyntheticTrace()
    g = t.gpu(0)
    g.kernel(10 * US, 50 * US)
    g.memcpy("D2H", 20 * US, 10 * US, nbytes)
    t.step(0, 5 * US, 100 * US)
    xs = XSpace.FromString(t.to_bytes())
    if edit:
        edit(xs)
    p = tmp_path / "h.xplane.pb"
    p.write_bytes(xs.SerializeToString())
    return p


def _memcpy_event(xs):
    pl = next(p for p in xs.planes if p.name.startswith("/device:GPU"))
    mid = next(k for k, m in pl.event_metadata.items() if m.name == "MemcpyD2H")
    return next(e for ln in pl.lines for e in ln.events if e.metadata_id == mid)


def test_absolute_timestamps_without_task_environment(tmp_path):
    def edit(xs):
        task = [i for i, p in enumerate(xs.planes) if p.name == "Task Environment"]
        for i in reversed(task):
            del xs.planes[i]
        for pl in xs.planes:
            for ln in pl.lines:
                ln.timestamp_ns += 1_795_000_000_000_000_000
    r = analysis.analyze(read_trace(_gpu(tmp_path, edit)))
    assert r["summary"]["transfers"] == 1 and r["summary"]["hidden_ps"] == 10 * US


@pytest.mark.parametrize("off,dur", [(2**63 - 1, -(2**62)), (0, 2**63 - 1), (0, -5)])
def test_wrapping_times_are_dropped_and_counted(tmp_path, off, dur):
    def edit(xs):
        ev = _memcpy_event(xs)
        ev.offset_ps, ev.duration_ps = off, dur
    trace = read_trace(_gpu(tmp_path, edit))
    assert len(trace.transfers) == 0
    assert sum(c["events_dropped_invalid"] for c in trace.capture.values()) == 1
    r = analysis.analyze(trace)
    assert r["summary"]["transfers"] == 0


@pytest.mark.parametrize("size", ["-4096", "10000000000000000000", "nan"])
def test_impossible_memcpy_sizes_never_give_negative_bytes(tmp_path, size):
    def edit(xs):
        pl = next(p for p in xs.planes if p.name.startswith("/device:GPU"))
        for ev in (e for ln in pl.lines for e in ln.events):
            for st in ev.stats:
                if pl.stat_metadata[st.metadata_id].name == "memcpy_details":
                    st.str_value = f"kind_src:device kind_dst:pinned size:{size} async:1"
    r = analysis.analyze(read_trace(_gpu(tmp_path, edit)))
    assert r["summary"]["transfers"] == 1 and r["summary"]["bytes"] == 0


def test_int_stats_beyond_int64_nan_inf_and_wrong_types():
    assert as_int(2**64 - 1) is None and as_int(float("nan")) is None
    assert as_int(float("inf")) is None and as_int(1e300) is None and as_int(True) is None
    assert as_int("12") == 12 and as_int(-3) == -3
    assert shape_bytes("f32[3037000500,3037000500]") is None  # 2**65 bytes: no real buffer
    assert shape_bytes("f32[2,3]") == 24


def test_allocator_name_of_the_wrong_type(tmp_path):
    t = SyntheticTrace()
    t.gpu(0).kernel(10 * US, 5 * US)
    t.allocation(12 * US, bytes_allocated=4096)
    xs = XSpace.FromString(t.to_bytes())
    host = next(p for p in xs.planes if p.name == "/host:CPU")
    for ln in host.lines:
        for ev in ln.events:
            for st in ev.stats:
                if host.stat_metadata[st.metadata_id].name == "allocator_name":
                    st.int64_value = 7
    p = tmp_path / "a.xplane.pb"
    p.write_bytes(xs.SerializeToString())
    analysis.analyze(read_trace(p))  # no TypeError


@pytest.mark.parametrize("value", ["int", "str"])
def test_hlo_proto_stat_of_the_wrong_type_is_no_program(tmp_path, value):
    # Found by a 4,000-case fuzz run (seed 11, case 2006): an `Hlo Proto` stat written as a
    # uint64 became bytes(n), n zero bytes (a MemoryError for a large n); a str one a
    # TypeError. A proto is a bytes_value: any other type is no program (as the TPU copy
    # rules already read it), and the module's other programs still count.
    t = SyntheticTrace()
    t.gpu(0).kernel(10 * US, 5 * US)
    t.module("jit_step", 5, hlo_proto=b"")
    t.module("jit_other", 6, hlo_proto=b"")
    xs = XSpace.FromString(t.to_bytes())
    meta = next(p for p in xs.planes if p.name == "/host:metadata")
    sid = next(k for k, m in meta.stat_metadata.items() if m.name == "Hlo Proto")
    md = next(m for m in meta.event_metadata.values() if m.name == "jit_step(5)")
    st = next(s for s in md.stats if s.metadata_id == sid)
    if value == "int":
        st.uint64_value = 1 << 62
    else:
        st.str_value = "not a proto"
    p = tmp_path / "a.xplane.pb"
    p.write_bytes(xs.SerializeToString())
    trace = read_trace(p)
    assert trace.modules["name"].tolist() == ["jit_other(6)"]
    analysis.analyze(trace)
    r = run_cli("report", "--json", str(p))
    assert r.returncode == 0, r.stderr


def test_host_planes_only_is_not_called_a_cpu_run(tmp_path):
    def edit(xs):
        for i in reversed([i for i, p in enumerate(xs.planes) if p.name.startswith("/device:")]):
            del xs.planes[i]
    trace = read_trace(_gpu(tmp_path, edit))
    r = analysis.analyze(trace)
    assert trace.backend == "unknown" and "XLA:CPU compiles" not in r["reason"]
    assert "host planes only" in r["reason"]


def test_non_files_and_empty_paths_are_one_line_exit_3(tmp_path):
    for path in ("/dev/null", ""):
        with pytest.raises(InputError):
            read_trace(path)
        r = run_cli("report", path)
        assert r.returncode == 3 and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_zero_length_only_transfers_fail_the_gate(tmp_path):
    p = _gpu(tmp_path, lambda xs: setattr(_memcpy_event(xs), "duration_ps", 0))
    r = run_cli("check", str(p))
    assert r.returncode == 1 and "no transfer has a measurable duration" in r.stdout
    assert run_cli("check", str(p), "--allow-no-transfers").returncode == 0


def test_cli_crash_is_exit_4_and_one_line(tmp_path, monkeypatch, capsys):
    r = run_cli("check", str(_gpu(tmp_path)), "--max-exposed-ms", "inf")
    assert r.returncode == 2 and "finite" in r.stderr
    r = run_cli("report", str(_gpu(tmp_path)), "--no-such-flag")
    assert r.returncode == 2 and "usage: overlap report" in r.stderr
    # An unforeseen exception (a bug) is exit 4 with one line, never 1 ("a check failed").
    from overlap.cli.main import main

    def boom(*a, **k):
        raise RuntimeError("simulated bug")

    # reduce_parts is on every path of `check` (one host or a pod), so a bug there must surface.
    monkeypatch.setattr(analysis, "reduce_parts", boom)
    monkeypatch.delenv("OVERLAP_DEBUG", raising=False)
    assert main(["check", str(_gpu(tmp_path))]) == 4
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "internal error (RuntimeError" in err[0] and "--debug" in err[0]
    assert main(["--debug", "check", str(_gpu(tmp_path))]) == 4
    assert "Traceback" in capsys.readouterr().err


def test_events_with_omitted_zero_metadata_id_stay_on_the_fast_path(tmp_path):
    """proto3 omits metadata_id=0, so such events do not start with the 0x08 tag; they used to
    drop the event walk to 16 events at a time (640k events: 39-92 s). Same tables, either way:
    the result must equal the file whose events all have a non-zero id."""
    import time

    def build(zero_every):
        t = SyntheticTrace()
        g = t.gpu(0)
        for i in range(3000):
            g.kernel(10 * US + i * US, US // 2, name=f"k{i % 5}")
        xs = XSpace.FromString(t.to_bytes())
        pl = next(p for p in xs.planes if p.name.startswith("/device:GPU"))
        k = next(iter(pl.event_metadata))
        pl.event_metadata[0].CopyFrom(pl.event_metadata[k])
        pl.event_metadata[0].id = 0
        for ln in pl.lines:
            for j, ev in enumerate(ln.events):
                if ev.metadata_id == k and j % zero_every == 0:
                    ev.metadata_id = 0  # same name and stats, id 0: omitted on the wire
        p = tmp_path / f"z{zero_every}.xplane.pb"
        p.write_bytes(xs.SerializeToString())
        return p

    base = read_trace(build(10**9)).compute
    for every in (1, 17):
        t0 = time.perf_counter()
        got = read_trace(build(every)).compute
        assert time.perf_counter() - t0 < 5  # was minutes at 640k events; seconds is the bound
        cols = ["start_ps", "end_ps", "name", "stream"]
        assert got[cols].reset_index(drop=True).equals(base[cols].reset_index(drop=True))


def test_chrome_trace_json_points_to_the_xplane(tmp_path):
    import gzip

    (tmp_path / "vm.xplane.pb").write_bytes(b"x")
    for name, data in (("vm.trace.json.gz", gzip.compress(b'{"traceEvents": []}')),
                       ("vm.trace.json", b' {"traceEvents": []}')):
        (tmp_path / name).write_bytes(data)
        with pytest.raises(InputError, match="Chrome-trace JSON.*vm.xplane.pb"):
            read_trace(tmp_path / name)
    # a Chrome trace named *.xplane.pb, alone: the hint never points at the refused file
    alone = tmp_path / "only"
    alone.mkdir()
    (alone / "json.xplane.pb").write_bytes(b'{"traceEvents": []}')
    with pytest.raises(InputError, match="use the .xplane.pb next to it") as e:
        read_trace(alone / "json.xplane.pb")
    assert "use " + str(alone / "json.xplane.pb") not in str(e.value)


def _many_gpu_planes(tmp_path, n):
    """`n` GPU planes of a few events each; planes differ in their metadata and stat ids (odd
    planes shift every event-metadata id, planes 3k shift every stat-metadata id and ref value),
    one plane has an id no group can key, and one event names metadata that does not exist."""
    t = SyntheticTrace()
    for d in range(n):
        g = t.gpu(d)
        g.kernel(10 * US + d, US, name=f"k{d % 7}")
        g.memcpy("D2H" if d % 2 else "H2D", 12 * US + d, US, 4096 * (1 + d % 3))
    xs = XSpace.FromString(t.to_bytes())
    gpus = [p for p in xs.planes if p.name.startswith("/device:GPU")]
    def shift_ids(pl, field, shift):
        old = dict(getattr(pl, field).items())
        pl.ClearField(field)
        for k, m in old.items():
            getattr(pl, field)[k + shift].CopyFrom(m)
            getattr(pl, field)[k + shift].id = k + shift

    for d, pl in enumerate(gpus):
        if d % 2:
            shift = 1000 + d
            shift_ids(pl, "event_metadata", shift)
            for ln in pl.lines:
                for ev in ln.events:
                    ev.metadata_id += shift
        if d % 3 == 0:
            shift = 50 + d
            shift_ids(pl, "stat_metadata", shift)

            def fix(stats, shift=shift):
                for s in stats:
                    s.metadata_id += shift
                    if s.WhichOneof("value") == "ref_value":
                        s.ref_value += shift
            for m in pl.event_metadata.values():
                fix(m.stats)
            for ln in pl.lines:
                for ev in ln.events:
                    fix(ev.stats)
    k = next(iter(gpus[2].event_metadata))
    gpus[2].event_metadata[1 << 40].CopyFrom(gpus[2].event_metadata[k])  # not groupable
    gpus[4].lines[0].events[0].metadata_id = 987654  # no such metadata
    p = tmp_path / "planes.xplane.pb"
    p.write_bytes(xs.SerializeToString())
    return p


def test_many_small_planes_read_together_give_the_same_tables(tmp_path, monkeypatch):
    """Small lines of many GPU planes are read as one segment (issue 11: ~5 ms per plane, 10,000
    planes took 26 s); the tables must equal reading every line on its own."""
    import time

    import pandas as pd


    p = _many_gpu_planes(tmp_path, 40)
    merged = read_trace(p)
    monkeypatch.setattr(gpu, "_SMALL_LINE", 0)  # every line on its own, as before
    alone = read_trace(p)
    assert len(alone.transfers) == 40 and len(alone.compute) == 40
    assert (alone.compute["name"] == "").sum() == 1  # the kernel whose metadata is missing
    for name in ("transfers", "compute"):
        pd.testing.assert_frame_equal(getattr(merged, name), getattr(alone, name))
    monkeypatch.undo()
    p = _many_gpu_planes(tmp_path, 3000)
    t0 = time.perf_counter()
    tr = read_trace(p)
    assert time.perf_counter() - t0 < 20  # was ~15 s at 3,000 planes; ~1 s now
    assert len(tr.transfers) == 3000 and tr.transfers["bytes"].sum() == 4096 * 6000


def test_many_distinct_copy_ops_give_the_same_facts_on_both_paths(tmp_path):
    """Issue 15: the copy facts of thousands of distinct copy ops are gathered in one batch
    (`_copy_facts`) from the `Async XLA Ops` spans' metadata; they must equal what the
    copy-start / copy-done pairing path gives from the copy-start ops' own metadata,
    including a repeated stat (the first wins), a stat only some metadata have, a ref value
    and metadata with no stats."""
    import pandas as pd

    t = SyntheticTrace()
    tpu = t.tpu(0)
    for k in range(300):
        t0 = (10 + 20 * k) * US
        tpu.op(t0, 6 * US, name=f"fusion.{k % 3}")
        tpu.async_copy("D2H" if k % 2 else "H2D", t0, t0 + 5 * US, dims=(8, 128 + k),
                       program_id=1000 + k % 4)
    t.step(0, 5 * US, 7000 * US)
    xs = XSpace.FromString(t.to_bytes())
    pl = next(p for p in xs.planes if p.name.startswith("/device:TPU"))
    sid = {m.name: k for k, m in pl.stat_metadata.items()}
    new = max(pl.stat_metadata) + 1
    pl.stat_metadata[new].id = new
    pl.stat_metadata[new].name = "hlo_module"
    ref = new + 1
    pl.stat_metadata[ref].id = ref
    pl.stat_metadata[ref].name = "jit_step_as_ref"
    for _k, m in sorted(pl.event_metadata.items()):
        if "copy-start" not in m.name:
            continue
        # the same edits on every metadata of copy i (its copy-start op and its async span)
        i = int(m.name.split(" = ", 1)[0].rsplit(".", 1)[-1])
        if i % 3 == 0:
            extra = m.stats.add()
            extra.metadata_id = sid["program_id"]
            extra.uint64_value = 7  # a second program_id: the first one wins
        if i % 5 == 0:
            s = m.stats.add()
            s.metadata_id = new
            s.ref_value = ref
        if i % 7 == 0:
            s = m.stats.add()
            s.metadata_id = new
            s.str_value = "second module"  # hlo_module repeated: the ref (first) wins
        if i % 11 == 0:
            del m.stats[:]  # no stats at all: no program_id, no module
            m.name = m.name.replace("{1,0:T(8,128)S(5)}", "{1,0:S(5)}")
    p = tmp_path / "ops.xplane.pb"
    p.write_bytes(xs.SerializeToString())
    batched = read_trace(p).transfers
    for k in [k for k, ln in enumerate(pl.lines) if ln.name == "Async XLA Ops"]:
        del pl.lines[k]
    p.write_bytes(xs.SerializeToString())
    paired = read_trace(p).transfers
    assert len(batched) == 300
    mods = set(batched["hlo_module"].dropna())
    assert mods == {"jit_step_as_ref", "second module"}
    assert batched["program_id"].isna().any() and not (batched["program_id"] == 7).any()
    cols = ["direction", "start_ps", "end_ps", "bytes", "hlo_op", "hlo_module", "program_id"]
    pd.testing.assert_frame_equal(batched[cols], paired[cols])


# ---------------------------------------------------------------------------------------------
# Second round (issue 25): stats of any type, pods with a damaged host, side files, dropped
# events, scheduler addresses.

TEXT_STATS = ("gpu_device_name", "device_vendor", "jax_version", "jaxlib_version")


def set_stat_type(xs, names, kind: str) -> int:
    """Store every stat named in `names` (plane stats) as `kind`; returns how many changed.
    `bytes` holds an undecodable byte, as a hostile producer might write."""
    n = 0
    for pl in xs.planes:
        for st in pl.stats:
            name = pl.stat_metadata[st.metadata_id].name
            if name not in names:
                continue
            old = getattr(st, st.WhichOneof("value") or "str_value")
            text = old.decode("latin-1") if isinstance(old, bytes) else str(old)
            if kind == "bytes":
                st.bytes_value = text.encode() + b"\xff"
            elif kind == "int64":
                st.int64_value = 7
            elif kind == "uint64":
                st.uint64_value = 2**64 - 1
            elif kind == "double":
                st.double_value = float("nan")
            elif kind == "ref":
                st.ref_value = st.metadata_id
            else:
                st.str_value = text
            n += 1
    return n


def _with_jax_version(xs):
    """The synthetic writer puts jax_version on /host:metadata; make sure it is there."""
    names = {m.name for pl in xs.planes for m in pl.stat_metadata.values()}
    assert {"gpu_device_name", "jax_version"} <= names, names
    return xs


@pytest.mark.parametrize("kind", ["bytes", "int64", "uint64", "double", "ref", "str"])
def test_name_and_version_stats_are_text_whatever_their_type(tmp_path, kind):
    def edit(xs):
        assert set_stat_type(_with_jax_version(xs), TEXT_STATS, kind) >= 3
    trace = read_trace(_gpu(tmp_path, edit))
    facts = next(iter(trace.capture.values()))
    names = list(trace.devices["name"]) + list(trace.devices["vendor"]) + [
        facts.get("jax_version"), facts.get("jaxlib_version")]
    assert all(v is None or isinstance(v, str) for v in names), names
    if kind == "bytes":
        assert facts["jax_version"].endswith("\\xff") and "H100" in trace.devices["name"][0]


def test_input_error_survives_pickling():
    import pickle

    e = pickle.loads(pickle.dumps(InputError("/x/h.xplane.pb", "truncated")))
    assert isinstance(e, InputError) and e.path == "/x/h.xplane.pb" and e.problem == "truncated"
    assert str(e) == "/x/h.xplane.pb: truncated"


def pod(root, hosts: int = 3, damaged: tuple[int, ...] = (1,), garbage: bytes = b"\x0b\xff\x00"):
    """A SYNTHETIC session of `hosts` GPU host files (`host-N.xplane.pb`, one D2H copy each,
    hidden behind a kernel); the hosts in `damaged` hold `garbage` instead."""
    session = root / "plugins" / "profile" / "2026_11_23_00_00_00"
    for i in range(hosts):
        t = SyntheticTrace(host=f"host-{i}")
        g = t.gpu(0)
        g.kernel(10 * US, 50 * US)
        g.memcpy("D2H", 20 * US, 10 * US, 4096)
        t.step(0, 5 * US, 100 * US)
        f = t.write_session(root, session.name)
        if i in damaged:
            f.write_bytes(garbage)
    return root


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_damaged_host_file_leaves_the_other_hosts_readable(tmp_path, jobs):
    from overlap.analysis.pod import read_and_analyze

    root = pod(tmp_path / "pod")
    trace = read_trace(root, jobs=jobs)
    assert trace.hosts == ["host-0", "host-2"] and len(trace.transfers) == 2
    assert [u["path"] for u in trace.unreadable] == [
        str(next(root.rglob("host-1.xplane.pb")))]
    assert "corrupt" in trace.unreadable[0]["problem"]
    _, r = read_and_analyze(root, jobs=jobs)
    assert r["hosts"] == ["host-0", "host-2"] and r["summary"]["transfers"] == 2
    assert r["unreadable_hosts"] == trace.unreadable
    assert "1 of 3 host file(s) unreadable" in r["verdict"] and "host-1.xplane.pb" in r["verdict"]
    assert analysis.analyze(trace)["unreadable_hosts"] == trace.unreadable


def test_a_pod_with_no_readable_host_is_refused_naming_the_first(tmp_path):
    root = pod(tmp_path / "pod", hosts=2, damaged=(0, 1))
    for jobs in (1, 2):
        with pytest.raises(InputError, match="host-0.xplane.pb"):
            read_trace(root, jobs=jobs)


def _drop(tmp_path, which: str):
    """A GPU capture whose device events (all, or the kernels only) have negative durations."""
    def edit(xs):
        pl = next(p for p in xs.planes if p.name.startswith("/device:GPU"))
        for ln in pl.lines:
            for e in ln.events:
                if which == "all" or not pl.event_metadata[e.metadata_id].name.startswith(
                        "Memcpy"):
                    e.duration_ps = -5
    return _gpu(tmp_path, edit)


def test_dropped_events_are_counted_by_reason_next_to_the_verdict_they_change(tmp_path):
    r = analysis.analyze(read_trace(_drop(tmp_path, "all")))
    assert r["status"] == analysis.STATUS_NO_DEVICE_EVENTS
    assert r["dropped_events"] == {"count": 2, "by_reason": {"negative offset or duration": 2}}
    assert "2 event(s) were dropped as invalid" in r["verdict"]
    r = analysis.analyze(read_trace(_drop(tmp_path, "kernels")))
    assert r["summary"]["transfers"] == 1 and r["summary"]["hidden_ps"] == 0
    assert "1 invalid event(s) dropped" in r["verdict"]
    assert any("dropped as invalid" in n for n in r["notes"])
    clean = analysis.analyze(read_trace(_gpu(tmp_path)))
    assert clean["dropped_events"]["count"] == 0 and "dropped" not in clean["verdict"]


def test_out_of_range_times_are_their_own_reason(tmp_path):
    def edit(xs):
        _memcpy_event(xs).offset_ps = 2**62
    r = analysis.analyze(read_trace(_gpu(tmp_path, edit)))
    assert r["dropped_events"]["by_reason"] == {"time beyond 2**61 ps (26 days)": 1}


@pytest.mark.parametrize("kind", ["fifo", "device", "directory", "too large", "missing"])
def test_side_files_are_regular_and_bounded(tmp_path, kind):
    import os

    from overlap.trace.paths import read_side_file, read_side_json
    from overlap.trace.reader import read_host_file

    p = tmp_path / "side.json"
    if kind == "fifo":
        os.mkfifo(p)
    elif kind == "device":
        p = "/dev/zero"
    elif kind == "directory":
        p.mkdir()
    elif kind == "too large":
        with open(p, "wb") as f:  # sparse: no disk used
            f.truncate(5 << 20)
    with pytest.raises(InputError, match="|".join(
            ["regular file", "directory", "too large", "not found"])) as e:
        read_side_json(p, "run manifest", limit=1 << 20)
    assert str(p) in str(e.value) and "\n" not in str(e.value)
    if kind in ("fifo", "device"):  # a capture path goes through the same check
        with pytest.raises(InputError, match="regular file"):
            read_host_file(p)
    if kind == "too large":
        assert len(read_side_file(p, limit=6 << 20)) == 5 << 20


def test_chrome_trace_hint_never_names_a_directory(tmp_path):
    (tmp_path / "a_dir.xplane.pb").mkdir()
    j = tmp_path / "host.trace.json"
    j.write_text('{"traceEvents": []}')
    with pytest.raises(InputError) as e:
        read_trace(j)
    assert "a_dir" not in str(e.value) and "use the .xplane.pb next to it" in str(e.value)
    real = tmp_path / "real.xplane.pb"
    real.write_bytes(b"x")
    with pytest.raises(InputError, match="use .*real.xplane.pb"):
        read_trace(j)


@pytest.mark.parametrize("address", ["garbage", "http://10.0.0.5:8786", "tcp://[::1", "", "  ",
                                     "tcp://host:0", "tcp://host:99999", "tcp://:8786",
                                     "a b:1"])
def test_bad_scheduler_addresses_are_usage_errors(address):
    from overlap.errors import UsageError
    from overlap.trace.distributed import check_scheduler_address

    with pytest.raises(UsageError, match="--scheduler"):
        check_scheduler_address(address)


@pytest.mark.parametrize("address,want", [("10.0.0.5:8786", "tcp://10.0.0.5:8786"),
                                          ("tcp://[::1]:8786", "tcp://[::1]:8786"),
                                          ("tls://sched.example.com:8786",
                                           "tls://sched.example.com:8786")])
def test_good_scheduler_addresses_pass(address, want):
    from overlap.trace.distributed import check_scheduler_address

    assert check_scheduler_address(address) == want


def test_dask_reports_the_readable_hosts_and_names_the_damaged_one(tmp_path):
    distributed = pytest.importorskip("dask.distributed")
    root = pod(tmp_path / "pod")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=None) as cluster:
        r = run_cli("report", str(root), "--scheduler", cluster.scheduler_address, timeout=300)
        trace = read_trace(root, scheduler=cluster.scheduler_address)
    assert r.returncode == 3 and "host-1.xplane.pb" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "1 of 3 host file(s)" in r.stdout
    assert trace.hosts == ["host-0", "host-2"] and len(trace.unreadable) == 1


def test_every_overlap_error_survives_pickling():
    import pickle

    from overlap.errors import MissingExtra, UsageError

    for e in (UsageError("--x: bad"), MissingExtra("dask", "dask"), InputError(None, "empty")):
        back = pickle.loads(pickle.dumps(e))
        assert type(back) is type(e) and str(back) == str(e)
        assert back.exit_code == e.exit_code


@pytest.mark.parametrize("size", [13, 32, 91, 123])
def test_a_capture_opening_like_json_text_is_read(tmp_path, size):
    """An XSpace opens with its first plane's tag, 0x0a (a newline), then its length: a first
    plane of 91 or 123 bytes reads `[` or `{` after the newline, and of 13 or 32 bytes more
    whitespace. Such a capture is read, not refused as a Chrome trace (it was, round 22)."""
    from overlap.trace.files import _json_text

    xs = XSpace()
    pl = xs.planes.add(id=1, name="/host:CPU")
    pl.name += "x" * (size - len(pl.SerializeToString()))
    assert len(pl.SerializeToString()) == size
    gpu = xs.planes.add(id=2, name="/device:GPU:0")
    gpu.event_metadata[1].id, gpu.event_metadata[1].name = 1, "k"
    gpu.lines.add(id=1, name="Stream #1").events.add(metadata_id=1, offset_ps=1, duration_ps=2)
    raw = xs.SerializeToString()
    p = tmp_path / "vm.xplane.pb"
    p.write_bytes(raw)
    assert read_trace(p).devices is not None
    assert not _json_text(raw[:64])
    assert _json_text(b' \n{"traceEvents": []}') and _json_text(b"[{")
    assert not _json_text(b"x{") and not _json_text(b"")
