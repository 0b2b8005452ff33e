"""The overlap estimate for a target: its machine model, with the user's overrides named.

One place builds the `overlap.hlo.schedule.Roofline` a plan (or `overlap report --predict`)
uses from a target's data-sheet numbers, so that a plan and a prediction for a capture assume
the same things, and so that every number the user overrode says so in the estimate's model
and assumptions (`--host-bandwidth`, `--kernel-floor-us`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from overlap.errors import UsageError
from overlap.hlo.program import parses_kept
from overlap.plan.targets import Target

_CB_FLAG_RE = re.compile(r"--xla_gpu_enable_command_buffer(?:=(\S*))?")


def command_buffers_from_flags(flags: str | None) -> bool | None:
    """Whether `XLA_FLAGS` text turns XLA:GPU's command buffers on (True), off (False: the flag
    given empty, as `overlap capture` does), or leaves XLA's default (None: flag absent). The
    last occurrence wins, as XLA's flag parser takes it."""
    found = _CB_FLAG_RE.findall(flags or "")
    if not found:
        return None
    return bool(found[-1].strip().strip("'\""))


def command_buffers_for(target: Target, given: bool | None = None,
                        calibration: Any = None,
                        env: Mapping[str, str] | None = None) -> tuple[bool, str]:
    """(command buffers on?, why) for an estimate on `target`: `given`, else the calibration
    run's flags, else this process's XLA_FLAGS, else XLA's default for the target."""
    if target.platform != "cuda":
        return False, "TPU: no command buffers"
    if given is not None:
        return given, "given"
    cal = getattr(calibration, "command_buffers", None)
    if cal is not None:
        return cal, f"as in the calibration run {calibration.run}"
    env = os.environ if env is None else env
    flag = command_buffers_from_flags(env.get("XLA_FLAGS"))
    if flag is not None:
        return flag, "XLA_FLAGS in this environment"
    return target.command_buffers_default, "XLA's default (XLA_FLAGS does not set it)"


def roofline_for(target: Target, *, host_link_Bps: float | None = None,
                 h2d_link_Bps: float | None = None,
                 kernel_floor_us: float | None = None, command_buffers: bool | None = None,
                 calibration: Any = None) -> tuple[Any, dict[str, Any]]:
    """(Roofline, model dict) for `target`; overrides replace the target's numbers and are
    named as given in the model dict (which is printed next to every estimate).

    `calibration` (`overlap.plan.calibrate.Calibration`): its compute scale, launch gap, link
    and command-buffer setting replace the target's (explicit bandwidths still win)."""
    from overlap.hlo.schedule import Roofline

    for name, v in (("--host-bandwidth", host_link_Bps), ("H2D bandwidth", h2d_link_Bps)):
        if v is not None and not (0 < v < 1e16):
            raise UsageError(f"{name} must be a positive bandwidth, got {v}")
    if kernel_floor_us is not None and not (0 <= kernel_floor_us < 1e6):
        raise UsageError(f"--kernel-floor-us must be >= 0 microseconds, got {kernel_floor_us}")
    floor_s = target.kernel_floor_s if kernel_floor_us is None else kernel_floor_us * 1e-6
    cal_link = (getattr(calibration, "link", None) or {}) if not (
        host_link_Bps or h2d_link_Bps) else {}
    d2h = host_link_Bps or cal_link.get("D2H_Bps") or target.host_link_Bps
    h2d = h2d_link_Bps or (host_link_Bps or None) or cal_link.get("H2D_Bps")
    share = cal_link.get("duplex_share") or target.duplex_share
    cb, cb_why = command_buffers_for(target, command_buffers, calibration)
    model = Roofline(target.hbm_Bps, target.peak_flops_bf16, target.peak_flops_f32, d2h,
                     kernel_floor_ps=int(round(floor_s * 1e12)),
                     h2d_link_Bps=h2d, full_duplex=target.full_duplex,
                     duplex_share=min(1.0, max(0.0, float(share))),
                     copies_on_compute_stream=cb,
                     compute_scale=float(getattr(calibration, "compute_scale", 1.0) or 1.0),
                     kernel_gap_ps=int(getattr(calibration, "gap_ps", 0) or 0))
    info = target.model()
    info["kernel_floor_ps"] = model.kernel_floor_ps
    if kernel_floor_us is not None:
        info["kernel_floor_source"] = "given with --kernel-floor-us"
    if host_link_Bps or h2d_link_Bps:
        info["host_link"] = "given" + (" (measured)" if h2d_link_Bps else " with --host-bandwidth")
    elif cal_link:
        info["host_link"] = cal_link.get("source") or "measured by the calibration"
    info["host_link_Bps"] = model.link_Bps("D2H")
    info["h2d_link_Bps"] = model.link_Bps("H2D")
    info["duplex_share"] = model.duplex_share
    info["command_buffers"] = cb
    info["command_buffers_source"] = cb_why
    info["compute_scale"] = model.compute_scale
    info["kernel_gap_ps"] = model.kernel_gap_ps
    if calibration is not None:
        info["calibration"] = calibration.run
    return model, info


def plan_streams(hlo_text: str, hlo_proto: bytes | None, target: Target, *,
                 calibration: Any = None) -> tuple[dict[str, Any] | None, str]:
    """(stream of each async op, where that comes from) for a plan's program on `target`, as
    `estimate_for(..., streams=, streams_source=)` takes them (`overlap.hlo.streams`).

    1. With a `calibration` whose run ran this very program (same content,
       `Calibration.streams_for`): the streams observed in that capture (XLA:GPU's rule over its
       HloProto, checked against the CUDA streams its host copies ran on, or those streams
       where the rule disagreed).
    2. Else XLA:GPU's rule over the plan's own HloProto (`Plan.hlo_proto`): the rule needs the
       proto's instruction order; the HLO text is in schedule order, which is not it.
    3. Else None (each async op on a stream of its own), with the reason.

    TPU targets: None, "" (the execution-stream rule is XLA:GPU's)."""
    if target.platform != "cuda":
        return None, ""
    from overlap.hlo.program import parsed
    from overlap.hlo.streams import XLA_GPU_EXECUTION_STREAMS as N_STREAMS
    from overlap.hlo.streams import execution_streams, is_async_start, proto_order

    other = ""
    if calibration is not None and getattr(calibration, "streams_for", None) is not None:
        got = calibration.streams_for(hlo_text)
        if got is not None:
            return got
        if getattr(calibration, "streams_source", ""):
            other = (f"; the calibration run {calibration.run} ran another program, so the "
                     "streams observed there do not apply")
    got = parsed(hlo_text, uncommented=True)
    comps, entry = got.comps, got.entry
    if not any(is_async_start(i.opcode) for instrs in comps.values() for i in instrs):
        return None, "the program has no async ops" + other
    if not hlo_proto:
        return None, ("the plan carries no HloProto, and XLA:GPU's stream rule needs its "
                      "instruction order" + other)
    try:
        rule = execution_streams(comps, entry, proto_order(hlo_proto))
    except Exception:  # noqa: BLE001 - a proto our schema cannot read: no order, no rule
        rule = {}
    if not rule:
        return None, ("the plan's HloProto does not list its program's instructions, so "
                      "XLA:GPU's stream rule cannot be applied" + other)
    return rule, (f"XLA:GPU's assignment over the plan's HloProto: async ops in its instruction "
                  f"order, breadth first from the entry, take execution streams "
                  f"1..{N_STREAMS} in turn" + other)


@parses_kept()  # (the text parsed once by the schedule, its timeline and streams)
def estimate_for(hlo_text: str, target: Target, *, calibration: Any = None,
                 streams: dict[str, Any] | None = None, streams_source: str = "",
                 **overrides: Any) -> dict[str, Any]:
    """`overlap.hlo.schedule.estimate_overlap` of `hlo_text` under `target`'s model (see
    `roofline_for` for the overrides). With a `calibration`, instructions it measured (matched
    by content, `Calibration.kernel_ps_for`) take their measured time. `streams` /
    `streams_source`: the async ops' streams (`overlap.hlo.streams`), passed through."""
    from overlap.hlo.schedule import estimate_overlap

    model, info = roofline_for(target, calibration=calibration, **overrides)
    kernel_ps, how = None, ""
    if calibration is not None:
        kernel_ps, stats = calibration.kernel_ps_for(hlo_text, model)
        info["calibration_match"] = stats
        how = calibration.describe(stats)
    est = estimate_overlap(hlo_text, model, link_name=str(info.get("host_link") or ""),
                           kernel_ps=kernel_ps, calibration=how, streams=streams,
                           streams_source=streams_source)
    est["model"].update(info)
    if model.kernel_floor_ps:
        est["assumptions"] = [a if not a.startswith("each kernel takes at least") else
                              f"{a} ({info.get('kernel_floor_source') or 'target data'})"
                              for a in est["assumptions"]]
    return est
