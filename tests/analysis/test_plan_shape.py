"""A plan's run.json of another shape than `overlap plan` writes is bad input, never a crash or
a hang (issue 32, round 35: the fuzz campaign's N6 again).

The campaign edited a real plan's run.json field by field. `"estimate": 5` still ended `report`,
`check` and `compare` with an internal error (exit 4), as did a string of assumptions, a null
flop rate, a record of `estimate.ops` without the fields the join indexes, and ~40 others; a
link bandwidth of -1 made the dashboard's predicted timeline wait forever for a copy that
never moved. `overlap.analysis.plans.PLAN_SHAPE` now says what each field is, `plan_problem`
refuses any other (exit 3, one line naming run.json and the field), `compare` and the
dashboard read plans through it, and `Roofline` refuses a rate of 0 or below.

The sweep below edits every field of a real (deviceless) H100 plan to values of the wrong kind
and runs the commands a user runs on it, each under an alarm: exit 0, 1 or 3 only, and a
refusal is one line naming the plan's run.json."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import math
import shutil

import pytest

from overlap.analysis.plans import PLAN_SHAPE, plan_problem, shape_problem
from overlap.cli.main import main as cli_main
from overlap.hlo.schedule import Roofline
from tests.conftest import Hang, bounded

GOOD = {"kind": "plan", "status": "ok", "target": {"name": "h100", "platform": "cuda"},
        "estimate": {"step_ps": 10, "model": {"host_link_Bps": 5e10, "duplex_share": 0.8},
                     "per_step": {"D2H": {"bytes": 4, "hidden_fraction": 0.5}},
                     "assumptions": ["a", "b"]}}


def _with(path: tuple, value) -> dict:
    m = copy.deepcopy(GOOD)
    d = m
    for k in path[:-1]:
        d = d[k]
    d[path[-1]] = value
    return m


@pytest.mark.parametrize("path,value,says", [
    (("estimate",), 5, "estimate is 5, not an object"),
    (("estimate", "assumptions"), "x", "estimate.assumptions is 'x', not a list"),
    (("estimate", "assumptions"), ["a", 3], "estimate.assumptions[1] is 3, not a string"),
    (("estimate", "model", "host_link_Bps"), -1, "estimate.model.host_link_Bps is -1, not a "
     "number > 0"),
    (("estimate", "model", "host_link_Bps"), 0, "not a number > 0"),
    (("estimate", "model", "host_link_Bps"), True, "is True, not a number > 0"),
    (("estimate", "model", "host_link_Bps"), math.inf, "is inf, not a number > 0"),
    (("estimate", "model", "h2d_link_Bps"), math.nan, "estimate.model.h2d_link_Bps is nan"),
    (("estimate", "model", "duplex_share"), 0, "not a fraction in (0, 1]"),
    (("estimate", "model", "kernel_floor_ps"), 2.0 ** 70, "not a number >= 0"),
    (("estimate", "per_step"), [1], "estimate.per_step is [1], not an object"),
    (("estimate", "per_step", "D2H", "link_Bps"), "fast", "per_step.D2H.link_Bps is 'fast'"),
    (("fits",), "yes", "fits is 'yes', not true or false"),
    (("target",), 7, "target is 7, not an object"),
    (("memory_budget",), {"bytes": [1]}, "memory_budget.bytes is [1], not a number >= 0"),
    (("notes",), [{"a": 1}], "notes[0] is {'a': 1}, not a string"),
])
def test_a_field_of_another_kind_is_named(path, value, says):
    got = plan_problem(_with(path, value))
    assert got is not None and says in got, got


def test_what_the_shape_leaves_alone():
    assert plan_problem(GOOD) is None
    # null stands for any field (older plans lack some); fields it does not name are not read
    assert plan_problem(_with(("estimate", "model"), None)) is None
    assert plan_problem(_with(("estimate", "model", "host_link_Bps"), None)) is None
    assert plan_problem(_with(("something_new",), {"any": [1, "shape"]})) is None
    # a bare target name, as `_target` reads it
    assert plan_problem(_with(("target",), "h100")) is None
    assert shape_problem(["x"], PLAN_SHAPE["notes"]) is None
    assert shape_problem([1], PLAN_SHAPE["notes"], "notes") == "notes[0] is 1, not a string"
    # a long value is shown cut, the message stays one short line
    got = shape_problem({"label": "x" * 500}, {"label": PLAN_SHAPE["fits"]})
    assert got is not None and len(got) < 100 and got.startswith("label is 'xxx")


def test_the_checks_of_numbers_keep_their_own_words_first():
    m = _with(("device_peak_bytes",), -1)
    assert plan_problem(m) == "device_peak_bytes is -1, not a byte count >= 0"
    m = _with(("estimate", "per_step", "D2H", "hidden_fraction"), 7)
    assert plan_problem(m) == ("estimate.per_step.D2H.hidden_fraction is 7, not a fraction in "
                               "[0, 1]")


@pytest.mark.parametrize("field,value", [
    ("host_link_Bps", -1.0), ("host_link_Bps", 0.0), ("hbm_Bps", math.nan),
    ("peak_flops_bf16", math.inf), ("h2d_link_Bps", -5.0), ("duplex_share", 0.0),
    ("duplex_share", 1.5), ("compute_scale", 0.0), ("kernel_floor_ps", -1),
])
def test_a_machine_model_refuses_rates_that_never_move_a_copy(field, value):
    # (the stream model divided each copy's bytes by its rate until none was left: at -1 B/s,
    # never; the dashboard's plan timeline hung on such a plan)
    args = {"hbm_Bps": 1e12, "peak_flops_bf16": 1e15, "peak_flops_f32": 1e15,
            "host_link_Bps": 5e10, field: value}
    with pytest.raises(ValueError, match=field):
        Roofline(**args)
    assert Roofline(1e12, 1e15, 1e15, 5e10, h2d_link_Bps=0).link_Bps("H2D") == 5e10


# ---- the sweep over a real plan ------------------------------------------------------------

def test_every_plan_this_machine_writes_has_the_shape(h100_plan):
    m = json.loads((h100_plan / "run.json").read_text())
    assert plan_problem(m) is None


def _fields(x, pre: tuple = (), depth: int = 0):
    """Each field of a run.json to depth 3 (a list: its first element)."""
    if isinstance(x, dict):
        for k, v in x.items():
            yield (*pre, k)
            if depth < 3:
                yield from _fields(v, (*pre, k), depth + 1)
    elif isinstance(x, list) and x and depth < 3:
        yield (*pre, 0)
        yield from _fields(x[0], (*pre, 0), depth + 1)


_DELETED = object()
# Values of every other kind than a field's, and the ones `overlap plan` writes never
_WRONG = (_DELETED, None, 5, -1, "x", True, [1, "a"], {}, 1e308)


def _run(argv: list[str]) -> tuple[int, list[str]]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            with bounded(30):
                rc = cli_main(argv)
        except Hang:
            rc = "hang"  # type: ignore[assignment]
    return rc, [line for line in err.getvalue().splitlines() if line.strip()]


def test_no_edit_of_a_real_plan_crashes_or_hangs_a_command(h100_plan, gpu_corpus, tmp_path):
    from overlap.dashboard import data

    base = json.loads((h100_plan / "run.json").read_text())
    run = str(gpu_corpus / "gpu-h100" / "scan-small" / "offload_x")
    fields = list(_fields(base))
    assert len(fields) > 150  # (the whole plan, not a corner of it)
    bad: list[str] = []
    refused = 0
    for i, path in enumerate(fields):
        # every field with a wrong kind; the estimate (read by the most code) with each
        for value in (_WRONG if path[0] == "estimate" else (_DELETED, 5, "x", [1, "a"])):
            m = copy.deepcopy(base)
            d = m
            for k in path[:-1]:
                d = d[k]
            if value is _DELETED:
                del d[path[-1]]
            else:
                d[path[-1]] = value
            plan = tmp_path / f"p{i}"
            shutil.copytree(h100_plan, plan, dirs_exist_ok=True)
            (plan / "run.json").write_text(json.dumps(m))
            label = f"{'.'.join(map(str, path))}={'deleted' if value is _DELETED else value!r}"
            commands = [["report", "--json", str(plan)], ["check", str(plan)]]
            if path[0] == "estimate":  # (the estimate's readers: the join and the page too)
                commands += [["compare", str(plan), run], ["report", run, "--plan", str(plan)],
                             ["report", "--html", str(tmp_path / "page.html"), str(plan)]]
            for argv in commands:
                rc, err = _run(argv)
                if rc == 3:
                    refused += 1
                    # (named: its run.json, or the directory where an edit made it no plan)
                    if len(err) != 1 or str(plan) not in err[0]:
                        bad.append(f"{label}: {argv[0]}: exit 3 said {err}")
                elif rc not in (0, 1):
                    bad.append(f"{label}: {' '.join(argv[:2])}: exit {rc}: {err[-1:]}")
            # (an edit can make it no run at all: a run.json of no kind, beside no capture)
            for r in data.discover_runs([str(plan)]):
                try:
                    with bounded(30):
                        data.load_run(r)
                except data.RunLoadError:
                    pass
                except Hang:
                    bad.append(f"{label}: the dashboard's load hangs")
                except Exception as e:  # noqa: BLE001 - any other is the defect this test finds
                    bad.append(f"{label}: the dashboard's load raises {type(e).__name__}: {e}")
            shutil.rmtree(plan)
    assert not bad, "\n".join(bad[:30])
    assert refused > 300  # (the edits are seen: most are refused)
