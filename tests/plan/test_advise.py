"""The advisor against the real XLA:TPU compiler (libtpu, no TPU), kept to a few policies.

The tutorial scan (10 layers, x 256x256 f32 tagged "x"): `offload:x` moves one 256 KiB
residual per layer each way; `full` and `nothing_saveable` are the same program (full remat
either way), so the second is not compiled again.
"""

from __future__ import annotations

import json
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax.ad_checkpoint import checkpoint_name  # noqa: E402

from overlap.plan.advisor import advise, checkpoint_names, policy_space  # noqa: E402
from overlap.runs.rundir import is_complete, load_manifest  # noqa: E402
from tests.conftest import run_cli  # noqa: E402

LAYER_BYTES = 256 * 256 * 4


def _layer(x, w):
    x = checkpoint_name(x, "x")
    h = checkpoint_name(jnp.sin(x @ w[0]), "h")
    return h @ w[1], None


def _factory(policy):
    def loss(ws, x):
        return jnp.mean(jax.lax.scan(policy.wrap(_layer), x, ws)[0] ** 2)

    def step(ws, x):
        loss_value, g = jax.value_and_grad(loss)(ws, x)
        return jax.tree.map(lambda a, b: a - 1e-3 * b, ws, g), loss_value

    return jax.jit(step, donate_argnums=0)


def _args():
    ws = (jax.ShapeDtypeStruct((10, 256, 1024), jnp.float32),
          jax.ShapeDtypeStruct((10, 1024, 256), jnp.float32))
    return ws, jax.ShapeDtypeStruct((256, 256), jnp.float32)


def test_checkpoint_names_are_found_inside_scans_and_remat():
    from overlap.capture.policies import get_policy

    ws, x = _args()
    assert checkpoint_names(_factory(get_policy("none")), ws, x) == ["x", "h"]
    assert checkpoint_names(_factory(get_policy("full")), ws, x) == ["x", "h"]


def test_policy_space_has_jax_policies_maxtext_only_for_its_names_and_each_name():
    space = [p for p, _ in policy_space(["x", "h"])]
    assert space[:2] == ["none", "full"]
    assert "everything_saveable" in space and "offload_dot_with_no_batch_dims" in space
    assert "qkv_proj_offloaded" not in space  # no MaxText name: its presets would all be full
    assert {"offload:x", "save:x", "offload:h", "save:h"} <= set(space)
    mt = [p for p, _ in policy_space(["query_proj", "mlpwo"])]
    assert "qkv_proj_offloaded" in mt and "offload:mlpwo" in mt


def test_advise_a_users_step_on_v5e(tmp_path):
    ws, x = _args()
    a = advise(_factory, ws, x, target="v5e", out=tmp_path, name="tutorial",
               policies=["full", "nothing_saveable", "offload:x", "everything_saveable",
                         "offload:nope"])
    r = a.result
    assert r["checkpoint_names"] == ["x", "h"] and r["target"] == "v5e"
    rows = {row["policy"]: row for row in r["rows"]}
    assert set(rows) == {"full", "nothing_saveable", "offload:x", "everything_saveable",
                         "offload:nope"}
    assert rows["nothing_saveable"]["same_program_as"] == "v5e-tutorial-full"
    assert r["programs_compiled"] == 3
    off = rows["offload:x"]
    assert off["moved_bytes"] == 2 * 10 * LAYER_BYTES and off["category"] == "offload"
    for row in rows.values():
        if row["status"] == "ok":
            assert row["fits"] is True and row["device_peak_bytes"] > 0
            assert row["step_ps"] > 0 and row["headroom_bytes"] == (
                r["budget"]["bytes"] - row["device_peak_bytes"])
    assert rows["full"]["vs_full_ps"] == 0
    # A name the step never tags offloads nothing: a row, compiled, same program as full.
    assert rows["offload:nope"]["same_program_as"] == "v5e-tutorial-full"
    assert r["recommended"] in rows and r["why"]
    # Every compiled plan is a complete plan run; advice.json is the result.
    runs = sorted(p.name for p in tmp_path.iterdir() if p.is_dir())
    assert runs == ["v5e-tutorial-everything_saveable", "v5e-tutorial-full",
                    "v5e-tutorial-offload_x"]
    assert all(is_complete(tmp_path / n) for n in runs)
    assert load_manifest(tmp_path / "v5e-tutorial-offload_x")["policy"]["source"] == "given"
    assert json.loads((tmp_path / "advice.json").read_text())["recommended"] == r["recommended"]


def test_cli_advise_json_and_text(tmp_path):
    out = tmp_path / "adv"
    r = run_cli("advise", "--target", "v5e", "--workload", "scan", "--policy", "full",
                "--policy", "offload:x", "--out", str(out), "--json", timeout=300)
    assert r.returncode == 0, r.stderr
    a = json.loads(r.stdout)
    assert a["kind"] == "advice" and a["workload"] == "scan:tiny" and len(a["rows"]) == 2
    assert "Traceback" not in r.stderr
    r = run_cli("compare", str(out))
    assert r.returncode == 0 and "v5e-scan-offload_x" in r.stdout
    r = run_cli("check", str(out / "v5e-scan-full"))
    assert r.returncode == 0, r.stdout
    r = run_cli("advise", "--target", "v5e", "--workload", "scan", "--out", str(out))
    assert r.returncode == 2 and "advice already" in r.stderr
    r = run_cli("advise", "--target", "v5e", "--workload", "nope:tiny:x:y", "--out",
                str(tmp_path / "b"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1


def test_policies_that_fail_are_rows_with_the_reason(tmp_path):
    ws, x = _args()

    def factory(policy):
        if policy.name == "save:h":
            raise RuntimeError("this step cannot take save:h")
        return _factory(policy)

    a = advise(factory, ws, x, target="v5e", out=tmp_path, name="t",
               policies=["save:x", "save:h", "no_such_policy"], jobs=1)
    rows = {row["policy"]: row for row in a.result["rows"]}
    assert rows["save:x"]["status"] == "ok" and rows["save:x"]["rank"] == 1
    assert rows["save:h"]["status"] == "compile_error"
    assert "cannot take save:h" in rows["save:h"]["reason"]
    assert rows["no_such_policy"]["status"] == "compile_error"
    assert "unknown policy" in rows["no_such_policy"]["reason"]
    assert a.result["recommended"] == "save:x"
    # The failed lowering is a plan run too: `overlap check` fails its `compiles`.
    r = run_cli("check", str(tmp_path / "v5e-t-save_h"))
    assert r.returncode == 1 and "[FAIL] compiles" in r.stdout
