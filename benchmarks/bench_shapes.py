"""Shapes that used to fall off a cliff, and pod-sized captures: ratios in the same process.

    python benchmarks/bench_shapes.py            # every shape, 3 rounds
    python benchmarks/bench_shapes.py --quick    # small sizes (the test suite runs this)

Shapes (all SYNTHETIC, written by `overlap.trace.synthetic`, labelled as such):

* `many-ops tpu`: a TPU capture where every copy has its own `copy-start.N` op metadata (a fully
  unrolled or many-program capture): time follows distinct ops, not events, unless the
  per-metadata work is cheap (`many_ops_tpu_clocked`: each copy on the chip's clock too).
  Readers: bare decode, `overlap report --json` in process, and xprof's
  `analyze_async_overlap`. `distinct compute too`: every fusion is its own op as well.
* `id-0 events`: a GPU line whose events use metadata id 0, which proto3 omits on the wire (the
  event does not start with the 0x08 tag); compared with the same content using id 1.
* `many planes`: many GPU device planes of two events each (per-plane overhead).
* `pod N hosts`: one session of N host files (GPU-shaped); the report with `--jobs 1` and
  `--jobs 2` (spawned workers). `bench_pod.py` measures pods at scale (64 hosts, Dask, memory).

Every time is the median over rounds, interleaved so that noise hits all readers alike; ratios
are against the first reader of the row, in the same process.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:
    sys.path.insert(1, str(HERE.parent))

US = 1_000_000


def many_ops_tpu(path: Path, steps: int, distinct_compute: bool = False) -> Path:
    from overlap.trace.synthetic import many_ops_scenario

    return many_ops_scenario(steps, distinct_compute).write(path)


def many_ops_tpu_clocked(path: Path, steps: int) -> Path:
    """The many-ops shape with the chip's clock on every copy (`device_offset_ps`/
    `device_duration_ps` on the copy-start and copy-done events, as real XLA:TPU captures
    write them): the reader then joins each Async XLA Ops span to its two XLA Ops events by
    name and time (`overlap.trace.tpu._async_device_spans`), 36k distinct names at 3000
    steps. SYNTHETIC; the device clock is the host-aligned one plus 1 us."""
    from overlap.trace.synthetic import many_ops_scenario

    return many_ops_scenario(steps, clocked=True).write(path)


def id0_events(path: Path, n: int, zero: bool) -> Path:
    from overlap.trace.protos import XSpace
    from overlap.trace.synthetic import SyntheticTrace

    t = SyntheticTrace()
    g = t.gpu(0)
    for i in range(n):
        g.kernel(10 * US + i * US, US // 2, name="k")
    xs = XSpace.FromString(t.to_bytes())
    if zero:
        pl = next(p for p in xs.planes if p.name.startswith("/device:GPU"))
        k = next(iter(pl.event_metadata))
        pl.event_metadata[0].CopyFrom(pl.event_metadata[k])
        pl.event_metadata[0].id = 0
        for ln in pl.lines:
            for ev in ln.events:
                if ev.metadata_id == k:
                    ev.metadata_id = 0
    path.write_bytes(xs.SerializeToString())
    return path


def many_planes(path: Path, n: int) -> Path:
    from overlap.trace.synthetic import SyntheticTrace

    t = SyntheticTrace()
    for d in range(n):
        g = t.gpu(d)
        g.kernel(10 * US, US)
        g.memcpy("D2H", 10 * US, US, 4096)
    return t.write(path)


def pod(root: Path, hosts: int, steps: int) -> Path:
    from overlap.trace.synthetic import gpu_offload_scenario

    for h in range(hosts):
        gpu_offload_scenario(steps=steps, layers=8, host=f"host-{h:02d}",
                             hidden_fraction=0.5 if h == 3 else 1.0).write_session(root)
    return root


def bare(path) -> None:
    from overlap.trace.protos import XSpace

    for f in ([Path(path)] if Path(path).is_file() else sorted(Path(path).rglob("*.xplane.pb"))):
        XSpace.FromString(f.read_bytes())


def report(path, **kw) -> None:
    """What `overlap report --json` does, in process: read, analyze (per host), serialize."""
    import io

    from overlap.analysis.pod import read_and_analyze
    from overlap.report import text

    _, result = read_and_analyze(path, **kw)
    text.write_json(io.StringIO(), result)


def xprof(path) -> None:
    from xprof.cli.tools.analyze_async_overlap_tool import analyze_async_overlap

    analyze_async_overlap(str(path), bypass_cache=True)


def timed(fns: dict, rounds: int) -> dict[str, float]:
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(rounds):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


XPROF = "xprof analyze_async_overlap"


def row(name: str, size: int, res: dict[str, float]) -> str:
    first = next(iter(res.values()))
    cells = "  ".join(f"{k} {v:.3f} s ({v / first:.2f}x)" for k, v in res.items())
    if XPROF in res and "overlap report" in res:  # issue 15's target: at least 5x
        ratio = res[XPROF] / res["overlap report"]
        cells += f"  -> overlap report {ratio:.1f}x faster than xprof"
    return f"| {name} | {size / 1e6:.1f} MB | {cells} |"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    q = args.quick
    rounds = 1 if q else args.rounds
    out = []
    with tempfile.TemporaryDirectory(prefix="overlap-bench-") as d:
        d = Path(d)
        p = many_ops_tpu(d / "manyops.xplane.pb", 100 if q else 3000)
        fns = {"bare decode": lambda: bare(p), "overlap report": lambda: report(p)}
        if not q:
            fns[XPROF] = lambda: xprof(p)
        out.append(row("many-ops tpu", p.stat().st_size, timed(fns, rounds)))
        p2 = many_ops_tpu(d / "manycompute.xplane.pb", 100 if q else 3000, distinct_compute=True)
        fns = {"bare decode": lambda: bare(p2), "overlap report": lambda: report(p2)}
        if not q:
            fns[XPROF] = lambda: xprof(p2)
        out.append(row("many-ops tpu, distinct compute too", p2.stat().st_size,
                       timed(fns, rounds)))
        n = 2000 if q else 200_000
        a, b = id0_events(d / "id1.xplane.pb", n, False), id0_events(d / "id0.xplane.pb", n, True)
        out.append(row("id-0 events", b.stat().st_size, timed(
            {"metadata id 1": lambda: report(a), "metadata id 0": lambda: report(b)}, rounds)))
        for n in ((50,) if q else (1000, 10_000)):
            p = many_planes(d / f"planes{n}.xplane.pb", n)
            out.append(row(f"many planes ({n:,})", p.stat().st_size,
                           timed({"bare decode": lambda p=p: bare(p),
                                  "overlap report": lambda p=p: report(p)}, rounds)))
        for hosts in ((2,) if q else (1, 8)):
            root = pod(d / f"pod{hosts}", hosts, 3 if q else 400)
            size = sum(f.stat().st_size for f in root.rglob("*.xplane.pb"))
            fns = {"bare decode": lambda r=root: bare(r),
                   "jobs 1": lambda r=root: report(r, jobs=1),
                   "jobs 2": lambda r=root: report(r, jobs=2)}
            out.append(row(f"pod {hosts} hosts", size, timed(fns, rounds)))
    print("| shape | size | readers (median s, ratio to the first) |")
    print("|---|---|---|")
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
