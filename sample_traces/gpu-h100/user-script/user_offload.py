"""A user's own training script (not overlap's capture API): activation offload with JAX's
save_and_offload_only_these_names in a scanned MLP stack, profiled with plain jax.profiler.
usage: user_offload.py LOGDIR POLICY SIZE   (POLICY: offload | remat | save; SIZE: balanced | linkbound | tiny)"""
import functools, json, sys, time
import jax, jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

logdir, policy_name, size = sys.argv[1], sys.argv[2], sys.argv[3]
L, B, D, H = {"balanced": (16, 4096, 4096, 16384), "linkbound": (16, 8192, 1024, 16384),
              "tiny": (4, 64, 32, 128)}[size]
dt = jnp.bfloat16
pol = {"offload": jax.checkpoint_policies.save_and_offload_only_these_names(
           names_which_can_be_saved=[], names_which_can_be_offloaded=["act"],
           offload_src="device", offload_dst="pinned_host"),
       "remat": jax.checkpoint_policies.nothing_saveable,
       "save": jax.checkpoint_policies.save_only_these_names("act")}[policy_name]

def layer(x, w):
    w1, w2 = w
    a = checkpoint_name(jnp.tanh(x @ w1), "act")   # B x H per layer: what is offloaded
    return x + (a @ w2) * 0.1, None

def loss(ws, x):
    y, _ = jax.lax.scan(jax.checkpoint(layer, policy=pol), x, ws)
    return jnp.mean(jnp.square(y.astype(jnp.float32)))

@functools.partial(jax.jit, donate_argnums=0)
def train_step(ws, x):
    l, g = jax.value_and_grad(loss)(ws, x)
    return jax.tree.map(lambda w, gw: w - 1e-3 * gw.astype(w.dtype), ws, g), l

k1, k2, k3 = jax.random.split(jax.random.key(0), 3)
ws = ((jax.random.normal(k1, (L, D, H)) / D**0.5).astype(dt), (jax.random.normal(k2, (L, H, D)) / H**0.5).astype(dt))
x = jax.random.normal(k3, (B, D)).astype(dt)
for _ in range(3):
    ws, l = train_step(ws, x); l.block_until_ready()
t_unprof = []
for _ in range(5):
    t = time.perf_counter(); ws, l = train_step(ws, x); l.block_until_ready(); t_unprof.append(time.perf_counter() - t)
with jax.profiler.trace(logdir):
    for i in range(5):
        with jax.profiler.StepTraceAnnotation("train", step_num=i):
            ws, l = train_step(ws, x); l.block_until_ready()
mem = train_step.lower(ws, x).compile().memory_analysis()
print(json.dumps({"policy": policy_name, "size": size, "L_B_D_H": [L, B, D, H],
                  "offloaded_bytes_per_step_fwd": L * B * H * 2 if policy_name == "offload" else 0,
                  "step_s_unprofiled": sorted(t_unprof), "loss": float(l),
                  "temp_bytes": getattr(mem, "temp_size_in_bytes", None),
                  "host_temp_bytes": getattr(mem, "host_temp_size_in_bytes", None)}))
