"""The JAX host-offloading tutorial's memory table, reproduced by plans of its own functions.

The tutorial ("JAX Memories and Host Offloading", docs.jax.dev, notebooks/host-offloading)
prints `compiled.memory_analysis()` of three programs, one real device of its own (a Colab
accelerator), in MiB (it labels them "MB" and divides by 1024**2):

=============================================  ======  ========  =====
program                                        temp    argument  total
=============================================  ======  ========  =====
`jit(grad(scan))`, no remat                    17.25   20.25     57.50
activation offload of `x` (remat, policy)       6.50   20.25     46.75
activation + parameter offload (w in host)      4.75    0.25     25.00
=============================================  ======  ========  =====

The scan: 10 layers, `x` 256x256 f32, `w1` 10x256x1024, `w2` 10x1024x256; each layer is
`(x @ w1) @ w2`, the loss their sum. The functions below are the same computations written
here (not copied); `run(target)` plans each for a target with `overlap.plan.plan_step` and
returns the compiler's numbers beside the published ones. `python -m benchmarks.tutorial_memory
h100 v5e` prints the table; docs/advise.md says what matched.
"""

from __future__ import annotations

import os
import sys
from typing import Any

MiB = 1 << 20

# (temp MiB, argument MiB, total MiB) as the tutorial prints them.
PUBLISHED = {"baseline": (17.25, 20.25, 57.50), "offload_x": (6.50, 20.25, 46.75),
             "offload_x_and_params": (4.75, 0.25, 25.00)}


def _programs() -> dict[str, tuple[Any, Any, Any]]:
    """name -> (jitted step, weights, input), abstract (ShapeDtypeStructs)."""
    import jax
    import jax.numpy as jnp
    from jax.ad_checkpoint import checkpoint_name

    policy = jax.checkpoint_policies.save_and_offload_only_these_names(
        names_which_can_be_saved=[], names_which_can_be_offloaded=["x"],
        offload_src="device", offload_dst="pinned_host")

    def plain(x, w):
        return (x @ w[0]) @ w[1], None

    def named(x, w):
        x = checkpoint_name(x, "x")
        return (x @ w[0]) @ w[1], None

    def params_from_host(x, w):
        w = jax.tree.map(lambda a: jax.device_put(a, jax.memory.Space.Device), w)
        return named(x, w)

    def total(layer):
        def f(w, x):
            return jnp.sum(jax.lax.scan(layer, x, w)[0])
        return f

    def remat(layer):
        return jax.checkpoint(layer, policy=policy, prevent_cse=False)

    dev_w = (jax.ShapeDtypeStruct((10, 256, 1024), jnp.float32),
             jax.ShapeDtypeStruct((10, 1024, 256), jnp.float32))
    host = jax.sharding.SingleDeviceSharding(jax.devices("cpu")[0], memory_kind="pinned_host")
    host_w = tuple(jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=host) for a in dev_w)
    x = jax.ShapeDtypeStruct((256, 256), jnp.float32)
    return {
        "baseline": (jax.jit(jax.grad(total(plain))), dev_w, x),
        "offload_x": (jax.jit(jax.grad(total(remat(named)))), dev_w, x),
        "offload_x_and_params": (jax.jit(jax.grad(total(remat(params_from_host)))), host_w, x),
    }


def run(target: str) -> list[dict[str, Any]]:
    """One row per tutorial program: the plan's temp/argument/total (MiB) beside the tutorial's."""
    from overlap.analysis.memory import memory_analysis_peak
    from overlap.plan.compile import plan_step

    rows = []
    for name, (fn, w, x) in _programs().items():
        (p,) = plan_step(fn, w, x, target=target)
        mem = p.manifest.get("memory_analysis") or {}
        peak = memory_analysis_peak(mem) if mem else None
        pub = PUBLISHED[name]
        rows.append({
            "target": target, "program": name, "status": p.status,
            "temp_MiB": None if not mem else mem["temp_size_in_bytes"] / MiB,
            "argument_MiB": None if not mem else mem["argument_size_in_bytes"] / MiB,
            "total_MiB": None if peak is None else peak / MiB,
            "host_temp_MiB": None if not mem else mem.get("host_temp_size_in_bytes", 0) / MiB,
            "host_argument_MiB": None if not mem else
            mem.get("host_argument_size_in_bytes", 0) / MiB,
            "published_temp_MiB": pub[0], "published_argument_MiB": pub[1],
            "published_total_MiB": pub[2],
            "d2h_bytes_per_step": ((p.manifest.get("offload_inventory") or {}).get("D2H")
                                   or {}).get("executed_bytes"),
            "notes": p.manifest.get("notes") or [],
        })
    return rows


def main(argv: list[str]) -> int:
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    targets = argv or ["h100", "v5e"]
    print(f"{'target':<7}{'program':<22}{'temp':>8}{'(pub.)':>8}{'arg':>8}{'(pub.)':>8}"
          f"{'total':>8}{'(pub.)':>8}{'host temp':>11}{'host arg':>10}   MiB")
    for t in targets:
        for r in run(t):
            def f(v: Any) -> str:
                return "-" if v is None else f"{v:.2f}"
            print(f"{t:<7}{r['program']:<22}{f(r['temp_MiB']):>8}{f(r['published_temp_MiB']):>8}"
                  f"{f(r['argument_MiB']):>8}{f(r['published_argument_MiB']):>8}"
                  f"{f(r['total_MiB']):>8}{f(r['published_total_MiB']):>8}"
                  f"{f(r['host_temp_MiB']):>11}{f(r['host_argument_MiB']):>10}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
