"""Remat and host-offload policies by name, so a sweep can say `--policy qkv_proj_offloaded`.

A *policy* decides, for every intermediate of a layer's forward pass, whether the backward pass
finds it saved in device memory, offloaded to pinned host memory (copied out after the forward
and back in before the backward), or recomputed. Names resolve to a :class:`Policy`:

* JAX's own policies (`jax.checkpoint_policies`, jax 0.10.2): ``nothing_saveable``,
  ``everything_saveable``, ``dots_saveable`` (alias ``checkpoint_dots``),
  ``dots_with_no_batch_dims_saveable`` (alias ``checkpoint_dots_with_no_batch_dims``),
  ``offload_dot_with_no_batch_dims`` (offloads every batch-dim-free dot to ``pinned_host``).
* MaxText presets, with the same tensor names and the same
  ``save_only_these_names`` / ``save_and_offload_only_these_names(..., offload_src="device",
  offload_dst="pinned_host")`` calls as MaxText's ``decoders.py``: ``full``, ``minimal``,
  ``minimal_with_context``, ``save_dot_with_context_except_mlp``, ``save_dot_except_mlpwi``,
  ``save_dot_except_mlp``, ``save_qkv_proj``, ``save_out_proj``, ``qkv_proj_offloaded``,
  ``minimal_offloaded``. They only act on tensors tagged with
  ``jax.ad_checkpoint.checkpoint_name`` under those names; a model that tags nothing gets
  ``full`` behaviour from all of them.
* Custom: ``offload:NAME,NAME`` (offload those names, recompute the rest) and
  ``save:NAME,NAME`` (keep those on device, recompute the rest). Both may be combined with
  ``+``: ``save:context+offload:query_proj,key_proj``.
* ``none``: no ``jax.checkpoint`` at all; autodiff keeps every residual it needs on device
  (the fastest and most memory-hungry baseline).

Categories, for picking baselines in a comparison:

* ``offload``  – the policy offloads at least one name (or dot) to host memory;
* ``remat``    – ``jax.checkpoint`` with a policy that recomputes something, nothing offloaded;
* ``no-remat`` – ``none`` and ``everything_saveable`` (nothing is recomputed).

Blind spot: whether an offload policy actually offloads depends on the model tagging the names
and on the backend. XLA:CPU compiles host offload away (no ``copy-start`` with ``S(5)`` in the
compiled HLO), so on CPU an ``offload`` policy behaves like saving on device. Use
:func:`overlap.hlo.program.offload_inventory` on the compiled program to see what really moves.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import jax

OFFLOAD_SRC = "device"
OFFLOAD_DST = "pinned_host"

CATEGORY_OFFLOAD = "offload"
CATEGORY_REMAT = "remat"
CATEGORY_NO_REMAT = "no-remat"

# MaxText's tensor names (src/maxtext/layers/decoders.py). "kv_proj"/"qkv_proj" exist for
# models with fused projections; tagging them costs nothing when a model has none.
QKV = ("query_proj", "value_proj", "key_proj", "qkv_proj")
MLP = ("mlpwi_0", "mlpwi_1", "mlpwi", "mlpwo")
MAXTEXT_NAMES = ("query_proj", "key_proj", "value_proj", "kv_proj", "qkv_proj", "out_proj",
                 "context", "mlpwi", "mlpwi_0", "mlpwi_1", "mlpwo")


@dataclasses.dataclass(frozen=True)
class Policy:
    """A named remat/offload policy.

    ``checkpoint_policy`` is what goes to ``jax.checkpoint(fn, policy=...)``; ``None`` together
    with ``remat=True`` means "save nothing" (MaxText's ``full``); ``remat=False`` means do not
    wrap the function at all (``none``).
    """

    name: str
    category: str
    saved: tuple[str, ...] = ()
    offloaded: tuple[str, ...] = ()
    remat: bool = True
    checkpoint_policy: Callable[..., Any] | None = None
    description: str = ""

    @property
    def offloads(self) -> bool:
        return self.category == CATEGORY_OFFLOAD

    def wrap(self, fn: Callable, *, prevent_cse: bool = False) -> Callable:
        """`fn` under this policy. `prevent_cse=False` suits a body of `lax.scan` (the loop
        already stops XLA from merging forward and recomputed ops, and the barrier costs time);
        pass True when the wrapped function is not inside a scan or loop."""
        if not self.remat:
            return fn
        return jax.checkpoint(fn, policy=self.checkpoint_policy, prevent_cse=prevent_cse)

    def to_dict(self) -> dict:
        return {"name": self.name, "category": self.category, "saved": list(self.saved),
                "offloaded": list(self.offloaded), "remat": self.remat,
                "description": self.description}


def _save_only(*names: str):
    return jax.checkpoint_policies.save_only_these_names(*names)


def _save_and_offload(saved, offloaded):
    # Exactly MaxText's call: offload from the device's default memory to pinned host.
    return jax.checkpoint_policies.save_and_offload_only_these_names(
        names_which_can_be_saved=list(saved), names_which_can_be_offloaded=list(offloaded),
        offload_src=OFFLOAD_SRC, offload_dst=OFFLOAD_DST)


def _named_remat(name, saved, desc):
    return lambda: Policy(name, CATEGORY_REMAT, saved=tuple(saved),
                          checkpoint_policy=_save_only(*saved), description=desc)


def _named_offload(name, saved, offloaded, desc):
    return lambda: Policy(name, CATEGORY_OFFLOAD, saved=tuple(saved), offloaded=tuple(offloaded),
                          checkpoint_policy=_save_and_offload(saved, offloaded), description=desc)


def _jax(name, category, fn_name, desc):
    return lambda: Policy(name, category,
                          checkpoint_policy=getattr(jax.checkpoint_policies, fn_name),
                          description=desc)


# Built lazily (a factory per name) so that importing this module never touches jax's policy
# constructors, and each lookup gets a fresh, picklable-enough object.
_REGISTRY: dict[str, Callable[[], Policy]] = {
    "none": lambda: Policy("none", CATEGORY_NO_REMAT, remat=False,
                           description="no jax.checkpoint: every residual stays on device"),
    # --- JAX ---
    "nothing_saveable": _jax("nothing_saveable", CATEGORY_REMAT, "nothing_saveable",
                             "recompute everything in the layer (jax)"),
    "everything_saveable": _jax("everything_saveable", CATEGORY_NO_REMAT, "everything_saveable",
                                "save every residual on device (jax)"),
    "dots_saveable": _jax("dots_saveable", CATEGORY_REMAT, "dots_saveable",
                          "save every dot output, recompute the rest (jax)"),
    "checkpoint_dots": _jax("checkpoint_dots", CATEGORY_REMAT, "checkpoint_dots",
                            "alias of dots_saveable (jax)"),
    "dots_with_no_batch_dims_saveable": _jax(
        "dots_with_no_batch_dims_saveable", CATEGORY_REMAT, "dots_with_no_batch_dims_saveable",
        "save dots without batch dimensions (weight matmuls), recompute the rest (jax)"),
    "checkpoint_dots_with_no_batch_dims": _jax(
        "checkpoint_dots_with_no_batch_dims", CATEGORY_REMAT, "checkpoint_dots_with_no_batch_dims",
        "alias of dots_with_no_batch_dims_saveable (jax)"),
    "offload_dot_with_no_batch_dims": lambda: Policy(
        "offload_dot_with_no_batch_dims", CATEGORY_OFFLOAD,
        checkpoint_policy=jax.checkpoint_policies.offload_dot_with_no_batch_dims(
            offload_src=OFFLOAD_SRC, offload_dst=OFFLOAD_DST),
        description="offload every dot without batch dimensions to pinned_host (jax)"),
    # --- MaxText (decoders.py) ---
    "full": lambda: Policy("full", CATEGORY_REMAT, checkpoint_policy=None,
                           description="MaxText full: recompute the whole layer (policy=None)"),
    "minimal_with_context": _named_remat("minimal_with_context",
                                         QKV + ("context", "out_proj") + MLP,
                                         "MaxText: save q/k/v, context, out_proj and MLP dots"),
    "minimal": _named_remat("minimal", QKV + ("out_proj",) + MLP,
                            "MaxText: save q/k/v, out_proj and MLP dots"),
    "save_dot_with_context_except_mlp": _named_remat(
        "save_dot_with_context_except_mlp", QKV + ("context", "out_proj"),
        "MaxText: save q/k/v, context, out_proj; recompute the MLP"),
    "save_dot_except_mlpwi": _named_remat("save_dot_except_mlpwi", QKV + ("out_proj", "mlpwo"),
                                          "MaxText: save q/k/v, out_proj, mlpwo"),
    "save_dot_except_mlp": _named_remat("save_dot_except_mlp", QKV + ("out_proj",),
                                        "MaxText: save q/k/v and out_proj"),
    "save_qkv_proj": _named_remat("save_qkv_proj", QKV, "MaxText: save q/k/v projections"),
    "save_out_proj": _named_remat("save_out_proj", ("out_proj",), "MaxText: save out_proj"),
    "qkv_proj_offloaded": _named_offload(
        "qkv_proj_offloaded", (), ("query_proj", "value_proj", "key_proj", "kv_proj"),
        "MaxText: offload q/k/v projections to pinned_host, recompute the rest"),
    "minimal_offloaded": _named_offload(
        "minimal_offloaded", (), QKV + ("out_proj",) + MLP,
        "MaxText: offload q/k/v, out_proj and MLP dots (all but context) to pinned_host"),
}

# Aliases MaxText still accepts.
_ALIASES = {"minimal_flash": "minimal_with_context"}


def policy_names() -> list[str]:
    """Every fixed name (custom `offload:`/`save:` forms are not listed)."""
    return sorted(set(_REGISTRY) | set(_ALIASES))


def _split_names(spec: str, text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    if not names:
        raise ValueError(f"policy {spec!r}: no tensor names after the colon "
                         "(write e.g. offload:query_proj,key_proj)")
    return names


def _custom(spec: str) -> Policy:
    saved: tuple[str, ...] = ()
    offloaded: tuple[str, ...] = ()
    for part in spec.split("+"):
        kind, _, names = part.partition(":")
        kind = kind.strip()
        if kind == "offload":
            offloaded += _split_names(spec, names)
        elif kind == "save":
            saved += _split_names(spec, names)
        else:
            raise ValueError(f"policy {spec!r}: {kind!r} is neither 'offload' nor 'save'")
    overlap_ = set(saved) & set(offloaded)
    if overlap_:
        raise ValueError(f"policy {spec!r}: {sorted(overlap_)} both saved and offloaded")
    if offloaded:
        return Policy(spec, CATEGORY_OFFLOAD, saved=saved, offloaded=offloaded,
                      checkpoint_policy=_save_and_offload(saved, offloaded),
                      description="custom: offload " + ",".join(offloaded)
                      + (("; save " + ",".join(saved)) if saved else ""))
    return Policy(spec, CATEGORY_REMAT, saved=saved, checkpoint_policy=_save_only(*saved),
                  description="custom: save " + ",".join(saved))


def get_policy(name: str | Policy) -> Policy:
    """Resolve a policy name (see the module docstring). Unknown names raise ValueError listing
    the valid ones."""
    if isinstance(name, Policy):
        return name
    key = name.strip()
    if key.startswith(("offload:", "save:")):
        return _custom(key)
    key = _ALIASES.get(key, key)
    factory = _REGISTRY.get(key)
    if factory is None:
        raise ValueError(f"unknown policy {name!r}; valid: {', '.join(policy_names())}, "
                         "or offload:NAME,NAME / save:NAME,NAME")
    return factory()


def baselines_for(policy: str | Policy) -> list[str]:
    """The policies an offload policy should be compared against: full remat (what offload
    tries to beat on speed at similar memory) and the same names saved on device (the speed
    upper bound offload approaches when every transfer hides)."""
    p = get_policy(policy)
    if not p.offloads:
        return []
    out = ["full"]
    if p.offloaded:
        out.append("save:" + ",".join(p.saved + p.offloaded))
    return out
