"""Pod-sized captures: `overlap report --json` over 1, 8 and 64 host files, time and peak memory.

    python benchmarks/bench_pod.py                       # 50k device events per host, GPU and TPU
    python benchmarks/bench_pod.py --events 20000 --hosts 1,8
    python benchmarks/bench_pod.py --big                 # 64 x ~110 MB GPU hosts (~7 GB)
    python benchmarks/bench_pod.py --quick               # smoke run (tests/benchmarks)

Inputs are SYNTHETIC (`overlap.trace.synthetic_bulk`): one host file is written per shape and
hard-linked under N host names, so a 64-host session costs one file's disk and write time (the
reader opens every name as its own file). Each configuration runs `overlap report --json` in a
fresh process; a sampler thread reads VmRSS of that process and of all its descendants every
20 ms (`ru_maxrss` is useless here: Linux carries it across fork+exec), giving

* `parent`: peak RSS of the `overlap` process itself (the reducer: the parts and the kept
  compute of the worst steps),
* `worker`: the largest peak of any one worker process (`--jobs 2`, or Dask workers),
* `total`: the peak of the sum over the whole process tree.

Readers per row: `--jobs 1` (hosts one after another in the `overlap` process), `--jobs 2`
(two spawned workers; this VM has two cores), a Dask `LocalCluster` of two worker processes on
loopback (`--scheduler`), and `whole read`: `analyze(read_trace(all files))` in one process, the
single-table path `overlap report` used before the map/reduce (its memory grows with the
capture's total). Times are one run each (these runs take seconds to minutes, and the medians of
`bench.py` already cover per-file speed).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
if str(REPO) not in sys.path:
    sys.path.insert(1, str(REPO))

SESSION = "2026_11_22_00_00_00"
WHOLE_READ = ("import sys, json; from overlap.trace import read_trace; "
              "from overlap.analysis.overlap import analyze; "
              "json.dumps(analyze(read_trace(sys.argv[1])))")


def _rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _children(pid: int) -> list[int]:
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return out


def _tree(pid: int) -> list[int]:
    todo, seen = [pid], []
    while todo:
        p = todo.pop()
        seen.append(p)
        todo += _children(p)
    return seen


class Sampler:
    """Peak RSS of `root` itself, of its largest descendant, and of the tree's sum (KiB)."""

    def __init__(self, root: int, extra_roots: tuple[int, ...] = ()):
        self.root, self.extra = root, extra_roots
        self.parent = self.worker = self.total = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            pids = _tree(self.root)
            for r in self.extra:
                pids += _tree(r)
            rss = {p: _rss_kib(p) for p in pids}
            self.parent = max(self.parent, rss.get(self.root, 0))
            others = [v for p, v in rss.items() if p != self.root]
            self.worker = max([self.worker, *others])
            self.total = max(self.total, sum(rss.values()))
            self._stop.wait(0.02)

    def stop(self) -> "Sampler":
        self._stop.set()
        self._t.join()
        return self


def run(cmd: list[str], extra_roots: tuple[int, ...] = ()) -> dict:
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=REPO)
    s = Sampler(p.pid, extra_roots)
    _, err = p.communicate()
    s.stop()
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}): {err.decode()[-2000:]}")
    return {"s": wall, "parent": s.parent / 1024, "worker": s.worker / 1024,
            "total": s.total / 1024}


def make_pod(root: Path, backend: str, events: int, hosts: int, cache: dict) -> Path:
    """`hosts` names for one SYNTHETIC host file (hard links: one file's disk and write time)."""
    from overlap.trace import synthetic_bulk

    key = (backend, events)
    if key not in cache:
        src = root / f"{backend}-{events}.xplane.pb"
        synthetic_bulk.write(src, backend, events)
        cache[key] = src
    sess = root / f"{backend}-{events}-{hosts}" / "plugins" / "profile" / SESSION
    sess.mkdir(parents=True, exist_ok=True)
    for h in range(hosts):
        dst = sess / f"host-{h:02d}.xplane.pb"
        if not dst.exists():
            os.link(cache[key], dst)
    return sess.parents[2]


def fmt(r: dict | None) -> str:
    if r is None:
        return "-"
    return (f"{r['s']:.1f} s, parent {r['parent']:.0f} / worker {r['worker']:.0f} / "
            f"total {r['total']:.0f} MiB")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=50_000, help="device events per host file")
    ap.add_argument("--hosts", default="1,8,64")
    ap.add_argument("--backends", default="gpu,tpu")
    ap.add_argument("--no-dask", action="store_true")
    ap.add_argument("--no-whole", action="store_true", help="skip the single-table read")
    ap.add_argument("--big", action="store_true",
                    help="64 GPU hosts of 1M device events (~110 MB each, ~7 GB): --jobs 2 only")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--dir", help="where to write the files (default: a temporary directory)")
    args = ap.parse_args(argv)
    if args.quick:
        args.events, args.hosts, args.no_dask = 2000, "1,3", True
    if args.big:
        args.events, args.hosts, args.backends, args.no_whole = 1_000_000, "64", "gpu", True
    hosts = [int(h) for h in args.hosts.split(",")]
    py = sys.executable
    cluster = None
    if not args.no_dask and not args.big:
        try:
            from dask.distributed import LocalCluster
            cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                   host="127.0.0.1", dashboard_address=None)
        except ImportError:
            print("dask not installed: no Dask column ('pip install overlap-jax[dask]')",
                  file=sys.stderr)
    rows = []
    with tempfile.TemporaryDirectory(prefix="overlap-pod-", dir=args.dir) as d:
        d, cache = Path(d), {}
        for backend in args.backends.split(","):
            for n in hosts:
                root = make_pod(d, backend, args.events, n, cache)
                files = sorted(root.rglob("*.xplane.pb"))
                size = sum(f.stat().st_size for f in files)
                big = max(f.stat().st_size for f in files)
                report = [py, "-m", "overlap", "report", "--json", str(root)]
                res = {}
                if not args.big:
                    res["jobs 1"] = run(report + ["--jobs", "1"])
                res["jobs 2"] = run(report + ["--jobs", "2"])
                if cluster is not None and n > 1:
                    worker_pids = tuple(w.process.pid for w in cluster.workers.values()
                                        if getattr(w, "process", None) is not None)
                    res["dask 2 workers"] = run(
                        report + ["--scheduler", cluster.scheduler_address], worker_pids)
                if not args.no_whole:
                    res["whole read"] = run([py, "-c", WHOLE_READ, str(root)])
                rows.append((f"{backend} {n} host{'s' if n > 1 else ''} x {args.events:,} "
                             f"device events", size, big, res))
                print(f"{rows[-1][0]}: " + "; ".join(f"{k}: {fmt(v)}" for k, v in res.items()),
                      file=sys.stderr, flush=True)
    if cluster is not None:
        cluster.close()
    cols = ["jobs 1", "jobs 2", "dask 2 workers", "whole read"]
    print("| capture | total MB | largest host file MB | " + " | ".join(cols) + " |")
    print("|---|---|---|" + "---|" * len(cols))
    for name, size, big, res in rows:
        print(f"| {name} | {size / 1e6:.1f} | {big / 1e6:.1f} | "
              + " | ".join(fmt(res.get(c)) for c in cols) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
