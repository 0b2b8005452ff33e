"""Real captures of shapes no file in the repository had (issue 32), made with plain
jax.profiler.trace (not overlap's capture API), XLA's default flags (command buffers on):

* `buckets`: a scanned MLP that offloads its activations (save_and_offload_only_these_names),
  jitted for N batch sizes, as a loader that buckets sequence lengths makes it: N compiled
  programs with host copies in one capture, each program's HloProto in `/host:metadata`.
* `eager`: a loop of op-by-op dispatch (each jnp call its own tiny program) over M distinct
  shapes, with explicit `jax.device_put` to and from pinned host memory each step: thousands of
  programs and transfers that no compiled program made.

    python benchmarks/device/programs_capture.py buckets LOGDIR N SIZE   # SIZE: gpu | tiny
    python benchmarks/device/programs_capture.py eager LOGDIR M SIZE
"""
# (one line per line as when the captures were made: their stack frames name these lines)
import json
import sys
import time

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

kind, logdir, count, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
dt = jnp.bfloat16
dev = jax.devices()[0]
kinds = {m.kind for m in dev.addressable_memories()}
host_kind = "pinned_host" if "pinned_host" in kinds else "unpinned_host"


def buckets():
    L, D, H, B0 = {"gpu": (6, 1024, 4096, 1024), "tiny": (2, 16, 32, 8)}[size]
    pol = jax.checkpoint_policies.save_and_offload_only_these_names(
        names_which_can_be_saved=[], names_which_can_be_offloaded=["act"],
        offload_src="device", offload_dst=host_kind)

    def layer(x, w):
        w1, w2 = w
        a = checkpoint_name(jnp.tanh(x @ w1), "act")
        return x + (a @ w2) * 0.1, None

    def loss(ws, x):
        y, _ = jax.lax.scan(jax.checkpoint(layer, policy=pol), x, ws)
        return jnp.mean(jnp.square(y.astype(jnp.float32)))

    @jax.jit
    def train_step(ws, x):
        val, g = jax.value_and_grad(loss)(ws, x)
        return jax.tree.map(lambda w, gw: w - 1e-3 * gw.astype(w.dtype), ws, g), val

    k1, k2, k3 = jax.random.split(jax.random.key(0), 3)
    ws = ((jax.random.normal(k1, (L, D, H)) / D**0.5).astype(dt),
          (jax.random.normal(k2, (L, H, D)) / H**0.5).astype(dt))
    sizes = [B0 + 64 * i for i in range(count)]
    xs = [jax.random.normal(k3, (b, D)).astype(dt) for b in sizes]
    t0 = time.perf_counter()
    for x in xs:  # compiled before the trace: the capture holds the runs, not the compiles
        ws, val = train_step(ws, x)
    val.block_until_ready()
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    with jax.profiler.trace(logdir):
        for rep in range(2):
            for i, x in enumerate(xs):
                with jax.profiler.StepTraceAnnotation("train", step_num=rep * count + i):
                    ws, val = train_step(ws, x)
                    val.block_until_ready()
    return {"programs": count, "batch_sizes": [sizes[0], sizes[-1]], "L_D_H": [L, D, H],
            "compile_s": compile_s, "profiled_s": time.perf_counter() - t0, "loss": float(val)}


def eager():
    D = {"gpu": 2048, "tiny": 16}[size]
    on_host = jax.sharding.SingleDeviceSharding(dev, memory_kind=host_kind)
    on_dev = jax.sharding.SingleDeviceSharding(dev, memory_kind="device")
    key = jax.random.key(1)
    xs = [jax.random.normal(jax.random.fold_in(key, i), (D // 8 + i, D)).astype(dt)
          for i in range(count)]
    w = jax.random.normal(key, (D, D)).astype(dt)
    acc = jnp.zeros((), jnp.float32)
    t0 = time.perf_counter()
    with jax.profiler.trace(logdir):
        for i, x in enumerate(xs):
            with jax.profiler.StepTraceAnnotation("eager", step_num=i):
                y = jnp.tanh(x @ w)                     # op by op: a program per shape
                h = jax.device_put(y, on_host)          # an explicit D2H copy
                y2 = jax.device_put(h, on_dev)          # and back (H2D)
                acc = acc + jnp.mean(y2.astype(jnp.float32))
                acc.block_until_ready()
    return {"shapes": count, "D": D, "profiled_s": time.perf_counter() - t0,
            "acc": float(acc)}


out = {"buckets": buckets, "eager": eager}[kind]()
out.update(kind=kind, size=size, host_memory_kind=host_kind, jax=jax.__version__,
           devices=[str(d) for d in jax.devices()])
print(json.dumps(out))
