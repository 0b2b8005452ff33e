"""The advisor's ranking (`overlap.analysis.advise`) on plan manifests whose answers are known
by construction: each plan's peak, predicted step, bytes moved and status are set by hand."""

from __future__ import annotations

from overlap.analysis.advise import TIE_FRACTION, advise

MiB = 1 << 20
US = 1_000_000  # ps


def plan(policy: str, *, peak_mib: float = 10, step_us: float = 100, moved: int = 0,
         category: str = "remat", status: str = "ok", error: str = "",
         break_even: float | None = None, same: str | None = None) -> dict:
    """A plan manifest: all of the peak is temp; half the moved bytes each way."""
    kind, _, names = policy.partition(":")
    m: dict = {"kind": "plan", "label": f"h100-x-{policy}", "status": status,
               "policy": {"name": policy, "category": category,
                          "saved": names.split(",") if kind == "save" else [],
                          "offloaded": names.split(",") if kind == "offload" else []}}
    if same:
        m["same_program_as"] = same
    if status != "ok":
        m["error"] = error
        return m
    step = int(step_us * US)
    m.update(
        memory_analysis={"temp_size_in_bytes": int(peak_mib * MiB), "argument_size_in_bytes": 0,
                         "output_size_in_bytes": 0, "alias_size_in_bytes": 0},
        offload_inventory={"D2H": {"executed_bytes": moved // 2},
                           "H2D": {"executed_bytes": moved - moved // 2},
                           "trip_counts_known": True},
        estimate={"step_ps": step, "busy_ps": step, "stall_ps": 0,
                  "break_even_Bps": break_even})
    return m


BUDGET = {"bytes": 20 * MiB, "source": "test budget"}


def by_policy(result: dict) -> dict[str, dict]:
    return {r["policy"]: r for r in result["rows"]}


def test_fastest_fitting_plan_is_recommended_and_rows_are_ranked():
    plans = [plan("full", step_us=100), plan("none", peak_mib=30, step_us=60),
             plan("offload:x", category="offload", step_us=80, moved=4 * MiB, break_even=5e10),
             plan("save:x", peak_mib=15, step_us=90)]
    a = advise(plans, BUDGET)
    assert a["recommended"] == "offload:x" and a["baseline"] == "full"
    assert [r["policy"] for r in a["rows"]] == ["offload:x", "save:x", "full", "none"]
    assert [r["rank"] for r in a["rows"]] == [1, 2, 3, 4]
    rows = by_policy(a)
    assert rows["none"]["fits"] is False and rows["none"]["headroom_bytes"] == -10 * MiB
    assert rows["none"]["reason"] == "device peak over the budget"
    assert rows["offload:x"]["vs_full_ps"] == -20 * US
    assert abs(rows["offload:x"]["vs_full_fraction"] + 0.2) < 1e-12
    assert rows["offload:x"]["moved_bytes"] == 4 * MiB
    assert rows["save:x"]["headroom_bytes"] == 5 * MiB
    assert a["offload"]["pays"] is True and a["offload"]["policy"] == "offload:x"


def test_within_the_tie_the_plan_that_moves_less_wins():
    eps = TIE_FRACTION / 2
    plans = [plan("full", step_us=100),
             plan("offload:x", category="offload", step_us=80, moved=MiB),
             plan("save:x", step_us=80 * (1 + eps), peak_mib=12)]
    a = advise(plans, BUDGET)
    assert a["rows"][0]["policy"] == "offload:x"  # ranking is by predicted step
    assert a["recommended"] == "save:x"
    assert "moves less" in " ".join(a["why"])


def test_offload_does_not_pay_when_it_is_not_faster_than_full_remat():
    plans = [plan("full", step_us=100),
             plan("offload:x", category="offload", step_us=101, moved=MiB)]
    a = advise(plans, BUDGET)
    assert a["offload"]["pays"] is False
    assert a["recommended"] == "full"


def test_failures_and_out_of_memory_are_rows_with_reasons_after_the_rest():
    plans = [plan("boom", status="compile_error", error="INTERNAL: bad\nthing"),
             plan("oom", status="does_not_fit", error="RESOURCE_EXHAUSTED: Ran out of memory"),
             plan("full")]
    a = advise(plans, BUDGET)
    assert [r["policy"] for r in a["rows"]] == ["full", "oom", "boom"]
    rows = by_policy(a)
    assert rows["oom"]["fits"] is False and "ran out of device memory" in rows["oom"]["reason"]
    assert rows["boom"]["fits"] is None and rows["boom"]["reason"] == \
        "compile failed: INTERNAL: bad thing"


def test_nothing_fits_recommends_nothing_and_names_the_smallest_peak():
    plans = [plan("full", peak_mib=30), plan("save:x", peak_mib=25)]
    a = advise(plans, BUDGET)
    assert a["recommended"] is None
    assert "save:x" in a["why"][0]
    assert [r["policy"] for r in a["rows"]] == ["save:x", "full"]


def test_same_program_rows_carry_the_numbers_and_never_win_a_tie():
    base = plan("full")
    dup = {**plan("nothing_saveable"), "same_program_as": "h100-x-full"}
    a = advise([dup, base], BUDGET)
    assert a["recommended"] == "full"
    assert by_policy(a)["nothing_saveable"]["same_program_as"] == "h100-x-full"


def test_without_full_remat_there_is_no_difference_and_no_offload_verdict():
    a = advise([plan("save:x"), plan("offload:x", category="offload", moved=MiB)], BUDGET)
    assert a["baseline"] is None and all(r["vs_full_ps"] is None for r in a["rows"])
    assert a["offload"]["pays"] is None


def test_text_rendering_names_the_recommendation_and_says_not_run():
    from overlap.report.advise_text import render_advice

    a = advise([plan("full"), plan("none", peak_mib=30, step_us=60),
                plan("boom", status="compile_error", error="nope")], BUDGET)
    a.update(target="h100", workload="x:tiny", policies_considered=3, programs_compiled=3,
             seconds=1.0)
    text = render_advice(a)
    lines = text.splitlines()
    assert lines[0].startswith("ADVICE for x:tiny on h100") and "not run" in lines[0]
    assert "RECOMMENDED: full" in text and "20.0 MiB" in text
    assert any(ln.split()[:3] == ["3", "boom", "ERROR"] for ln in lines)
    assert any(ln.split()[:3] == ["2", "none", "NO"] for ln in lines)
    assert max(len(ln) for ln in lines) <= 110  # the table, and everything wraps to it


def test_offload_is_set_against_saving_the_same_on_device():
    plans = [plan("full", step_us=100),
             plan("offload:x", category="offload", step_us=90, moved=MiB, peak_mib=10),
             plan("save:x", step_us=80, peak_mib=12)]
    off = advise(plans, BUDGET, names=["x"])["offload"]
    assert off["pays"] is True and off["on_device"] == "save:x"
    assert off["vs_on_device_ps"] == 10 * US
    # Said of the offload (its step takes 12.5% more time than the twin's), never "X% faster"
    # of the twin, which reads as nonsense once the offload is several times slower.
    assert ("against saving the same on device (save:x), offload:x is predicted 12.5% slower "
            "and saves 2.00 MiB of device peak") in off["why"]
    plans[1] = plan("offload:x", category="offload", step_us=480, moved=MiB, peak_mib=13)
    plans[0] = plan("full", step_us=500)
    why = advise(plans, BUDGET, names=["x"])["offload"]["why"]
    assert "offload:x is predicted 500.0% slower and adds 1.00 MiB" in why


def test_offload_pays_when_it_is_what_fits():
    plans = [plan("full", step_us=100, peak_mib=25),
             plan("offload:x", category="offload", step_us=150, moved=MiB, peak_mib=15)]
    a = advise(plans, BUDGET)
    assert a["recommended"] == "offload:x"
    assert a["offload"]["pays"] is True
    assert a["offload"]["why"].startswith("full remat does not fit the budget and offload:x does")
