"""The estimate against real hardware: predicted vs measured on every real capture with its HLO.

    python benchmarks/accuracy.py                       # the in-repo GPU corpus + the v6e sample
    python benchmarks/accuracy.py --corpus /tmp/caps    # an unpacked corpus (gpu-h100/, gpu-h200/)
    python benchmarks/accuracy.py --only scan-small --no-tpu   # a subset (the smoke test)
    python benchmarks/accuracy.py --markdown out.md     # also write the tables to a file

Captures: the 38 real H100/H200 run directories of `tests/data/gpu-corpus/gpu-h1{00,200}.tar.xz`
(unpacked into `--cache`; SOURCES.md beside them says how they were made) and the real TPU v6e
capture `sample_traces/tpu-v6e-offload`. Each carries the compiled program it ran (HloProto in
the xplane; `hlo/*.hlo.txt` beside `overlap capture` runs).

Per offload capture and direction (`overlap report CAPTURE --predict`'s numbers,
`overlap.plan.predict.predict_capture`, one span definition on both sides,
`overlap.analysis.predict.SPAN_DEFINITION`):

* measured exposed per step: the joined copies' exposed time (span - compute-covered) over the
  program runs the capture holds; measured hidden = hidden / span.
* predicted exposed per step and hidden, at the measured link and at the data sheet's. GPU
  measured link: the machine's own `bw.json` (torch pinned copies, 1 GiB, one way per
  direction; both ways at once enters as the target's `duplex_share`, measured on the same
  machines); TPU (no bw.json): the capture's own busy-time rate (`link_throughput`).
* target: |predicted - measured| <= 25% of measured + 2% of the measured step.

Per capture set with a baseline (`full` / `nothing_saveable` / `full_cb` / the user script's
`remat`): each policy's step time against the baseline's, measured (median unprofiled step of
run.json / user_runs.jsonl) and predicted (the estimate's `step_ps` of each run's own program).

Everything here is a prediction beside a measurement of the same run; nothing is fitted to the
measurements (the link rates come from bw.json, measured apart from the captures).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
if str(REPO) not in sys.path:
    sys.path.insert(1, str(REPO))

BASELINES = ("full", "nothing_saveable", "full_cb", "balanced-remat", "linkbound-remat")
TARGET_REL, TARGET_STEP = 0.25, 0.02


def unpack_corpus(cache: Path) -> list[Path]:
    """The corpus archives (in-repo copy first, else the shared one), unpacked under `cache`."""
    roots = []
    for name in ("gpu-h100", "gpu-h200"):
        dst = cache / name
        if not dst.is_dir():
            src = next((p for p in (REPO / "tests" / "data" / "gpu-corpus" / f"{name}.tar.xz",
                                    REPO.parent / "shared" / "captures" / f"{name}.tar.xz")
                        if p.is_file()), None)
            if src is None:
                continue
            cache.mkdir(parents=True, exist_ok=True)
            with tarfile.open(src) as tf:
                tf.extractall(cache, filter="data")
        if dst.is_dir():
            roots.append(dst)
    return roots


def run_dirs(root: Path) -> list[Path]:
    """Capture directories under a corpus root (each holds plugins/profile/...)."""
    return sorted(p.parent for p in root.rglob("plugins") if p.is_dir())


def _bw(run: Path) -> dict[str, float] | None:
    """One-way pinned rates (bytes/s) of the machine's bw.json, 1 GiB copies."""
    for p in (run, *run.parents):
        f = p / "bw.json"
        if f.is_file():
            t = json.loads(f.read_text())["torch"]
            row = t.get("1024") or t[sorted(t, key=int)[-1]]
            return {"D2H": row["d2h_GBps"] * 1e9, "H2D": row["h2d_GBps"] * 1e9}
    return None


def _measured_step_s(run: Path) -> float | None:
    man = run / "run.json"
    if man.is_file():
        steps = json.loads(man.read_text()).get("step_ns") or []
        return statistics.median(steps) / 1e9 if steps else None
    jl = run.parent / "user_runs.jsonl"
    if jl.is_file():
        policy, size = run.name.split("-", 1)[1], run.name.split("-", 1)[0]
        for line in jl.read_text().splitlines():
            r = json.loads(line)
            if r.get("policy") == policy and r.get("size") == size:
                return statistics.median(r["step_s_unprofiled"])
    return None


def _command_buffers(run: Path) -> bool:
    """The run's XLA:GPU command-buffer setting: run.json's XLA_FLAGS, else XLA's default."""
    from overlap.plan.estimate import command_buffers_from_flags

    man = run / "run.json"
    if man.is_file():
        flags = (json.loads(man.read_text()).get("xla_flags") or {}).get("XLA_FLAGS")
        got = command_buffers_from_flags(flags)
        if got is not None:
            return got
    return True  # the user script ran with XLA's defaults


def _program_text(run: Path, trace) -> tuple[str | None, bytes | None]:
    """The step program's HLO: hlo/*.hlo.txt of an `overlap capture` run, else the capture's
    largest HloProto (the step; the rest are jax's small helper programs); and that largest
    HloProto (its instruction order gives the async ops' streams, `overlap.hlo.streams`, where
    it names every instruction of the text's computations)."""
    from overlap.hlo.program import hlo_text_from_proto

    protos = sorted((bytes(p) for p in trace.modules["hlo_proto"] if p), key=len, reverse=True)
    proto = protos[0] if protos else None
    texts = sorted((run / "hlo").glob("*.hlo.txt")) if (run / "hlo").is_dir() else []
    if len(texts) == 1:
        text = texts[0].read_text()
        # the compile of the text among the capture's (same instruction names): the largest
        # whose order covers it
        return text, next((p for p in protos if _streams_of(text, p)), proto)
    return (hlo_text_from_proto(proto) if proto else None), proto


def _streams_of(text: str, proto: bytes | None) -> dict[str, Any] | None:
    """XLA:GPU's execution streams of the program's async ops (None where the proto's order does
    not cover the text's program, or it has none)."""
    from overlap.hlo.program import _COMMENT_RE, _parse_module
    from overlap.hlo.streams import execution_streams, proto_order

    if not proto:
        return None
    comps, entry = _parse_module(_COMMENT_RE.sub("", text))
    return execution_streams(comps, entry, proto_order(proto)) or None


def _pred_step_ps(text: str, tname: str, cb: bool, link: dict[str, float] | None,
                  streams: dict[str, Any] | None = None) -> int | None:
    from overlap.plan.estimate import estimate_for
    from overlap.plan.targets import get_target

    tgt = get_target(tname)
    ov: dict[str, Any] = {}
    if tgt.platform == "cuda":
        ov["command_buffers"] = cb
        if streams and not cb:
            ov["streams"] = streams
    if link:
        ov.update(host_link_Bps=link["D2H"], h2d_link_Bps=link["H2D"])
    return estimate_for(text, tgt, **ov).get("step_ps")


def measure(run: Path, label: str) -> dict[str, Any]:
    """One capture: per direction measured vs predicted (both links), and step predictions."""
    from overlap.analysis.overlap import analyze
    from overlap.errors import UsageError
    from overlap.plan.predict import predict_capture
    from overlap.plan.targets import get_target
    from overlap.trace import read_trace

    trace = read_trace(str(run))
    result = analyze(trace)
    out: dict[str, Any] = {"capture": label, "run": run, "backend": result.get("backend"),
                           "step_s": _measured_step_s(run)}
    n = result["summary"]["transfers"]
    tname = None
    try:
        from overlap.plan.predict import _target_name

        tname = _target_name(trace, None)[0]
    except UsageError:
        return out
    out["target"] = tname
    sheet = get_target(tname).model().get("nominal_link_Bps") or get_target(tname).host_link_Bps
    bw = _bw(run)
    if n:
        try:
            at_sheet = predict_capture(trace, result, host_link_Bps=sheet, h2d_link_Bps=sheet)
        except UsageError as e:  # no copy of a compiled program (device_put staging)
            out["not_predicted"] = str(e)
            return out
        at_meas = (predict_capture(trace, result, host_link_Bps=bw["D2H"], h2d_link_Bps=bw["H2D"])
                   if bw else None)
        prog = at_sheet["programs"][0]
        out["joined"], out["transfers"] = at_sheet["copies_joined"], at_sheet["transfers"]
        out["unjoined_groups"] = at_sheet["unjoined_groups"]
        out["runs"] = prog["runs"]
        out["measured"] = prog["measured_per_step_as_captured"]
        out["at_sheet"] = prog["predicted_per_step_as_captured"]
        out["at_measured"] = (at_meas["programs"][0]["predicted_per_step_as_captured"] if at_meas
                              else prog["predicted_per_step_as_captured_at_measured_link"])
        out["measured_link"] = "bw.json" if at_meas else "the capture's busy-time rate: " + \
            ", ".join(f"{d} {v['link_Bps'] / 1e9:.1f} GB/s"
                      for d, v in prog["measured_link"].items())
        if out["step_s"] is None and prog["runs"]:
            # no step timing beside the capture (TPU sample): per-device capture span / runs
            t = trace.columns("transfers")
            devs = len(set(t["device"].tolist())) or 1
            span = (max(t["end_ps"].tolist()) - min(t["start_ps"].tolist())) / 1e12
            out["step_s"] = span / (prog["runs"] / devs)
            out["step_source"] = "capture span / runs per device"
    text, proto = _program_text(run, trace)
    if text and get_target(tname).platform == "cuda":
        cb = _command_buffers(run)
        st = _streams_of(text, proto)
        out["streams"] = bool(st)
        out["pred_step_ps"] = {"measured": _pred_step_ps(text, tname, cb, bw, st),
                               "sheet": _pred_step_ps(text, tname, cb,
                                                      {"D2H": sheet, "H2D": sheet}, st)}
    return out


def _ms(ps: float | None) -> str:
    return "-" if ps is None else f"{ps / 1e9:.1f}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def within(pred: float, meas: float, step_s: float | None) -> bool:
    """The target: |pred - meas| <= 25% of meas + 2% of the step (ps)."""
    slack = TARGET_REL * meas + (TARGET_STEP * step_s * 1e12 if step_s else 0.0)
    return abs(pred - meas) <= slack


def exposed_table(rows: list[dict]) -> list[str]:
    out = ["| capture | dir | measured exposed/step (ms) | predicted @ measured link | "
           "within target | predicted @ data sheet | measured hidden | predicted hidden "
           "@ measured / sheet | joined |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "measured" not in r or not r["measured"]:
            continue
        for d in ("D2H", "H2D"):
            m, a, s = r["measured"][d], r["at_measured"][d], r["at_sheet"][d]
            if not m["transfers"]:
                continue
            ok = within(a["exposed_ps"], m["exposed_ps"], r.get("step_s"))
            out.append(f"| {r['capture']} | {d} | {_ms(m['exposed_ps'])} | "
                       f"{_ms(a['exposed_ps'])} | {'yes' if ok else '**no**'} | "
                       f"{_ms(s['exposed_ps'])} | {_pct(m['hidden_fraction'])} | "
                       f"{_pct(a['hidden_fraction'])} / {_pct(s['hidden_fraction'])} | "
                       f"{r['joined']}/{r['transfers']} |")
    return out


def _set_of(label: str) -> tuple[str, str]:
    """(capture set, policy) of a capture label: the parent folder, and for the user script
    (`user-script/balanced-offload`) the size too, whose runs compare among themselves."""
    folder, _, name = label.rpartition("/")
    if folder.endswith("user-script") and "-" in name:
        size, pol = name.split("-", 1)
        return f"{folder}/{size}", name
    return folder, name


def step_table(rows: list[dict]) -> list[str]:
    by_set: dict[str, list[dict]] = {}
    for r in rows:
        by_set.setdefault(_set_of(r["capture"])[0], []).append(r)
    out = ["| set | policy | baseline | measured step vs baseline | predicted @ measured link "
           "| predicted @ data sheet |", "|---|---|---|---|---|---|"]
    for s, rs in by_set.items():
        base = next((r for r in rs if _set_of(r["capture"])[1] in BASELINES), None)
        if base is None or not base.get("step_s") or not base.get("pred_step_ps"):
            continue
        for r in rs:
            if r is base or not r.get("step_s") or not r.get("pred_step_ps"):
                continue

            def delta(a: float | None, b: float | None) -> str:
                return "-" if not a or not b else f"{100 * (a / b - 1):+.1f}%"
            pr, pb = r["pred_step_ps"], base["pred_step_ps"]
            out.append(f"| {s} | {_set_of(r['capture'])[1]} | {_set_of(base['capture'])[1]} | "
                       f"{delta(r['step_s'], base['step_s'])} | "
                       f"{delta(pr['measured'], pb['measured'])} | "
                       f"{delta(pr['sheet'], pb['sheet'])} |")
    return out


def summary(rows: list[dict]) -> list[str]:
    n = ok = 0
    misses = []
    for r in rows:
        for d in ("D2H", "H2D"):
            m = (r.get("measured") or {}).get(d)
            if not m or not m["transfers"]:
                continue
            n += 1
            if within(r["at_measured"][d]["exposed_ps"], m["exposed_ps"], r.get("step_s")):
                ok += 1
            else:
                misses.append(f"{r['capture']} {d}")
    out = [f"target met on {ok} of {n} (capture, direction) pairs at the measured link"
           + (f"; missed: {', '.join(misses)}" if misses else "")]
    for r in rows:
        if r.get("not_predicted"):
            out.append(f"not predicted: {r['capture']}: {r['not_predicted']}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", action="append", type=Path,
                    help="an unpacked corpus root (holding gpu-h100/, gpu-h200/ or run dirs)")
    ap.add_argument("--cache", type=Path,
                    default=Path(tempfile.gettempdir()) / "overlap-gpu-corpus")
    ap.add_argument("--only", action="append", default=[],
                    help="keep captures whose path contains this (repeatable)")
    ap.add_argument("--no-tpu", action="store_true", help="leave out the TPU v6e sample")
    ap.add_argument("--markdown", type=Path, help="also write the tables here")
    args = ap.parse_args(argv)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    roots = []
    for c in args.corpus or []:
        roots += [p for p in (c / "gpu-h100", c / "gpu-h200") if p.is_dir()] or [c]
    if not args.corpus:
        roots = unpack_corpus(args.cache)
    runs = [(r, f"{root.name}/{r.relative_to(root)}") for root in roots for r in run_dirs(root)]
    if not args.no_tpu:
        runs.append((REPO / "sample_traces" / "tpu-v6e-offload", "tpu-v6e-offload"))
    runs = [(r, lab) for r, lab in runs if not args.only or any(o in lab for o in args.only)]
    rows = [measure(r, lab) for r, lab in runs]
    lines = (["## Exposed time per step and hidden share, per capture and direction", ""]
             + exposed_table(rows) + ["", *summary(rows), "",
                                      "## Step time against the baseline of the same set", ""]
             + step_table(rows))
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        args.markdown.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
