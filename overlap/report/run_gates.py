"""Gates on what a run computed and where, beside the transfer gates of `overlap.report.gate`.

Each returns one check in the outcome format of `overlap.report.gate` (`name`, `status`
pass/fail/skip, `passed`, `value`, `limit`, `message`); `add_checks` appends them to an outcome
and recomputes its `passed`, `failed` and `verdict`.

* `host_compute` (`host_compute_check`): fails when the compiled program has ops XLA runs on the
  host (`overlap.analysis.host_memory.host_compute_ops`: host calls, host-annotated or
  host-memory compute), slow and usually unintended. On by default for plan runs (a plan is
  where this should be caught, before the hardware; `--allow-host-compute` turns it into a
  pass); opt-in for captures (`--no-host-compute`), whose executed program's HLO is not always
  in the capture: then it fails as "cannot be checked" (a gate asked for must not pass on
  nothing), as on XLA:CPU, where every op is host compute by nature and the gate is skipped.
* `pinned_host_cap` (plans, on by default when the plan knows its pinned host peak and a cap
  applies): the step's pinned host peak must not exceed the GPU runtime's pinned host pool
  (`XLA_PJRT_GPU_HOST_MEMORY_LIMIT_GB`, 64 GB by default) – above it the step cannot get its
  buffers.
* `same_answer` (`same_answer_check`, opt-in: `overlap check RUN --same-answer-as BASE`):
  RUN's loss and gradient fingerprint must match BASE's within the tolerance of
  `overlap.analysis.answers` (relative; `--max-grad-diff X` sets it). A run or baseline whose
  answer was not recorded (made before overlap recorded answers), or whose answers are of
  other inputs, fails as "cannot be checked": the gate was asked for.
"""

from __future__ import annotations

from typing import Any

PASS, FAIL, SKIP = "pass", "fail", "skip"


def _check(name, status, message, value=None, limit=None) -> dict[str, Any]:
    return {"name": name, "status": status, "passed": status != FAIL, "value": value,
            "limit": limit, "message": message}


def host_compute_check(section: dict[str, Any] | None, *, allow: bool = False,
                       platform: str | None = None) -> dict[str, Any]:
    """`host_compute` from a ``host`` section (`overlap.analysis.host_memory`)."""
    hc = (section or {}).get("host_compute") or {}
    count = hc.get("count")
    if platform == "cpu":
        return _check("host_compute", SKIP, "XLA:CPU: every op runs on the host; nothing is "
                      "moved there")
    if count is None:
        return _check("host_compute", PASS if allow else FAIL,
                      f"cannot be checked: {hc.get('source') or 'no compiled program'}", None, 0)
    if not count:
        return _check("host_compute", PASS, "no op of the compiled program runs on the host "
                      f"({hc.get('source')})", 0, 0)
    names = ", ".join(f"{o['name']} ({o['opcode']})" for o in (hc.get("ops") or [])[:5])
    msg = (f"{count} op(s) of the compiled program run on the host, slowly: {names}"
           + (" ..." if count > 5 else ""))
    if allow:
        return _check("host_compute", PASS, msg + " (allowed with --allow-host-compute)",
                      count, None)
    return _check("host_compute", FAIL, msg + " (--allow-host-compute to accept)", count, 0)


def pinned_host_check(section: dict[str, Any] | None) -> dict[str, Any] | None:
    """`pinned_host_cap`, or None where there is no peak or no cap to hold it against."""
    ph = (section or {}).get("pinned_host") or {}
    peak, cap = ph.get("peak_bytes"), ph.get("cap_bytes")
    if peak is None or not cap:
        return None
    from overlap.report.units import format_bytes

    return _check("pinned_host_cap", PASS if peak <= cap else FAIL,
                  f"pinned host memory at peak {format_bytes(peak)} vs the pool's cap "
                  f"{format_bytes(cap)} ({ph.get('cap_source')})", peak, cap)


def same_answer_check(manifest: dict | None, base_manifest: dict | None, base_name: str,
                      rtol: float | None = None) -> dict[str, Any]:
    """`same_answer`: this run's ``answer`` against `base_name`'s (module docstring)."""
    from overlap.analysis import answers

    res = answers.check((manifest or {}).get("answer"), (base_manifest or {}).get("answer"),
                        rtol)
    lim = res.get("tolerance") if res.get("tolerance") is not None else rtol
    if res["status"] == answers.SAME:
        return _check("same_answer", PASS, f"as {base_name}: {res['text']}", res["grad_diff"],
                      lim)
    if res["status"] == answers.DIFFERS:
        return _check("same_answer", FAIL, f"loss or gradients differ from {base_name}'s: "
                      + res["text"].removeprefix("DIFFERS "), res["grad_diff"], lim)
    return _check("same_answer", FAIL, f"cannot be checked against {base_name}: {res['text']}",
                  None, lim)


def add_checks(outcome: dict[str, Any], checks: list[dict[str, Any]]) -> dict[str, Any]:
    """`outcome` with `checks` appended and its pass/fail head recomputed."""
    if not checks:
        return outcome
    allc = [*outcome["checks"], *checks]
    failed = [c["name"] for c in allc if c["status"] == FAIL]
    rest = outcome["verdict"].split(": ", 1)[1] if ": " in outcome["verdict"] else ""
    head = "PASS" if not failed else "FAIL (" + ", ".join(failed) + ")"
    return {**outcome, "checks": allc, "failed": failed, "passed": not failed,
            "verdict": f"{head}: {rest}" if rest else head}
