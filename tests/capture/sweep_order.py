"""Workload makers for tests/capture/test_sweep_timing.py: plain (unjitted) jax steps that log
which policy ran each call, so the sweep's timing order is visible."""

import jax.numpy as jnp

from overlap.capture.workloads import Workload

CALLS: list[str] = []


def logged(policy, size):
    def step(state, batch):
        CALLS.append(policy.name)
        return state + batch, jnp.sum(state)

    return Workload(step, jnp.zeros(4), jnp.ones(4), "a step that logs its policy")


def shape_by_policy(policy, size):
    """State shape depends on the policy: no state fits every step, so no interleaving."""
    n = 4 if policy.name == "full" else 8

    def step(state, batch):
        CALLS.append(policy.name)
        return state + 1, jnp.sum(state)

    return Workload(step, jnp.zeros(n), jnp.ones(n), "state shaped by the policy")
