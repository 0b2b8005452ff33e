"""Are the answers unchanged? `overlap report --json` (and the text report) of every reference
input, kept in a folder, and compared byte for byte with another folder (issue 32: every speed-up
keeps every answer identical).

    python benchmarks/same_answers.py --out /tmp/before          # before a change
    python benchmarks/same_answers.py --out /tmp/after --compare /tmp/before
    python benchmarks/same_answers.py --check ...                 # `overlap check` too

Inputs: every `.xplane.pb` under `sample_traces/`, the real H100/H200 captures of
`tests/data/gpu-corpus/*.tar.xz` (unpacked once into `--corpus DIR`, as files and as run
directories: a run directory also reads its `hlo/*.hlo.txt` and `run.json`), the SYNTHETIC files
in `benchmarks/.cache/` and any `--files`. Each command runs as a fresh process (exit code, stdout
and stderr kept); nothing here times anything.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tarfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CORPUS_TARS = REPO / "tests" / "data" / "gpu-corpus"


def corpus(dest: Path) -> Path:
    """The real GPU corpus unpacked into `dest` (once)."""
    if not (dest / "gpu-h100").is_dir():
        dest.mkdir(parents=True, exist_ok=True)
        for tar in sorted(CORPUS_TARS.glob("*.tar.xz")):
            with tarfile.open(tar) as tf:
                tf.extractall(dest, filter="data")
    return dest


def run_dir_of(f: Path) -> Path | None:
    """The run directory a capture file sits in (`RUN/plugins/profile/SESSION/x.xplane.pb`)."""
    if f.parent.parent.name == "profile" and f.parent.parent.parent.name == "plugins":
        return f.parent.parent.parent.parent
    return None


def inputs(corpus_dir: Path, extra: list[str]) -> list[Path]:
    files = sorted((REPO / "sample_traces").rglob("*.xplane.pb"))
    files += sorted(corpus(corpus_dir).rglob("*.xplane.pb"))
    out: list[Path] = []
    for f in files:
        out.append(f)
        d = run_dir_of(f)
        if d is not None and d not in out:
            out.append(d)
    out += sorted((HERE / ".cache").glob("*.xplane.pb"))
    return out + [Path(x) for x in extra]


def key(p: Path) -> str:
    """A file name for `p`'s answers: its path, readable, made unique by a short hash."""
    s = str(p.resolve())
    tail = "_".join(p.resolve().parts[-4:]).replace(".", "_")
    return f"{tail}-{hashlib.sha1(s.encode()).hexdigest()[:8]}"


COMMANDS = (("json", ["report", "--json"]), ("text", ["report"]))
CHECK = ("check", ["check"])  # with --check: `overlap check`'s verdict and exit code too


def answers(p: Path, tree: Path, commands=COMMANDS) -> dict[str, bytes]:
    out = {}
    for tag, cmd in commands:
        r = subprocess.run([sys.executable, "-m", "overlap", *cmd, str(p.resolve())],
                           capture_output=True, cwd=str(tree), timeout=600,
                           env=dict(os.environ, COLUMNS="120", PYTHONPATH=str(tree)))
        raw = f"exit {r.returncode}\n".encode() + r.stdout + b"\n--- stderr\n" + r.stderr
        # the package's own files are named in some answers (a workload's source), and the
        # inputs under this checkout by their path: neither folder is part of the answer (a
        # copy of the tree made before a change reads the same inputs from here)
        for folder in (tree, REPO):
            raw = raw.replace(str(folder).encode() + b"/", b"<tree>/")
        out[tag] = raw
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, type=Path, help="folder for this tree's answers")
    ap.add_argument("--compare", type=Path, help="a folder written before: report differences")
    ap.add_argument("--corpus", type=Path, default=Path("/tmp/overlap-gpu-corpus"))
    ap.add_argument("--files", nargs="*", default=[])
    ap.add_argument("--check", action="store_true", help="also `overlap check` of each input")
    ap.add_argument("--tree", type=Path, default=REPO,
                    help="the checkout whose `overlap` answers (a copy of the package made "
                         "before a change, say); default: this one")
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    differ = 0
    ins = inputs(a.corpus, a.files)
    commands = COMMANDS + ((CHECK,) if a.check else ())
    for p in ins:
        k = key(p)
        for tag, data in answers(p, a.tree.resolve(), commands).items():
            (a.out / f"{k}.{tag}").write_bytes(data)
            if a.compare is not None:
                old = a.compare / f"{k}.{tag}"
                if not old.exists():
                    print(f"new   {tag:4} {p}")
                elif old.read_bytes() != data:
                    differ += 1
                    print(f"DIFF  {tag:4} {p}")
    print(f"{len(ins)} inputs, {len(commands) * len(ins)} answers"
          + (f", {differ} differ from {a.compare}" if a.compare is not None else ""))
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
