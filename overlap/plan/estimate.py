"""The overlap estimate for a target: its machine model, with the user's overrides named.

One place builds the `overlap.hlo.schedule.Roofline` a plan (or `overlap report --predict`)
uses from a target's data-sheet numbers, so that a plan and a prediction for a capture assume
the same things, and so that every number the user overrode says so in the estimate's model
and assumptions (`--host-bandwidth`, `--kernel-floor-us`).
"""

from __future__ import annotations

from typing import Any

from overlap.errors import UsageError
from overlap.plan.targets import Target


def roofline_for(target: Target, *, host_link_Bps: float | None = None,
                 h2d_link_Bps: float | None = None,
                 kernel_floor_us: float | None = None) -> tuple[Any, dict[str, Any]]:
    """(Roofline, model dict) for `target`; overrides replace the target's numbers and are
    named as given in the model dict (which is printed next to every estimate)."""
    from overlap.hlo.schedule import Roofline

    for name, v in (("--host-bandwidth", host_link_Bps), ("H2D bandwidth", h2d_link_Bps)):
        if v is not None and not (0 < v < 1e16):
            raise UsageError(f"{name} must be a positive bandwidth, got {v}")
    if kernel_floor_us is not None and not (0 <= kernel_floor_us < 1e6):
        raise UsageError(f"--kernel-floor-us must be >= 0 microseconds, got {kernel_floor_us}")
    floor_s = target.kernel_floor_s if kernel_floor_us is None else kernel_floor_us * 1e-6
    d2h = host_link_Bps or target.host_link_Bps
    model = Roofline(target.hbm_Bps, target.peak_flops_bf16, target.peak_flops_f32, d2h,
                     kernel_floor_ps=int(round(floor_s * 1e12)),
                     h2d_link_Bps=h2d_link_Bps or (host_link_Bps or None),
                     full_duplex=target.full_duplex)
    info = target.model()
    info["kernel_floor_ps"] = model.kernel_floor_ps
    if kernel_floor_us is not None:
        info["kernel_floor_source"] = "given with --kernel-floor-us"
    if host_link_Bps or h2d_link_Bps:
        info["host_link"] = "given" + (" (measured)" if h2d_link_Bps else " with --host-bandwidth")
    info["host_link_Bps"] = model.link_Bps("D2H")
    info["h2d_link_Bps"] = model.link_Bps("H2D")
    return model, info


def estimate_for(hlo_text: str, target: Target, **overrides: Any) -> dict[str, Any]:
    """`overlap.hlo.schedule.estimate_overlap` of `hlo_text` under `target`'s model (see
    `roofline_for` for the overrides)."""
    from overlap.hlo.schedule import estimate_overlap

    model, info = roofline_for(target, **overrides)
    est = estimate_overlap(hlo_text, model, link_name=str(info.get("host_link") or ""))
    est["model"].update(info)
    if model.kernel_floor_ps:
        est["assumptions"] = [a if not a.startswith("each kernel takes at least") else
                              f"{a} ({info.get('kernel_floor_source') or 'target data'})"
                              for a in est["assumptions"]]
    return est
