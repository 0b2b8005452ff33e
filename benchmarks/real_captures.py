"""Every real capture against issue 32's goals, as whole processes: `overlap report --json` of
each capture against a bare upb decode of its capture file, and its peak RSS against the
memory goal (2x the input + 40 MiB). Rounds are interleaved: report, decode, next capture.

    python benchmarks/real_captures.py [--rounds 3] PATH...

A PATH is a capture file (`*.xplane.pb`), a run directory (one with `run.json`), or a folder
searched for both (the unpacked `../shared/captures/gpu-h100.tar.xz`, say). "input MB" is
the capture file plus the program text (`hlo/*.hlo.txt`) a run directory's report reads;
the decode reads the capture file alone. CPU is user + system seconds (`/usr/bin/time`),
medians over rounds; peak is the process's maximum RSS. Prints a Markdown table
(benchmarks/README.md, round 32). Nothing here is a test; no test asserts these times.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DECODE = ("import sys\nfrom overlap.trace.protos import XSpace\n"
          "XSpace().ParseFromString(open(sys.argv[1], 'rb').read())")


def captures(paths: list[Path]) -> list[Path]:
    """The run directories and capture files of `paths`, each once, in the order given (a
    folder's in path order; a capture file inside a run directory is that run's)."""
    out: list[Path] = []
    for p in paths:
        if p.is_file() or (p / "run.json").is_file():
            out.append(p)
            continue
        runs = sorted(r.parent for r in p.rglob("run.json"))
        out += runs
        out += [f for f in sorted(p.rglob("*.xplane.pb"))
                if not any(r in f.parents for r in runs)]
    return list(dict.fromkeys(out))


def capture_file(p: Path) -> Path:
    return p if p.is_file() else sorted(p.rglob("*.xplane.pb"))[0]


def input_bytes(p: Path) -> int:
    if p.is_file():
        return p.stat().st_size
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file()
               and (f.name.endswith(".xplane.pb") or f.name.endswith(".hlo.txt")))


def timed(args: list[str]) -> tuple[float, float]:
    """(CPU s, peak MiB) of one whole process."""
    r = subprocess.run(["/usr/bin/time", "-f", "%U %S %M", *args], capture_output=True,
                       text=True, cwd=REPO)
    u, s, m = r.stderr.strip().splitlines()[-1].split()
    return float(u) + float(s), int(m) / 1024


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+", type=Path)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args(argv)
    py = sys.executable
    print("| capture | input MB | report CPU s | bare decode CPU s | x decode | peak MiB "
          "| memory goal MiB | within |")
    print("|---|---|---|---|---|---|---|---|")
    for p in captures(a.paths):
        rep, dec = [], []
        for _ in range(a.rounds):
            rep.append(timed([py, "-m", "overlap", "report", "--json", str(p)]))
            dec.append(timed([py, "-c", DECODE, str(capture_file(p))]))
        cpu = statistics.median(x[0] for x in rep)
        peak = statistics.median(x[1] for x in rep)
        base = statistics.median(x[0] for x in dec)
        mb = input_bytes(p) / 2**20
        goal = 2 * mb + 40
        print(f"| {p} | {mb:.1f} | {cpu:.2f} | {base:.2f} | {cpu / base:.1f}x | {peak:.1f} "
              f"| {goal:.1f} | {'yes' if peak <= goal else 'no'} |", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
