"""Built-in training-step workloads, and the protocol a user's own workload follows.

Protocol
--------
A workload *maker* is a function ``make(policy, size) -> Workload``:

* ``policy`` – a policy name or :class:`overlap.capture.policies.Policy` (see
  :mod:`overlap.capture.policies`); the maker applies it with ``policy.wrap(layer_fn)``
  inside its ``lax.scan`` over layers.
* ``size`` – a size name the maker understands (built-ins: ``tiny``, ``small``, ``h100``,
  ``control``); a maker that has no sizes may ignore it.

A :class:`Workload` holds:

* ``step_fn`` – a **jitted** function ``step_fn(state, batch) -> (new_state, loss)``; one call is
  one full training step (forward, backward, optimizer update). The capture threads ``state``
  through successive calls, so ``step_fn`` may donate it (the built-ins do: ``donate_argnums=0``,
  which is what real training loops do and what makes the memory figures realistic). Being jitted,
  it offers ``step_fn.lower(state, batch).compile()``, which the capture uses for
  ``memory_analysis()`` and the compiled HLO.
* ``init_state`` and ``batch`` – device (or pinned-host) arrays for the first call.
* ``description`` – one line for the manifest and the report.
* ``loss_and_grad`` (optional) – a function ``(state, batch) -> (loss, grads)``: the step's
  loss and its gradients under the policy, without the update (``jax.value_and_grad`` of the
  same loss). The capture records the loss and a fingerprint of the gradients
  (:mod:`overlap.capture.answers`) so that ``overlap compare`` can tell a policy that computes
  another answer; without it the run's answer is "not recorded". The built-ins give it.
* ``notes`` – caveats (e.g. "parameters stayed on device: backend has no pinned_host").

On the command line a workload is ``NAME[:SIZE]`` for a built-in (default size ``tiny``) or
``module:function[:SIZE]`` for a user maker (``function`` is called as above). A user maker may
also return a tuple ``(step_fn, init_state, batch[, description])``.

Built-ins
---------
* ``scan`` – the JAX host-offloading tutorial's 10-layer scan: ``x`` 256x256, ``w1`` 10x256x1024,
  ``w2`` 10x1024x256, f32 (``tiny``); the per-layer input is tagged ``"x"`` so
  ``offload:x`` is the tutorial's policy. Too small to say anything about overlap; it shows that
  copies appear and what memory they save.
* ``transformer`` – a decoder-only transformer (RMSNorm, causal multi-head attention, fused gated
  SiLU MLP, untied embeddings) scanned over layers, with MaxText's ``checkpoint_name`` tags
  (``query_proj``, ``key_proj``, ``value_proj``, ``context``, ``out_proj``, ``mlpwi``,
  ``mlpwo``), next-token cross-entropy and an Adam update (f32 moments). Sizes:

  ====== ===== ====== ====== ===== ===== ======= ===== =====
  size   width MLP    layers heads seq   vocab   batch dtype
  ====== ===== ====== ====== ===== ===== ======= ===== =====
  tiny   64    128    2      4     32    256     2     f32
  small  256   1024   4      4     256   1024    4     f32
  h100   4096  11008  8      32    2048  32000   4     bf16
  control 2048 5632   8      16    2048  32000   4     bf16
  ====== ===== ====== ====== ===== ===== ======= ===== =====

  ``h100`` is MaxText's llama2-7b cut to 8 layers (~1.9 B parameters: 3.8 GB bf16 weights,
  15 GB of f32 Adam moments); under ``full`` remat it keeps one layer's recompute live
  (attention scores 4x32x2048x2048 f32 = 2 GiB) and fits an 80 GB H100 with room to spare.
  ``control`` halves the width: per-layer activations shrink 2x while per-layer matmul time
  shrinks 4x, so transfers have less compute to hide behind – the negative control in which
  offload should not pay.
* ``params`` – ``transformer`` with parameters and optimizer state resident in ``pinned_host``
  memory (MaxText's ``parameter_memory_host_offload`` + ``optimizer_memory_host_offload`` in
  spirit): each step copies them to the device, updates, and copies them back, so
  parameter/optimizer transfer patterns appear. On a backend without a ``pinned_host`` memory the
  state stays on device and ``notes`` says so. On XLA:CPU the placement works but the compiler
  turns the copies into no-ops, so only the GPU shows the transfers.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import math
from typing import Any, Callable

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

from overlap.capture.policies import Policy, get_policy

DEFAULT_SIZE = "tiny"


@dataclasses.dataclass
class Workload:
    """One training step, ready to run: ``state, loss = step_fn(state, batch)``."""

    step_fn: Callable
    init_state: Any
    batch: Any
    description: str
    name: str = ""
    size: str = ""
    policy: str = ""
    notes: list[str] = dataclasses.field(default_factory=list)
    # Caveats about the device the workload was built on (e.g. XLA:CPU compiling copies away):
    # true of a capture on that device, not of a plan compiled for another target.
    device_notes: list[str] = dataclasses.field(default_factory=list)
    # Memory kind every leaf of `init_state` lives in ("pinned_host" for `params`); None for
    # device memory. Said here because `jax.eval_shape`, which plans use so that no parameter
    # is materialised, drops shardings and with them the memory kind.
    state_memory_kind: str | None = None
    # Optional: ``loss_and_grad(state, batch) -> (loss, grads)``, the step's loss and its
    # gradients under the policy without the update; what `overlap.capture.answers` records so
    # that policies can be checked to compute the same answer. None: not recorded.
    loss_and_grad: Callable | None = None

    def manifest(self) -> dict:
        return {"name": self.name, "size": self.size, "policy": self.policy,
                "description": self.description,
                "notes": list(self.notes) + list(self.device_notes)}


# ---------------------------------------------------------------------------------------------
# scan: the host-offloading tutorial
# ---------------------------------------------------------------------------------------------

_SCAN_SIZES = {
    # (rows of x, width, hidden, layers)
    "tiny": (256, 256, 1024, 10),
    "small": (1024, 1024, 4096, 10),
    "h100": (8192, 4096, 16384, 10),
    "control": (8192, 1024, 4096, 10),
}


def make_scan(policy: str | Policy, size: str = DEFAULT_SIZE) -> Workload:
    pol = get_policy(policy)
    n, d, h, layers = _lookup(_SCAN_SIZES, "scan", size)

    def layer(x, w):
        w1, w2 = w
        x = checkpoint_name(x, "x")
        # sin keeps the layers from collapsing into one matmul and makes x a real residual.
        return jnp.sin(x @ w1) @ w2, None

    def loss_fn(ws, x):
        y, _ = jax.lax.scan(pol.wrap(layer), x, ws)
        return jnp.mean(y * y)

    @functools.partial(jax.jit, donate_argnums=0)
    def step(ws, x):
        loss, grads = jax.value_and_grad(loss_fn)(ws, x)
        return jax.tree.map(lambda w, g: w - 1e-3 * g, ws, grads), loss

    k1, k2, k3 = jax.random.split(jax.random.key(0), 3)
    ws = (jax.random.normal(k1, (layers, d, h)) / math.sqrt(d),
          jax.random.normal(k2, (layers, h, d)) / math.sqrt(h))
    x = jax.random.normal(k3, (n, d))
    return Workload(step, ws, x, name="scan", size=size, policy=pol.name,
                    loss_and_grad=jax.jit(jax.value_and_grad(loss_fn)),
                    description=f"tutorial scan: {layers} layers, x {n}x{d}, w1 {layers}x{d}x{h}, "
                                f"w2 {layers}x{h}x{d}, f32, SGD; offloadable name 'x'")


# ---------------------------------------------------------------------------------------------
# transformer
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class TransformerConfig:
    width: int
    mlp: int
    layers: int
    heads: int
    seq: int
    vocab: int
    batch: int
    dtype: str

    @property
    def head_dim(self) -> int:
        return self.width // self.heads

    def n_params(self) -> int:
        per_layer = 4 * self.width * self.width + 3 * self.width * self.mlp + 2 * self.width
        return self.layers * per_layer + 2 * self.vocab * self.width + self.width


TRANSFORMER_SIZES = {
    "tiny": TransformerConfig(64, 128, 2, 4, 32, 256, 2, "float32"),
    "small": TransformerConfig(256, 1024, 4, 4, 256, 1024, 4, "float32"),
    "h100": TransformerConfig(4096, 11008, 8, 32, 2048, 32000, 4, "bfloat16"),
    "control": TransformerConfig(2048, 5632, 8, 16, 2048, 32000, 4, "bfloat16"),
}


def _rms_norm(x, scale):
    x32 = x.astype(jnp.float32)
    y = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + 1e-6)
    return (y * scale).astype(x.dtype)


def _decoder_layer(cfg: TransformerConfig, x, p):
    b, s, _ = x.shape
    h = _rms_norm(x, p["ln1"])
    q = checkpoint_name(h @ p["wq"], "query_proj")
    k = checkpoint_name(h @ p["wk"], "key_proj")
    v = checkpoint_name(h @ p["wv"], "value_proj")
    q, k, v = (t.reshape(b, s, cfg.heads, cfg.head_dim) for t in (q, k, v))
    scores = jnp.einsum("bqhd,bkhd->bhqk", q, k).astype(jnp.float32) / math.sqrt(cfg.head_dim)
    causal = jnp.tril(jnp.ones((s, s), dtype=bool))
    scores = jnp.where(causal, scores, jnp.finfo(jnp.float32).min)
    probs = jax.nn.softmax(scores, axis=-1).astype(x.dtype)
    ctx = jnp.einsum("bhqk,bkhd->bqhd", probs, v).reshape(b, s, cfg.width)
    ctx = checkpoint_name(ctx, "context")
    x = x + checkpoint_name(ctx @ p["wo"], "out_proj")
    h = _rms_norm(x, p["ln2"])
    # Fused gate+up projection, MaxText's "mlpwi" (fused_mlp); split after tagging.
    wi = checkpoint_name(h @ p["wi"], "mlpwi")
    gate, up = jnp.split(wi, 2, axis=-1)
    x = x + checkpoint_name((jax.nn.silu(gate) * up) @ p["wo_mlp"], "mlpwo")
    return x


def _init_params(cfg: TransformerConfig, key):
    dt = jnp.dtype(cfg.dtype)
    d, f, L = cfg.width, cfg.mlp, cfg.layers
    ks = jax.random.split(key, 8)

    def normal(k, shape, fan_in):
        return (jax.random.normal(k, shape, jnp.float32) / math.sqrt(fan_in)).astype(dt)

    return {
        "embed": normal(ks[0], (cfg.vocab, d), 1.0),
        "unembed": normal(ks[1], (d, cfg.vocab), d),
        "final_ln": jnp.ones((d,), dt),
        "layers": {
            "ln1": jnp.ones((L, d), dt),
            "wq": normal(ks[2], (L, d, d), d),
            "wk": normal(ks[3], (L, d, d), d),
            "wv": normal(ks[4], (L, d, d), d),
            "wo": normal(ks[5], (L, d, d), d),
            "ln2": jnp.ones((L, d), dt),
            "wi": normal(ks[6], (L, d, 2 * f), d),
            "wo_mlp": normal(ks[7], (L, f, d), f),
        },
    }


def _transformer_loss(cfg: TransformerConfig, pol: Policy, params, batch):
    x = params["embed"][batch["inputs"]]
    body = pol.wrap(functools.partial(_decoder_layer, cfg))
    x, _ = jax.lax.scan(lambda c, p: (body(c, p), None), x, params["layers"])
    x = _rms_norm(x, params["final_ln"])
    logits = (x @ params["unembed"]).astype(jnp.float32)
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, batch["targets"][..., None], axis=-1))


def _adam(params, grads, mu, nu, count, lr=1e-4, b1=0.9, b2=0.95, eps=1e-8):
    count = count + 1
    mu = jax.tree.map(lambda m, g: b1 * m + (1 - b1) * g.astype(jnp.float32), mu, grads)
    nu = jax.tree.map(lambda v, g: b2 * v + (1 - b2) * jnp.square(g.astype(jnp.float32)), nu, grads)
    c1 = 1 - b1 ** count.astype(jnp.float32)
    c2 = 1 - b2 ** count.astype(jnp.float32)
    params = jax.tree.map(
        lambda p, m, v: (p.astype(jnp.float32)
                         - lr * (m / c1) / (jnp.sqrt(v / c2) + eps)).astype(p.dtype),
        params, mu, nu)
    return params, mu, nu, count


def _init_state(cfg: TransformerConfig, key):
    params = _init_params(cfg, key)
    zeros = jax.tree.map(lambda p: jnp.zeros(p.shape, jnp.float32), params)
    return {"params": params, "mu": zeros, "nu": jax.tree.map(jnp.copy, zeros),
            "count": jnp.zeros((), jnp.int32)}


def _make_batch(cfg: TransformerConfig, key):
    tokens = jax.random.randint(key, (cfg.batch, cfg.seq + 1), 0, cfg.vocab, jnp.int32)
    return {"inputs": tokens[:, :-1], "targets": tokens[:, 1:]}


def _describe(cfg: TransformerConfig) -> str:
    return (f"decoder transformer: width {cfg.width}, MLP {cfg.mlp}, {cfg.layers} layers, "
            f"{cfg.heads} heads, seq {cfg.seq}, vocab {cfg.vocab}, batch {cfg.batch}, {cfg.dtype}, "
            f"{cfg.n_params() / 1e6:.1f} M params, Adam")


def make_transformer(policy: str | Policy, size: str = DEFAULT_SIZE) -> Workload:
    pol = get_policy(policy)
    cfg = _lookup(TRANSFORMER_SIZES, "transformer", size)

    def train_step(state, batch):
        loss, grads = jax.value_and_grad(functools.partial(_transformer_loss, cfg, pol))(
            state["params"], batch)
        params, mu, nu, count = _adam(state["params"], grads, state["mu"], state["nu"],
                                      state["count"])
        return {"params": params, "mu": mu, "nu": nu, "count": count}, loss

    key_p, key_b = jax.random.split(jax.random.key(0))
    # Initialise on the device inside jit: the h100 state (~23 GB) must never pass through numpy.
    state = jax.jit(functools.partial(_init_state, cfg))(key_p)
    batch = _make_batch(cfg, key_b)
    step = jax.jit(train_step, donate_argnums=0)

    @jax.jit
    def loss_and_grad(state, batch):
        return jax.value_and_grad(functools.partial(_transformer_loss, cfg, pol))(
            state["params"], batch)

    return Workload(step, state, batch, description=_describe(cfg), name="transformer",
                    size=size, policy=pol.name, loss_and_grad=loss_and_grad)


def pinned_host_support(device=None) -> tuple[bool, str]:
    """Whether `device` has a pinned_host memory that placement can target, and why not."""
    device = device or jax.devices()[0]
    try:
        kinds = {m.kind for m in device.addressable_memories()}
    except Exception as e:  # older/odd plugins: no memories API at all
        return False, f"{device.platform} device exposes no memories ({type(e).__name__}: {e})"
    if "pinned_host" not in kinds:
        return False, f"{device.platform} device has no pinned_host memory (has {sorted(kinds)})"
    return True, ""


def make_params_offloaded(policy: str | Policy, size: str = DEFAULT_SIZE) -> Workload:
    """``transformer`` with parameters and Adam state living in pinned_host memory."""
    pol = get_policy(policy)
    cfg = _lookup(TRANSFORMER_SIZES, "params", size)
    dev = jax.devices()[0]
    ok, why = pinned_host_support(dev)
    device_notes: list[str] = []
    if not ok:
        w = make_transformer(pol, size)
        w.name = "params"
        w.device_notes.append(f"parameters and optimizer state stayed on device: {why}")
        return w
    if dev.platform == "cpu":
        device_notes.append("XLA:CPU compiles pinned_host<->device copies away: the placement "
                            "is real, but no transfers will show in the trace")
    host = jax.sharding.SingleDeviceSharding(dev, memory_kind="pinned_host")

    def train_step(state, batch):
        # Explicit H2D of the whole state, update on device, explicit D2H back: the transfer
        # pattern of parameter + optimizer-state offload (MaxText moves them the same way).
        # Memory spaces, not shardings: the step names no device, so `overlap plan` can compile
        # it for an H100 or a TPU (a sharding would tie it to this machine's device).
        state = jax.device_put(state, jax.memory.Space.Device)
        loss, grads = jax.value_and_grad(functools.partial(_transformer_loss, cfg, pol))(
            state["params"], batch)
        params, mu, nu, count = _adam(state["params"], grads, state["mu"], state["nu"],
                                      state["count"])
        new = {"params": params, "mu": mu, "nu": nu, "count": count}
        return jax.device_put(new, jax.memory.Space.Host), loss

    key_p, key_b = jax.random.split(jax.random.key(0))
    state_shape = jax.eval_shape(functools.partial(_init_state, cfg), key_p)
    host_tree = jax.tree.map(lambda _: host, state_shape)
    state = jax.jit(functools.partial(_init_state, cfg), out_shardings=host_tree)(key_p)
    batch = _make_batch(cfg, key_b)
    step = jax.jit(train_step, donate_argnums=0)

    @jax.jit
    def loss_and_grad(state, batch):
        params = jax.device_put(state["params"], jax.memory.Space.Device)
        return jax.value_and_grad(functools.partial(_transformer_loss, cfg, pol))(params, batch)

    return Workload(step, state, batch, name="params", size=size, policy=pol.name,
                    loss_and_grad=loss_and_grad,
                    device_notes=device_notes, state_memory_kind="pinned_host",
                    description=_describe(cfg) + "; params+optimizer state in pinned_host")


# ---------------------------------------------------------------------------------------------
# Resolution
# ---------------------------------------------------------------------------------------------

BUILTINS: dict[str, Callable[..., Workload]] = {
    "scan": make_scan,
    "transformer": make_transformer,
    "params": make_params_offloaded,
}


def _lookup(table: dict, name: str, size: str):
    try:
        return table[size]
    except KeyError:
        raise ValueError(
            f"workload {name!r} has no size {size!r}; valid: {', '.join(table)}") from None


def parse_spec(spec: str) -> tuple[Callable[..., Any], str, str]:
    """``NAME[:SIZE]`` or ``module:function[:SIZE]`` -> (maker, display name, size)."""
    parts = spec.split(":")
    if parts[0] in BUILTINS:
        if len(parts) > 2:
            raise ValueError(f"workload {spec!r}: expected NAME[:SIZE]")
        size = parts[1] if len(parts) == 2 and parts[1] else DEFAULT_SIZE
        return BUILTINS[parts[0]], parts[0], size
    if len(parts) not in (2, 3) or not all(parts[:2]):
        raise ValueError(f"unknown workload {spec!r}; built-ins: {', '.join(BUILTINS)} "
                         "(NAME[:SIZE]), or module:function[:SIZE] for your own maker")
    module_name, fn_name = parts[0], parts[1]
    size = parts[2] if len(parts) == 3 and parts[2] else DEFAULT_SIZE
    # A module is a dotted name, never a path: `../x` would be a relative import (TypeError in
    # importlib) and `/tmp/x` nothing importable.
    if not all(p.isidentifier() for p in module_name.split(".")) or not fn_name.isidentifier():
        raise ValueError(f"workload {spec!r}: expected module:function with a dotted module "
                         "name (pkg.mod:make_step), not a path")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ValueError(f"workload {spec!r}: cannot import {module_name!r}: {e}") from e
    fn = getattr(module, fn_name, None)
    if not callable(fn):
        raise ValueError(f"workload {spec!r}: {module_name} has no callable {fn_name!r}")
    return fn, f"{module_name}:{fn_name}", size


# Names each built-in tags with `checkpoint_name`: what a policy can save or offload there.
CHECKPOINT_NAMES = {
    "scan": ("x",),
    "transformer": ("query_proj", "key_proj", "value_proj", "context", "out_proj", "mlpwi",
                    "mlpwo"),
    "params": ("query_proj", "key_proj", "value_proj", "context", "out_proj", "mlpwi",
               "mlpwo"),
}


def load_workload(spec: str, policy: str | Policy) -> Workload:
    """Build the workload `spec` under `policy` (see the module docstring)."""
    maker, name, size = parse_spec(spec)
    pol = get_policy(policy)
    known = CHECKPOINT_NAMES.get(name)
    # Presets (MaxText's) name aliases on purpose; a user's own offload:/save: list must match.
    if known is not None and pol.name.startswith(("offload:", "save:")):
        # A name the workload never tags would be a silent no-op policy: refuse it.
        unknown = sorted((set(pol.saved) | set(pol.offloaded)) - set(known))
        if unknown:
            raise ValueError(f"policy {pol.name!r} names {', '.join(map(repr, unknown))}, which "
                             f"workload {name!r} never tags; its checkpoint names: "
                             f"{', '.join(known)}")
    try:
        out = maker(pol, size)
    except TypeError as e:  # e.g. `os:getcwd`: a callable that is not a workload maker
        raise ValueError(f"workload {spec!r}: calling {name}(policy, size) failed ({e}); a "
                         "maker takes (policy, size) and returns a Workload") from None
    if isinstance(out, tuple):
        if len(out) not in (3, 4):
            raise ValueError(f"workload {spec!r} returned a {len(out)}-tuple; expected a Workload "
                             "or (step_fn, init_state, batch[, description])")
        out = Workload(out[0], out[1], out[2], out[3] if len(out) == 4 else name)
    if not isinstance(out, Workload):
        raise ValueError(f"workload {spec!r} returned {type(out).__name__}, not a Workload")
    out.name = out.name or name
    out.size = out.size or size
    out.policy = out.policy or pol.name
    return out
