"""Policy names resolve to the right jax.checkpoint policies, verified by what autodiff saves."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import pytest
from jax._src.ad_checkpoint import saved_residuals  # public print_saved_residuals prints only

from overlap.capture import policies
from overlap.capture.policies import get_policy
from overlap.capture.workloads import (
    TRANSFORMER_SIZES,
    _decoder_layer,
    _init_params,
    load_workload,
    parse_spec,
)

MAXTEXT = ["full", "minimal", "minimal_with_context", "save_dot_except_mlp",
           "save_dot_except_mlpwi", "save_dot_with_context_except_mlp", "save_qkv_proj",
           "save_out_proj", "qkv_proj_offloaded", "minimal_offloaded"]
JAX = ["nothing_saveable", "everything_saveable", "dots_saveable",
       "dots_with_no_batch_dims_saveable", "offload_dot_with_no_batch_dims"]


@pytest.fixture(scope="module")
def layer_args():
    cfg = TRANSFORMER_SIZES["tiny"]
    params = jax.tree.map(lambda a: a[0], _init_params(cfg, jax.random.key(0))["layers"])
    x = jax.random.normal(jax.random.key(1), (cfg.batch, cfg.seq, cfg.width))
    return cfg, x, params


def residuals(policy, layer_args):
    cfg, x, p = layer_args
    f = get_policy(policy).wrap(functools.partial(_decoder_layer, cfg))
    res = saved_residuals(lambda x, p: f(x, p).sum(), x, p)
    named = sorted(s.split("'")[1] for _, s in res if s.startswith("named"))
    offloaded = sum("device_put" in s for _, s in res)
    return named, offloaded, len(res)


@pytest.mark.parametrize("name", MAXTEXT + JAX + ["none", "minimal_flash"])
def test_every_name_resolves(name):
    p = get_policy(name)
    assert p.category in (policies.CATEGORY_REMAT, policies.CATEGORY_OFFLOAD,
                          policies.CATEGORY_NO_REMAT)
    assert p.offloads == (p.category == policies.CATEGORY_OFFLOAD)
    assert set(MAXTEXT + JAX + ["none"]) <= set(policies.policy_names())


def test_categories():
    assert [n for n in MAXTEXT + JAX if get_policy(n).offloads] == [
        "qkv_proj_offloaded", "minimal_offloaded", "offload_dot_with_no_batch_dims"]
    assert get_policy("none").category == "no-remat" and not get_policy("none").remat
    assert get_policy("everything_saveable").category == "no-remat"
    assert get_policy("full").category == "remat" and get_policy("full").checkpoint_policy is None
    assert policies.baselines_for("qkv_proj_offloaded") == [
        "full", "save:query_proj,value_proj,key_proj,kv_proj"]
    assert policies.baselines_for("full") == []


def test_unknown_name_lists_valid_ones():
    with pytest.raises(ValueError) as e:
        get_policy("qkv_offload")
    assert "qkv_proj_offloaded" in str(e.value) and "offload:NAME" in str(e.value)
    for bad in ("offload:", "keep:x", "save:a+offload:a"):
        with pytest.raises(ValueError):
            get_policy(bad)


def test_custom_policies_parse():
    p = get_policy("save:context+offload:query_proj,key_proj")
    assert p.offloads and p.saved == ("context",) and p.offloaded == ("query_proj", "key_proj")
    q = get_policy("save:out_proj")
    assert q.category == "remat" and q.saved == ("out_proj",)


@pytest.mark.parametrize("policy, named, offloaded", [
    ("full", [], 0),
    ("nothing_saveable", [], 0),
    ("save_qkv_proj", ["key_proj", "query_proj", "value_proj"], 0),
    ("save_out_proj", ["out_proj"], 0),
    ("save_dot_except_mlp", ["key_proj", "out_proj", "query_proj", "value_proj"], 0),
    # mlpwo's only consumer is the residual add, whose backward needs no values: autodiff never
    # keeps it, so naming it saves nothing in this layer (nor in MaxText's).
    ("save_dot_except_mlpwi", ["key_proj", "out_proj", "query_proj", "value_proj"], 0),
    ("save_dot_with_context_except_mlp",
     ["context", "key_proj", "out_proj", "query_proj", "value_proj"], 0),
    ("minimal", ["key_proj", "mlpwi", "out_proj", "query_proj", "value_proj"], 0),
    ("minimal_with_context",
     ["context", "key_proj", "mlpwi", "out_proj", "query_proj", "value_proj"], 0),
    # Offloaded residuals show up as outputs of device_put (to pinned_host), not as names.
    ("qkv_proj_offloaded", [], 3),
    ("minimal_offloaded", [], 5),  # q, k, v, out_proj, mlpwi
    ("offload:context", [], 1),
    ("save:context+offload:mlpwi", ["context"], 1),
])
def test_policy_saves_what_maxtext_says(layer_args, policy, named, offloaded):
    got_named, got_off, _ = residuals(policy, layer_args)
    assert got_named == named
    assert got_off == offloaded


def test_none_saves_more_than_everything_remat(layer_args):
    # No remat: autodiff keeps every intermediate it needs; full remat keeps only the inputs.
    assert (residuals("none", layer_args)[2] > residuals("minimal", layer_args)[2]
            > residuals("full", layer_args)[2])


def test_workload_spec_parsing():
    assert parse_spec("transformer")[1:] == ("transformer", "tiny")
    assert parse_spec("scan:small")[1:] == ("scan", "small")
    maker, name, size = parse_spec("overlap.capture.workloads:make_scan:tiny")
    assert name == "overlap.capture.workloads:make_scan" and size == "tiny"
    for bad in ("nope", "transformer:tiny:x", "overlap.capture.workloads:missing",
                "no_such_module_xyz:f"):
        with pytest.raises(ValueError):
            parse_spec(bad)
    with pytest.raises(ValueError, match="valid: tiny"):
        load_workload("transformer:huge", "full")


def test_user_workload_tuple_protocol(monkeypatch, tmp_path):
    mod = tmp_path / "my_wl.py"
    mod.write_text(
        "import jax, jax.numpy as jnp\n"
        "def make(policy, size):\n"
        "    step = jax.jit(lambda s, b: (s + b, (s * b).sum()))\n"
        "    return step, jnp.ones(3), jnp.ones(3), f'toy {policy.name} {size}'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    w = load_workload("my_wl:make:small", "save:x")
    assert w.description == "toy save:x small" and w.size == "small" and w.policy == "save:x"
    state, aux = w.step_fn(w.init_state, w.batch)
    assert float(aux) == 3.0 and state.tolist() == [2.0, 2.0, 2.0]


def test_params_variant_places_state_on_pinned_host():
    w = load_workload("params", "full")
    kinds = {a.sharding.memory_kind for a in jax.tree.leaves(w.init_state)}
    from overlap.capture.workloads import pinned_host_support

    ok, why = pinned_host_support()
    if ok:
        assert kinds == {"pinned_host"}
        state, loss = w.step_fn(w.init_state, w.batch)
        assert {a.sharding.memory_kind for a in jax.tree.leaves(state)} == {"pinned_host"}
        assert jnp.isfinite(loss)
        if jax.devices()[0].platform == "cpu":
            # A caveat about this machine's device: in the capture's manifest, not in plans.
            assert any("compiles" in n for n in w.device_notes)
            assert any("compiles" in n for n in w.manifest()["notes"])
    else:
        assert any(why in n for n in w.manifest()["notes"])


def test_offload_of_a_name_the_workload_never_tags_is_refused():
    from overlap.capture.workloads import load_workload

    with pytest.raises(ValueError, match="never tags"):
        load_workload("scan", "offload:doesnotexist")
    assert load_workload("scan", "offload:x").name == "scan"
