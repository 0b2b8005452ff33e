"""Reader benchmark: overlap vs bare protobuf decode vs jaxlib ProfileData vs xprof, same files.

    python benchmarks/bench.py                 # 100k, 1M, 5M device events, GPU and TPU shapes
    python benchmarks/bench.py --sizes 100k,1M --repeat 5
    python benchmarks/bench.py --quick         # tiny smoke run (the test suite calls this)

Every ratio is against *bare decode* (`XSpace.ParseFromString` of the file's bytes, file read
included), measured in the same process, interleaved with the other readers (one repetition of
every reader per round, medians over rounds), so machine noise hits all readers alike. Peak
memory is measured separately: each reader runs once in a fresh subprocess, which reports its
own peak RSS (`VmHWM`, import baseline subtracted), so readers do not inherit each other's heap.

Inputs are SYNTHETIC files from `overlap.trace.synthetic_bulk`, cached in `benchmarks/.cache/`, plus
the largest real captures in `sample_traces/` if that folder exists.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CACHE = HERE / ".cache"
if str(REPO) not in sys.path:  # `python benchmarks/bench.py`: the repo's dashboard/ package
    sys.path.insert(1, str(REPO))
SIZES = {"10k": 10_000, "100k": 100_000, "1M": 1_000_000, "5M": 5_000_000}


# ---------------------------------------------------------------------------------------------
# Readers: each takes a path and returns something small (so result size is not measured).


def bare_decode(path: str):
    from overlap.trace.protos import XSpace

    xs = XSpace()
    with open(path, "rb") as f:
        xs.ParseFromString(f.read())
    return len(xs.planes)


def overlap_read(path: str):
    from overlap.trace import read_trace

    t = read_trace(path)
    return len(t.transfers)


def overlap_report(path: str):
    """File to the `overlap report --json` text: read, analyze, serialize."""
    from overlap.trace import read_trace

    try:
        from overlap.analysis.overlap import analyze
    except ImportError:  # analysis not there yet: time the reader alone
        return overlap_read(path)
    return len(json.dumps(analyze(read_trace(path))))


def jaxlib_profile_data(path: str):
    """jaxlib's C++ reader, touching name, start and duration of every event."""
    from jax._src.lib import _profile_data

    pd = _profile_data.ProfileData.from_file(path)
    n = 0
    for plane in pd.planes:
        for line in plane.lines:
            for ev in line.events:
                _ = (ev.name, ev.start_ns, ev.duration_ns)  # touch every field, as a reader would
                n += 1
    return n


def xprof_async_overlap(path: str):
    """xprof's `analyze_async_overlap` CLI tool, file to JSON, its disk cache bypassed."""
    from xprof.cli.tools.analyze_async_overlap_tool import analyze_async_overlap

    return len(analyze_async_overlap(path, bypass_cache=True))


def _dashboard_render(path: str, cache_dir: str) -> bool:
    """`prepare_run_view` of the run that is this file, in-memory cache cleared first."""
    from overlap.dashboard.data import clear_cache, discover_runs, prepare_run_view  # type: ignore[import-not-found]

    old = os.environ.get("OVERLAP_CACHE_DIR")
    os.environ["OVERLAP_CACHE_DIR"] = cache_dir
    try:
        clear_cache()
        run = discover_runs([path])[0]
        return prepare_run_view(run) is not None
    finally:
        if old is None:
            del os.environ["OVERLAP_CACHE_DIR"]
        else:
            os.environ["OVERLAP_CACHE_DIR"] = old


def dashboard_first_render(path: str):
    """Dashboard first render of a run never seen before: on-disk cache disabled."""
    return _dashboard_render(path, "")


def dashboard_cached(path: str):
    """Dashboard first render (fresh process state) when the on-disk cache holds the run: the
    warm-up round fills it (a cache of our own under benchmarks/.cache, not ~/.cache)."""
    return _dashboard_render(path, str(CACHE / "dashboard"))


def _has_dashboard() -> bool:
    try:
        from overlap.dashboard.data import prepare_run_view  # noqa: F401
    except Exception:
        return False
    return True


READERS = {
    "decode": bare_decode,
    "overlap_read": overlap_read,
    "overlap_report": overlap_report,
    "jaxlib_ProfileData": jaxlib_profile_data,
    "xprof_async_overlap": xprof_async_overlap,
    "dashboard": dashboard_first_render,
    "dashboard_cached": dashboard_cached,
}


def readers_for(kind: str) -> list[str]:
    names = ["decode", "overlap_read", "overlap_report", "jaxlib_ProfileData"]
    if kind in ("tpu", "real"):
        names.append("xprof_async_overlap")  # xprof's tool only reads TPU-style XLA Ops lines
    if _has_dashboard():
        names += ["dashboard", "dashboard_cached"]
    return names


# ---------------------------------------------------------------------------------------------
# Inputs


def synthetic_inputs(sizes: list[str], cache: Path) -> list[dict]:
    from overlap.trace import synthetic_bulk

    out = []
    cache.mkdir(parents=True, exist_ok=True)
    for size in sizes:
        n = SIZES[size]
        for kind in ("gpu", "tpu"):
            p = cache / f"{kind}_{size}.xplane.pb"
            meta = p.with_suffix(".json")
            if not (p.exists() and meta.exists()):
                t0 = time.perf_counter()
                truth = synthetic_bulk.write(p, kind, n)
                meta.write_text(json.dumps({
                    "device_events": truth.device_events, "host_events": truth.host_events,
                    "transfers": truth.transfers, "write_s": time.perf_counter() - t0}))
            m = json.loads(meta.read_text())
            out.append({"name": f"synthetic {kind} {size}", "kind": kind, "path": str(p),
                        "events": m["device_events"] + m["host_events"],
                        "device_events": m["device_events"]})
    return out


def reencoded_inputs(inputs: list[dict], cache: Path) -> list[dict]:
    """The same content as each synthetic input, serialised by upb (`overlap/protos`), not by
    `synthetic_bulk`'s own encoder: the reader's fast path must not depend on one writer's
    byte layout (issue 14, item 5)."""
    from overlap.trace.protos import XSpace

    out = []
    for inp in inputs:
        if not inp["name"].startswith("synthetic"):
            continue
        src = Path(inp["path"])
        p = src.with_name(src.name.replace(".xplane.pb", ".upb.xplane.pb"))
        if not p.exists():
            xs = XSpace()
            xs.ParseFromString(src.read_bytes())
            p.write_bytes(xs.SerializeToString())
            del xs
        same = p.read_bytes() == src.read_bytes()
        out.append({**inp, "name": inp["name"] + " (upb" + (", byte-identical)" if same else ")"),
                    "path": str(p)})
    return out


def capture_inputs(paths: list[str]) -> list[dict]:
    """Large real captures given on the command line (e.g. a many-step `overlap capture`)."""
    out = []
    for p in paths:
        q = Path(p)
        files = [q] if q.is_file() else sorted(q.rglob("*.xplane.pb"))
        for f in files:
            out.append({"name": f"real {f.parent.parent.parent.parent.name or f.name}/{f.name}",
                        "kind": "real", "path": str(f), "events": None, "device_events": None})
    return out


def real_inputs(limit: int = 2) -> list[dict]:
    root = REPO / "sample_traces"
    if not root.is_dir():
        return []
    files = sorted(root.rglob("*.xplane.pb"), key=lambda p: p.stat().st_size, reverse=True)
    out = []
    for p in files[:limit]:
        out.append({"name": f"real {p.name}", "kind": "real", "path": str(p),
                    "events": None, "device_events": None})
    return out


# ---------------------------------------------------------------------------------------------
# Timing and memory


def time_readers(path: str, names: list[str], repeat: int) -> dict[str, float]:
    """Median seconds per reader; rounds interleave the readers (one warm-up round first)."""
    samples: dict[str, list[float]] = {n: [] for n in names}
    for rnd in range(repeat + 1):
        for n in names:
            gc.collect()
            t0 = time.perf_counter()
            READERS[n](path)
            dt = time.perf_counter() - t0
            if rnd:  # round 0 warms imports and the page cache
                samples[n].append(dt)
    return {n: statistics.median(v) for n, v in samples.items()}


# VmHWM (peak RSS of this process image), not ru_maxrss: Linux carries ru_maxrss across
# fork+exec, so a child of a big parent would report the parent's peak.
_CHILD = """
import sys
sys.path.insert(0, {bench_dir!r})
import bench
reader = bench.READERS[{name!r}]
# Import everything the reader needs first, so the baseline holds the interpreter and libraries.
bench.warm_imports({name!r})
base = bench.vm_hwm_kib()
reader({path!r})
print(base, bench.vm_hwm_kib())
"""


def vm_hwm_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def warm_imports(name: str) -> None:
    import numpy  # noqa: F401
    import pandas  # noqa: F401

    import overlap.trace.reader  # noqa: F401
    from overlap.trace.protos import XSpace  # noqa: F401
    if name == "overlap_report":
        import overlap.analysis.overlap  # noqa: F401
    if name == "jaxlib_ProfileData":
        from jax._src.lib import _profile_data  # noqa: F401
    if name == "xprof_async_overlap":
        from xprof.cli.tools import analyze_async_overlap_tool  # noqa: F401
    if name in ("dashboard", "dashboard_cached"):
        import plotly.io  # noqa: F401

        import overlap.dashboard.data  # noqa: F401
        import overlap.report.figures  # noqa: F401


def peak_rss_mib(path: str, name: str) -> float | None:
    """Peak RSS growth (MiB) of one reader run in a fresh interpreter."""
    code = _CHILD.format(bench_dir=str(HERE), name=name, path=path)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=1800)
    if r.returncode != 0:
        return None
    base, peak = (int(x) for x in r.stdout.split()[-2:])
    return (peak - base) / 1024


# ---------------------------------------------------------------------------------------------
# Report


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import google.protobuf
    from google.protobuf.internal import api_implementation

    return (f"{os.cpu_count()} cores, {cpu}, Python {platform.python_version()}, protobuf "
            f"{google.protobuf.__version__} ({api_implementation.Type()})")


def fmt_table(rows: list[dict], names: list[str]) -> str:
    head = ["input", "MB", "events", "decode s"] + [f"{n} x" for n in names if n != "decode"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["name"], f"{r['mb']:.1f}", f"{r['events']:,}" if r["events"] else "?",
                 f"{r['times']['decode']:.3f}"]
        for n in names:
            if n == "decode":
                continue
            t = r["times"].get(n)
            cells.append("-" if t is None else f"{t / r['times']['decode']:.2f} ({t:.2f}s)")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def fmt_memory(rows: list[dict], names: list[str]) -> str:
    head = ["input", "MB"] + [f"{n} peak MiB (x file)" for n in names]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["name"], f"{r['mb']:.1f}"]
        for n in names:
            m = r["rss"].get(n)
            cells.append("-" if m is None else f"{m:.0f} ({m * 2**20 / r['bytes']:.1f}x)")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def fmt_linearity(rows: list[dict]) -> str:
    """ns per event for each reader, per input (flat across sizes = linear in events)."""
    cols = [n for n in ALL_COLS if any(n in r["times"] for r in rows)]
    out = ["| input | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    for r in rows:
        if not r["events"]:
            continue
        cells = [f"{r['times'][n] * 1e9 / r['events']:.0f}" if n in r["times"] else "-"
                 for n in cols]
        out.append(f"| {r['name']} | " + " | ".join(cells) + " |")
    return "\n".join(out)


ALL_COLS = list(READERS)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100k,1M,5M",
                    help="comma-separated device-event counts among " + ",".join(SIZES))
    ap.add_argument("--repeat", type=int, default=3, help="timed rounds per input (median)")
    ap.add_argument("--quick", action="store_true",
                    help="tiny smoke run: 10k events, 1 round, no memory subprocesses")
    ap.add_argument("--no-memory", action="store_true", help="skip the peak-RSS subprocesses")
    ap.add_argument("--no-real", action="store_true", help="skip sample_traces/")
    ap.add_argument("--encodings", action="store_true",
                    help="also time each synthetic file re-serialised by upb (another writer's "
                         "byte layout)")
    ap.add_argument("--capture", action="append", default=[], metavar="PATH",
                    help="also time this real capture (an .xplane.pb or a run directory); "
                         "repeatable")
    ap.add_argument("--readers", help="comma-separated subset of " + ",".join(READERS)
                    + " (decode is always kept: every ratio is against it)")
    ap.add_argument("--cache", default=str(CACHE), help="where synthetic inputs are kept")
    ap.add_argument("--json", help="also write the raw numbers to this file")
    a = ap.parse_args(argv)
    if a.quick:
        a.sizes, a.repeat, a.no_memory, a.no_real = "10k", 1, True, True
    sizes = [s.strip() for s in a.sizes.split(",") if s.strip()]
    bad = [s for s in sizes if s not in SIZES]
    if bad:
        ap.error(f"unknown size(s) {bad}; choose among {list(SIZES)}")

    inputs = synthetic_inputs(sizes, Path(a.cache))
    if a.encodings:
        inputs += reencoded_inputs(inputs, Path(a.cache))
    inputs += capture_inputs(a.capture)
    if not a.no_real:
        inputs += real_inputs()
    only = None
    if a.readers:
        only = {"decode", *(r.strip() for r in a.readers.split(",") if r.strip())}
        if only - set(READERS):
            ap.error(f"unknown reader(s) {sorted(only - set(READERS))}; "
                     f"choose among {list(READERS)}")
    print(f"machine: {machine()}", flush=True)
    rows = []
    for inp in inputs:
        names = [n for n in readers_for(inp["kind"]) if only is None or n in only]
        size = os.path.getsize(inp["path"])
        print(f"timing {inp['name']} ({size / 1e6:.1f} MB) ...", file=sys.stderr, flush=True)
        times = time_readers(inp["path"], names, a.repeat)
        rss = {} if a.no_memory else {n: peak_rss_mib(inp["path"], n) for n in names}
        rows.append({**inp, "bytes": size, "mb": size / 1e6, "times": times, "rss": rss})

    cols = [n for n in ALL_COLS if any(n in r["times"] for r in rows)]  # readers measured
    print("\n## Time (median of %d interleaved rounds), ratio to bare decode\n" % a.repeat)
    print(fmt_table(rows, cols))
    print("\n## Time per event (ns; all events, device + host), linearity check\n")
    print(fmt_linearity(rows))
    if not a.no_memory:
        print("\n## Peak RSS growth per reader (fresh subprocess), vs file size\n")
        print(fmt_memory(rows, cols))
    if not _has_dashboard():
        print("\nTODO: dashboard first render (dashboard.data.prepare_run_view) not measured: "
              "not importable here.")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
