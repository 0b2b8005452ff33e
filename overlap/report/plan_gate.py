"""`overlap check` on a plan run: gates that make sense before the hardware exists.

Checks (each pass/fail/skip, in the same outcome format as `overlap.report.gate`):

* `compiles`: the step compiled for the target (a compiler error fails it).
* `fits`: the device peak (`memory_analysis` temp + arguments + outputs - aliases) is at most
  the target's device memory, or `--max-device-gib` when given. A compile that ran out of
  memory fails it with the compiler's message.
* `min_offload_bytes` (opt-in): the plan still moves at least N bytes per step to host memory
  (D2H executed bytes of the offload inventory): offload has not silently stopped.
* `max_predicted_exposed_ms` (opt-in): the roofline estimate's exposed transfer time per step
  stays under the bound. An estimate, said so in the message.
"""

from __future__ import annotations

from typing import Any

from overlap.analysis.memory import memory_analysis_peak
from overlap.report.units import format_bytes, format_ps

PASS, FAIL, SKIP = "pass", "fail", "skip"


def _check(name, status, message, value=None, limit=None) -> dict[str, Any]:
    return {"name": name, "status": status, "passed": status != FAIL, "value": value,
            "limit": limit, "message": message}


def run_plan_checks(manifest: dict[str, Any], *, min_offload_bytes: int | None = None,
                    max_device_gib: float | None = None,
                    max_predicted_exposed_ms: float | None = None) -> dict[str, Any]:
    t: dict[str, Any] = (manifest["target"] if isinstance(manifest.get("target"), dict)
                         else {})
    tname = t.get("name", "?")
    status = manifest.get("status")
    checks = []
    if status == "compile_error":
        checks.append(_check("compiles", FAIL, f"compile failed: {manifest.get('error', '')}"))
    else:
        checks.append(_check("compiles", PASS, f"compiled for {tname}"))
    limit = int(max_device_gib * (1 << 30)) if max_device_gib is not None else t.get(
        "device_memory_bytes")
    where = f"--max-device-gib {max_device_gib:g}" if max_device_gib is not None else \
        f"{tname}'s device memory"
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
    inv = manifest.get("offload_inventory") or {}
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


def text(outcome: dict[str, Any]) -> str:
    lines = [outcome["verdict"]]
    for c in outcome["checks"]:
        lines.append(f"  [{c['status'].upper():4}] {c['name']}: {c['message']}")
    return "\n".join(lines)
