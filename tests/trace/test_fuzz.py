"""Fuzz: any file a user or another producer hands us is read with sane numbers or refused with
one line (InputError, exit 3); never a traceback, never an impossible number.

A seeded mutator over real captures (sample_traces/) and SYNTHETIC GPU/TPU builds changes both
bytes and valid-protobuf field values: extreme ints (int64/uint64 limits, negatives), NaN/inf
and huge doubles, stats of the wrong type, absolute line timestamps, missing planes, odd
`memcpy_details`. Each case is read in-process with `read_trace` + `analyze` and checked for the
invariants below, under a time bound proportional to the file size.

`OVERLAP_FUZZ_CASES=N` runs N cases (default 900, about a minute here); a failure prints the
seed and case number so it can be replayed with `OVERLAP_FUZZ_SEED`.

Beyond the reader (issue 25): a tenth of the cases go through every renderer (text, JSON, JUnit,
Markdown, inspect, the dashboard's figures, the HTML page); every stat type (int64, uint64,
double, str, bytes, ref) is forced onto every stat of each base and rendered everywhere; a
multi-host session of one good and two mutated hosts must report the good host and name the
unreadable ones (in worker processes too); and each side file (run.json, a baseline,
program_memory.json, a plan's HLO text) in every bad shape (FIFO, device, directory, beyond the
size bound, garbage, not UTF-8, nested too deeply, wrong JSON type, empty) gets one line and an
exit code of 0-3 within a time bound, from the CLI and the dashboard.
"""

from __future__ import annotations

import math
import os
import random
import time
from pathlib import Path

import pytest

from overlap.analysis import overlap as analysis
from overlap.errors import InputError
from overlap.trace import read_trace
from overlap.trace.protos import XSpace
from overlap.trace.synthetic import SyntheticTrace
from tests.conftest import bounded

REPO = Path(__file__).resolve().parents[2]
CASES = int(os.environ.get("OVERLAP_FUZZ_CASES", "900"))
SEED = int(os.environ.get("OVERLAP_FUZZ_SEED", "20261122"))
US = 1_000_000

INTS = [0, 1, -1, 2**31, 2**62, 2**63 - 1, -(2**62), -(2**63), 2**64 - 1, 2**63 + 5]
DOUBLES = [float("nan"), float("inf"), float("-inf"), 1e300, -1e300, 0.5, -0.0]
STRINGS = ["", "size:-4096", "size:10000000000000000000 kind_src:device kind_dst:pinned",
           "kind_src:pinned kind_dst:device size:nan", "f32[3037000500,3037000500]{1,0:S(5)}",
           "GPU_0_bfc", "\x00\xff", "x" * 300]
STAT_NAMES = ["memcpy_details", "allocator_name", "step_num", "bytes_allocated", "_r",
              "hlo_op", "program_id", "profile_start_time", "clock_rate", "memory_size",
              "kernel_details", "bytes_reserved", "peak_bytes_in_use"]


def _gpu_base() -> bytes:
    t = SyntheticTrace()
    for dev in (0, 1):
        g = t.gpu(dev)
        for i in range(6):
            g.kernel((10 + 40 * i) * US, 30 * US, stream=7, name=f"k{i}")
            g.memcpy("D2H" if i % 2 else "H2D", (15 + 40 * i) * US, 20 * US, 1 << 20,
                     stream=13, hlo_op=f"copy-start.{i}")
    for s in range(3):
        t.step(s, (5 + 80 * s) * US, (85 + 80 * s) * US)
    t.allocation(12 * US, bytes_allocated=4096)
    return t.to_bytes()


def _tpu_base() -> bytes:
    t = SyntheticTrace()
    tpu = t.tpu(0)
    for i in range(5):
        tpu.op((10 + 50 * i) * US, 40 * US, name=f"fusion.{i}")
        tpu.async_copy("D2H" if i % 2 else "H2D", (12 + 50 * i) * US, (48 + 50 * i) * US)
    t.step(0, 5 * US, 300 * US)
    return t.to_bytes()


def _bases() -> list[tuple[str, bytes]]:
    out = [("gpu", _gpu_base()), ("tpu", _tpu_base())]
    for p in sorted((REPO / "sample_traces").rglob("*.xplane.pb"))[:1]:
        out.append((p.parent.parent.parent.parent.name, p.read_bytes()))
    return out


def _all_stats(xs):
    for pl in xs.planes:
        yield from pl.stats
        for md in pl.event_metadata.values():
            yield from md.stats
        for ln in pl.lines:
            for ev in ln.events:
                yield from ev.stats


def _set_value(stat, rng: random.Random) -> None:
    kind = rng.randrange(6)
    if kind == 0:
        stat.int64_value = rng.choice([v for v in INTS if -(2**63) <= v < 2**63])
    elif kind == 1:
        stat.uint64_value = rng.choice([v for v in INTS if 0 <= v < 2**64])
    elif kind == 2:
        stat.double_value = rng.choice(DOUBLES)
    elif kind == 3:
        stat.str_value = rng.choice(STRINGS)
    elif kind == 4:
        stat.bytes_value = rng.choice([b"", b"\x00" * 9, b"\xff\xfe"])
    else:
        stat.ref_value = rng.choice([0, 1, 2**63, 99999])


def mutate(data: bytes, rng: random.Random) -> bytes:
    """One case: a few value mutations, sometimes a byte-level one on top."""
    xs = XSpace.FromString(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(9)
        planes = list(xs.planes)
        if not planes:
            break
        pl = rng.choice(planes)
        lines = list(pl.lines)
        if op == 0 and lines:  # extreme event times
            ln = rng.choice(lines)
            if ln.events:
                ev = rng.choice(ln.events)
                setattr(ev, rng.choice(["offset_ps", "duration_ps"]),
                        rng.choice([v for v in INTS if -(2**63) <= v < 2**63]))
        elif op == 1 and lines:  # absolute or extreme line timestamps
            rng.choice(lines).timestamp_ns = rng.choice(
                [1_795_000_000_000_000_000, -1, 2**63 - 1, 0])
        elif op == 2:  # drop a plane (Task Environment, a device, the metadata)
            del xs.planes[rng.randrange(len(xs.planes))]
        elif op == 3:  # a stat's value of another type or out of range
            stats = list(_all_stats(xs))
            if stats:
                _set_value(rng.choice(stats), rng)
        elif op == 4 and pl.stat_metadata:  # rename a stat to one the rules read
            k = rng.choice(list(pl.stat_metadata))
            pl.stat_metadata[k].name = rng.choice(STAT_NAMES)
        elif op == 5 and pl.event_metadata:  # events of unknown metadata, odd names
            k = rng.choice(list(pl.event_metadata))
            pl.event_metadata[k].name = rng.choice(
                ["MemcpyD2H", "MemcpyH2D", "", "%copy-start.1 = (f32[2]{0:S(5)}, f32[2]) "
                 "copy-start(f32[2] %p)", "MemoryAllocation"])
        elif op == 6 and lines:  # metadata ids that do not exist / zero
            ln = rng.choice(lines)
            if ln.events:
                rng.choice(ln.events).metadata_id = rng.choice([0, 2**63 - 1, 123456])
        elif op == 7:  # plane names that change the backend
            pl.name = rng.choice(["/device:GPU:0", "/device:TPU:0", "/host:CPU",
                                  "/device:GPU:99999999999", "Task Environment"])
        elif op == 8 and lines:  # aggregated events (num_occurrences) mixed in
            ln = rng.choice(lines)
            if ln.events:
                rng.choice(ln.events).num_occurrences = rng.choice([1, 2**62])
    out = bytearray(xs.SerializeToString())
    if out and rng.random() < 0.15:  # bytes too: truncate or flip
        if rng.random() < 0.5:
            out = out[: rng.randrange(len(out))]
        else:
            i = rng.randrange(len(out))
            out[i] ^= 1 << rng.randrange(8)
    return bytes(out)


def check_invariants(r: dict) -> None:
    s = r["summary"]
    parts = [r["summary"]] + list(r["by_direction"].values())
    for p in parts:
        for k in ("span_ps", "hidden_ps", "exposed_ps", "bytes"):
            if k in p:
                assert p[k] >= 0, (k, p)
        if "hidden_ps" in p and "span_ps" in p:
            assert p["hidden_ps"] <= p["span_ps"], p
        ratio = p.get("overlap_ratio")
        assert ratio is None or (0.0 <= ratio <= 1.0 and not math.isnan(ratio)), p
    if s.get("transfers"):
        assert s["hidden"] + s["partial"] + s["exposed"] + s.get("zero_length", 0) \
            >= s["transfers"] - s.get("zero_length", 0)
        assert s["hidden"] + s["partial"] + s["exposed"] <= s["transfers"]
    for st in r.get("steps", []):
        assert st["duration_ps"] >= 0 and st.get("exposed_wall_ps", 0) >= 0


def test_fuzz_reader_and_analysis(tmp_path):
    rng = random.Random(SEED)
    bases = _bases()
    path = tmp_path / "case.xplane.pb"
    refused = read = 0
    for case in range(CASES):
        name, base = bases[case % len(bases)]
        data = mutate(base, rng)
        path.write_bytes(data)
        t0 = time.perf_counter()
        try:
            trace = read_trace(path)
            r = analysis.analyze(trace)
            check_invariants(r)
            tr = trace.transfers
            if len(tr):
                assert (tr["end_ps"] >= tr["start_ps"]).all()
                assert (tr["bytes"] >= 0).all()
            read += 1
        except InputError as e:
            assert "\n" not in str(e) and str(path) in str(e), str(e)
            refused += 1
        except Exception as e:  # noqa: BLE001 - the point of the test
            pytest.fail(f"case {case} (seed {SEED}, base {name}): {type(e).__name__}: {e}")
        took = time.perf_counter() - t0
        assert took < 2.0 + len(data) / 1e6, f"case {case}: {took:.1f} s for {len(data)} bytes"
    assert read > CASES // 4 and refused > 0  # both outcomes are exercised


# ---------------------------------------------------------------------------------------------
# Beyond the reader (issue 25): every renderer on what the reader returns, pods with a damaged
# host, and every side file in every bad shape.

def render_all(trace, result: dict, tmp: Path, html: bool) -> None:
    """Every renderer a user can reach: text, JSON, JUnit, Markdown, inspect (text and JSON),
    the dashboard's RunData and figures, and (when `html`) the HTML page. Each must produce
    its output for any result the reader and analysis give."""
    import io
    import json
    import xml.etree.ElementTree as ET

    from overlap.cli.inspect import inspect_trace, render_text
    from overlap.report import text as render
    from overlap.report.gate import CheckConfig, run_checks

    outcome = run_checks(result, CheckConfig(allow_no_transfers=True), trace)
    assert render.text(result, outcome) and render.markdown(result, outcome)
    buf = io.StringIO()
    render.write_json(buf, result, outcome)
    json.loads(buf.getvalue())
    ET.fromstring(render.junit(result, outcome))
    info = inspect_trace(trace)
    json.dumps(info)  # no default=: every value must already be JSON
    assert render_text(info)
    try:
        import plotly  # noqa: F401
    except ImportError:
        return
    from overlap.report.figures import run_figures
    from overlap.report.rundata import default_step, run_data

    data = run_data(trace, result, None)
    for fig in run_figures(data, default_step(data)).values():
        fig.to_json()
    if html:
        from overlap.report.html import write_html

        write_html(result, trace, tmp / "case.html")


STAT_KINDS = ("int64", "uint64", "double", "str", "bytes", "ref")


def _all_stats_as(xs, kind: str) -> None:
    from tests.trace.test_hardening import set_stat_type

    names = {m.name for pl in xs.planes for m in pl.stat_metadata.values()}
    set_stat_type(xs, names, kind)  # plane stats (names, versions, device facts)
    for st in _all_stats(xs):  # and every metadata and event stat
        v = {"int64": ("int64_value", -7), "uint64": ("uint64_value", 2**64 - 1),
             "double": ("double_value", float("inf")), "str": ("str_value", "size:-1 \x1b["),
             "bytes": ("bytes_value", b"\xff\xfe"), "ref": ("ref_value", 2**63)}[kind]
        setattr(st, *v)


@pytest.mark.parametrize("kind", STAT_KINDS)
@pytest.mark.parametrize("base", ["gpu", "tpu", "real"])
def test_every_stat_type_in_every_renderer(tmp_path, kind, base):
    bases = _bases()
    data = {"gpu": bases[0][1], "tpu": bases[1][1], "real": bases[2][1]}[base]
    xs = XSpace.FromString(data)
    _all_stats_as(xs, kind)
    path = tmp_path / "case.xplane.pb"
    path.write_bytes(xs.SerializeToString())
    try:
        trace = read_trace(path)
    except InputError:
        return  # refused with one line: allowed
    render_all(trace, analysis.analyze(trace), tmp_path, html=True)


def test_fuzz_renderers(tmp_path):
    """A slice of the mutation campaign through every renderer (the HTML page every 5th)."""
    rng = random.Random(SEED + 1)
    bases = _bases()
    path = tmp_path / "case.xplane.pb"
    for case in range(max(CASES // 10, 30)):
        name, base = bases[case % len(bases)]
        path.write_bytes(mutate(base, rng))
        try:
            trace = read_trace(path)
        except InputError:
            continue
        try:
            render_all(trace, analysis.analyze(trace), tmp_path, html=case % 5 == 0)
        except Exception as e:  # noqa: BLE001 - the point of the test
            pytest.fail(f"renderers, case {case} (seed {SEED + 1}, base {name}): "
                        f"{type(e).__name__}: {e}")


def test_fuzz_multi_host(tmp_path):
    """A session of one good host and two mutated ones: the good host is always reported;
    each mutated host is read or named in `unreadable`, never the cause of an exception."""
    from overlap.analysis.pod import read_and_analyze

    rng = random.Random(SEED + 2)
    good = _gpu_base()
    session = tmp_path / "plugins" / "profile" / "2026_11_23_00_00_00"
    session.mkdir(parents=True)
    cases = max(CASES // 30, 12)
    for case in range(cases):
        (session / "a-good.xplane.pb").write_bytes(good)
        for h in ("b", "c"):
            data = mutate(good, rng)
            if rng.random() < 0.3:
                data = data[: rng.randrange(1, 64)]  # surely damaged
            (session / f"{h}-mutated.xplane.pb").write_bytes(data)
        try:
            # Worker processes twice (they cost a second to start), serial otherwise.
            jobs = 2 if case in (0, 1) else 1
            trace = read_trace(tmp_path, jobs=jobs)
            _, r = read_and_analyze(tmp_path, jobs=jobs)
        except Exception as e:  # noqa: BLE001 - the point of the test
            pytest.fail(f"multi-host case {case} (seed {SEED + 2}): {type(e).__name__}: {e}")
        assert "a-good" in trace.hosts and "a-good" in r["hosts"]
        named = {Path(u["path"]).name for u in trace.unreadable}
        assert named == {Path(u["path"]).name for u in r["unreadable_hosts"]}
        assert len(trace.sources) + len(named) == 3
        for u in trace.unreadable:
            assert "\n" not in u["problem"] and u["path"] in [str(p) for p in session.iterdir()]
        check_invariants(r)


SIDE_SHAPES = ("fifo", "device", "directory", "huge", "garbage", "not utf-8", "deep", "array",
               "empty")


def _side_file(p: Path, shape: str) -> None:
    import os

    if p.is_dir() and not p.is_symlink():
        p.rmdir()
    elif p.exists() or p.is_symlink():
        p.unlink()
    if shape == "fifo":
        os.mkfifo(p)
    elif shape == "device":
        p.symlink_to("/dev/zero")
    elif shape == "directory":
        p.mkdir()
    elif shape == "huge":
        with open(p, "wb") as f:
            f.truncate(3 << 30)  # sparse: above the side-file bound, no disk used
    else:
        p.write_bytes({"garbage": b"\x00\x01{]", "not utf-8": b'{"a": "\xff"}',
                       "deep": b"[" * 200000, "array": b"[1, 2, 3]", "empty": b""}[shape])


@pytest.mark.parametrize("shape", SIDE_SHAPES)
def test_side_files_of_every_kind(tmp_path, capsys, shape):
    """run.json, a --baseline, program_memory.json and a plan's HLO text in every bad shape:
    each command answers within the bound, with one line and an exit code of 0-3."""
    import json
    import shutil

    from overlap.cli.main import main

    run = tmp_path / "run"
    shutil.copytree(REPO / "sample_traces" / "cpu-scan" / "offload_x", run)
    plan = tmp_path / "plan"
    (plan / "hlo").mkdir(parents=True)
    (plan / "run.json").write_text(json.dumps({
        "schema_version": 1, "kind": "plan", "label": "p", "policy": {"name": "full"},
        "target": {"name": "h100", "platform": "gpu"}, "estimate": {"model": {}}}))
    (plan / "hlo" / "m.after_optimizations.hlo.txt").write_text("HloModule m")
    baseline = tmp_path / "baseline.json"
    cases = [
        (run / "run.json", [["report", str(run)], ["check", str(run), "--allow-no-transfers"],
                            ["compare", str(run)], ["compare", str(tmp_path)]]),
        (baseline, [["check", str(run), "--allow-no-transfers", "--baseline", str(baseline)]]),
        (plan / "program_memory.json", [["report", str(plan)], ["check", str(plan)]]),
        (plan / "hlo" / "m.after_optimizations.hlo.txt", [["report", str(plan)]]),
    ]
    for side, commands in cases:
        original = side.read_bytes() if side.exists() else None
        _side_file(side, shape)
        for argv in commands:
            with bounded(60):
                code = main(argv)
            err = capsys.readouterr().err.strip().splitlines()
            assert code in (0, 1, 2, 3), (side.name, argv, err)
            assert len(err) <= 1 and not any("internal error" in e for e in err), (argv, err)
            if side.name == "run.json" and argv[0] != "compare" or argv[-1] == str(baseline):
                assert code == 3 and str(side) in err[0], (argv, err)
        _side_file(side, "empty")  # the next side file is tried with this one sound
        if original is None:
            side.unlink()
        else:
            side.write_bytes(original)
    for side, _ in cases:  # all at once, for the dashboard
        _side_file(side, shape)
    try:  # the dashboard's discovery and rows answer too
        from overlap.dashboard import data
    except ImportError:
        return
    data.clear_cache()
    with bounded(60):
        rows = [data.safe_run_row(r) for r in data.discover_runs([tmp_path])]
    assert {r["run"] for r in rows} >= {"run", "plan"}
