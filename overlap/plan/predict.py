"""`overlap report CAPTURE --predict`: the estimate of the program a capture ran, beside it.

A capture carries the compiled, scheduled HloProto of every program it ran (`/host:metadata`).
For each program whose copies the capture measured, this prints that proto as HLO text (XLA's
own printer, through jaxlib), runs the plan estimate on it for the capture's target (from the
device kind, or `--target`), and joins the estimate's copy ops to the measured ones by name
(`overlap.analysis.predict`). It runs the estimate twice: at the target's data-sheet link
bandwidth, and at the link bandwidth the capture measured, which separates "the link was
slower than the sheet" from "the model is wrong about the schedule".

`overlap report CAPTURE --plan PLAN_RUN` (:func:`predict_from_plan`) does the same join with a
plan run's own estimate in place of the captured proto's, when the plan compiled the program
the capture measured (`overlap.analysis.plan_join.match`: module, inputs, policy, target);
otherwise the section says why nothing was joined.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from overlap.errors import UsageError
from overlap.hlo.program import parses_kept
from overlap.plan.targets import Target, get_target, target_for_device_kind

_PID_RE = re.compile(r"\((\d+)\)\s*$")
_CB_RE = re.compile(r"^command_buffer_\d+$")


def _target_name(trace, target: str | None) -> tuple[str, str]:
    if target:
        return get_target(target).name, "given with --target"
    # (each kind once, in the order the devices table first names it)
    kinds = [str(k) for k in dict.fromkeys(trace.columns("devices")["name"]) if k is not None]
    for k in kinds:
        name = target_for_device_kind(k)
        if name:
            return name, f"from the capture's device kind {k!r}"
    raise UsageError("cannot tell the target from the capture's device kind "
                     f"({', '.join(kinds) or 'none recorded'}); pass --target")


def _joined(trace, by_pid: dict[int, tuple[str, str]], missing: dict[int, str] | None = None):
    """The capture's copies joined to their ops (`overlap.analysis.copy_join`): (per-transfer
    metrics, program id per transfer, op per transfer, unjoined groups, ProgramOps by id).
    `missing`: program id -> why its HLO is not at hand (an unreadable HloProto)."""
    from overlap.analysis.copy_join import ProgramOps, join_copies
    from overlap.analysis.overlap import transfer_columns

    table, _ = transfer_columns(trace)
    progs = {pid: ProgramOps(text) for pid, (_, text) in by_pid.items()}
    pid, op, unjoined = join_copies(dict(trace.columns("transfers")),
                                    dict(trace.columns("compute")), progs, missing)
    return table, pid, op, unjoined, progs


def _measured_link(transfers, pid, backend: str) -> tuple[dict, float | None, float | None]:
    """(link_throughput of the program's copies, D2H and H2D rates the estimate is rerun at):
    the busy-time rate (`overlap.analysis.predict.link_throughput`). On TPU a span runs to its
    done's end, which can come after the bytes moved, so that rate reads low there."""
    from overlap.analysis.predict import link_throughput

    measured = link_throughput(transfers, pid)
    return (measured, (measured.get("D2H") or {}).get("link_Bps"),
            (measured.get("H2D") or {}).get("link_Bps"))


def _captured(text: str, tgt: Target, backend: str, streams: dict[str, Any] | None = None,
              **overrides: Any) -> dict[str, dict]:
    """Per op, the estimate's span and hidden time on the capture's span definition."""
    from overlap.analysis.predict import as_captured
    from overlap.hlo.schedule import predicted_timeline
    from overlap.plan.estimate import roofline_for

    model, _ = roofline_for(tgt, **overrides)
    return as_captured(predicted_timeline(text, model, streams), backend)


def _streams(trace, tgt: Target, pid: Any, text: str, proto: bytes | None,
             pid_col: np.ndarray, op_col: np.ndarray) -> tuple[dict[str, Any] | None, str]:
    """(stream of each async op, where that comes from) for one program of a GPU capture:
    XLA:GPU's execution-stream rule (`overlap.hlo.streams`) over the instruction order of the
    capture's HloProto, checked against the streams the capture's joined host copies ran on
    (`overlap.analysis.copy_join.stream_check`). Where the capture disagrees, its host copies'
    own streams are used and device-side async ops get a stream of their own each."""
    from overlap.analysis.copy_join import stream_check
    from overlap.hlo.program import offload_inventory, parsed
    from overlap.hlo.streams import XLA_GPU_EXECUTION_STREAMS, execution_streams, proto_order

    if tgt.platform != "cuda" or not proto:
        return None, ""
    got = parsed(text, uncommented=True)
    comps, entry = got.comps, got.entry
    try:
        rule = execution_streams(comps, entry, proto_order(proto))
    except Exception:  # a proto the printer read but our schema cannot: no order, no rule
        rule = {}
    if not rule:
        return None, "XLA's instruction order could not be read from the HloProto"
    n = XLA_GPU_EXECUTION_STREAMS
    how = (f"XLA:GPU's assignment: async ops in the HloProto's order take execution streams "
           f"1..{n} in turn")
    execs = {o.name: o.executions for o in offload_inventory(text).ops}
    chk = stream_check(dict(trace.columns("transfers")), op_col, pid_col, pid, execs, rule)
    if not chk["runs"]:
        return rule, how + " (the capture's copies name no stream to check it by)"
    if chk["agree"]:
        return rule, how + (f"; checked on the capture: its host copies ran on those streams in "
                            f"all {chk['runs']} runs")
    # The rule does not describe this capture: its host copies' own streams (most often per op)
    tr = trace.columns("transfers")
    stream = np.asarray(tr["stream"], object)
    own: dict[str, Any] = {}
    for name in set(op_col[(pid_col == pid)].tolist()) - {None}:
        vals = stream[(pid_col == pid) & (op_col == name)].tolist()
        if vals:
            own[name] = ("captured", max(set(vals), key=vals.count))
    return own, ("the capture's own streams for host copies (XLA's rule disagreed: "
                 + "; ".join(chk["mismatch"]) + "); device-side async ops each on their own")


def _entry(name: str, pid: Any, text: str | None, est: dict, tgt: Target, backend: str,
           measured: dict, link: tuple[dict, float | None, float | None],
           overrides: dict[str, Any], kernel_floor_us: float | None,
           streams: tuple[dict[str, Any] | None, str] = (None, "")) -> dict[str, Any]:
    """One program's section: the estimate's ops beside the measured ones (and again at the
    measured link), per step on both sides, on the capture's span definition."""
    from overlap.analysis.predict import SPAN_DEFINITION, join, per_step, program_runs
    from overlap.plan.estimate import estimate_for

    ml, d2h, h2d = link
    again = captured = captured_again = None
    if text is not None:
        captured = _captured(text, tgt, backend, streams[0], kernel_floor_us=kernel_floor_us,
                             **overrides)
    if text and (d2h or h2d):
        at = dict(overrides, host_link_Bps=d2h or h2d, h2d_link_Bps=h2d or d2h)
        again = estimate_for(text, tgt, kernel_floor_us=kernel_floor_us, streams=streams[0],
                             streams_source=streams[1], **at)
        captured_again = _captured(text, tgt, backend, streams[0],
                                   kernel_floor_us=kernel_floor_us, **at)
    one_way = d2h or h2d
    suggest = None
    if one_way:
        suggest = (f"overlap plan --target {tgt.name} --host-bandwidth {one_way / 1e9:.1f}"
                   + (f" --host-bandwidth-h2d {h2d / 1e9:.1f}" if h2d and d2h else ""))
    execs = {r["op"]: r["executions"] for r in est.get("ops") or []}
    dirs = {r["op"]: r["direction"] for r in est.get("ops") or []}
    runs = program_runs(measured, execs)
    return {"module": name, "program_id": pid,
            "ops": join(measured, est, captured=captured, estimate_at_measured=again,
                        captured_at_measured=captured_again),
            "span_definition": SPAN_DEFINITION.get(backend, SPAN_DEFINITION["gpu"]),
            "measured_link": ml, "plan_with_measured_bandwidth": suggest,
            "model": est.get("model") or {}, "assumptions": est.get("assumptions") or [],
            "streams": est.get("streams"),
            "predicted_per_step": est.get("per_step"),
            "predicted_per_step_at_measured_link": again["per_step"] if again else None,
            "runs": runs,
            "measured_per_step_as_captured": per_step(measured, execs, dirs, runs)
            if runs else None,
            "predicted_per_step_as_captured": per_step(captured, execs, dirs)
            if captured else None,
            "predicted_per_step_as_captured_at_measured_link":
                per_step(captured_again, execs, dirs) if captured_again else None,
            "predicted_step_ps": est.get("step_ps"),
            "predicted_step_ps_at_measured_link": again.get("step_ps") if again else None}


def _unjoined_section(unjoined: list[dict], n: int) -> dict[str, Any]:
    """`transfers`, `copies_joined`, `copies_unjoined` (counts: they sum to `transfers`) and the
    unjoined groups with their reasons (`overlap.analysis.copy_join`)."""
    left = sum(g["count"] for g in unjoined)
    return {"transfers": n, "copies_joined": n - left, "copies_unjoined": left,
            "unjoined_groups": unjoined}


def _in_command_buffers(trace_ops: np.ndarray, pid_col: np.ndarray, pid: Any) -> bool:
    """Did the program's copies run inside XLA:GPU command buffers (CUDA graphs)? Most of them
    named `command_buffer_N` in the trace."""
    from overlap.arrays import factorize

    codes, uniq = factorize(trace_ops[pid_col == pid])
    if not len(codes):
        return False
    graph = np.array([bool(_CB_RE.match(str(u))) for u in uniq.tolist()] + [False], bool)
    return bool(graph[codes].mean() >= 0.5)  # code -1 (no name) reads the last: False


def _protos_by_pid(trace, pids: set) -> tuple[dict[int, str], dict[int, bytes]]:
    """(program id -> module name, program id -> serialized HloProto) of the programs in
    `pids` whose HloProto the capture carries."""
    names: dict[int, str] = {}
    raw: dict[int, bytes] = {}
    mods = trace.columns("modules")
    for name, proto in zip(mods["name"], mods["hlo_proto"]):
        m = _PID_RE.search(str(name))
        if m and proto and int(m.group(1)) in pids:
            names[int(m.group(1))] = str(name)
            raw[int(m.group(1))] = bytes(proto)
    return names, raw


def _measured_pids(trace) -> set[int]:
    """The program ids of the capture's measured copies: the programs a prediction prints."""
    return {int(p) for p in trace.columns("transfers")["program_id"] if p is not None}


def protos_to_print(trace) -> dict[int, bytes]:
    """The HloProtos `predict_capture` will print (program id -> bytes): what a report hands
    XLA's printer ahead (`overlap.hlo.proto_print.hand_ahead`), before its other sections."""
    return _protos_by_pid(trace, _measured_pids(trace))[1]


def _hlo_by_pid(trace, pids: set, protos: dict[Any, bytes] | None = None,
                missing: dict[int, str] | None = None
                ) -> tuple[dict[Any, tuple[str, str]], list[str]]:
    """(program id -> (module name, HLO text)) of the programs in `pids` whose HloProto the
    capture carries and XLA's printer reads (`overlap.hlo.proto_print`: checked first, printed
    in a child process, so a damaged proto cannot abort this one), and a note per one it
    cannot; `protos` (if given) gets each printed program's serialized proto, `missing` (if
    given) each unreadable one's reason."""
    from overlap.hlo.proto_print import print_protos

    names, raw = _protos_by_pid(trace, pids)
    out: dict[Any, tuple[str, str]] = {}
    notes = []
    for pid, (text, why) in sorted(print_protos(raw).items()):
        if text is not None:
            out[pid] = (names[pid], text)
            if protos is not None:
                protos[pid] = raw[pid]
        else:  # a damaged proto is no program: said, the rest goes on
            reason = f"its HloProto cannot be read ({why})"
            notes.append(f"program {pid} ({names[pid]}): {reason}")
            if missing is not None:
                missing[pid] = f"program {pid}: {reason}"
    return out, notes


@parses_kept()  # (each program's text parsed once for all the steps below)
def predict_capture(trace, result: dict, *, target: str | None = None,
                    host_link_Bps: float | None = None, h2d_link_Bps: float | None = None,
                    kernel_floor_us: float | None = None,
                    command_buffers: bool | None = None) -> dict[str, Any]:
    """The `prediction` section of a report (JSON-safe): per program with measured copies, the
    estimate's ops beside the measured ones, the measured link bandwidth per direction, and the
    assumptions; which copies were not joined to an op, and why. Raises UsageError when the
    capture carries no program to predict. `command_buffers`: XLA:GPU's setting in the run
    (None: the estimate's own default)."""
    from overlap.plan.estimate import estimate_for

    tname, tsource = _target_name(trace, target)
    tgt = get_target(tname)
    backend = str(result.get("backend") or "")
    if backend in ("gpu", "tpu") and tgt.platform != ("cuda" if backend == "gpu" else "tpu"):
        raise UsageError(f"--target {tname} is a {tgt.platform} target; this capture ran on "
                         f"{backend.upper()}")
    # (the tables' columns, not their DataFrames: no pandas, issue 32)
    transfers = trace.columns("transfers")
    pids = _measured_pids(trace)
    protos: dict[Any, bytes] = {}
    missing: dict[int, str] = {}
    by_pid, notes = _hlo_by_pid(trace, pids, protos, missing)
    table, pid_col, op_col, unjoined, _ = _joined(trace, by_pid, missing)
    trace_ops = np.asarray(trace.columns("transfers")["hlo_op"], object)
    overrides: dict[str, Any] = {"host_link_Bps": host_link_Bps, "h2d_link_Bps": h2d_link_Bps}
    if command_buffers is not None and tgt.platform == "cuda":
        overrides["command_buffers"] = command_buffers
    programs = []
    from overlap.analysis.predict import measured_ops

    for pid in sorted(by_pid):
        name, text = by_pid[pid]
        measured = measured_ops(table, pid_col, op_col, pid)
        if not measured:
            continue
        ov = dict(overrides)
        if tgt.platform == "cuda" and "command_buffers" not in ov:
            # What the run did, from the capture: copies inside CUDA graphs carry the graph's
            # name (not this process's XLA_FLAGS, which is not the run's).
            ov["command_buffers"] = _in_command_buffers(trace_ops, pid_col, pid)
        streams: tuple[dict[str, Any] | None, str] = (None, "")
        if tgt.platform == "cuda" and not ov.get("command_buffers"):
            streams = _streams(trace, tgt, pid, text, protos.get(pid), pid_col, op_col)
        est = estimate_for(text, tgt, kernel_floor_us=kernel_floor_us, streams=streams[0],
                           streams_source=streams[1], **ov)
        if "command_buffers" in ov and tgt.platform == "cuda":
            est["model"]["command_buffers_source"] = (
                "given" if "command_buffers" in overrides else
                "from the capture: its copies " + ("ran inside CUDA graphs (command_buffer_N)"
                                                   if ov["command_buffers"] else
                                                   "ran outside CUDA graphs"))
        link = _measured_link(transfers, pid, backend)
        programs.append(_entry(name, pid, text, est, tgt, backend, measured, link, ov,
                               kernel_floor_us, streams))
    join_info = _unjoined_section(unjoined, len(op_col))
    if not programs and missing:
        # Programs the capture carries but that cannot be read: said, and the measured report
        # goes on (nothing of the capture is lost to a damaged program).
        return {"kind": "prediction", "predicted": False,
                "note": "nothing predicted: the program(s) whose copies the capture measured "
                        "cannot be read; the measured report stands",
                "target": tname, "target_source": tsource, "programs": [], "notes": notes,
                **join_info}
    if not programs:
        why = "; ".join(f"{g['count']} {g['direction']} {g['hlo_op']}: {g['reason']}"
                        for g in unjoined[:3])
        raise UsageError("nothing to predict: the capture has no copies of a program whose "
                         "HloProto it carries" + (f" ({why})" if why else "")
                         + (f" ({'; '.join(notes)})" if notes else ""))
    return {
        "kind": "prediction", "predicted": True,
        "note": "predicted = the plan estimate of the captured program (roofline + host-link "
                "model), not a measurement; measured = this capture",
        "target": tname, "target_source": tsource, "programs": programs, "notes": notes,
        **join_info,
    }


@parses_kept()
def predict_from_plan(trace, result: dict, plan: dict, run: dict,
                      hlo_text: str | None = None) -> dict[str, Any]:
    """The `prediction` section for `overlap report CAPTURE --plan PLAN_RUN` (JSON-safe):
    `joined` False with `reason` when the plan did not compile the capture's program, else the
    plan's estimate per copy op beside the measured copies, as :func:`predict_capture` lays it
    out. `run`: the capture's fingerprint as `overlap.analysis.plan_join.match` reads it."""
    from overlap.analysis.plan_join import match, module_base

    tname = str((plan.get("target") or {}).get("name") if isinstance(plan.get("target"), dict)
                else plan.get("target") or "?")
    label = f"predicted (plan for {tname})"
    ok, how = match(run, plan, target_for_device_kind)
    base = {"kind": "prediction", "label": label, "plan": plan.get("label"), "target": tname,
            "target_source": f"plan {plan.get('label')}, compiled for {tname}, not run",
            "note": "predicted = the plan run's roofline estimate (compiled for the target, "
                    "not run), not a measurement; measured = this capture"}
    if not ok:
        return {**base, "joined": False, "reason": how, "programs": [], "notes": []}
    tgt = get_target(tname)
    transfers = trace.columns("transfers")
    want = module_base((plan.get("program") or {}).get("module") or plan.get("module"))
    pids = sorted({int(p) for p in transfers["program_id"] if p is not None})
    names = {}
    for name in map(str, trace.columns("modules")["name"]):
        m = _PID_RE.search(name)
        if m and module_base(name) == want and int(m.group(1)) in pids:
            names[int(m.group(1))] = name
    notes = []
    rid = (run.get("program") or {}).get("program_id")
    if rid is not None and int(rid) in names:
        names = {int(rid): names[int(rid)]}  # run.json says which compile ran
    elif len(names) > 1:
        notes.append(f"{len(names)} compiles of {want} moved copies in this capture; each is "
                     "shown against the plan")
    kernel_floor_us = None
    fl = ((plan.get("estimate") or {}).get("model") or {}).get("kernel_floor_ps")
    if fl is not None:
        kernel_floor_us = fl / 1e6
    # Copies are named by the plan's HLO where it is at hand (the same program), else by the
    # capture's own HloProto of that compile (its async-wrapper and command-buffer names).
    own, bad = _hlo_by_pid(trace, set(names))
    notes += bad
    texts = {pid: (name, hlo_text if hlo_text is not None else own.get(pid, (name, None))[1])
             for pid, name in names.items()}
    by_pid = {pid: (n, t) for pid, (n, t) in texts.items() if t is not None}
    table, pid_col, op_col, unjoined, _ = _joined(trace, by_pid)
    from overlap.analysis.predict import measured_ops

    backend = str(result.get("backend") or "")
    # The re-estimates (as captured, at the measured link) put the async ops on the streams
    # the plan's own estimate used (from its HloProto, `overlap.plan.estimate.plan_streams`).
    st = (plan.get("estimate") or {}).get("streams") or {}
    streams: tuple[dict[str, Any] | None, str] = (
        (dict(st["ops"]), str(st.get("source") or "")) if st.get("modelled") and
        isinstance(st.get("ops"), dict) else (None, ""))
    programs = []
    for pid, (name, _) in sorted(texts.items()):
        measured = measured_ops(table, pid_col, op_col, pid)
        programs.append(_entry(name, pid, hlo_text, plan["estimate"], tgt, backend, measured,
                               _measured_link(transfers, pid, backend), {},
                               kernel_floor_us, streams))
    return {**base, "joined": True, "matched_by": how, "programs": programs, "notes": notes,
            **_unjoined_section(unjoined, len(op_col))}
