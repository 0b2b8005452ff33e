"""A user's training loop profiled with JAX's Python tracer on (issue 32): every Python call of
the loop and of JAX's dispatch becomes a host event, the shape of a capture made with
`ProfileOptions(python_tracer_level=1)`, which no real capture in the repository had.
Activation offload of a scanned MLP with save_and_offload_only_these_names, a numpy batch
made in Python each step, plain jax.profiler.trace (not overlap's capture API).

    python benchmarks/device/pytracer_capture.py LOGDIR STEPS SIZE   # SIZE: gpu | tiny
"""
import functools
import json
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax.ad_checkpoint import checkpoint_name

logdir, steps, size = sys.argv[1], int(sys.argv[2]), sys.argv[3]
L, B, D, H = {"gpu": (8, 4096, 1024, 8192), "tiny": (2, 32, 16, 64)}[size]
dt = jnp.bfloat16
pol = jax.checkpoint_policies.save_and_offload_only_these_names(
    names_which_can_be_saved=[], names_which_can_be_offloaded=["act"],
    offload_src="device", offload_dst="pinned_host")


def layer(x, w):
    w1, w2 = w
    a = checkpoint_name(jnp.tanh(x @ w1), "act")
    return x + (a @ w2) * 0.1, None


def loss(ws, x):
    y, _ = jax.lax.scan(jax.checkpoint(layer, policy=pol), x, ws)
    return jnp.mean(jnp.square(y.astype(jnp.float32)))


@functools.partial(jax.jit, donate_argnums=0)
def train_step(ws, x):
    val, g = jax.value_and_grad(loss)(ws, x)
    return jax.tree.map(lambda w, gw: w - 1e-3 * gw.astype(w.dtype), ws, g), val


def batch(rng, i):
    # a small Python-side pipeline: what a user's loader does between steps
    parts = [rng.standard_normal((B // 4, D), dtype=np.float32) * (1 + 0.01 * j) for j in range(4)]
    return jnp.asarray(np.concatenate(parts) + i * 1e-3, dtype=dt)


k1, k2 = jax.random.split(jax.random.key(0))
ws = ((jax.random.normal(k1, (L, D, H)) / D**0.5).astype(dt),
      (jax.random.normal(k2, (L, H, D)) / H**0.5).astype(dt))
rng = np.random.default_rng(0)
for i in range(3):
    ws, val = train_step(ws, batch(rng, i))
    val.block_until_ready()
opts = jax.profiler.ProfileOptions()
opts.python_tracer_level = 1
opts.host_tracer_level = 2
t0 = time.perf_counter()
with jax.profiler.trace(logdir, profiler_options=opts):
    for i in range(steps):
        with jax.profiler.StepTraceAnnotation("train", step_num=i):
            ws, val = train_step(ws, batch(rng, i))
            val.block_until_ready()
print(json.dumps({"steps": steps, "size": size, "L_B_D_H": [L, B, D, H],
                  "profiled_s": time.perf_counter() - t0, "loss": float(val),
                  "jax": jax.__version__, "devices": [str(d) for d in jax.devices()]}))
