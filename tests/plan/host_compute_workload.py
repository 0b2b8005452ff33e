"""TEST ONLY workload: a step that asks XLA to run part of it on the host
(`compute_on("device_host")`), for the host-compute gate (issue 33 item 3). Used as
`tests.plan.host_compute_workload:make`."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.experimental.compute_on import compute_on

from overlap.capture.workloads import Workload


def make(policy, size):
    @compute_on("device_host")
    @jax.jit
    def on_host(x):
        return x * 2.0 + 1.0

    @jax.jit
    def step(s, b):
        y = on_host(s) + b
        return y, jnp.sum(y)

    x = jnp.ones((1024,), jnp.float32)
    return Workload(step, x, x, "TEST ONLY: y = (2x + 1 on the host) + b, f32[1024]")
