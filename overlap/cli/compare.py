"""`overlap compare RUN RUN ...`: offload against the remat baseline, side by side.

Per run: step time (median, spread), peak device memory, bytes moved D2H/H2D per step, overlap
per direction and exposed time per step, with deltas against the baseline (default: the full
remat run), a verdict line per offload run, and the break-even between moving and recomputing.
"""

from __future__ import annotations

import argparse
import json
import sys


def register(sub) -> None:
    p = sub.add_parser("compare", help="compare runs against the remat baseline",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", metavar="RUN",
                   help="run directories (or a log directory holding several)")
    p.add_argument("--baseline", metavar="RUN",
                   help="label/path of the baseline run (default: the full-remat run)")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from overlap.analysis.compare import compare_dirs
    from overlap.plan.targets import target_for_device_kind
    from overlap.report.compare_text import render_text

    if args.baseline is not None and not args.baseline.strip():
        # An empty name would silently mean "pick the default baseline".
        from overlap.errors import UsageError

        raise UsageError("--baseline is empty: give a run's label, path or policy")
    res = compare_dirs(args.runs, baseline=args.baseline, target_of=target_for_device_kind)
    if args.json:
        json.dump(res, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        print(render_text(res))
    bad = res.get("named_unreadable") or []
    if bad:
        from overlap.errors import InputError

        sys.stdout.flush()  # the comparison first, then the one error line
        more = f" (and {len(bad) - 1} more host file(s))" if len(bad) > 1 else ""
        raise InputError(bad[0]["path"], f"{bad[0]['problem']}{more}; the comparison above "
                                         "covers the readable host files")
    return 0
