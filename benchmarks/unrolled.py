"""A workload for `overlap plan --workload benchmarks.unrolled:make_unrolled:LAYERS`: the
built-in transformer (`overlap.capture.workloads`, its `h100` size: MaxText's llama2-7b
dimensions) with its layers written out one after the other (a Python loop, as
`scan_layers=False` in MaxText), not scanned. Its compiled program holds every layer's
instructions: the large HLO text a run directory of an unrolled model carries (the built-in's
scanned program is ~430 KB whatever its depth), for the reader's HLO benchmark (issue 32,
round 30). Compiled for a target without one (deviceless); nothing runs.

    PYTHONPATH=. python -m overlap plan --target h100 --policy qkv_proj_offloaded \\
        --workload benchmarks.unrolled:make_unrolled:32 --out DIR
    python benchmarks/unrolled.py DIR/h100-benchmarks.unrolled_make_unrolled-qkv_proj_offloaded OUT

The second command makes the benchmark's run directory OUT (SYNTHETIC as a whole, said in
OUT/SYNTHETIC.txt): the real H100 capture `qkv_proj_offloaded_cb` of tests/data/gpu-corpus
with that compiled program's text as its `hlo/jit_train_step.hlo.txt` (the same module name:
the report reads it; its copies are not this program's, so the per-name table finds no name).
"""

from __future__ import annotations

import dataclasses
import functools
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any, NoReturn


def make_unrolled(policy: Any, size: str = "8") -> Any:
    """The `h100` transformer with `size` layers, unrolled (a `Workload`); `size` "N-DIMS"
    takes another built-in size's dimensions (`16-control`: the `control` transformer's, as
    the real H200 capture of benchmarks/device/unrolled_capture.sh was made)."""
    import jax  # (here: making the benchmark's run directory needs none of it)

    from overlap.capture import workloads as W
    from overlap.capture.policies import get_policy

    pol = get_policy(policy)
    layers, _, dims = str(size).partition("-")
    cfg = dataclasses.replace(W.TRANSFORMER_SIZES[dims or "h100"], layers=int(layers))

    def loss(params, batch):
        x = params["embed"][batch["inputs"]]
        body = pol.wrap(functools.partial(W._decoder_layer, cfg))
        for i in range(cfg.layers):  # (written out: one copy of the layer's instructions each)
            x = body(x, jax.tree.map(lambda a, i=i: a[i], params["layers"]))
        x = W._rms_norm(x, params["final_ln"])
        logp = jax.nn.log_softmax((x @ params["unembed"]).astype(jax.numpy.float32), axis=-1)
        return -jax.numpy.mean(jax.numpy.take_along_axis(logp, batch["targets"][..., None],
                                                         axis=-1))

    def train_step(state, batch):
        value, grads = jax.value_and_grad(loss)(state["params"], batch)
        params, mu, nu, count = W._adam(state["params"], grads, state["mu"], state["nu"],
                                        state["count"])
        return {"params": params, "mu": mu, "nu": nu, "count": count}, value

    key_p, key_b = jax.random.split(jax.random.key(0))
    state = jax.jit(functools.partial(W._init_state, cfg))(key_p)
    batch = W._make_batch(cfg, key_b)
    return W.Workload(jax.jit(train_step, donate_argnums=0), state, batch,
                      description="unrolled " + W._describe(cfg), name="unrolled",
                      size=size, policy=pol.name)


CAPTURE = "gpu-h100/transformer-h100-command-buffers/qkv_proj_offloaded_cb"


def make_run(plan_run: Path, out: Path) -> Path:
    """`out`: the real H100 capture with `plan_run`'s compiled program text (docstring)."""
    if out.exists():
        _refuse(f"{out}: exists; nothing written")
    texts = sorted((plan_run / "hlo").glob("*.after_optimizations.hlo.txt")) \
        if plan_run.is_dir() else []
    if len(texts) != 1:  # (found before anything is written)
        _refuse(f"{plan_run}: not a plan run with one compiled program's text "
                "(hlo/*.after_optimizations.hlo.txt)")
    corpus = Path(__file__).resolve().parents[1] / "tests" / "data" / "gpu-corpus"
    with tempfile.TemporaryDirectory() as tmp, \
            tarfile.open(corpus / "gpu-h100.tar.xz") as tf:
        tf.extractall(tmp, filter="data")
        shutil.copytree(Path(tmp) / CAPTURE, out)
    shutil.copyfile(texts[0], out / "hlo" / "jit_train_step.hlo.txt")
    (out / "SYNTHETIC.txt").write_text(
        f"SYNTHETIC benchmark input: the real H100 capture {CAPTURE} (tests/data/gpu-corpus) "
        f"with the program text of the plan {plan_run.name} (benchmarks/unrolled.py), not the "
        "program that ran.\n")
    return out


def _refuse(why: str) -> NoReturn:
    print(f"unrolled.py: error: {why}", file=sys.stderr)
    raise SystemExit(3)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print("usage: python benchmarks/unrolled.py PLAN_RUN OUT", file=sys.stderr)
        raise SystemExit(2)
    print(make_run(Path(sys.argv[1]), Path(sys.argv[2])))
