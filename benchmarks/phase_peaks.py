"""Where a report's time and peak memory go, function by function (issue 32, round 25).

    python benchmarks/phase_peaks.py FILE overlap.trace._scan.split_space \
        overlap.trace.wire.check_lines

Runs `overlap report --json FILE` in this process with each named function (`module.name`,
looked up on its module when the report calls it) wrapped: on entry the process's peak RSS is
reset (`/proc/self/clear_refs` 5, Linux), on return it prints the call's milliseconds, the RSS
before, the peak during the call (its callees included) and the RSS after. So a shape's peak
is found by narrowing: the function whose call holds the process's peak, then its callees.
Blind spots: a function imported by name into another module before the wrap is not seen
there (wrap it where it is called from); a nested call resets the outer one's peak (name
functions that do not call each other, or read the innermost); the timings carry the
wrapper's cost and none of the interpreter's start. Nothing here is a test.
"""

from __future__ import annotations

import importlib
import sys
import time
from pathlib import Path


def _status(key: str) -> float:
    """A `/proc/self/status` field in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key):
            return int(line.split()[1]) / 1024
    return float("nan")


def _wrap(spec: str) -> None:
    mod_name, _, fn_name = spec.rpartition(".")
    mod = importlib.import_module(mod_name)
    inner = getattr(mod, fn_name)

    def wrapped(*args, **kwargs):
        before = _status("VmRSS")
        Path("/proc/self/clear_refs").write_text("5")
        t0 = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            ms = (time.perf_counter() - t0) * 1e3
            print(f"{spec}: {ms:.1f} ms, RSS before {before:.1f}, peak {_status('VmHWM'):.1f}, "
                  f"after {_status('VmRSS'):.1f} MiB", file=sys.stderr)

    setattr(mod, fn_name, wrapped)


def main(argv: list[str]) -> None:
    if len(argv) < 2:
        raise SystemExit(__doc__)
    for spec in argv[1:]:
        _wrap(spec)
    from overlap.cli.main import main as overlap_main

    out = sys.stdout
    sys.stdout = open("/dev/null", "w")  # (the report itself is not wanted here)
    try:
        overlap_main(["report", "--json", argv[0]])
    except SystemExit:
        pass
    finally:
        sys.stdout.close()
        sys.stdout = out
    print(f"peak since the last reset {_status('VmHWM'):.1f} MiB", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
