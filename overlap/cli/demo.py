"""`overlap demo`: capture the built-in transformer three ways, compare, open the dashboard.

Runs `transformer:<size>` under an offload policy (`qkv_proj_offloaded`), full remat (`full`) and
no remat (`everything_saveable`) on whatever JAX backend is present, into a fresh
`./runs/demo-<time>/`, prints `overlap compare` of the three, then serves the dashboard on it
(`--no-serve` to skip). On CPU it says plainly that XLA:CPU compiles offload away, so there are
no transfers to measure, and points at the GPU captures in `sample_traces/`.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

DEMO_POLICIES = ("qkv_proj_offloaded", "full", "everything_saveable")


def register(sub) -> None:
    p = sub.add_parser("demo", help="capture offload vs remat vs no remat, compare, show",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("--size", default=None,
                   help="transformer size (default: h100 on a GPU with >= 70 GiB, small on other "
                        "GPUs/TPUs, tiny on CPU)")
    p.add_argument("--out", default="runs", help="parent directory for the demo runs (./runs)")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--no-serve", action="store_true", help="do not start the dashboard")
    p.add_argument("--port", type=int, default=8050)
    p.set_defaults(func=run)


def _default_size(platform: str, device) -> str:
    if platform == "gpu":
        stats = getattr(device, "memory_stats", lambda: None)() or {}
        limit = stats.get("bytes_limit", 0)
        return "h100" if limit >= 70 * (1 << 30) else "small"
    return "small" if platform == "tpu" else "tiny"


def run(args: argparse.Namespace) -> int:
    from overlap.capture.api import prepare_xla_flags

    prepare_xla_flags(False)  # before JAX brings its backend up
    import jax

    from overlap.analysis.compare import compare_dirs
    from overlap.report.compare_text import render_text
    from overlap.capture.sweep import sweep

    platform = jax.default_backend()
    device = jax.devices()[0]
    size = args.size or _default_size(platform, device)
    out = Path(args.out) / time.strftime("demo-%Y%m%d-%H%M%S")
    print(f"overlap demo: transformer:{size} on {platform} ({device.device_kind}), "
          f"policies {', '.join(DEMO_POLICIES)} -> {out}")
    if platform == "cpu":
        print("note: this machine runs JAX on the CPU. XLA:CPU compiles host offload away, so "
              "the offload run has no D2H/H2D transfers to measure; the comparison below shows "
              "step time and memory only. For real offload measurements, run this demo on a GPU "
              "(pip install 'overlap[cuda]') or open the GPU captures in sample_traces/.")
    runs = sweep(f"transformer:{size}", list(DEMO_POLICIES), out, steps=args.steps,
                 warmup=args.warmup)
    print()
    print(render_text(compare_dirs([str(r) for r in runs], baseline="full")))
    if args.no_serve:
        print(f"\nruns in {out}; browse them with: overlap dashboard {out}")
        return 0
    from overlap.cli import dashboard

    return dashboard.run(argparse.Namespace(logdirs=[str(out)], host="127.0.0.1",
                                            port=args.port, debug=False))
