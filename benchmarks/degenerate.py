"""The fuzz campaign's degenerate shapes, written for `bench_process.py --files` (issue 32).

    python benchmarks/degenerate.py DIR                       # every shape, default sizes
    python benchmarks/degenerate.py DIR lines:1000000 tinyplanes:100000

Shapes (all SYNTHETIC: each file's XSpace.warnings says so, and reports print SYNTHETIC):

* `lines:N`: one GPU plane of N lines of one event each (fuzz round 3: 1e6 lines, 46x the
  file in memory); no Task Environment plane, so line timestamps are read as absolute.
* `tinyplanes:N`: N GPU planes of one line of one event each (fuzz round 3: 1e5 planes).
* `planes:N`: N GPU planes of a kernel and a D2H memcpy each (`bench_shapes.py`'s shape).
* `memcpys:N`: one GPU plane of N kernels and N D2H memcpys whose `memcpy_details` all
  differ (a distinct byte count each: N interned stat strings).

The fuzz campaign's memory shapes no round had measured (round 20; its `mem_probe.py` is not
in the campaign's folder, so these are written from its table's descriptions and sizes):

* `emptyevents:N`: one GPU stream line of N events without a field (2 bytes each).
* `kernels:N`: one GPU stream line of N kernels of one name, no stats (~15 bytes each).
* `gpumeta:N` / `tpumeta:N`: a GPU (TPU) plane of N event-metadata entries, each its own
  name (`k<i>`), and one line of 1000 events of the first 1000 of them.
* `pyevents:N`: a host `python` line of N Python-tracer events of 100 frames, beside a GPU
  plane of one kernel.

Two more of the campaign's table (round 22):

* `eventstats:N`: one kernel carrying N stats (the campaign's 6 MB at 1e6).
* `copies:N`: N D2H memcpys alone on one line, each its own `memcpy_details` (60 MB).

Round 23:

* `refcopies:N`: `copies:N` with each `memcpy_details` written as CUPTI writes it on our real
  H100/H200 captures: a ref to a stat-metadata entry whose name is the text (N entries).

Round 37 (shapes no benchmark had timed; the campaign timed the first two in its scaling runs):

* `rocm:N`: one AMD GPU as XLA's ROCm collector writes it: N kernels and N copies
  (`__amd_rocclr_copyBuffer.kd`, D2H and H2D in turn), each copy joined to the HIP call that
  issued it on the host plane by `correlation_id` (the campaign: 20k/40k copies 0.34/0.52 s).
* `tpuchips:N`: N TPU planes (chips), each of an op and an async D2H copy beside it (the
  campaign: 2k/4k chips 2.8/5.5 s, linear).
* `gpusteps:N`: `gpu_offload_scenario` of N steps of 8 layers: per step 16 kernels and 16
  copies, and a host step marker (a long capture of the demo's shape).
* `gpus8:N`: the same steps on each of 8 GPUs of one host (a DGX's), N steps.

Round 38:

* `cbrepeat:N`: the real H100 capture made with XLA's default command buffers
  (`sample_traces/gpu-h100/transformer-h100-command-buffers/qkv_proj_offloaded_cb`: 5 steps,
  4,970 GPU events on one stream, every copy among the kernels, `cuda_graph_id` on each)
  repeated N times end to end, every plane's events shifted by the capture's span each time
  (a long capture of what XLA:GPU runs by default; SYNTHETIC as a whole).
* `v6erepeat:N`: the public TPU v6e host-offload sample (`sample_traces/tpu-v6e-offload`: 4
  chips, 2,400 async copies) repeated N times the same way (a long TPU capture).
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
for _p in (HERE.parent, HERE):
    if str(_p) not in sys.path:
        sys.path.insert(1, str(_p))

US = 1_000_000
DEFAULT = ("lines:100000", "lines:1000000", "tinyplanes:10000", "tinyplanes:100000",
           "planes:10000", "memcpys:100000")


def lines(out: Path, n: int) -> Path:
    from overlap.trace.synthetic import one_event_lines

    p = out / f"lines{n // 1000}k.xplane.pb"
    p.write_bytes(one_event_lines(n))
    return p


def tinyplanes(out: Path, n: int) -> Path:
    from overlap.trace.synthetic import tiny_planes

    p = out / f"tinyplanes{n // 1000}k.xplane.pb"
    p.write_bytes(tiny_planes(n))
    return p


def planes(out: Path, n: int) -> Path:
    from bench_shapes import many_planes  # (the same shape, one writer)

    return many_planes(out / f"planes{n // 1000}k.xplane.pb", n)


def memcpys(out: Path, n: int) -> Path:
    from overlap.trace.synthetic import SyntheticTrace

    t = SyntheticTrace()
    g = t.gpu(0)
    for i in range(n):
        g.kernel(10 * US + i * 4 * US, 2 * US)
        g.memcpy("D2H", 10 * US + i * 4 * US, US, 4096 + i)
    return t.write(out / f"memcpy{n // 1000}k.xplane.pb")


def _space(gpu: bool = True):
    """(an XSpace marked SYNTHETIC, its device plane: GPU:0, or TPU:0 where not `gpu`)."""
    from overlap.trace.protos import XSpace
    from overlap.trace.synthetic import SYNTHETIC_WARNING

    sp = XSpace()
    sp.warnings.append(SYNTHETIC_WARNING)
    pl = sp.planes.add(id=1, name="/device:GPU:0" if gpu else "/device:TPU:0")
    return sp, pl


def _write(sp, path: Path) -> Path:
    path.write_bytes(sp.SerializeToString())
    return path


def emptyevents(out: Path, n: int) -> Path:
    sp, pl = _space()
    ln = pl.lines.add(id=7, name="Stream #7(Compute)", timestamp_ns=1000)
    for _ in range(n):
        ln.events.add()
    sp.planes.add(id=2, name="/host:CPU")
    return _write(sp, out / f"emptyevents{n // 1000}k.xplane.pb")


def kernels(out: Path, n: int) -> Path:
    sp, pl = _space()
    md = pl.event_metadata[1]
    md.id, md.name = 1, "loop_fusion_kernel"
    ln = pl.lines.add(id=7, name="Stream #7(Compute)", timestamp_ns=1000)
    for i in range(n):
        ln.events.add(metadata_id=1, offset_ps=i * 10_000, duration_ps=5000)
    sp.planes.add(id=2, name="/host:CPU")
    return _write(sp, out / f"kernels{n // 1000}k.xplane.pb")


def _meta(out: Path, n: int, gpu: bool) -> Path:
    sp, pl = _space(gpu)
    for i in range(1, n + 1):
        md = pl.event_metadata[i]
        md.id, md.name = i, f"k{i}"
    ln = pl.lines.add(id=7, name="Stream #7(Compute)" if gpu else "XLA Ops", timestamp_ns=1000)
    for i in range(min(n, 1000)):
        ln.events.add(metadata_id=i + 1, offset_ps=i * 10_000, duration_ps=5000)
    sp.planes.add(id=2, name="/host:CPU")
    return _write(sp, out / f"{'gpu' if gpu else 'tpu'}meta{n // 1000}k.xplane.pb")


def gpumeta(out: Path, n: int) -> Path:
    return _meta(out, n, True)


def tpumeta(out: Path, n: int) -> Path:
    return _meta(out, n, False)


def pyevents(out: Path, n: int) -> Path:
    sp, pl = _space()
    md = pl.event_metadata[1]
    md.id, md.name = 1, "loop_fusion_kernel"
    pl.lines.add(id=7, name="Stream #7(Compute)", timestamp_ns=1000).events.add(
        metadata_id=1, offset_ps=10_000, duration_ps=5000)
    host = sp.planes.add(id=2, name="/host:CPU")
    for i in range(1, 101):
        md = host.event_metadata[i]
        md.id, md.name = i, f"$train.py:{i} step"
    ln = host.lines.add(id=1, name="python", timestamp_ns=1000)
    for i in range(n):
        ln.events.add(metadata_id=1 + i % 100, offset_ps=i * 1000, duration_ps=500)
    return _write(sp, out / f"pyevents{n // 1000}k.xplane.pb")


def eventstats(out: Path, n: int) -> Path:
    """One kernel (kernel_details) on a GPU stream line carrying `n` stats: `hlo_op` first,
    then int stats of an id no rule reads (the campaign's "one event with 1e6 stats")."""
    sp, pl = _space()
    for sid, name in ((1, "kernel_details"), (2, "hlo_op"), (3, "counter")):
        sm = pl.stat_metadata[sid]
        sm.id, sm.name = sid, name
    md = pl.event_metadata[1]
    md.id, md.name = 1, "loop_fusion_kernel"
    ev = pl.lines.add(id=7, name="Stream #7(Compute)", timestamp_ns=1000).events.add(
        metadata_id=1, offset_ps=10_000, duration_ps=5000)
    ev.stats.add(metadata_id=1, str_value="regs:32")
    ev.stats.add(metadata_id=2, str_value="fusion.1")
    for i in range(max(n - 2, 0)):
        ev.stats.add(metadata_id=3, int64_value=i)
    sp.planes.add(id=2, name="/host:CPU")
    return _write(sp, out / f"eventstats{n // 1000}k.xplane.pb")


def copies(out: Path, n: int) -> Path:
    """`n` D2H memcpys on one GPU stream line, each with its own `memcpy_details` (a
    distinct byte count), no kernels (the campaign's "1e6 memcpys, distinct details")."""
    sp, pl = _space()
    sm = pl.stat_metadata[1]
    sm.id, sm.name = 1, "memcpy_details"
    md = pl.event_metadata[1]
    md.id, md.name = 1, "MemcpyD2H"
    ln = pl.lines.add(id=13, name="Stream #13(MemcpyD2H)", timestamp_ns=1000)
    for i in range(n):
        ln.events.add(metadata_id=1, offset_ps=i * 10_000, duration_ps=5000).stats.add(
            metadata_id=1, str_value=f"kind_src:device kind_dst:pinned size:{4096 + i}")
    sp.planes.add(id=2, name="/host:CPU")
    return _write(sp, out / f"copies{n // 1000}k.xplane.pb")


def refcopies(out: Path, n: int) -> Path:
    """`copies:N` with the details as refs (CUPTI's form): stat metadata 2..n+1 are named by
    each copy's details text, and each copy's `memcpy_details` stat refers to its own."""
    sp, pl = _space()
    sm = pl.stat_metadata[1]
    sm.id, sm.name = 1, "memcpy_details"
    for i in range(n):
        sm = pl.stat_metadata[i + 2]
        sm.id, sm.name = i + 2, f"kind_src:device kind_dst:pinned size:{4096 + i}"
    md = pl.event_metadata[1]
    md.id, md.name = 1, "MemcpyD2H"
    ln = pl.lines.add(id=13, name="Stream #13(MemcpyD2H)", timestamp_ns=1000)
    for i in range(n):
        ln.events.add(metadata_id=1, offset_ps=i * 10_000, duration_ps=5000).stats.add(
            metadata_id=1, ref_value=i + 2)
    sp.planes.add(id=2, name="/host:CPU")
    return _write(sp, out / f"refcopies{n // 1000}k.xplane.pb")


def rocm(out: Path, n: int) -> Path:
    from overlap.trace.synthetic import SyntheticTrace

    t = SyntheticTrace()
    g = t.rocm(0)
    for i in range(n):
        t0 = 10 * US + i * 4 * US
        g.kernel(t0, 2 * US)
        g.hip_copy("D2H" if i % 2 == 0 else "H2D", t0 + US, 2 * US, 4096 + i)
    return t.write(out / f"rocm{n // 1000}k.xplane.pb")


def tpuchips(out: Path, n: int) -> Path:
    from overlap.trace.synthetic import SyntheticTrace

    t = SyntheticTrace()
    for c in range(n):
        d = t.tpu(c)
        d.op(10 * US, 5 * US)
        d.async_copy("D2H", 11 * US, 14 * US)
    name = f"tpuchips{n // 1000}k" if n >= 1000 else f"tpuchips{n}"
    return t.write(out / f"{name}.xplane.pb")


def gpusteps(out: Path, n: int) -> Path:
    from overlap.trace.synthetic import gpu_offload_scenario

    t = gpu_offload_scenario(steps=n, layers=8, hidden_fraction=0.5, kernel_ps=4 * US,
                             copy_ps=2 * US)
    return t.write(out / f"gpusteps{n // 1000}k.xplane.pb")


def gpus8(out: Path, n: int) -> Path:
    """`gpusteps:N` on each of 8 GPUs of one host (a DGX's), every device's steps at once."""
    from overlap.trace.synthetic import SyntheticTrace

    t = SyntheticTrace()
    gs = [t.gpu(d) for d in range(8)]
    now = 2 * US
    for s in range(n):
        t0 = now
        for direction in ("D2H", "H2D"):
            for layer in range(8):
                for g in gs:
                    g.kernel(now, 4 * US, hlo_op=f"fusion.{layer}", name=f"fusion_{layer}_kernel")
                    k = layer if direction == "D2H" else 8 + layer
                    g.memcpy(direction, now + 3 * US, 2 * US, 8 << 20, hlo_op=f"copy-start.{k}")
                now += 6 * US
        t.step(s, t0 - US // 2, now)
        now += 6 * US
    return t.write(out / f"gpus8x{n // 1000}k.xplane.pb")


SAMPLES = HERE.parent / "sample_traces"
CB_SAMPLE = SAMPLES / "gpu-h100" / "transformer-h100-command-buffers" / "qkv_proj_offloaded_cb"
V6E_SAMPLE = SAMPLES / "tpu-v6e-offload"


def cbrepeat(out: Path, n: int) -> Path:
    return _repeat(CB_SAMPLE, n, out / f"cbrepeat{n}.xplane.pb")


def v6erepeat(out: Path, n: int) -> Path:
    return _repeat(V6E_SAMPLE, n, out / f"tpu_v6e_repeat{n}.xplane.pb")


def _repeat(sample: Path, n: int, path: Path) -> Path:
    """The sample's capture with every line's events repeated `n` times end to end."""
    from overlap.trace.protos import XSpace
    from overlap.trace.synthetic import SYNTHETIC_WARNING

    sp = XSpace.FromString(next(sample.rglob("*.xplane.pb")).read_bytes())
    sp.warnings.append(SYNTHETIC_WARNING)
    # the span of every line's events on one clock (a line's offsets count from its own
    # timestamp), and a gap after it
    ends = [ln.timestamp_ns * 1000 + e.offset_ps + e.duration_ps
            for pl in sp.planes for ln in pl.lines for e in ln.events]
    starts = [ln.timestamp_ns * 1000 + e.offset_ps
              for pl in sp.planes for ln in pl.lines for e in ln.events]
    span = max(ends) - min(starts) + 1_000_000_000  # (+1 ms)
    for pl in sp.planes:
        for ln in pl.lines:
            events = list(ln.events)
            blob = [e.SerializeToString() for e in events]
            for k in range(1, n):
                for e, b in zip(events, blob):
                    c = ln.events.add()
                    c.MergeFromString(b)
                    c.offset_ps = e.offset_ps + k * span
    return _write(sp, path)


SHAPES = {"lines": lines, "tinyplanes": tinyplanes, "planes": planes, "memcpys": memcpys,
          "emptyevents": emptyevents, "kernels": kernels, "gpumeta": gpumeta,
          "tpumeta": tpumeta, "pyevents": pyevents, "eventstats": eventstats,
          "copies": copies, "refcopies": refcopies, "rocm": rocm, "tpuchips": tpuchips,
          "gpusteps": gpusteps, "gpus8": gpus8, "cbrepeat": cbrepeat, "v6erepeat": v6erepeat}


def main(argv: list[str]) -> None:
    if not argv:
        raise SystemExit(__doc__)
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    for spec in argv[1:] or DEFAULT:
        kind, n = spec.split(":")
        p = SHAPES[kind](out, int(n))
        print(p, p.stat().st_size)


if __name__ == "__main__":
    main(sys.argv[1:])
