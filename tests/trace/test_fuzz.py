"""Fuzz: any file a user or another producer hands us is read with sane numbers or refused with
one line (InputError, exit 3); never a traceback, never an impossible number.

A seeded mutator over real captures (sample_traces/) and SYNTHETIC GPU/TPU builds changes both
bytes and valid-protobuf field values: extreme ints (int64/uint64 limits, negatives), NaN/inf
and huge doubles, stats of the wrong type, absolute line timestamps, missing planes, odd
`memcpy_details`. Each case is read in-process with `read_trace` + `analyze` and checked for the
invariants below, under a time bound proportional to the file size.

`OVERLAP_FUZZ_CASES=N` runs N cases (default 900, about a minute here); a failure prints the
seed and case number so it can be replayed with `OVERLAP_FUZZ_SEED`.
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
from overlap.trace.protos import XSpace
from overlap.trace.reader import read_trace
from overlap.trace.synthetic import SyntheticTrace

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
