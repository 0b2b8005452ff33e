"""Captures whose step did not complete, as rows the views show beside the measured runs.

A failed capture (``status`` ``does_not_fit`` or ``failed``, written by
:mod:`overlap.capture.failures`) has run.json and no trace: nothing was measured. Its row
carries what was asked (workload, policy), the error, where it happened (``phase``), the one
allocation that failed (``allocation_bytes``, parsed from the runtime's message; None when the
message names none) and the device's memory with its source (``device_memory_bytes``,
``device_memory_source``), plus ``compiled_peak_bytes`` when the step compiled: the compiler's
``memory_analysis`` peak (temp + arguments + outputs - aliases,
:func:`overlap.analysis.memory.memory_analysis_peak`). No number here is a measurement of the
step.
"""

from __future__ import annotations

from typing import Any

from overlap.analysis.memory import memory_analysis_peak


def failed_row(m: dict, name: str) -> dict[str, Any]:
    """The row of failed capture manifest `m` (normalized, `overlap.runs.rundir`), called `name`
    where it has no label."""
    f: dict[str, Any] = m["failure"] if isinstance(m.get("failure"), dict) else {}
    dm: dict[str, Any] = f["device_memory"] if isinstance(f.get("device_memory"), dict) else {}
    pol = m.get("policy")
    wl = m.get("workload")
    mem = m.get("memory_analysis")
    return {
        "label": m.get("label") or name, "status": m.get("status"),
        "policy": str(pol.get("name")) if isinstance(pol, dict) else (pol or None),
        "workload": (f"{wl.get('name') or ''}:{wl.get('size') or ''}".strip(":")
                     if isinstance(wl, dict) else wl or None),
        "error": m.get("error"), "phase": f.get("phase"),
        "allocation_bytes": f.get("allocation_bytes"),
        "device_memory_bytes": dm.get("bytes"), "device_memory_source": dm.get("source"),
        "compiled_peak_bytes": memory_analysis_peak(mem) if isinstance(mem, dict) and mem
        else None,
        "platform": (m.get("backend") or {}).get("platform"),
        "device_kind": (m.get("backend") or {}).get("device_kind"),
    }


def _gib(n: int | None) -> str:
    return "?" if n is None else f"{n / (1 << 30):.2f} GiB"


def verdict(row: dict[str, Any]) -> str:
    """One line: DOES NOT FIT / FAILED, where, the allocation against the device's memory."""
    what = "DOES NOT FIT" if row["status"] == "does_not_fit" else "FAILED"
    parts = [f"{what} while {row.get('phase') or 'running the step'}"]
    if row.get("allocation_bytes") is not None:
        parts.append(f"an allocation of {_gib(row['allocation_bytes'])} failed")
    if row.get("compiled_peak_bytes") is not None:
        parts.append(f"compiled peak {_gib(row['compiled_peak_bytes'])} (memory_analysis)")
    if row.get("device_memory_bytes") is not None:
        parts.append(f"device memory {_gib(row['device_memory_bytes'])} "
                     f"({row.get('device_memory_source')})")
    return "; ".join(parts) + " (nothing captured)"

