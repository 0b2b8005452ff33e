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
    from overlap.trace.protos import XSpace
    from overlap.trace.synthetic import SYNTHETIC_WARNING

    sp = XSpace()
    sp.warnings.append(SYNTHETIC_WARNING)
    for d in range(n):
        pl = sp.planes.add(id=d, name=f"/device:GPU:{d}")
        md = pl.event_metadata[1]
        md.id, md.name = 1, "kernel_x"
        ln = pl.lines.add(id=1, name="Stream #1", timestamp_ns=1000)
        ln.events.add(metadata_id=1, offset_ps=10, duration_ps=5)
    sp.planes.add(id=n, name="/host:CPU")
    p = out / f"tinyplanes{n // 1000}k.xplane.pb"
    p.write_bytes(sp.SerializeToString())
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


SHAPES = {"lines": lines, "tinyplanes": tinyplanes, "planes": planes, "memcpys": memcpys}


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
