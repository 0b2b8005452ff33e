"""The calibration experiment of docs/advise.md: calibrate on a measured baseline, predict the
other policies' step-time differences, against what the same H100 measured.

    python benchmarks/calibration.py                          # captured programs only
    python benchmarks/calibration.py --plans ADVISE_OUT       # + the deviceless plans of
        # `overlap advise --target h100 --workload transformer:h100 --policy full
        #  --policy qkv_proj_offloaded --policy minimal_offloaded --policy minimal --out DIR`
    python benchmarks/calibration.py --corpus /tmp/caps       # an unpacked corpus

Rows (step time of each policy against `full`; every number names what it assumes):

* measured: the median unprofiled step of each run (run.json `step_ns`).
* captured program: the HLO each run ran (`hlo/*.hlo.txt`), at the data sheet's compute peaks
  and the target's link (command buffers off, as the runs), and calibrated on the `full` run
  (`overlap.plan.calibrate`); each with its async ops on no streams (each op on one of its own:
  the model before streams) and on the streams XLA:GPU gave them (the rule over the run's own
  HloProto, checked against its host copies' streams: `calibrate._run_streams`; `full`'s from
  the calibration itself, the same program).
* deviceless plan (with --plans): the advise's plan runs (their HLO text and HloProto),
  estimated the same ways; streams from each plan's HloProto (`plan_streams`).

Nothing is fitted to the measured deltas: the calibration reads only the `full` run.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
if str(REPO) not in sys.path:
    sys.path.insert(1, str(REPO))

POLICIES = ("qkv_proj_offloaded", "minimal_offloaded", "minimal")


def _median_step_ns(run: Path) -> float:
    s = sorted(json.loads((run / "run.json").read_text())["step_ns"])
    return float(s[len(s) // 2])


def _row(name: str, steps: dict[str, float], note: str = "") -> dict[str, Any]:
    base = steps["full"]
    return {"row": name, "full_ms": base / 1e9,
            **{p: steps[p] / base - 1 for p in POLICIES}, "note": note}


def experiment(corpus: Path, plans: Path | None = None) -> list[dict[str, Any]]:
    from overlap.plan.calibrate import _parse, _run_streams, load_calibration
    from overlap.plan.estimate import estimate_for, plan_streams
    from overlap.plan.targets import get_target
    from overlap.trace import read_trace

    h100 = get_target("h100")
    root = corpus / "gpu-h100" / "transformer-h100"
    cal = load_calibration(root / "full")
    rows = [_row("measured (median unprofiled step)",
                 {p: _median_step_ns(root / p) * 1000 for p in ("full", *POLICIES)})]

    def estimates(programs: dict[str, tuple[str, Any]], label: str) -> None:
        for mode, kw in (("sheet peaks, target link", {"command_buffers": False}),
                         ("calibrated on full", {"calibration": cal})):
            for with_streams in (False, True):
                steps = {}
                for pol, (text, st) in programs.items():
                    s, src = st if with_streams else (None, "")
                    steps[pol] = estimate_for(text, h100, streams=s, streams_source=src,
                                              **kw)["step_ps"]
                rows.append(_row(f"{label}, {mode}, "
                                 + ("XLA:GPU streams" if with_streams else "no streams"),
                                 steps))

    captured: dict[str, tuple[str, Any]] = {}
    for pol in ("full", *POLICIES):
        run = root / pol
        text = next((run / "hlo").glob("*.hlo.txt")).read_text()
        if pol == "full":
            st = plan_streams(text, None, h100, calibration=cal)
        else:
            comps, _, _, entry = _parse(text)
            st = _run_streams(read_trace(str(run)), text, "jit_train_step", comps, entry, "h100")
        captured[pol] = (text, st)
    estimates(captured, "captured program")
    if plans is not None:
        planned: dict[str, tuple[str, Any]] = {}
        for pol in ("full", *POLICIES):
            hlo = next(plans.glob(f"*-{pol}")) / "hlo"
            text = next(hlo.glob("*.hlo.txt")).read_text()
            proto = next(hlo.glob("*.hlo.pb")).read_bytes()
            planned[pol] = (text, plan_streams(text, proto, h100))
        estimates(planned, "deviceless plan")
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    out = ["| program predicted | " + " | ".join(POLICIES) + " | full step |",
           "|---" * (len(POLICIES) + 2) + "|"]
    for r in rows:
        out.append(f"| {r['row']} | " + " | ".join(f"{100 * r[p]:+.1f}%" for p in POLICIES)
                   + f" | {r['full_ms']:.1f} ms |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", type=Path, help="unpacked corpus (holding gpu-h100/)")
    ap.add_argument("--plans", type=Path, help="an `overlap advise --out` directory of "
                    "transformer:h100 plans for h100 (full and the three policies)")
    args = ap.parse_args(argv)
    corpus = args.corpus
    if corpus is None:
        from accuracy import unpack_corpus  # type: ignore[import-not-found]

        cache = Path(tempfile.gettempdir()) / "overlap-accuracy-corpus"
        cache.mkdir(exist_ok=True)
        unpack_corpus(cache)
        corpus = cache
    print(markdown(experiment(corpus, args.plans)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
