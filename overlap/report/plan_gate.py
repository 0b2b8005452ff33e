"""`overlap check` on a plan run: gates that make sense before the hardware exists.

Checks (each pass/fail/skip, in the same outcome format as `overlap.report.gate`):

* `compiles`: the step compiled for the target (a compiler error fails it).
* `fits`: the device peak (`memory_analysis` temp + arguments + outputs - aliases) is at most
  the plan's memory budget (JAX's usable share of the device, named in the message; the
  device memory for plans made before budgets), or `--max-device-gib` when given. A compile
  that ran out of memory fails it with the compiler's message.
* `min_offload_bytes` (opt-in): the plan still moves at least N bytes per step to host memory
  (D2H executed bytes of the offload inventory): offload has not silently stopped.
* `host_compute` (on by default): no op of the compiled program runs on the host (ops XLA
  moved to host compute, `overlap.analysis.host_memory`); `allow_host_compute=True`
  (`--allow-host-compute`) passes it. `pinned_host_cap` (on when a cap applies): the pinned
  host peak fits the GPU runtime's pinned pool. Both defined in `overlap.report.run_gates`;
  skipped for plans made before they were recorded.
* `max_predicted_exposed_ms` (opt-in): the roofline estimate's exposed transfer time per step
  stays under the bound. An estimate, said so in the message.

The same two defaults as a measured run (`overlap.report.gate`), on the plan's numbers:

* `planned_transfers` (on by default): a plan of an offloading policy (policy category
  `offload`, or a step given as is, whose intent the plan cannot know) with no planned
  device<->host copy fails: the offload was compiled away. A remat or no-remat policy without
  copies passes (it asks for none). `allow_no_transfers=True` passes it and skips the overlap
  checks, as for captures.
* `min_overlap` (on by default, 0.9): the PREDICTED hidden fraction of the planned copies'
  transfer time per step (`estimate.per_step.all.hidden_fraction`, the roofline estimate of
  `overlap.hlo.schedule`) is at least the minimum; per direction with `min_overlap_d2h/h2d`.
  Skipped when the plan moves nothing. Every message says "predicted": a plan is never run.
"""

from __future__ import annotations

from typing import Any

from overlap.analysis.memory import memory_analysis_peak
from overlap.report.units import format_bytes, format_ps

PASS, FAIL, SKIP = "pass", "fail", "skip"


def _check(name, status, message, value=None, limit=None) -> dict[str, Any]:
    return {"name": name, "status": status, "passed": status != FAIL, "value": value,
            "limit": limit, "message": message}


DEFAULT_MIN_OVERLAP = 0.9  # the measured gate's default (overlap.report.gate)


def _moves(inv: dict[str, Any]) -> int:
    """Planned copies per step, both directions (executions of the offload inventory)."""
    return sum(int((inv.get(d) or {}).get("executed_count") or 0) for d in ("D2H", "H2D"))


def run_plan_checks(manifest: dict[str, Any], *, min_offload_bytes: int | None = None,
                    max_device_gib: float | None = None,
                    max_predicted_exposed_ms: float | None = None,
                    min_overlap: float | None = DEFAULT_MIN_OVERLAP,
                    min_overlap_d2h: float | None = None,
                    min_overlap_h2d: float | None = None,
                    allow_no_transfers: bool = False,
                    allow_host_compute: bool = False) -> dict[str, Any]:
    t: dict[str, Any] = (manifest["target"] if isinstance(manifest.get("target"), dict)
                         else {})
    tname = t.get("name") or "?"
    status = manifest.get("status")
    checks = []
    if status == "compile_error":
        checks.append(_check("compiles", FAIL, f"compile failed: {manifest.get('error', '')}"))
    else:
        checks.append(_check("compiles", PASS, f"compiled for {tname}"))
    # The plan's usable budget (JAX's share of the device, `overlap.plan.targets.memory_budget`)
    # when it has one: the same limit its `fits` verdict used; older plans: the device memory.
    budget = manifest.get("memory_budget") or {}
    limit: int | None
    if max_device_gib is not None:
        limit, where = int(max_device_gib * (1 << 30)), f"--max-device-gib {max_device_gib:g}"
    elif budget.get("bytes"):
        limit, where = int(budget["bytes"]), f"budget: {budget.get('source')}"
    else:
        limit, where = t.get("device_memory_bytes"), f"{tname}'s device memory"
    if status == "does_not_fit":
        checks.append(_check("fits", FAIL, f"the compiler ran out of device memory: "
                                           f"{manifest.get('error', '')}"))
    elif status == "ok":
        peak = memory_analysis_peak(manifest.get("memory_analysis") or {})
        if peak is None or limit is None:
            checks.append(_check("fits", SKIP, "no memory analysis or no limit to check"))
        else:
            checks.append(_check(
                "fits", PASS if peak <= limit else FAIL,
                f"device peak {format_bytes(peak)} (memory_analysis temp + arguments + outputs "
                f"- aliases) vs {format_bytes(limit)} ({where})", peak, limit))
    checks.extend(_host_checks(manifest, allow_host_compute))
    inv = manifest.get("offload_inventory") or {}
    pol: dict[str, Any] = manifest["policy"] if isinstance(manifest.get("policy"), dict) else {}
    category = pol.get("category")
    moves = _moves(inv)
    check_overlap = status == "ok" and moves > 0
    if status != "ok":
        checks.append(_check("planned_transfers", SKIP, "nothing compiled to look for copies in"))
    elif moves:
        checks.append(_check("planned_transfers", PASS, f"{moves} planned device<->host "
                             "copies per step", moves))
    elif allow_no_transfers:
        checks.append(_check("planned_transfers", PASS, "no planned device<->host copies "
                             "(allowed with --allow-no-transfers)", 0))
    elif category in ("remat", "no-remat"):
        checks.append(_check("planned_transfers", PASS, f"no planned copies; policy "
                             f"{pol.get('name')!r} ({category}) offloads nothing", 0))
    else:
        what = (f"offloading policy {pol.get('name')!r}" if category == "offload"
                else f"step {pol.get('name', 'as given')!r}")
        checks.append(_check("planned_transfers", FAIL, f"the {what} plans no device<->host "
                             "copies: offload was compiled away (--allow-no-transfers to accept)",
                             0))
    per = ((manifest.get("estimate") or {}).get("per_step") or {})
    for name, direction, lim in (("min_overlap", "all", min_overlap),
                                 ("min_overlap_d2h", "D2H", min_overlap_d2h),
                                 ("min_overlap_h2d", "H2D", min_overlap_h2d)):
        if lim is None:
            continue
        hf = (per.get(direction) or {}).get("hidden_fraction")
        which = "" if direction == "all" else f" {direction}"
        if not check_overlap:
            checks.append(_check(name, SKIP, "no planned copies: nothing to hide", None, lim))
        elif hf is None:
            if direction == "all":
                checks.append(_check(name, FAIL, "the plan has copies but no estimate", None,
                                     lim))
            else:
                checks.append(_check(name, SKIP, f"no{which} copies planned", None, lim))
        else:
            checks.append(_check(
                name, PASS if hf >= lim else FAIL,
                f"PREDICTED{which} hidden fraction {100 * hf:.0f}% (roofline estimate from the "
                f"compiled schedule, not measured) vs minimum {100 * lim:.0f}%", hf, lim))
    if min_offload_bytes is not None:
        got = (inv.get("D2H") or {}).get("executed_bytes")
        if status != "ok" or got is None:
            checks.append(_check("min_offload_bytes", FAIL, "no offload inventory to check"))
        else:
            note = ("" if inv.get("trip_counts_known", True)
                    else " (a loop count is unknown: at least)")
            checks.append(_check(
                "min_offload_bytes", PASS if got >= min_offload_bytes else FAIL,
                f"offloads {format_bytes(got)} D2H per step{note}, need at least "
                f"{format_bytes(min_offload_bytes)}", got, min_offload_bytes))
    if max_predicted_exposed_ms is not None:
        per = ((manifest.get("estimate") or {}).get("per_step") or {}).get("all") or {}
        exp = per.get("exposed_ps")
        if exp is None:
            checks.append(_check("max_predicted_exposed_ms", FAIL, "no estimate to check"))
        else:
            lim = int(round(max_predicted_exposed_ms * 1e9))
            checks.append(_check(
                "max_predicted_exposed_ms", PASS if exp <= lim else FAIL,
                f"predicted exposed transfer time {format_ps(exp)} per step (roofline "
                f"estimate, not measured) vs {format_ps(lim)}", exp, lim))
    failed = [c["name"] for c in checks if c["status"] == FAIL]
    head = "PASS" if not failed else "FAIL (" + ", ".join(failed) + ")"
    return {"passed": not failed, "checks": checks, "failed": failed,
            "verdict": f"{head}: plan {manifest.get('label')} compiled for {tname}, not run"}


def _host_checks(manifest: dict[str, Any], allow: bool) -> list[dict[str, Any]]:
    """`host_compute` and `pinned_host_cap` (`overlap.report.run_gates`) on the plan's
    ``host`` facts; skipped for a plan that did not compile or was made before them."""
    from overlap.report.run_gates import host_compute_check, pinned_host_check

    host = manifest.get("host")
    if manifest.get("status") != "ok":
        return [_check("host_compute", SKIP, "nothing compiled to look for host compute in")]
    if not isinstance(host, dict) or "host_compute" not in host:
        return [_check("host_compute", SKIP, "not recorded: plan made before overlap listed "
                       "host compute (plan again)")]
    out = [host_compute_check(host, allow=allow)]
    cap = pinned_host_check(host)
    return out + ([cap] if cap is not None else [])


def markdown(outcome: dict[str, Any]) -> str:
    """GitHub step-summary Markdown (`$GITHUB_STEP_SUMMARY`) for a plan check."""
    mark = ":white_check_mark:" if outcome["passed"] else ":x:"
    out = ["### overlap: plan check (compiled, not run)", "",
           f"{mark} **{_md(outcome['verdict'])}**", "",
           "| check | result | detail |", "|---|---|---|"]
    out += [f"| `{c['name']}` | {c['status'].upper()} | {_md(c['message'])} |"
            for c in outcome["checks"]]
    out += ["", "Overlap numbers of a plan are a roofline estimate from the compiled schedule; "
            "nothing was measured."]
    return "\n".join(out) + "\n"


def _md(s: str) -> str:
    """Escape what breaks a Markdown table cell (pipes, newlines)."""
    return str(s).replace("|", "\\|").replace("\n", " ")


def text(outcome: dict[str, Any]) -> str:
    lines = [outcome["verdict"]]
    for c in outcome["checks"]:
        lines.append(f"  [{c['status'].upper():4}] {c['name']}: {c['message']}")
    return "\n".join(lines)
