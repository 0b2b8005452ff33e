"""`overlap advise --target T --workload W --out DIR`: which remat/offload policy to use there.

Compiles the step for the target (deviceless, with its real XLA compiler) under every policy
that applies to it (JAX's, MaxText's, and offload/save of each checkpoint name the step
tags), writes each distinct program as a plan run under `--out` (plus `advice.json`), and
ranks them: fits the memory budget, device peak and headroom, predicted step time, difference
from full remat, bytes moved per step, break-even host bandwidth. Compiled, not run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def register(sub) -> None:
    from overlap.cli.plan import add_model_args

    p = sub.add_parser("advise", help="rank remat/offload policies for a step on a target "
                       "(compiled, not run)", description=__doc__.split("\n\n")[0])
    from overlap.plan.targets import TARGETS  # light: dataclasses only, no jax

    p.add_argument("--target", required=True, metavar="TARGET",
                   help=f"{', '.join(TARGETS)} (see `overlap plan --list-targets`)")
    p.add_argument("--workload", required=True, metavar="W",
                   help="NAME[:SIZE] or module:function[:SIZE] (e.g. transformer:tiny)")
    p.add_argument("--memory-budget", type=float, metavar="GiB",
                   help="device memory a policy must fit in (default: JAX's usable share of "
                        "the target: 75%% of a GPU, all of a TPU's HBM)")
    p.add_argument("--out", required=True, metavar="DIR",
                   help="directory for the plan runs and advice.json")
    p.add_argument("--policy", action="append", metavar="P",
                   help="rank only these policies (repeat; default: every policy that applies)")
    p.add_argument("--topology", metavar="TOPO", help="TPU topology (default per target)")
    p.add_argument("--host-bandwidth", type=float, metavar="GB/s",
                   help="host link bandwidth for the estimate (default: the target's)")
    add_model_args(p)
    p.add_argument("--jobs", type=int, metavar="N",
                   help="programs compiled at once (default: 2 on a machine with 2+ cores)")
    p.add_argument("--json", action="store_true", help="print the advice as JSON")
    p.add_argument("--quiet", action="store_true", help="no per-policy progress on stderr")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from overlap.errors import UsageError
    from overlap.plan.targets import get_target

    target = get_target(args.target)
    from overlap.cli.options import check_host_bandwidth

    check_host_bandwidth("--host-bandwidth", args.host_bandwidth)
    if args.memory_budget is not None and not (0 < args.memory_budget < 1 << 20):
        raise UsageError("--memory-budget must be a positive number of GiB")
    if not str(args.out).strip():
        raise UsageError("--out is empty: name the directory the plan runs and advice go to")
    # No accelerator needed: keep jax on the CPU for host work (see `overlap plan`). Set before
    # the policy check, which imports jax: jax reads JAX_PLATFORMS when it is imported, and
    # with it unset the CUDA plugin's "topology not implemented" failed every compile.
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    _check_policies(args.policy, args.workload)
    if os.path.exists(os.path.join(args.out, "advice.json")):
        raise UsageError(f"{args.out} holds an advice already; choose another --out")
    from overlap.plan.advisor import advise_workload
    from overlap.plan.compile import require_compiler

    require_compiler(target)
    from overlap.plan.calibrate import calibration_args

    calibration, command_buffers = calibration_args(args)

    if args.jobs is not None and not 1 <= args.jobs <= 64:
        raise UsageError("--jobs must be between 1 and 64")
    if args.topology is not None:
        from overlap.plan.compile import target_devices

        # Before any compile: a topology the target's compiler has no device for would make
        # every policy's row a compile error (UsageError naming it, as `overlap plan` says).
        target_devices(target, args.topology)
    # Progress goes to the terminal's stderr as it is now: while compiles run, file
    # descriptor 2 is redirected to keep the compilers' own chatter off the screen.
    err = None if args.quiet else os.fdopen(os.dup(2), "w", buffering=1)

    def progress(msg: str) -> None:
        if err is not None:
            err.write(f"  {msg}\n")

    try:
        advice = advise_workload(
            args.workload, target, policies=args.policy, memory_budget_gib=args.memory_budget,
            out=args.out, topology=args.topology,
            host_link_Bps=None if args.host_bandwidth is None else args.host_bandwidth * 1e9,
            progress=progress, jobs=args.jobs, calibration=calibration,
            command_buffers=command_buffers)
    except ValueError as e:  # unknown workload or size
        raise UsageError(str(e)) from None
    except FileExistsError as e:
        raise UsageError(f"{e}: a run with that name exists; choose another --out") from None
    finally:
        if err is not None:
            err.close()
    if args.json:
        json.dump(advice.result, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        print(advice.text())
        print(f"\nwrote {len(advice.plans)} plan run(s) and {advice.path} under {args.out}; "
              f"compare them with: overlap compare {args.out}")
    return 0


def _check_policies(policies: list[str] | None, workload: str) -> None:
    """Every --policy must name a policy, and for a built-in workload only checkpoint names it
    tags (what `overlap plan` and `overlap capture` refuse, refused here before compiling)."""
    from overlap.capture.policies import get_policy
    from overlap.capture.workloads import CHECKPOINT_NAMES
    from overlap.errors import UsageError

    for name in policies or []:
        try:
            pol = get_policy(name)
        except ValueError as e:
            raise UsageError(str(e)) from None
        known = CHECKPOINT_NAMES.get(str(workload).split(":")[0])
        unknown = sorted((set(pol.saved) | set(pol.offloaded)) - set(known)) if (
            known is not None and pol.name.startswith(("offload:", "save:"))) else []
        if unknown:
            raise UsageError(f"policy {pol.name!r} names {', '.join(map(repr, unknown))}, which "
                             f"workload {workload!r} never tags; its checkpoint names: "
                             f"{', '.join(known or ())}")
