"""What the capture's own compiled programs plan to move between device and host.

`planned_host_copies(path, trace)` answers one question for a capture without transfers: was
any host copy *planned*? It tells a remat or save baseline (its programs move nothing to
host memory, so "no transfers" is the right and expected answer) from offload that silently
stopped happening (the programs plan copies and the trace shows none).

Definition: `count` is the number of host-copy instructions (`overlap.hlo.program.
offload_inventory`: copies, async dynamic-slices and dynamic-update-slices to or from host
memory space S(5)) summed over the evidence, per static instruction (loops not multiplied).
The evidence, in order:

* a run directory's `run.json` with an `offload_inventory` (what `overlap capture` compiled);
* else every program the capture files carry (`Hlo Proto` stats on `/host:metadata`, which
  `jax.profiler` writes by default): all of them, helper programs included, since the trace
  alone does not say which one is the step. A copy planned in any of them counts.

`asked` is whether the run's policy asked for offload (run.json's `policy.offloaded`; None
where nothing says). `count` is None (and `source` says why) when there is no such evidence:
a capture made with HLO protos off, a TensorFlow capture. Blind spots: a program that ran
but whose proto the capture lacks; copies a runtime makes outside any program
(`jax.device_put` of host arrays) are never planned, so a capture that only has those is
not a baseline by this rule.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def planned_host_copies(path: str | Path | None, trace: Any = None) -> dict[str, Any]:
    """{count, asked, source} for the capture at `path` (a run directory, a log directory or a
    file) read as `trace`. See the module docstring."""
    p = Path(path) if path is not None else None
    if p is not None and p.is_dir():
        from overlap.runs.rundir import load_manifest

        manifest = load_manifest(p)
        inv = (manifest or {}).get("offload_inventory")
        policy = (manifest or {}).get("policy")
        asked = policy.get("offloaded") if isinstance(policy, dict) else None
        if isinstance(inv, dict) and any(isinstance(inv.get(d), dict) for d in ("D2H", "H2D")):
            count = sum(int((inv.get(d) or {}).get("count") or 0) for d in ("D2H", "H2D"))
            return {"count": count, "asked": asked,
                    "source": "run.json's offload inventory"}
    from overlap.analysis.names import capture_protos

    return _from_protos(list(capture_protos(trace).values()) if trace is not None else [])


def _from_protos(protos: list[bytes]) -> dict[str, Any]:
    from overlap.hlo.program import offload_inventory

    count, programs, unreadable = 0, 0, 0
    for blob in protos:
        try:
            inv = offload_inventory(blob)
        except Exception:  # noqa: BLE001 - a damaged program is evidence of nothing
            unreadable += 1
            continue
        programs += 1
        count += len(inv.ops)
    if unreadable:
        return {"count": None, "asked": None,
                "source": f"{unreadable} program(s) in the capture could not be parsed"}
    if not programs:
        return {"count": None, "asked": None,
                "source": "the capture carries no compiled program (HLO proto)"}
    return {"count": count, "asked": None,
            "source": f"the capture's {programs} compiled program(s)"}


BASELINE_REASON = (
    "The capture has device compute and no device<->host transfers, and none was planned "
    "(per {source}): a baseline without offload (remat or save), as expected.")
ASKED_NOT_COMPILED_REASON = (
    "The capture has device compute but no device<->host transfers: the run's policy asks for "
    "offload, and the compiler planned no host copy ({source}): offload was compiled away.")
NOT_HAPPENING_REASON = (
    "The capture has device compute but no device<->host transfers, while {count} host "
    "cop{plural} {verb} planned ({source}): offload did not happen in the captured steps (is the "
    "profile covering steps that offload?).")


def is_baseline(planned: Any) -> bool:
    """Nothing was meant to move: no host copy planned, and no offload asked for."""
    return isinstance(planned, dict) and planned.get("count") == 0 and not planned.get("asked")


def planned_reason(planned: dict[str, Any]) -> str | None:
    """The NO_TRANSFERS reason once the plan is known (None: unknown, keep the generic one)."""
    count = planned.get("count")
    if count is None:
        return None
    if count == 0 and planned.get("asked"):
        return ASKED_NOT_COMPILED_REASON.format(source=planned["source"])
    if count == 0:
        return BASELINE_REASON.format(source=planned["source"])
    return NOT_HAPPENING_REASON.format(count=count, plural="y" if count == 1 else "ies",
                                       verb="was" if count == 1 else "were",
                                       source=planned["source"])
