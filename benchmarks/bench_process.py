"""Whole processes, as a user or CI runs them: `overlap report --json FILE` against a bare upb
decode of the same file in a fresh interpreter (issue 24).

    python benchmarks/bench_process.py        # GPU and TPU 1M (upb-written), many-ops TPU
    python benchmarks/bench_process.py --rounds 5 --xprof   # with xprof's analyze_async_overlap
    python benchmarks/bench_process.py --files a.xplane.pb b.xplane.pb RUN_DIR
    python benchmarks/bench_process.py --no-upb --files CAPTURES/   # every capture in a folder

A run directory is reported as a directory (its run.json and `hlo/*.hlo.txt` read too) against
a bare decode of its newest capture file; its size, for the RSS goal, is all three.

Each cell is the median wall time of fresh processes (interpreter start and imports included:
that is what a user waits for), rounds interleaved so machine noise hits every command alike;
ratios are against `decode` in the same run. Peak RSS is the child's own high-water mark
(`VmHWM`, written by an exit hook each command runs under; not `ru_maxrss`, which Linux carries
across fork+exec from this parent, whose size then floors every cell); `over base` subtracts the
peak of a process that only imports what the report imports (the interpreter, numpy, pandas,
protobuf: ~70 MiB whatever the file), which is what the read itself costs.

Bytecode: the package's modules are compiled first (`compileall`), as `pip install` does for a
user; without it (`PYTHONDONTWRITEBYTECODE=1`, an editable install) every run compiles ~40
modules again, ~0.4 s of start-up that no installed copy pays.

Commands:

* `decode`: `XSpace.FromString(open(f).read())` with the project's schema, nothing else
  (`overlap.trace.protos` imports protobuf only: no numpy, no pandas).
* `report`: `python -m overlap report --json FILE > /dev/null` (the compiled scanner; run as
  `runpy.run_module('overlap')` under the exit hook).
* `report (upb)`: the same with `OVERLAP_SCANNER=0`: the fallback where the scanner was not built.
* `xprof`: xprof's `analyze_async_overlap` CLI tool on the file (TPU files; `--xprof`).
* `report (before)`: `report` from another checkout (`--before DIR`), for a before/after.

Inputs (SYNTHETIC, cached in `benchmarks/.cache/`): `synthetic_bulk`'s GPU and TPU 1M files
re-serialised by upb (an independent writer's layout: `bench.py --encodings`), and the
`many-ops tpu` shape of `bench_shapes.py` (every copy its own op metadata), and the compact GPU
1M (`synthetic_bulk.write_gpu(compact=True)`, re-serialised by upb: few stats per kernel).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CACHE = HERE / ".cache"
if str(REPO) not in sys.path:
    sys.path.insert(1, str(REPO))

# Every command runs under this hook: it prints the process's own peak RSS on exit.
PEAK = ("import atexit, sys\n"
        "atexit.register(lambda: sys.stderr.write('\\nPEAK_KIB %s\\n' % next(\n"
        "    l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM'))))\n")
DECODE = ("from overlap.trace.protos import XSpace\n"
          "XSpace.FromString(open({f!r}, 'rb').read())")
XPROF = ("from xprof.cli.tools.analyze_async_overlap_tool import analyze_async_overlap\n"
         "analyze_async_overlap({f!r}, bypass_cache=True)")


def capture_of(p: Path) -> Path:
    """The capture file a bare decode reads: `p` itself, or a run directory's newest one."""
    if p.is_dir():
        found = sorted(p.glob("plugins/profile/*/*.xplane.pb"))
        if not found:
            raise SystemExit(f"{p}: no plugins/profile/*/*.xplane.pb in it")
        return found[-1]
    return p


def input_bytes(p: Path) -> int:
    """What `report` reads: the file, or a run directory's capture, HLO text and run.json."""
    if not p.is_dir():
        return p.stat().st_size
    extra = [*p.glob("hlo/*.hlo.txt"), p / "run.json"]
    return capture_of(p).stat().st_size + sum(f.stat().st_size for f in extra if f.is_file())


def label(p: Path) -> str:
    """A run directory's or its capture file's last two folders (the corpus's files are all
    `vm.xplane.pb`), `(dir)` for the directory; else the file's name."""
    if p.is_dir():
        return f"{p.parent.name}/{p.name} (dir)"
    if p.parent.parent.name == "profile" and p.parent.parent.parent.name == "plugins":
        run = p.parents[3]
        return f"{run.parent.name}/{run.name}"
    return p.name


# The goals (32): peak RSS at most 2x the input + 40 MiB; a small capture within 0.2 s.
RSS_SLACK_MIB = 40
SMALL_S = 0.2


def commands(f: str, xprof: bool, before: str | None = None,
             command: tuple[str, ...] = ("report", "--json")
             ) -> dict[str, tuple[list[str], dict]]:
    py = sys.executable
    # `python -m overlap report --json f` (or another `command`), under the hook
    report = [py, "-c", PEAK + f"import runpy\nsys.argv = ['overlap', *{list(command)!r}, "
              f"{f!r}]\nrunpy.run_module('overlap', run_name='__main__')"]
    # this checkout's overlap, not whichever the interpreter finds first (an editable install
    # elsewhere, without bytecode: every run would time that tree, compiling)
    here = {"PYTHONPATH": str(REPO)}
    out = {
        "decode": ([py, "-c", PEAK + DECODE.format(f=str(capture_of(Path(f))))], here),
        "report": (report, here),
        "report (upb)": (report, {**here, "OVERLAP_SCANNER": "0"}),
    }
    if before:  # another checkout of overlap (e.g. `git archive OLD | tar -x -C DIR`)
        out["report (before)"] = (report, {"PYTHONPATH": before})
    if xprof:
        out["xprof"] = ([py, "-c", PEAK + XPROF.format(f=f)], {})
    return out


BASE = "import overlap.cli.report, overlap.report.text, overlap.analysis.overlap"


def compile_bytecode(*roots: str | Path) -> None:
    """Write `__pycache__` for the package(s) timed, as a wheel install does."""
    import compileall

    for root in roots:
        compileall.compile_dir(str(Path(root) / "overlap"), quiet=1)


def run_once(argv: list[str], env: dict) -> tuple[float, int, float]:
    """(wall seconds, peak RSS KiB, CPU seconds: user + system) of one fresh process. CPU
    time is what the process itself spent: on a shared machine the load stretches wall time,
    much less CPU time."""
    full = dict(os.environ, **env)
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=full,
                         cwd="/")
    _, status, ru = os.wait4(p.pid, 0)
    dt = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    err = p.stderr.read().decode() if p.stderr else ""
    if p.returncode not in (0, 1):
        raise SystemExit(f"{argv[:4]} exited {p.returncode}: {err[-500:]}")
    peak = [ln.split()[1] for ln in err.splitlines() if ln.startswith("PEAK_KIB ")]
    return dt, int(peak[-1]), ru.ru_utime + ru.ru_stime


def cell(med: dict[str, float], k: str) -> str:
    """`k`'s median as a ratio to decode (and seconds); the report's speed-up over xprof."""
    if k not in med:
        return "-"
    s = f"{med[k] / med['decode']:.2f}x ({med[k]:.2f} s)"
    if k == "report" and "xprof" in med:
        s += f", {med['xprof'] / med['report']:.1f}x faster than xprof"
    return s


def inputs(files: list[str]) -> list[Path]:
    if files:
        return [q for f in files for q in expand(Path(f))]
    sys.path.insert(0, str(HERE))
    import bench
    import bench_shapes

    syn = bench.synthetic_inputs(["1M"], CACHE)
    out = [Path(i["path"]) for i in bench.reencoded_inputs(syn, CACHE)]
    many = CACHE / "many_ops_tpu.xplane.pb"
    if not many.exists():
        bench_shapes.many_ops_tpu(many, 3000)
    clocked = CACHE / "many_ops_tpu_clock.xplane.pb"
    if not clocked.exists():
        bench_shapes.many_ops_tpu_clocked(clocked, 3000)
    return out + [compact_gpu(), many, clocked]


def expand(p: Path) -> list[Path]:
    """`p` where it is a capture file or a run directory (one with `run.json`); a folder of
    captures (the unpacked `../shared/captures/gpu-h100.tar.xz`, say): its run directories,
    then its capture files that lie in none of them, each in path order."""
    if p.is_file() or (p / "run.json").is_file() or not p.is_dir():
        return [p]
    runs = sorted(r.parent for r in p.rglob("run.json"))
    return runs + [f for f in sorted(p.rglob("*.xplane.pb"))
                   if not any(r in f.parents for r in runs)]


def compact_gpu() -> Path:
    """SYNTHETIC compact GPU 1M (`synthetic_bulk.write_gpu(compact=True)`: kernels with two
    ref stats, no launch events; 48 MB), re-serialised by upb like the other two."""
    from overlap.trace import synthetic_bulk
    from overlap.trace.protos import XSpace

    p = CACHE / "gpu_compact_1M.upb.xplane.pb"
    if not p.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        raw = CACHE / "gpu_compact_1M.xplane.pb"
        synthetic_bulk.write_gpu(raw, 1_000_000, compact=True)
        p.write_bytes(XSpace.FromString(raw.read_bytes()).SerializeToString())
    return p


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", nargs="*", default=[])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--xprof", action="store_true", help="also time xprof on TPU files")
    ap.add_argument("--no-upb", action="store_true", help="skip the upb fallback's report")
    ap.add_argument("--before", metavar="DIR",
                    help="also time `report` from the overlap checkout in DIR (same rounds)")
    ap.add_argument("--command", default="report --json", metavar="ARGS",
                    help="the overlap command timed in the `report` columns, the input "
                         "after it (e.g. 'inspect --json', 'check', 'report --json --predict')")
    a = ap.parse_args(argv)
    compile_bytecode(REPO, *([a.before] if a.before else []))
    base_kib = max(run_once([sys.executable, "-c", PEAK + BASE], {})[1] for _ in range(3))
    # CPU seconds of `report` (and `report (before)`), medians: printed after the table
    cpu_rows: list[str] = []
    print(f"# {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start; "
          f"medians of {a.rounds} interleaved rounds (fresh processes); "
          f"`report` = `overlap {a.command} INPUT`")
    print("| input | MB | " + " | ".join(["decode s", "report", "report (upb)", "xprof",
                                            "report (before)",
                                            "peak RSS decode / report (x file)",
                                            "report over base (x file)",
                                            "RSS goal (2x input + 40 MiB)"]) + " |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for f in inputs(a.files):
        tpu = "tpu" in f.name
        cmds = commands(str(f.resolve()), a.xprof and tpu, a.before, tuple(a.command.split()))
        if a.no_upb:
            cmds.pop("report (upb)")
        times: dict[str, list[float]] = {k: [] for k in cmds}
        rss: dict[str, list[int]] = {k: [] for k in cmds}
        cpu: dict[str, list[float]] = {k: [] for k in cmds}
        for _ in range(a.rounds):
            for k, (argv_, env) in cmds.items():
                dt, kib, c = run_once(argv_, env)
                times[k].append(dt)
                rss[k].append(kib)
                cpu[k].append(c)
        cpu_rows.append(f"| {label(f)} | " + " | ".join(
            f"{statistics.median(cpu[k]):.3f}" if k in cpu else "-"
            for k in ("decode", "report", "report (before)", "xprof")) + " |")
        med = {k: statistics.median(v) for k, v in times.items()}
        size = input_bytes(f)
        mb = size / 1e6
        d = med["decode"]
        peak = {k: max(v) / 1024 for k, v in rss.items()}
        over = peak["report"] - base_kib / 1024
        limit = 2 * size / 2**20 + RSS_SLACK_MIB
        print(f"| {label(f)} | {mb:.1f} | {d:.2f} | {cell(med, 'report')} | "
              f"{cell(med, 'report (upb)')} | {cell(med, 'xprof')} | "
              f"{cell(med, 'report (before)')} | "
              f"{peak['decode']:.0f} / {peak['report']:.1f} MiB "
              f"({peak['report'] * 2**20 / size:.1f}x) | "
              f"{over:.0f} MiB ({over * 2**20 / size:.1f}x) | "
              f"{'within' if peak['report'] <= limit else 'OVER'} {limit:.1f}"
              + (f" (before: {peak['report (before)']:.1f}, "
                 f"{'within' if peak['report (before)'] <= limit else 'OVER'})"
                 if "report (before)" in peak else "") + " |", flush=True)
    print(f"# load average {os.getloadavg()[0]:.1f} at the end; base (imports only) "
          f"{base_kib / 1024:.0f} MiB")
    print("\n| input | CPU s: decode | report | report (before) | xprof |\n|---|---|---|---|---|")
    print("\n".join(cpu_rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
