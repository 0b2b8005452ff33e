"""Calibrate the plan estimate from a measurement of the same step on the target.

`overlap plan|advise --calibrate RUN`: RUN is a run directory `overlap capture` wrote on the
target (`run.json`, `hlo/*.hlo.txt`, the trace), e.g. the full-remat baseline. From it:

* Measured kernel time per HLO instruction (`per_execution_ps`): the summed duration of the
  kernels the trace attributes to the instruction (`hlo_op`) inside the step windows, divided
  by the steps and by the instruction's executions per step (loop trip counts, from the HLO).
* Matching into another program (another policy compiles different instruction names): by
  content. `exact` signature: opcode, result and operand shapes (layouts included), attributes
  without names or metadata, and for fusions and other calls the called computation's
  instructions the same way, operands by position. `loose`: opcode and shapes only. An
  instruction takes the median measured time of its exact group, else of its loose group, else
  its roofline time times `compute_scale`.
* `compute_scale` = measured / roofline time, summed over the run's measured instructions
  (how far the data sheet's peaks are from what ran).
* `gap_ps`: the compute stream's idle time per kernel-launching instruction execution =
  (mean step window - measured kernel time per step) / those executions per step: launch gaps,
  which the schedule walk adds after each kernel (never as hiding compute).
* Link (`link`): `bw.json` in the run directory or the two above it (torch pinned copies:
  medians of the sizes >= 256 MiB, one way per direction and each way with both at once;
  `duplex_share` = both / one way), else the run's own copies (bytes / time moving, per
  direction), else none (the target's).
* Command buffers: the run's `XLA_FLAGS` (run.json `xla_flags`); None when it does not say.
* Streams (XLA:GPU): which execution stream each async op of the run's program used, by XLA's
  rule over the capture's HloProto of that compile (`overlap.hlo.streams`), checked against the
  CUDA streams the run's host copies ran on (the copies' own streams where the rule disagrees,
  as `overlap report --predict` does). They apply to a plan only where the plan compiled the
  same program (same content, names and metadata aside: `Calibration.streams_for`); another
  program's streams come from its own HloProto (`overlap.plan.estimate.plan_streams`).

Blind spots: a kernel the next program runs with other shapes (a new fusion) gets the roofline
times the scale; kernel times measured under the profiler (slightly slower than without);
sharing of the link with the compute's memory traffic is in the measured times, not modelled.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from overlap.errors import InputError

# Instructions that launch no kernel of their own (as the schedule walk costs them 0).
_NO_KERNEL = {"parameter", "constant", "get-tuple-element", "tuple", "bitcast", "after-all",
              "partition-id", "replica-id", "opt-barrier", "add-dependency", "domain",
              "while", "call", "conditional", "send", "recv"}
_META_RE = re.compile(r"metadata=\{[^}]*\}")
_CALLS_RE = re.compile(r"\b(calls|to_apply|body|condition)=%?([\w.\-]+)")
_NAME_RE = re.compile(r"%[\w.\-]+")
_QUEUE_RE = re.compile(r'"(operation_queue_id|wait_on_operation_queues)"\s*:\s*'
                       r'(\[[^\]]*\]|"[^"]*"|\d+)')
_MIN_BW_BYTES = 256 << 20


def _launches(ins: Any) -> bool:
    op = ins.opcode
    return not (op in _NO_KERNEL or op.endswith(("-start", "-done", "-update")))


class _Signer:
    """Content signatures of a module's instructions (see the module docstring)."""

    def __init__(self, comps: dict[str, list[Any]]):
        self.comps = comps
        self.comp_sig: dict[str, str] = {}

    def _attrs(self, attrs: str, depth: int) -> str:
        a = _META_RE.sub("", attrs)
        a = _QUEUE_RE.sub("", a)
        a = _CALLS_RE.sub(lambda m: f"{m.group(1)}=<{self.computation(m.group(2), depth + 1)}>",
                          a)
        return _NAME_RE.sub("%", a).strip()

    def computation(self, name: str, depth: int = 0) -> str:
        if name in self.comp_sig:
            return self.comp_sig[name]
        if depth > 16:
            return "?"
        pos: dict[str, int] = {}
        lines = []
        for k, ins in enumerate(self.comps.get(name, [])):
            pos[ins.name] = k
            ops = ",".join(str(pos.get(o, o if o.isdigit() else "?")) for o in ins.operands)
            lines.append(f"{ins.opcode} {ins.shape!r} ({ops}) {self._attrs(ins.attrs, depth)}"
                         + (" ROOT" if ins.root else ""))
        sig = hashlib.sha256("\n".join(lines).encode()).hexdigest()[:20]
        self.comp_sig[name] = sig
        return sig

    def sigs(self, ins: Any, by_name: dict[str, Any]) -> tuple[str, str]:
        shapes = []
        for i, o in enumerate(ins.operands):
            sh = ins.operand_shapes[i] if i < len(ins.operand_shapes) else None
            if sh is None and o in by_name:
                sh = by_name[o].shape
            shapes.append(repr(sh))
        loose = f"{ins.opcode} {ins.shape!r} ({';'.join(shapes)})"
        exact = hashlib.sha256(f"{loose} {self._attrs(ins.attrs, 0)}".encode()).hexdigest()[:24]
        return exact, loose


def _async_ops(comps: dict[str, list[Any]]) -> list[str]:
    """Async-start names in the text's order (computations as listed, then instructions)."""
    from overlap.hlo.streams import is_async_start

    return [i.name for instrs in comps.values() for i in instrs if is_async_start(i.opcode)]


def _parse(text: str):
    from overlap.hlo.program import _COMMENT_RE, _multipliers, _parse_module

    comps, entry = _parse_module(_COMMENT_RE.sub("", text))
    mult, _ = _multipliers(comps, entry)
    by_name = {i.name: i for instrs in comps.values() for i in instrs}
    return comps, by_name, mult, entry


@dataclasses.dataclass
class Calibration:
    """What one measured run says about the target (see the module docstring)."""

    run: str
    module: str
    steps: int
    step_ps: int                 # mean step window of the capture (profiled)
    kernel_ps_per_step: int      # measured kernel time per step
    gap_ps: int
    compute_scale: float
    exact: dict[str, int]        # signature -> ps per execution (median)
    loose: dict[str, int]
    link: dict[str, Any]
    command_buffers: bool | None
    measured_share: float        # share of the run's kernel time attributed to an instruction
    step_ns_unprofiled: int | None = None
    streams: dict[str, Any] | None = None   # async op -> stream observed in this run
    streams_source: str = ""
    program_sig: str = ""        # content signature of the run's program (entry computation)
    async_ops: list[str] = dataclasses.field(default_factory=list)  # in the text's order

    def streams_for(self, hlo_text: str) -> tuple[dict[str, Any], str] | None:
        """The streams this run was observed to use, for `hlo_text` when it is the run's own
        program (same content signature, `_Signer`: names and metadata aside); None otherwise.
        Where the names differ, ops are paired by their position in the text."""
        if self.streams is None or not self.program_sig:
            return None
        comps, _, _, entry = _parse(hlo_text)
        if entry is None or _Signer(comps).computation(entry) != self.program_sig:
            return None
        names = _async_ops(comps)
        if set(self.streams) <= set(names):
            mapped = dict(self.streams)
        elif len(names) == len(self.async_ops):
            pos = dict(zip(self.async_ops, names))
            mapped = {pos[k]: v for k, v in self.streams.items() if k in pos}
        else:
            return None
        return mapped, (f"from the calibration run {self.run}, which ran this same "
                        f"program: {self.streams_source}")

    def kernel_ps_for(self, hlo_text: str, model: Any = None) -> tuple[dict[str, int], dict]:
        """Measured times for the instructions of `hlo_text` this run matches (by content),
        and how many matched (`exact`, `loose`, `unmatched` kernel instructions)."""
        comps, by_name, _, _ = _parse(hlo_text)
        signer = _Signer(comps)
        out: dict[str, int] = {}
        n = {"exact": 0, "loose": 0, "unmatched": 0}
        called = {m.group(2) for instrs in comps.values() for i in instrs
                  for m in _CALLS_RE.finditer(i.attrs) if m.group(1) in ("calls", "to_apply")}
        for cname, instrs in comps.items():
            if cname in called:
                continue  # a fusion's (or reducer's) inside: no kernels of their own
            for ins in instrs:
                if not _launches(ins):
                    continue
                exact, loose = signer.sigs(ins, by_name)
                if exact in self.exact:
                    out[ins.name] = self.exact[exact]
                    n["exact"] += 1
                elif loose in self.loose:
                    out[ins.name] = self.loose[loose]
                    n["loose"] += 1
                else:
                    n["unmatched"] += 1
        return out, n

    def describe(self, stats: dict) -> str:
        return (f"kernel times measured in {self.run} ({stats.get('exact', 0)} instructions "
                f"matched by content, {stats.get('loose', 0)} by shapes only; "
                f"{stats.get('unmatched', 0)} others at the roofline x {self.compute_scale:.3g}, "
                "the measured/roofline ratio of that run)")

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d.pop("exact")
        d.pop("loose")
        d.pop("async_ops")
        d["instructions_measured"] = len(self.exact)
        d["streams"] = None if self.streams is None else {
            "count": len(set(self.streams.values())), "ops": len(self.streams)}
        return d


def _bw_json(run: Path) -> tuple[dict[str, Any], str] | None:
    for d in (run, run.parent, run.parent.parent):
        p = d / "bw.json"
        if not p.is_file():
            continue
        try:
            data = json.loads(p.read_text())
            rows = [v for v in (data.get("torch") or {}).values()
                    if isinstance(v, dict) and (v.get("bytes") or 0) >= _MIN_BW_BYTES]
            h2d = float(np.median([v["h2d_med_GBps"] for v in rows])) * 1e9
            d2h = float(np.median([v["d2h_med_GBps"] for v in rows])) * 1e9
            both = [v["duplex_each_GBps"] for v in rows if v.get("duplex_each_GBps")]
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise InputError(p, f"not a link measurement this tool reads ({e})") from None
        if not rows or not (h2d > 0 and d2h > 0):
            continue
        share = float(np.median(both)) * 1e9 / ((h2d + d2h) / 2) if both else None
        return ({"D2H_Bps": d2h, "H2D_Bps": h2d,
                 "duplex_share": min(1.0, share) if share else None,
                 "source": f"measured in {p} (pinned copies >= 256 MiB): {d2h / 1e9:.1f} GB/s "
                           f"D2H, {h2d / 1e9:.1f} GB/s H2D one way"
                           + (f", {float(np.median(both)):.1f} GB/s each way with both"
                              if both else "")}, str(p))
    return None


def _copies_link(transfers: Any) -> dict[str, Any] | None:
    if transfers is None or not len(transfers):
        return None
    out: dict[str, Any] = {}
    for d in ("D2H", "H2D"):
        sel = transfers[transfers["direction"] == d]
        span = (sel["end_ps"] - sel["start_ps"]).to_numpy(dtype=np.int64)
        nbytes = sel["bytes"].to_numpy(dtype=np.float64)
        if span.sum() > 0 and nbytes.sum() > 0:
            out[f"{d}_Bps"] = float(nbytes.sum() / span.sum() * 1e12)
    if not out:
        return None
    out["source"] = ("measured from the calibration run's copies (bytes / time moving): "
                     + ", ".join(f"{out[k] / 1e9:.1f} GB/s {k[:3]}" for k in sorted(out)))
    return out


def _hlo_text(run: Path, manifest: dict) -> str:
    module = str(manifest.get("module") or "")
    files = sorted((run / "hlo").glob("*.hlo.txt")) if (run / "hlo").is_dir() else []
    pick = [f for f in files if f.name.split(".")[0] == module] or files
    if not pick:
        raise InputError(run, "no hlo/*.hlo.txt: the run carries no program to calibrate on")
    return pick[0].read_text(errors="replace")


def _run_streams(trace: Any, text: str, module: str, comps: dict[str, list[Any]],
                 entry: str | None, tname: str | None) -> tuple[dict[str, Any] | None, str]:
    """(stream of each async op, how it is known) for the run's program: XLA:GPU's rule over
    the capture's HloProto of the compile whose instructions are the text's (a capture holds
    every compile of the step: the largest that lists them all), checked against the streams
    its host copies ran on (`overlap.plan.predict._streams`, as `report --predict` does)."""
    from overlap.hlo.streams import execution_streams, proto_order
    from overlap.plan.predict import _PID_RE, _joined, _streams
    from overlap.plan.targets import get_target

    if not tname or get_target(tname).platform != "cuda":
        return None, ""
    if not _async_ops(comps):
        return None, "its program has no async ops"
    mods = trace.modules
    rows = sorted(((str(n), bytes(p)) for n, p in zip(mods["name"], mods["hlo_proto"])
                   if p and (not module or str(n) == module or str(n).startswith(module + "("))),
                  key=lambda r: len(r[1]), reverse=True)
    for name, proto in rows:
        try:
            if not execution_streams(comps, entry, proto_order(proto)):
                continue
        except Exception:  # noqa: BLE001 - a proto our schema cannot read is not the one
            continue
        m = _PID_RE.search(name)
        if m is None:
            continue
        pid = int(m.group(1))
        _, pid_col, op_col, _, _ = _joined(trace, {pid: (name, text)})
        return _streams(trace, get_target(tname), pid, text, proto, pid_col, op_col)
    return None, ("the capture carries no HloProto of its program that lists the instructions "
                  "of its hlo/*.hlo.txt, and XLA:GPU's stream rule needs that order")


def load_calibration(run_dir: str | Path) -> Calibration:
    """The calibration one run directory gives (see the module docstring). Bad input (not a
    run, no program, no kernels in its steps) raises InputError naming it."""
    from overlap.plan.estimate import command_buffers_from_flags
    from overlap.runs.rundir import load_manifest
    from overlap.trace import read_trace

    run = Path(run_dir)
    manifest = load_manifest(run) if run.is_dir() else None
    if not manifest:
        raise InputError(run, "not a run directory with a run.json (--calibrate takes a run "
                              "`overlap capture` wrote on the target)")
    if manifest.get("kind") == "plan":
        raise InputError(run, "a plan run (compiled, not run) measures nothing to calibrate on")
    text = _hlo_text(run, manifest)
    trace = read_trace(run)
    module = str(manifest.get("module") or "")
    c, steps = trace.compute, trace.steps
    if steps is None or not len(steps):
        raise InputError(run, "the capture has no step annotations to measure a step by")
    if module and "hlo_module" in c.columns:
        c = c[c["hlo_module"].astype(str).str.replace(r"\(\d+\)$", "", regex=True) == module]
    start = c["start_ps"].to_numpy(dtype=np.int64)
    end = c["end_ps"].to_numpy(dtype=np.int64)
    s0 = steps["start_ps"].to_numpy(dtype=np.int64)
    s1 = steps["end_ps"].to_numpy(dtype=np.int64)
    order = np.argsort(s0)
    s0, s1 = s0[order], s1[order]
    k = np.searchsorted(s0, start, side="right") - 1
    inside = (k >= 0) & (end <= s1[np.clip(k, 0, None)])
    if not inside.any():
        raise InputError(run, "no kernel of its program ran inside its steps")
    ops = c["hlo_op"].astype(str).to_numpy()[inside]
    dur = (end - start)[inside]
    names, inv = np.unique(ops, return_inverse=True)
    per_op = np.bincount(inv, weights=dur)
    n_steps = len(s0)
    comps, by_name, mult, entry = _parse(text)
    signer = _Signer(comps)
    from overlap.hlo.schedule import _kernel_ps, _Module
    from overlap.plan.targets import get_target, target_for_device_kind

    tname = target_for_device_kind(str((manifest.get("backend") or {}).get("device_kind")))
    model = None
    if tname:
        from overlap.plan.estimate import roofline_for

        model, _ = roofline_for(get_target(tname))
    m = _Module(comps, by_name)
    exact: dict[str, list[int]] = {}
    loose: dict[str, list[int]] = {}
    measured = roofline = 0.0
    execs = 0
    attributed = 0.0
    for name, total in zip(names, per_op):
        ins = by_name.get(str(name))
        if ins is None or not _launches(ins):
            continue
        n = max(1, mult.get(ins.computation, 1))
        ps = int(round(total / n_steps / n))
        e, lo = signer.sigs(ins, by_name)
        exact.setdefault(e, []).append(ps)
        loose.setdefault(lo, []).append(ps)
        attributed += total
        execs += n
        if model is not None:
            measured += total / n_steps
            roofline += _kernel_ps(ins, m, model) * n
    kernel_step = int(round(dur.sum() / n_steps))
    step_ps = int(round(float(np.mean(s1 - s0))))
    flags = (manifest.get("xla_flags") or {})
    flags_text = flags.get("XLA_FLAGS") if isinstance(flags, dict) else str(flags)
    link = None
    found = _bw_json(run)
    if found:
        link = found[0]
    else:
        link = _copies_link(trace.transfers)
    step_ns = manifest.get("step_ns") or []
    streams, streams_how = _run_streams(trace, text, module, comps, entry, tname)
    return Calibration(
        run=str(run), module=module, steps=n_steps, step_ps=step_ps,
        kernel_ps_per_step=kernel_step,
        gap_ps=max(0, int(round((step_ps - kernel_step) / max(execs, 1)))),
        compute_scale=(measured / roofline) if roofline > 0 else 1.0,
        exact={k: int(np.median(v)) for k, v in exact.items()},
        loose={k: int(np.median(v)) for k, v in loose.items()},
        link=link or {}, command_buffers=command_buffers_from_flags(flags_text),
        measured_share=float(attributed / dur.sum()) if dur.sum() else 0.0,
        step_ns_unprofiled=int(np.median(step_ns)) if step_ns else None,
        streams=streams, streams_source=streams_how,
        program_sig=signer.computation(entry) if entry else "", async_ops=_async_ops(comps))


def calibration_args(args: Any) -> tuple[Calibration | None, bool | None]:
    """(calibration, command buffers) from `overlap plan|advise` arguments (`--calibrate RUN`,
    `--command-buffers on|off`)."""
    cb = {"on": True, "off": False}.get(getattr(args, "command_buffers", None) or "")
    run = getattr(args, "calibrate", None)
    return (load_calibration(run) if run else None), cb
