"""Like with like on real GPU sweeps (issue 33, item 7): runs of one program made with other
XLA flags or another runtime (command buffers on vs off) are another experiment, each with a
baseline made the same way; the verdict says whether offload pays and why not; long run names
stay readable on the bar axes."""

from __future__ import annotations

from pathlib import Path

import pytest

from overlap.analysis.compare import compare, made_differs, made_with
from tests.analysis.test_compare import MS, _row


@pytest.fixture
def sweeps(gpu_corpus) -> tuple[Path, Path]:
    """The real H100 transformer sweeps (tests/data/gpu-corpus): command buffers off
    (`XLA_FLAGS=--xla_gpu_enable_command_buffer=`) and on (XLA's default flags)."""
    h100 = gpu_corpus / "gpu-h100"
    return h100 / "transformer-h100", h100 / "transformer-h100-command-buffers"


OFF = {"xla_flags": {"XLA_FLAGS": "--xla_gpu_enable_command_buffer="},
       "versions": {"jax": "0.11.2", "jaxlib": "0.11.2"}}
ON = {"xla_flags": {"XLA_FLAGS": ""}, "versions": {"jax": "0.11.2", "jaxlib": "0.11.2"}}


def test_made_with_reads_flags_and_runtime_and_ignores_dump_paths():
    a = made_with({**OFF, "xla_flags": {"XLA_FLAGS": "--xla_dump_to=/tmp/a "
                                                    "--xla_gpu_enable_command_buffer="}})
    assert a == made_with(OFF)  # where XLA writes its dumps is not another experiment
    assert a["text"].startswith("XLA_FLAGS: command buffers off") and "jax 0.11.2" in a["text"]
    assert made_with(ON)["text"].startswith("default XLA flags")
    assert made_with(None)["text"] == "flags and runtime not recorded"
    assert made_with({"xla_flags": "--a=1 --b=2"})["xla_flags"] == ["--a=1", "--b=2"]  # a plan
    why = made_differs(made_with(ON), made_with(OFF))
    assert "the baseline only: command buffers off (--xla_gpu_enable_command_buffer=)" in why
    assert made_differs(made_with(ON), made_with(ON)) is None
    newer = made_with({**ON, "versions": {"jax": "0.12.0", "jaxlib": "0.12.0"}})
    assert "runtime jax 0.12.0, jaxlib 0.12.0 vs jax 0.11.2" in made_differs(newer,
                                                                              made_with(ON))


def _made(row, manifest):
    return {**row, "program": {"module": "jit_train_step", "inputs": "aaaa"},
            "made_with": made_with(manifest)}


def test_runs_made_another_way_get_a_baseline_of_their_own():
    rows = [_made(_row("full_cb", "full", "remat", 100, 40 << 30), ON),
            _made(_row("qkv_cb", "qkv_proj_offloaded", "offload", 116, 41 << 30, offloads=True,
                       transfers=240, overlap=0.0), ON),
            _made(_row("full", "full", "remat", 101, 40 << 30), OFF),
            _made(_row("minimal", "minimal", "remat", 91, 43 << 30), OFF)]
    res = compare(rows, baseline="full")
    v = {r["label"]: r["verdict"] for r in res["runs"]}
    # the baseline's experiment is judged against it; the other is flagged, never judged
    assert v["minimal"].startswith("minimal: 9.9% faster than full")
    assert "not compared" in v["full_cb"] and "command buffers off" in v["full_cb"]
    assert next(r for r in res["runs"] if r["label"] == "qkv_cb")["step_delta"] is None
    assert res["mixed_made"] and res["mixed_programs"] is None
    g = res["groups"]
    assert [x["runs"] for x in g] == [["full", "minimal"], ["full_cb", "qkv_cb"]]
    assert g[0]["baseline"] == "full" and g[1]["baseline"] == "full_cb"
    assert g[1]["verdicts"] == ["qkv_cb: 16.0% slower than full_cb, 2.5% more peak memory than "
                                "full_cb, 0% of transfer time hidden"]
    # all made alike: one experiment, no groups
    alike = compare([_made(r, ON) for r in rows[:2]])
    assert alike["groups"] is None and alike["mixed_made"] is None


def test_axis_names_stay_readable():
    from overlap.report.figures import axis_names

    long = ["transformer-h100-command-buffers/full_cb",
            "transformer-h100-command-buffers/qkv_proj_offloaded_cb", "transformer-h100/full"]
    got = axis_names(long)
    assert got == ["full_cb", "qkv_proj_<br>offloaded_cb", "full"]
    assert all(len(line) <= 16 for n in got for line in n.split("<br>"))
    # tails that would read the same keep enough of the path to differ
    assert axis_names(["a/x/full", "b/x/full"]) == ["a/x/full", "b/x/full"]


def _loaded(*dirs):
    from overlap.dashboard import data

    runs = data.discover_runs(list(dirs))
    return runs, [(r.name, data.load_run(r), 0.0) for r in runs]


def test_real_h100_command_buffer_runs_are_another_group_with_their_own_baseline(sweeps):
    from overlap.dashboard import data
    from overlap.report import groups

    runs, items = _loaded(*sweeps)
    gs = groups.groups(items)
    assert sorted(len(g["runs"]) for g in gs) == [2, 4]
    d = {n: dd for n, dd, _ in items}
    for g in gs:
        cb = all("command-buffers" in n for n in g["runs"])
        assert cb or not any("command-buffers" in n for n in g["runs"]), g["runs"]
        assert ("command buffers off" in g["label"]) == (not cb), g["label"]
        base = data.default_baseline([r for r in runs if r.name in g["runs"]])
        assert base is not None and base.endswith("full_cb" if cb else "/full")
        v = groups.group_verdict([(n, d[n]) for n in g["runs"]], base)
        # what users came for, first: offload does not pay on either, and why
        assert v.startswith("offload does not pay here: "), v
        assert "why: its copies are " + ("0%" if cb else "24%") + " hidden" in v
        assert "exposed per step" in v
    full = next(n for n in d if n.endswith("h100/full"))
    full_cb = next(n for n in d if n.endswith("full_cb"))
    why = groups.what_differs(d[full_cb], d[full])
    assert "made another way" in why and "command buffers off" in why


def test_real_h100_compare_cli_judges_each_experiment_against_its_own_baseline(sweeps):
    from tests.conftest import run_cli

    r = run_cli("compare", *map(str, sweeps))
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "made with other XLA flags or another runtime" in out
    line = next(ln for ln in out.splitlines() if ln.startswith("full_cb:"))
    assert "not compared" in line and "command buffers off" in line
    i = out.index("experiment: jit_train_step")
    assert "default XLA flags" in out[i:i + 200]
    assert "baseline: full_cb" in out[i:]
    assert "qkv_proj_offloaded_cb: 16.3% slower than full_cb" in out[i:]
    assert "minimal is 9.4% faster than full_cb" not in out
    assert MS  # the helper's unit, shared with tests.analysis.test_compare
