"""`overlap check PATH`: the CI gate. Exit 0 when every check passes, 1 when one fails.

By default two checks run: transfers exist (a capture without them fails: offload silently
stopped happening; `--allow-no-transfers` to accept that) and the duration-weighted overlap
ratio is at least `--min-overlap` (0.9). Per-direction, per-step and baseline checks are opt-in;
see `overlap.report.gate` for their exact definitions. A capture with device events the
reader has no rule for fails `transfers_readable` ("cannot tell") unless `--allow-unknown`.
`--json` prints the {check, analysis} JSON on stdout (the text report then goes to stderr),
as `--json` does on every command; `--json-out FILE` and `--junit FILE` write machine-readable
files; when `$GITHUB_STEP_SUMMARY` is set a Markdown summary is appended.

Opt-in gates on what the run computed and where (`overlap.report.run_gates`):
`--same-answer-as RUN [--max-grad-diff X]` fails when PATH's loss or gradient fingerprint
differs from RUN's beyond float tolerance; `--no-host-compute` fails on ops XLA runs on the
host.

PATH may be a plan run (`overlap plan`, `overlap advise`: compiled, not run). It gets the same
two defaults on its PREDICTED numbers (an offloading policy with no planned copies fails; the
predicted hidden fraction must reach `--min-overlap`), plus the plan checks (`fits`,
`host_compute` (on by default; `--allow-host-compute`), ...): see `overlap.report.plan_gate`.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

from overlap.cli.report import (
    add_analysis_args,
    non_negative_int,
    note_planned_copies,
    unit_fraction,
)
from overlap.errors import EXIT_CHECK_FAILED, EXIT_OK, UsageError


def non_negative_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not v >= 0.0:  # also rejects NaN
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    if not math.isfinite(v) or v > 1e15:  # a limit must be a number the gate can compare
        raise argparse.ArgumentTypeError(f"must be a finite number below 1e15, got {text}")
    return v


def register(sub) -> None:
    from overlap.analysis import thresholds as check  # constants only: --help needs no pandas

    p = sub.add_parser("check", help="CI gate: fail when transfers stop hiding behind compute",
                       description=__doc__.split("\n\n")[0])
    add_analysis_args(p)
    g = p.add_argument_group("checks")
    g.add_argument("--min-overlap", type=unit_fraction, default=None,
                   metavar="R", help="minimum duration-weighted overlap ratio over all "
                   f"transfers (default {check.DEFAULT_MIN_OVERLAP}; off with the transfer "
                   "gates unless given)")
    g.add_argument("--min-overlap-d2h", type=unit_fraction, metavar="R",
                   help="minimum overlap ratio of D2H transfers")
    g.add_argument("--min-overlap-h2d", type=unit_fraction, metavar="R",
                   help="minimum overlap ratio of H2D transfers")
    g.add_argument("--max-exposed-ms", type=non_negative_float, metavar="MS",
                   help="maximum exposed transfer wall time in the worst step, ms")
    g.add_argument("--max-exposed-frac", type=unit_fraction, metavar="F",
                   help="maximum exposed transfer wall time as a fraction of the worst step")
    g.add_argument("--allow-no-transfers", action="store_true",
                   help="pass captures without device<->host transfers (default: fail)")
    g.add_argument("--allow-unknown", action="store_true",
                   help="pass captures holding device events overlap cannot read (default: "
                        "fail: 'cannot tell' is not 'no transfers'; see overlap inspect)")
    g.add_argument("--max-host-skew", type=non_negative_float, metavar="X",
                   help="multi-host captures: the worst host may expose at most X times the "
                        "median host's transfer time per step")
    t = p.add_argument_group("transfers that should not be there (hot loops)")
    t.add_argument("--max-transfers", type=non_negative_int, metavar="N",
                   help="at most N host<->device copies per step; offenders are named")
    t.add_argument("--max-transfer-bytes", type=non_negative_int, metavar="B",
                   help="at most B bytes copied per step")
    t.add_argument("--transfer-direction", choices=("both", "D2H", "H2D"), default="both",
                   help="which copies the two gates above count (default both)")
    b = p.add_argument_group("baseline regression")
    b.add_argument("--baseline", metavar="REPORT.json|RUN",
                   help="a previous `overlap report --json` (or `check --json`) output, or the "
                        "baseline's run directory / capture")
    b.add_argument("--max-ratio-drop", type=unit_fraction, default=check.DEFAULT_MAX_RATIO_DROP,
                   metavar="D", help="overlap ratio may fall by at most D (absolute ratio "
                   f"points, default {check.DEFAULT_MAX_RATIO_DROP})")
    b.add_argument("--max-exposed-growth", type=non_negative_float,
                   default=check.DEFAULT_MAX_EXPOSED_GROWTH, metavar="G",
                   help="mean exposed time per step may grow by at most this fraction "
                   f"(default {check.DEFAULT_MAX_EXPOSED_GROWTH})")
    b.add_argument("--exposed-slack-ms", type=non_negative_float,
                   default=check.DEFAULT_EXPOSED_SLACK_MS, metavar="MS",
                   help="absolute allowance on top of --max-exposed-growth, ms (default "
                   f"{check.DEFAULT_EXPOSED_SLACK_MS})")
    a = p.add_argument_group("what the run computed and where (overlap.report.run_gates)")
    a.add_argument("--same-answer-as", metavar="RUN",
                   help="fail unless PATH's loss and gradient fingerprint (recorded by `overlap "
                        "capture`) match RUN's within float tolerance; fails when either has "
                        "none recorded")
    a.add_argument("--max-grad-diff", type=non_negative_float, metavar="X",
                   help="relative tolerance for --same-answer-as (default: 1e-4 for float32, "
                        "2e-2 where bf16/fp16 is involved; see overlap.analysis.answers)")
    a.add_argument("--no-host-compute", action="store_true",
                   help="captures: fail when the executed program has ops XLA runs on the host "
                        "(fails when the capture lacks the program's HLO); on by default for "
                        "plan runs")
    a.add_argument("--allow-host-compute", action="store_true",
                   help="plan runs: pass host-compute ops (the plan gate fails on them by "
                        "default)")
    pl = p.add_argument_group("plan checks (PATH is a plan run from `overlap plan`)")
    pl.add_argument("--min-offload-bytes", type=non_negative_float, metavar="B",
                    help="the plan must still move at least B bytes D2H per step")
    pl.add_argument("--max-device-gib", type=non_negative_float, metavar="GIB",
                    help="device peak must fit in GIB (default: the target's memory)")
    pl.add_argument("--max-predicted-exposed-ms", type=non_negative_float, metavar="MS",
                    help="estimated exposed transfer time per step must stay under MS")
    o = p.add_argument_group("output")
    o.add_argument("--json", action="store_true", help="print {check, analysis} JSON on "
                   "stdout (the text report then goes to stderr)")
    o.add_argument("--json-out", metavar="FILE", help="also write {check, analysis} JSON to "
                   "FILE (the CI artifact)")
    o.add_argument("--junit", metavar="FILE", help="write JUnit XML, one testcase per check")
    p.set_defaults(func=run)


def _write(path: str, text, what: str) -> None:
    """Write `text` (a string, or a function writing to the open file) to `path`. A place
    that cannot take it is a usage error (exit 2), as for `report --html`: see overlap.errors."""
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text) if isinstance(text, str) else text(f)
    except OSError as e:
        raise UsageError(f"{path}: cannot write {what}: {e.strerror or e}") from None


def _plan_manifest(path: str) -> dict | None:
    p = Path(path)
    if not p.is_dir():  # a capture file is no plan (and its check never imports rundir: ~5 ms)
        return None
    from overlap.runs.rundir import is_plan, load_manifest

    m = load_manifest(p)
    if is_plan(m):
        from overlap.analysis.plans import refuse_impossible

        refuse_impossible(p, m)  # bad input (exit 3), never a verdict on impossible numbers
    return {**m, "label": m.get("label") or p.name} if is_plan(m) else None


def run_plan(args: argparse.Namespace, manifest: dict) -> int:
    """The gate on a plan run (compiled, not run): see overlap.report.plan_gate."""
    import json

    from overlap.report import plan_gate
    from overlap.report.text import junit

    # The measured gate's defaults, on the plan's predicted numbers: copies must exist for an
    # offloading policy, and the predicted hidden fraction must reach --min-overlap (0.9).
    outcome = plan_gate.run_plan_checks(
        manifest, min_offload_bytes=None if args.min_offload_bytes is None
        else int(args.min_offload_bytes), max_device_gib=args.max_device_gib,
        max_predicted_exposed_ms=args.max_predicted_exposed_ms,
        min_overlap=plan_gate.DEFAULT_MIN_OVERLAP if args.min_overlap is None
        else args.min_overlap, min_overlap_d2h=args.min_overlap_d2h,
        min_overlap_h2d=args.min_overlap_h2d, allow_no_transfers=args.allow_no_transfers,
        allow_host_compute=args.allow_host_compute)
    human = plan_gate.text(outcome)
    doc = json.dumps({"check": outcome, "plan": manifest}, indent=2, default=str) + "\n"
    if args.json:
        sys.stdout.write(doc)
        print(human, file=sys.stderr)
    else:
        print(human)
    if args.json_out:
        _write(args.json_out, doc, "JSON report")
    if args.junit:
        _write(args.junit, junit({"synthetic": False, "sources": [args.path]}, outcome),
               "JUnit XML")
    _append_step_summary(plan_gate.markdown(outcome))
    return EXIT_OK if outcome["passed"] else EXIT_CHECK_FAILED


def _append_step_summary(text: str) -> None:
    """Append Markdown to `$GITHUB_STEP_SUMMARY` when it is set (GitHub Actions)."""
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if not summary:
        return
    try:
        with open(summary, "a", encoding="utf-8") as f:
            # Leading blank line: earlier steps may not have ended their Markdown block.
            f.write("\n" + text)
    except OSError as e:
        # The gate's answer matters more than the summary; say so and keep the exit code.
        print(f"overlap check: warning: cannot append to $GITHUB_STEP_SUMMARY "
              f"({summary}): {e.strerror or e}", file=sys.stderr)


def _answer_baseline(path: str) -> dict:
    """--same-answer-as RUN's manifest: a run directory with run.json, else exit 3."""
    from overlap.errors import InputError
    from overlap.runs.rundir import load_manifest

    p = Path(path)
    if not p.exists():
        raise InputError(p, "no such file or directory")
    m = load_manifest(p) if p.is_dir() else None
    if m is None:
        raise InputError(p, "not a run directory with run.json (--same-answer-as needs a run "
                            "made by overlap capture)")
    return m


def _run_gates(args, trace, result: dict, outcome: dict, same_as: dict | None) -> dict:
    """The opt-in gates of `overlap.report.run_gates` on a capture. None asked for: `outcome`
    as it is (`run_gates.add_checks` of no check), without importing `run_gates`."""
    if not args.no_host_compute and same_as is None:
        return outcome
    from overlap.report import run_gates

    extra = []
    if args.no_host_compute:
        from overlap.cli.report import host_section

        section = result.get("host") or host_section(args.path, trace, result)
        result["host"] = section
        extra.append(run_gates.host_compute_check(section, platform=result.get("backend")))
    if same_as is not None:
        from overlap.runs.rundir import load_manifest

        p = Path(args.path)
        m = load_manifest(p) if p.is_dir() else None
        extra.append(run_gates.same_answer_check(m, same_as, args.same_answer_as,
                                                 args.max_grad_diff))
    return run_gates.add_checks(outcome, extra)


def run(args: argparse.Namespace) -> int:
    from overlap.report import gate as check
    from overlap.report import text as render

    plan = _plan_manifest(args.path)
    if plan is not None:
        return run_plan(args, plan)

    baseline = None
    if args.baseline:
        if Path(args.baseline).is_dir() or args.baseline.endswith(".xplane.pb"):
            # A run or capture as the baseline: analysed the same way as PATH.
            from overlap.analysis import overlap as analysis
            from overlap.cli.report import fail_on_unreadable
            from overlap.trace import read_trace

            base_trace = read_trace(args.baseline)
            fail_on_unreadable(base_trace, baseline=True)  # else unlike compared with like
            baseline = analysis.analyze(base_trace,
                                        hidden_threshold=args.hidden_threshold,
                                        exposed_threshold=args.exposed_threshold, top=args.top)
        else:
            baseline = check.load_baseline(args.baseline)
    gates = args.max_transfers is not None or args.max_transfer_bytes is not None
    min_overlap = args.min_overlap if args.min_overlap is not None else (
        None if gates else check.DEFAULT_MIN_OVERLAP)
    config = check.CheckConfig(
        max_host_skew=args.max_host_skew,
        max_transfers=args.max_transfers, max_transfer_bytes=args.max_transfer_bytes,
        transfer_direction=args.transfer_direction,
        min_overlap=min_overlap, min_overlap_d2h=args.min_overlap_d2h,
        min_overlap_h2d=args.min_overlap_h2d, max_exposed_ms=args.max_exposed_ms,
        max_exposed_frac=args.max_exposed_frac, baseline=baseline, baseline_path=args.baseline,
        max_ratio_drop=args.max_ratio_drop, max_exposed_growth=args.max_exposed_growth,
        exposed_slack_ms=args.exposed_slack_ms, allow_no_transfers=args.allow_no_transfers,
        allow_unknown=args.allow_unknown)
    config.validate()
    from overlap.cli.main import keep_until_exit
    from overlap.cli.report import read_and_analyze

    if args.max_grad_diff is not None and not args.same_answer_as:
        raise UsageError("--max-grad-diff goes with --same-answer-as RUN")
    same_as = _answer_baseline(args.same_answer_as) if args.same_answer_as else None
    trace, result = read_and_analyze(args)
    keep_until_exit(trace, result)  # freed by the process's end (`overlap.cli.main.run`)
    note_planned_copies(args.path, trace, result)
    outcome = check.run_checks(result, config, trace)
    outcome = _run_gates(args, trace, result, outcome, same_as)

    human = render.text(result, outcome)
    if args.json:
        render.write_json(sys.stdout, result, outcome)
        print(human, file=sys.stderr)
    else:
        print(human)
    if args.json_out:
        _write(args.json_out, lambda f: render.write_json(f, result, outcome), "JSON report")
    if args.junit:
        _write(args.junit, render.junit(result, outcome), "JUnit XML")
    _append_step_summary(render.markdown(result, outcome))
    from overlap.cli.report import fail_on_unreadable

    sys.stdout.flush()
    fail_on_unreadable(trace)  # exit 3 over pass/fail: part of the capture was not checked
    return EXIT_OK if outcome["passed"] else EXIT_CHECK_FAILED
