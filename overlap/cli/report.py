"""`overlap report PATH`: how much of each device<->host transfer hides behind compute.

Prints the verdict, then per-direction, per-device, per-step and per-HLO-op tables and the most
exposed transfers. `--json` prints the full result object (`overlap.analysis.overlap.analyze`)
instead; that JSON is also what `overlap check --baseline` reads.
"""

from __future__ import annotations

import argparse
import os
import sys

from overlap.analysis import thresholds  # constants only: --help needs no pandas
from overlap.errors import UsageError


def unit_fraction(text: str) -> float:
    """argparse type: a float in [0, 1] (bad values exit 2 with one line)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.0 <= v <= 1.0:  # also rejects NaN
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {text}")
    return v


def non_negative_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not 0 <= v < (1 << 62):
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text}")
    return v


def add_analysis_args(p: argparse.ArgumentParser) -> None:
    """Arguments shared by `report` and `check`: what to read and how to classify."""
    p.add_argument("path", help=".xplane.pb file, plugins/profile/<session> dir or run dir")
    p.add_argument("--session", help="capture session (timestamp dir) to read; default newest")
    p.add_argument("--jobs", type=non_negative_int, default=None, metavar="N",
                   help="read host files in N worker processes (default: the machine's cores "
                        "where the host files hold 128 MiB or more, else 1; 1 reads serially)")
    # An empty OVERLAP_DASK_SCHEDULER is unset; an empty --scheduler is a usage error.
    p.add_argument("--scheduler", default=os.environ.get("OVERLAP_DASK_SCHEDULER") or None,
                   metavar="ADDRESS", help="read host files on a Dask distributed cluster "
                   "(also OVERLAP_DASK_SCHEDULER; needs overlap-jax[dask])")
    p.add_argument("--top", type=non_negative_int, default=thresholds.DEFAULT_TOP, metavar="N",
                   help=f"rows in the HLO-op and most-exposed tables (default "
                        f"{thresholds.DEFAULT_TOP}; cut-offs are flagged)")
    p.add_argument("--hidden-threshold", type=unit_fraction,
                   default=thresholds.DEFAULT_HIDDEN_THRESHOLD, metavar="R",
                   help="overlap ratio at or above which a transfer counts as hidden "
                        f"(default {thresholds.DEFAULT_HIDDEN_THRESHOLD})")
    p.add_argument("--exposed-threshold", type=unit_fraction,
                   default=thresholds.DEFAULT_EXPOSED_THRESHOLD, metavar="R",
                   help="overlap ratio at or below which a transfer counts as exposed "
                        f"(default {thresholds.DEFAULT_EXPOSED_THRESHOLD})")


def analyze_args(args: argparse.Namespace) -> dict:
    """Read the capture named by `args` and analyze it; errors are OverlapErrors."""
    return read_and_analyze(args)[1]


def read_and_analyze(args: argparse.Namespace):
    """(trace, result) for the capture named by `args`."""
    if not args.exposed_threshold < args.hidden_threshold:
        raise UsageError(f"--exposed-threshold ({args.exposed_threshold}) must be below "
                         f"--hidden-threshold ({args.hidden_threshold})")
    # local imports: keep `overlap --help` fast
    from overlap.analysis.pod import read_and_analyze as pod_read_and_analyze
    from overlap.trace.distributed import check_scheduler_address

    if getattr(args, "scheduler", None) is not None:
        check_scheduler_address(args.scheduler)  # before any file is read

    jobs = getattr(args, "jobs", None)
    return pod_read_and_analyze(
        args.path, session=args.session, jobs=None if jobs is None else max(jobs, 1),
        scheduler=getattr(args, "scheduler", None), hidden_threshold=args.hidden_threshold,
        exposed_threshold=args.exposed_threshold, top=args.top)


def fail_on_unreadable(trace, baseline: bool = False) -> None:
    """After the readable hosts' results are out: exit 3 naming the damaged host file(s), so CI
    notices a capture that was read only in part (`Trace.unreadable`). A `baseline` read in
    part is refused before anything is compared against it."""
    bad = getattr(trace, "unreadable", None) or []
    if bad:
        from overlap.errors import InputError

        more = f" (and {len(bad) - 1} more host file(s))" if len(bad) > 1 else ""
        tail = ("a baseline must be read whole" if baseline else
                f"the output above covers the {len(trace.sources)} readable host file(s)")
        raise InputError(bad[0]["path"], f"{bad[0]['problem']}{more}; {tail}")


def register(sub) -> None:
    p = sub.add_parser("report", help="how much of each host transfer hides behind compute",
                       description=__doc__.split("\n\n")[0])
    add_analysis_args(p)
    p.add_argument("--json", action="store_true", help="print the result object as JSON")
    p.add_argument("--html", metavar="FILE",
                   help="also write one self-contained HTML page with the dashboard's figures "
                        "(verdict, step timeline, overlap per transfer) for CI artifacts")
    p.add_argument("--baseline", metavar="REPORT.json|RUN",
                   help="with --html: a saved `overlap report --json` to draw bars against, or "
                        "the baseline's run directory/capture (adds device memory against it)")
    pr = p.add_argument_group(
        "predicted against measured",
        "--predict runs the plan estimate on the program the capture ran (its HloProto) and "
        "puts it beside the measurement, per copy op")
    pr.add_argument("--predict", action="store_true",
                    help="add the estimate of the captured program beside the measured copies "
                         "(needs overlap-jax[plan])")
    pr.add_argument("--target", metavar="TARGET",
                    help="with --predict: the target to predict for (default: from the "
                         "capture's device kind)")
    pr.add_argument("--host-bandwidth", type=float, metavar="GB/s",
                    help="with --predict: host link bandwidth for the estimate (default: the "
                         "target's data sheet)")
    pr.add_argument("--kernel-floor-us", type=float, metavar="US",
                    help="with --predict: least time of one kernel (default: the target's)")
    pr.add_argument("--plan", metavar="PLAN_RUN",
                    help="a plan run (overlap plan/advise) of the program this capture ran: its "
                         "prediction beside the measured copies, per copy op (joined only when "
                         "module, inputs, policy and target match; else says why)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.baseline and not args.html:
        raise UsageError("--baseline goes with --html (overlap check takes its own --baseline)")
    if not getattr(args, "predict", False) and any(
            getattr(args, k, None) is not None
            for k in ("target", "host_bandwidth", "kernel_floor_us")):
        raise UsageError("--target, --host-bandwidth and --kernel-floor-us go with --predict")
    printing = bool(getattr(args, "predict", False) or getattr(args, "plan", None))
    if printing:
        # The captured programs are printed by XLA in a child process: started now (before
        # any thread), its imports run beside the read (`proto_print.prestart`). Printing
        # needs jaxlib, not an accelerator: jax kept on the CPU, in the child too.
        if getattr(args, "predict", False):
            os.environ.setdefault("JAX_PLATFORMS", "cpu")
        from overlap.hlo import proto_print

        proto_print.prestart()
    try:
        return _run(args)
    finally:
        if printing:
            proto_print.release()


def _run(args: argparse.Namespace) -> int:
    if args.html:
        from overlap.errors import require_extra

        require_extra("dashboard", "plotly")
        # the page's compressed plotly.js made beside the read and the analysis
        from overlap.report.html import prefetch_plotly_js

        prefetch_plotly_js()
    plan = _plan(args.path)
    if plan is not None:
        if getattr(args, "predict", False) or getattr(args, "plan", None):
            raise UsageError(f"{args.path}: --predict and --plan put a plan's estimate beside a "
                             "capture; this is a plan run (its report already is the estimate)")
        return report_plan(args, plan)
    from overlap.report import text as render

    baseline = baseline_trace = baseline_manifest = None
    if args.baseline:
        from pathlib import Path

        if Path(args.baseline).is_dir() or args.baseline.endswith(".xplane.pb"):
            from overlap.runs.rundir import load_manifest
            from overlap.trace import read_trace

            baseline_trace = read_trace(args.baseline)
            fail_on_unreadable(baseline_trace, baseline=True)
            from overlap.analysis import overlap as analysis

            baseline = analysis.analyze(baseline_trace, hidden_threshold=args.hidden_threshold,
                                        exposed_threshold=args.exposed_threshold, top=args.top)
            if Path(args.baseline).is_dir():
                baseline_manifest = load_manifest(args.baseline)
        else:
            from overlap.report.gate import load_baseline

            baseline = load_baseline(args.baseline)
    trace, result = read_and_analyze(args)
    if getattr(args, "predict", False) and not getattr(args, "plan", None):
        # the programs `--predict` prints, printed by XLA's child while the sections below
        # are made (`proto_print.hand_ahead`: the same protos, collected where asked)
        from overlap.hlo.proto_print import hand_ahead
        from overlap.plan.predict import protos_to_print

        hand_ahead(protos_to_print(trace))
    from overlap.cli.main import keep_until_exit

    keep_until_exit(trace, result)
    from pathlib import Path as _P

    from overlap.trace.paths import list_sessions

    sessions = list_sessions(_P(args.path)) if _P(args.path).is_dir() else []
    if len(sessions) > 1:
        used = args.session or sessions[-1].name
        result.setdefault("notes", []).append(
            f"{len(sessions)} capture sessions here; this report reads {used}"
            + ("" if args.session else " (the newest; --session picks another)"))
    note_planned_copies(args.path, trace, result)
    offload = offload_section(args.path, result)
    if offload is not None:
        result["offload"] = offload
    programs = programs_section(args.path, trace, result)  # read once, for names and causes
    by_name = names_section(args.path, trace, result, programs)
    first_use_section(trace, result, programs)
    if by_name is not None:
        result["offload_by_name"] = by_name
    # The programs' instructions (~1 KiB each) go before the host section decodes its
    # program again: not both at once at the peak (issue 32: the real H100 `params`
    # captures' peak RSS 44 -> 43 MiB).
    del programs
    result["host"] = host_section(args.path, trace, result)
    if getattr(args, "predict", False) and getattr(args, "plan", None):
        raise UsageError("--predict and --plan are two predictions: give one")
    if getattr(args, "predict", False):
        result["prediction"] = _predict(args, trace, result)
    elif getattr(args, "plan", None):
        result["prediction"] = _plan_prediction(args, trace, result)
    if args.html:
        from pathlib import Path

        from overlap.report.html import write_html
        from overlap.runs.rundir import load_manifest

        _refuse_overwrite_of_capture(args.html)
        manifest = load_manifest(args.path) if Path(args.path).is_dir() else None
        write_html(result, trace, args.html, baseline=baseline, manifest=manifest,
                   baseline_trace=baseline_trace, baseline_manifest=baseline_manifest)
        print(f"wrote {args.html}", file=sys.stderr)
    if args.json:
        render.write_json(sys.stdout, result)
    else:
        print(render.text(result))
        if offload is not None:
            print()
            print(f"did offload happen? {offload['answer']}")
            for line in offload["lines"]:
                print(f"  {line}")
        from overlap.analysis.host_memory import host_lines

        if host_lines(result["host"]):
            print()
            print("\n".join(host_lines(result["host"])))
        if by_name is not None:
            from overlap.report.names_text import render_offload_by_name

            lines = render_offload_by_name(by_name)
            if lines:
                print()
                print("\n".join(lines))
        if "prediction" in result:
            from overlap.report.predict_text import render_prediction

            print()
            print(render_prediction(result["prediction"]))
    sys.stdout.flush()  # the results first, then the one error line of a partly read capture
    fail_on_unreadable(trace)
    # A report describes; only `overlap check` gates. Missing transfers are not an error here.
    return 0


def _predict(args: argparse.Namespace, trace, result: dict) -> dict:
    """The `prediction` section (`overlap.plan.predict`): the plan estimate of the program the
    capture ran, beside its measured copies."""
    from overlap.errors import require_extra

    require_extra("plan", "jax")
    from overlap.cli.options import check_host_bandwidth, check_kernel_floor

    check_host_bandwidth("--host-bandwidth", args.host_bandwidth)
    check_kernel_floor(args.kernel_floor_us)
    # (jax kept on the CPU: `run` set it, before the printer's child was forked)
    from overlap.plan.predict import predict_capture

    return predict_capture(trace, result, target=args.target,
                           host_link_Bps=None if args.host_bandwidth is None
                           else args.host_bandwidth * 1e9,
                           kernel_floor_us=args.kernel_floor_us)


def _plan_prediction(args: argparse.Namespace, trace, result: dict) -> dict:
    """The `prediction` section from a plan run of the capture's program
    (`overlap.plan.predict.predict_from_plan`)."""
    from pathlib import Path

    from overlap.analysis.compare import copy_module_names, device_kinds_of
    from overlap.runs.rundir import load_manifest

    plan = _plan(args.plan)
    if plan is None:
        raise UsageError(f"{args.plan}: --plan takes a plan run directory (overlap plan or "
                         "overlap advise writes them)")
    manifest = load_manifest(args.path) if Path(args.path).is_dir() else None
    prog = (manifest or {}).get("program")
    run = {"program": prog if isinstance(prog, dict) else {},
           "policy": (manifest or {}).get("policy"),
           "copy_modules": copy_module_names(trace), "device_kinds": device_kinds_of(trace),
           "backend": result.get("backend")}
    texts = sorted(Path(args.plan).glob("hlo/*.after_optimizations.hlo.txt"))
    try:
        text = texts[0].read_text() if len(texts) == 1 and texts[0].is_file() else None
    except UnicodeDecodeError as e:
        from overlap.errors import InputError

        raise InputError(texts[0], f"not UTF-8 text (byte {e.start}): the plan's optimized HLO "
                                   "is written as UTF-8; this file was damaged") from None
    from overlap.plan.predict import predict_from_plan

    return predict_from_plan(trace, result, plan, run, hlo_text=text)


def _plan(path: str) -> dict | None:
    """The manifest of a plan run (compiled, never run), with its program-order memory; None
    for anything else (a capture file is never one: it is answered without reading)."""
    from pathlib import Path

    p = Path(path)
    if not p.is_dir():
        return None
    from overlap.runs.rundir import is_plan, load_manifest

    m = load_manifest(p)
    if not is_plan(m):
        return None
    from overlap.analysis.plans import program_memory_bytes, refuse_impossible

    # A hand-edited or foreign plan: named, never read as written (exit 3, not a crash).
    refuse_impossible(p, m)
    m = {**m, "label": m.get("label") or p.name}
    from overlap.trace.paths import read_side_json

    pm = p / "program_memory.json"
    # optional; when present it is read with the checks every side file gets, and its byte
    # counts as the dashboard reads them (`program_memory_bytes`), else no curve
    m["_program_memory"] = program_memory_bytes(
        read_side_json(pm, "program memory (program_memory.json)")) \
        if os.path.lexists(pm) else None
    return m


def report_plan(args: argparse.Namespace, plan: dict) -> int:
    """`overlap report PLAN_RUN`: what the compiler said (a plan has no trace to analyse)."""
    import json

    from overlap.report.plan_text import render_plans

    baseline = _plan(args.baseline) if args.baseline else None
    if args.baseline and baseline is None:
        raise UsageError(f"{args.baseline}: the baseline of a plan must be a plan run "
                         "(overlap plan --out DIR writes them)")
    if args.html:
        from overlap.report.html import write_plan_html

        _refuse_overwrite_of_capture(args.html)
        write_plan_html([plan], args.html, baseline=baseline)
        print(f"wrote {args.html}", file=sys.stderr)
    clean = {k: v for k, v in plan.items() if not k.startswith("_")}
    if args.json:
        json.dump(clean, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        print(render_plans(([baseline] if baseline else []) + [plan]))
    return 0


def _refuse_overwrite_of_capture(path: str) -> None:
    # Writing an HTML page over a user's capture would lose it silently.
    if str(path).endswith((".xplane.pb", "run.json")):
        raise UsageError(f"{path}: refusing to overwrite a capture file with an HTML report")




def note_planned_copies(path: str, trace, result: dict) -> None:
    """A capture without transfers: whether its compiled programs planned any host copy
    (`overlap.analysis.planned`), as `planned_host_copies`, and the reason says which case it
    is. `overlap check` passes `no_transfers` on a baseline that planned none."""
    from overlap.analysis import overlap as analysis

    # XLA:CPU never moves host copies (CPU_REASON says why): its answer stays as it is.
    if result.get("status") != analysis.STATUS_NO_TRANSFERS or result.get("backend") == "cpu":
        return
    from overlap.analysis.planned import planned_host_copies, planned_reason

    planned = result["planned_host_copies"] = planned_host_copies(path, trace)
    reason = planned_reason(planned)
    if reason is not None:
        result["reason"] = reason
        result["verdict"] = analysis.verdict(result)


def offload_section(path: str, result: dict) -> dict | None:
    """For a run directory: the compiled HLO's planned copies per step against the trace's.

    This answers the first question users ask ("did offload happen at all?"). A bare capture has
    no manifest, hence no plan, and gets no section.
    """
    manifest = _manifest_of(path)
    if not manifest:
        return None
    from overlap.analysis.compare import executed_copies, offload_check, planned_copies

    planned, executed = planned_copies(manifest), executed_copies(result)
    policy = manifest.get("policy") or {}
    out = offload_check(planned, executed, bool(policy.get("offloaded")))
    out["policy"] = policy.get("name")
    return out


def host_section(path: str, trace, result: dict) -> dict:
    """`host` (`overlap.analysis.host_memory.capture_host_section`): ops XLA moved to host
    compute and the pinned host peak against the cap in force, or why not available."""
    from overlap.analysis.host_memory import capture_host_section

    return capture_host_section(trace, result, _manifest_of(path))


def _manifest_of(path: str) -> dict | None:
    """The run directory's manifest (`overlap.runs.rundir.load_manifest`); None for a capture
    file, whose report then never imports rundir (~5 ms of a small capture's start-up: its
    `secrets` import loads hashlib and OpenSSL; issue 32)."""
    from pathlib import Path

    if not Path(path).is_dir():
        return None
    from overlap.runs.rundir import load_manifest

    return load_manifest(Path(path))


def programs_section(path: str, trace, result: dict) -> dict | None:
    """The compiled programs of the capture's copies (`overlap.analysis.names.programs_of`:
    the run directory's HLO text, else the capture's HloProto); None off GPU/TPU (a CPU
    capture's offload is compiled away)."""
    if result.get("backend") not in ("gpu", "tpu"):
        return None
    from overlap.analysis.names import programs_of

    return programs_of(path, trace)


def first_use_section(trace, result: dict, programs: dict | None) -> None:
    """The HLO facts of `device_waits` (`overlap.analysis.first_use`): each copy's first user
    and how long before it the copy started, in that cause's evidence and `top_exposed`."""
    from overlap.analysis.first_use import add_hlo_evidence

    add_hlo_evidence(trace, result, {k: v[0] for k, v in (programs or {}).items()})


def names_section(path: str, trace, result: dict, programs: dict | None = None) -> dict | None:
    """`offload_by_name` (`overlap.analysis.names`): per checkpoint name, asked for, compiled
    into host copies, seen in the trace. Only for captures with host copies or a policy that
    asks for some; a CPU capture (offload compiled away) gets none."""
    if result.get("backend") not in ("gpu", "tpu"):
        return None
    from overlap.analysis.names import offload_by_name

    return offload_by_name(path, trace, result, _manifest_of(path), programs)

