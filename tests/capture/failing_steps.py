"""Workload makers for tests/capture/test_failures.py: one jitted step per policy, where
`everything_saveable` asks for more memory than the test's address-space limit allows and
`minimal` raises inside the step at run time (a host callback that throws)."""

import jax
import jax.numpy as jnp
import numpy as np

from overlap.capture.workloads import Workload

# 4 GiB of f32 in one output buffer: XLA:CPU allocates it when the step runs, and fails with
# RESOURCE_EXHAUSTED under an address-space limit below it.
BIG_ROWS = 1 << 20
COLS = 1024


def _boom(x):
    raise RuntimeError("the user's host callback failed")


def by_policy(policy, size):
    if policy.name == "everything_saveable":
        def step(state, batch):
            return state + 1, jnp.broadcast_to(batch[None, :], (BIG_ROWS, COLS)) + state[0]
    elif policy.name == "minimal":
        def step(state, batch):
            out = jax.pure_callback(_boom, jax.ShapeDtypeStruct((), jnp.float32), batch.sum())
            return state + out, out
    else:
        def step(state, batch):
            return state + 1, jnp.sum(state * batch)
    return Workload(jax.jit(step), jnp.zeros(COLS, jnp.float32),
                    jnp.asarray(np.arange(COLS, dtype=np.float32)), "a step per policy")


def big_state(policy, size):
    """`everything_saveable` builds a state too big for the limit (it fails before compiling)."""
    rows = BIG_ROWS if policy.name == "everything_saveable" else 1
    return Workload(jax.jit(lambda s, b: (s + 1, jnp.sum(s))), jnp.ones((rows, COLS)),
                    jnp.ones(COLS), "a state per policy")
