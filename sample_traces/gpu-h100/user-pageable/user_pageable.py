"""A user's input pipeline: numpy batches put on the GPU each step (pageable H2D), a pinned_host
staging buffer (pinned H2D), and results fetched with jax.device_get (D2H), under plain jax.profiler.
usage: user_pageable.py LOGDIR"""
import sys, time
import numpy as np, jax, jax.numpy as jnp
logdir = sys.argv[1]
d = jax.devices()[0]
pinned = jax.sharding.SingleDeviceSharding(d, memory_kind="pinned_host")
devs = jax.sharding.SingleDeviceSharding(d, memory_kind="device")
w = jax.device_put(jnp.ones((8192, 8192), jnp.bfloat16), devs)
@jax.jit
def work(x, w):
    y = x
    for _ in range(8):
        y = jnp.tanh(y @ w)
    return y
batch_np = np.random.default_rng(0).standard_normal((8192, 8192), dtype=np.float32).astype(jnp.bfloat16)  # 128 MiB pageable
staged = jax.device_put(batch_np, pinned); staged.block_until_ready()
for _ in range(3):
    work(jax.device_put(batch_np, devs), w).block_until_ready()
with jax.profiler.trace(logdir):
    for i in range(5):
        with jax.profiler.StepTraceAnnotation("train", step_num=i):
            x1 = jax.device_put(batch_np, devs)          # pageable H2D
            x2 = jax.device_put(staged, devs)            # pinned H2D
            y = work(x1, w) + work(x2, w)
            out = jax.device_get(y[:1024])               # D2H to numpy (pageable)
print("ok", float(out[0, 0]))
