"""`overlap plan --target T --workload W --policy P ...`: compile for an H100 or a TPU without one.

Compiles the step with the target's real XLA compiler (deviceless), once per policy, and writes
one plan run per policy under `--out`: memory analysis (device and host), the optimized HLO,
the offload inventory and a roofline estimate of how much of each planned transfer can hide.
Compiled, not run: nothing is measured. Compare plans with `overlap compare OUT`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def register(sub) -> None:
    from overlap.plan.targets import TARGETS  # light: dataclasses only, no jax

    p = sub.add_parser("plan", help="compile for a target (h100, v5e, ...) without the hardware",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("--target", metavar="TARGET",
                   help=f"{', '.join(TARGETS)} (see --list-targets)")
    p.add_argument("--list-targets", action="store_true", help="list targets and their numbers")
    p.add_argument("--workload", default="scan", metavar="W",
                   help="NAME[:SIZE] or module:function[:SIZE] (default: scan)")
    p.add_argument("--policy", action="append", metavar="P",
                   help="remat/offload policy; repeat to plan several (default: offload:x and "
                        "nothing_saveable for scan, qkv_proj_offloaded and full otherwise)")
    p.add_argument("--out", metavar="DIR", help="directory to write the plan runs into")
    p.add_argument("--topology", metavar="TOPO",
                   help="TPU topology (default per target, e.g. v5e:2x2) or GPU 1x1x1")
    p.add_argument("--host-bandwidth", type=float, metavar="GB/s",
                   help="host link bandwidth for the estimate, each way (default: the "
                        "target's nominal; `overlap report CAPTURE --predict` measures one)")
    p.add_argument("--host-bandwidth-h2d", type=float, metavar="GB/s",
                   help="H2D bandwidth when it differs from --host-bandwidth (D2H)")
    p.add_argument("--kernel-floor-us", type=float, metavar="US",
                   help="least time of one kernel, launch + tail, in microseconds (default: "
                        "the target's; 1 us on GPUs, from XLA's GPU cost model; 0 on TPUs)")
    budget = p.add_mutually_exclusive_group()
    budget.add_argument("--memory-budget", type=float, metavar="GiB",
                        help="device memory a plan must fit in (default: JAX's usable share: "
                             "75%% of a GPU, all of a TPU's HBM)")
    budget.add_argument("--memory-fraction", type=float, metavar="F",
                        help="fraction of the target's device memory a plan must fit in, as "
                             "XLA_PYTHON_CLIENT_MEM_FRACTION sets it for JAX on GPUs")
    add_model_args(p)
    p.add_argument("--json", action="store_true", help="print the plans' manifests as JSON")
    p.set_defaults(func=run)



def add_model_args(p) -> None:
    """`--calibrate` and `--command-buffers`, the estimate's inputs `plan` and `advise` share."""
    p.add_argument("--calibrate", metavar="RUN",
                   help="a run of the same step captured on the target (e.g. its full-remat "
                        "baseline): its measured kernel times, launch gaps, link and command-"
                        "buffer setting replace the data sheet's in the estimate")
    p.add_argument("--command-buffers", choices=("on", "off"),
                   help="XLA:GPU command buffers in the estimate (on: copies share the compute "
                        "stream); default: --calibrate's run, else XLA_FLAGS, else XLA's "
                        "default (on)")

def run(args: argparse.Namespace) -> int:
    from overlap.errors import UsageError
    from overlap.plan.targets import get_target, list_targets_text

    if args.list_targets:
        if args.json:
            import dataclasses

            from overlap.plan.targets import TARGETS

            # Every number the estimate uses, with its source; not the compiler's GPU config
            # text (gpu_spec), which is an input to XLA rather than a fact to read.
            json.dump([{k: v for k, v in dataclasses.asdict(t).items() if k != "gpu_spec"}
                       for t in TARGETS.values()], sys.stdout, indent=2)
            sys.stdout.write("\n")
        else:
            print(list_targets_text())
        return 0
    if not args.target:
        raise UsageError("--target is required (see --list-targets)")
    target = get_target(args.target)
    if not args.out:
        raise UsageError("--out DIR is required: each policy's plan is written there as a run")
    from overlap.cli.options import check_host_bandwidth, check_kernel_floor

    check_host_bandwidth("--host-bandwidth", args.host_bandwidth)
    check_host_bandwidth("--host-bandwidth-h2d", args.host_bandwidth_h2d)
    check_kernel_floor(args.kernel_floor_us)
    from overlap.plan.targets import memory_budget

    budget = memory_budget(target, budget_gib=args.memory_budget, fraction=args.memory_fraction)
    # The plan needs no accelerator of its own: keep jax on the CPU for host work, whatever
    # plugins are installed (they would otherwise try, and loudly fail, to find a GPU/TPU).
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    from overlap.plan.compile import plan_workload, require_compiler
    from overlap.report.plan_text import render_plans

    require_compiler(target)
    from overlap.plan.calibrate import calibration_args

    calibration, command_buffers = calibration_args(args)
    policies = args.policy or (["offload:x", "nothing_saveable"]
                               if args.workload.split(":")[0] == "scan"
                               else ["qkv_proj_offloaded", "full"])
    try:
        plans = plan_workload(args.workload, policies, target, out=args.out,
                              topology=args.topology,
                              host_link_Bps=None if args.host_bandwidth is None
                              else args.host_bandwidth * 1e9,
                              h2d_link_Bps=None if args.host_bandwidth_h2d is None
                              else args.host_bandwidth_h2d * 1e9,
                              kernel_floor_us=args.kernel_floor_us, budget=budget,
                              calibration=calibration, command_buffers=command_buffers)
    except ValueError as e:  # unknown workload or policy
        raise UsageError(str(e)) from None
    except FileExistsError as e:  # checked before the first compile (plan_workload)
        where = getattr(e, "path", None) or str(e)
        raise UsageError(f"{where}: a plan run of that name exists already; choose another "
                         "--out, or delete it first (overlap never overwrites a run)") from None
    if args.json:
        json.dump([{k: v for k, v in p.manifest.items() if not k.startswith("_")}
                   for p in plans], sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        print(render_plans([p.manifest | {"label": p.path.name if p.path else p.policy}
                            for p in plans]))
        print(f"\nwrote {len(plans)} plan run(s) under {args.out}; "
              f"compare them with: overlap compare {args.out}")
    return 0
