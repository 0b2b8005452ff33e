"""`overlap capture`: profile a workload under one or more policies, or attach to a running job.

    overlap capture --workload transformer:tiny --policy qkv_proj_offloaded --policy full \
        --out runs/
    overlap capture --attach localhost:9999 --duration-ms 2000 --out runs/live

Each policy becomes one run directory (`runs/<policy>`, or `--label`): the capture in
TensorBoard/xprof layout plus `run.json`. Existing runs are never overwritten. A policy whose
step runs out of memory is written as a run with `status: does_not_fit` (no capture) and the
sweep goes on (exit 0); a step that raises anything else is written with `status: failed` and
the command exits 3 after the other policies.
"""

from __future__ import annotations

import argparse
import sys

from overlap.errors import UsageError


def register(sub) -> None:
    p = sub.add_parser("capture", help="profile a workload per policy, or attach to a job",
                       description=__doc__.split("\n\n")[0],
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--workload", metavar="NAME[:SIZE]",
                   help="built-in (scan, transformer, params; sizes tiny, small, h100, control) "
                        "or module:function[:SIZE] returning the step for a policy")
    p.add_argument("--policy", action="append", default=[], metavar="P",
                   help="remat/offload policy, repeatable (full, minimal, qkv_proj_offloaded, "
                        "minimal_offloaded, everything_saveable, offload:A,B, save:A,B, ...)")
    p.add_argument("--label", action="append", default=None, metavar="L",
                   help="run directory name per --policy, in the same order")
    p.add_argument("--steps", type=int, default=10,
                   help="timed and profiled steps (default 10: enough to tell step-time "
                        "differences from noise)")
    p.add_argument("--warmup", type=int, default=3, help="unprofiled warm-up steps (default 3)")
    p.add_argument("--out", metavar="DIR", help="where run directories go (required to capture)")
    p.add_argument("--command-buffers", action="store_true",
                   help="keep XLA:GPU command buffers on (by default they are turned off for the "
                        "capture, since they hide per-op detail)")
    p.add_argument("--attach", metavar="HOST:PORT",
                   help="capture from a process that called jax.profiler.start_server(PORT)")
    p.add_argument("--duration-ms", type=_duration_ms, default=2000,
                   help="with --attach (default 2000; 1 ms to 1 hour)")
    p.add_argument("--list-policies", action="store_true", help="print policy names and exit")
    p.set_defaults(func=run)


def _duration_ms(text: str) -> int:
    """argparse type: a capture length in ms, 1 ms to an hour (bad values exit 2)."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not 0 < v <= 3_600_000:
        raise argparse.ArgumentTypeError(f"must be 1-3600000 ms, got {text}")
    return v


def run(args: argparse.Namespace) -> int:
    from overlap.env import choose_platforms

    choose_platforms()  # before jax is imported: no failing probes of absent GPUs/TPUs
    from overlap.errors import MissingExtra, has_module, require_extra

    if args.attach:
        require_extra("attach", "jax")
        if not (has_module("xprof") or has_module("tensorboard_plugin_profile")):
            raise MissingExtra("attach", "xprof")
    else:
        require_extra("capture", "jax")
    if args.list_policies:
        from overlap.capture.policies import get_policy, policy_names

        for name in policy_names():
            pol = get_policy(name)
            print(f"{name:<36}{pol.category:<10}{pol.description}")
        return 0
    if not args.out:
        raise UsageError("--out DIR is required: each run directory is written there")
    for lab in args.label or []:
        from overlap.runs.rundir import check_label

        check_label(lab)
    if args.steps < 1 or args.warmup < 0:
        raise UsageError("--steps must be >= 1 and --warmup >= 0")
    if args.attach:
        if args.workload or args.policy:
            raise UsageError("--attach captures a running job: --workload/--policy do not apply")
        from overlap.capture.api import attach

        try:
            path = attach(args.attach, args.duration_ms, args.out,
                          label=(args.label or [None])[0])
        except FileExistsError as e:
            raise UsageError(str(e)) from None
        except RuntimeError as e:  # nothing answered: the job is the unreadable input (3)
            from overlap.errors import InputError

            raise InputError(None, str(e)) from None
        print(path)
        return 0
    if not args.workload or not args.policy:
        raise UsageError("give --workload and at least one --policy (or --attach HOST:PORT)")
    from overlap.capture.sweep import sweep

    try:
        paths = sweep(args.workload, args.policy, args.out, steps=args.steps,
                      warmup=args.warmup, labels=args.label,
                      command_buffers=args.command_buffers)
    except FileExistsError as e:
        raise UsageError(str(e)) from None
    except ValueError as e:
        raise UsageError(str(e)) from None
    from overlap.capture.failures import STATUS_FAILED, summary_line
    from overlap.runs.rundir import is_failed_capture, load_manifest

    rc = 0
    for p in paths:
        print(p, file=sys.stdout)
        m = load_manifest(p)
        if is_failed_capture(m):
            # A policy that does not fit is a finding (exit 0, like a plan that does not fit);
            # a step that raised anything else is a workload that cannot be captured (exit 3).
            print(f"overlap capture: {summary_line(p, m)}", file=sys.stderr)
            if m.get("status") == STATUS_FAILED:
                rc = 3
    return rc
