"""Compare runs of the same step under different remat/offload policies.

`summarize_run(dir)` reads one run directory (its `run.json` manifest when present, and its
capture) into a flat summary; `compare(summaries, baseline=None)` is pure and returns one
JSON-ready result: a row per run, deltas against a baseline, and a verdict per offload run.

Metrics per run:

* step time: median and spread (min, max) of the wall-clock step times measured **without the
  profiler** (`run.json` `step_ns`); a bare capture without a manifest falls back to the step
  annotations in the trace, which include the profiler's own overhead (flagged `step_source`).
* peak device memory: the heap-simulator peak of the step's HLO program (`heap_simulator`, what
  xprof's memory viewer shows, program order) when the manifest has it, else
  `memory_analysis` temp + argument + output - alias, else the allocator's `peak_bytes_in_use`
  from the trace. `peak_source` says which; only like-for-like sources are compared.
* bytes moved per step D2H/H2D, overlap ratio per direction and exposed time per step: from the
  trace (`overlap.analysis.overlap`).
* planned vs executed copies: the compiled HLO's offload inventory (copies to/from host memory
  space S(5) per program run) against the transfers the trace shows per step.

Baseline: `--baseline` names a run; by default the full-remat run (policy `full` or
`nothing_saveable`), else any remat run. The memory reference for offload runs is the no-remat
run (`everything_saveable`/`none`) when present: offload exists to save that memory.

How a run was made (`made_with`): the XLA flags in force (run.json `xla_flags`, its `XLA_FLAGS`
string with flags that only name output paths, `--xla_dump_*`, left out; sorted) and the jax
and jaxlib versions. Two runs of one program made with other flags or another runtime (command
buffers on vs off) are another experiment: `same_program` is false for them, their deltas are
never computed, and `compare` judges each set of runs made the same way against its own
baseline (`groups`). A run whose manifest records none of it (a plain jax.profiler log
directory) is "not recorded": it is compared only with runs that record nothing either.

Same answer (`answer_check` per run, `answer_mismatch`): each run's loss and gradient
fingerprint (run.json ``answer``) against its experiment's baseline's, within the float
tolerance that `overlap.analysis.answers` defines; a run that differs has it in its verdict.
Runs made before answers were recorded are "not recorded", never flagged.

Break-even: offload pays when moving the bytes costs less than recomputing them. Both sides are
shown from measurements: recompute cost per step = step(full remat) - step(no remat); transfer
cost per step = the offload run's exposed transfer time per step (what the step actually waited)
next to its total in-flight time (what it would cost if nothing hid). Blind spot: the no-remat
run may not fit in memory at the sizes where offload matters; then recompute cost is unknown.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

from overlap.errors import InputError, UsageError

FULL_REMAT = ("full", "nothing_saveable")


def summarize_run(run_dir: str | os.PathLike, *, result: dict | None = None,
                  trace=None) -> dict[str, Any]:
    """One run's summary (reads the manifest and the capture)."""
    from overlap.analysis import overlap as analysis
    from overlap.runs.rundir import load_manifest
    from overlap.trace import read_trace

    p = Path(run_dir)
    manifest = load_manifest(p) if p.is_dir() else None
    if trace is None:
        trace = read_trace(p)
    if result is None:
        result = analysis.analyze(trace)
    # A plain jax.profiler log directory has no manifest: named after its directory, policy
    # unknown (never guessed from the name).
    policy = (manifest or {}).get("policy") or {"name": "unknown"}
    label = (manifest or {}).get("label") or (p.name[: -len(".xplane.pb")]
                                              if p.name.endswith(".xplane.pb") else p.name)
    from overlap.trace.paths import list_sessions

    sessions = list_sessions(p) if p.is_dir() else []
    session_note = (f"{len(sessions)} capture sessions in {p.name}; read the newest, "
                    f"{sessions[-1].name} (overlap report --session picks another)"
                    if len(sessions) > 1 else None)
    n_steps = max(len(result.get("steps") or []), 1)

    from overlap.analysis import steps as step_stats

    st = step_stats.run_step_time(manifest, result.get("steps"))
    step_ns, step_source = st["samples_ns"], st["source"] or "none recorded"
    st_sum = step_stats.summary(step_ns)
    med, lo, hi = st_sum["median"], st_sum["min"], st_sum["max"]

    from overlap.analysis.memory import peak_memory

    pm = peak_memory(manifest, trace)
    peak, peak_source = pm["bytes"], pm["source"]
    mem = (manifest or {}).get("memory_analysis") or {}

    by_dir = result.get("by_direction", {})
    planned = planned_copies(manifest)
    executed = executed_copies(result)
    summ = result.get("summary", {})
    step_summary = result.get("step_summary") or {}
    return {
        "run": str(p), "label": label, "policy": policy.get("name") or label,
        # host files of a pod capture that could not be read (the numbers cover the others)
        "unreadable_hosts": list(result.get("unreadable_hosts") or []),
        "category": policy.get("category"), "offloads": bool(policy.get("offloaded")),
        "backend": result.get("backend"), "synthetic": bool(result.get("synthetic")),
        "platform": _platform(result),
        # False: no step annotations, so the "per step" numbers are per capture
        "per_step": bool(result.get("steps")),
        # per direction, transfers whose size the capture does not record (not in the bytes)
        "unknown_bytes": {d: int((by_dir.get(d) or {}).get("unknown_bytes") or 0)
                          for d in ("D2H", "H2D")},
        "device": ((manifest or {}).get("backend") or {}).get("device_kind"),
        "workload": ((manifest or {}).get("workload") or {}).get("description"),
        "step_ns_median": med, "step_ns_min": lo, "step_ns_max": hi, "steps": st_sum["n"],
        "step_ns_samples": step_ns.tolist(),  # run_step_time kept only valid samples
        "step_source": step_source,
        "step_timing": _step_timing(manifest if step_source == step_stats.SOURCE_MANIFEST
                                    else None),
        "program": _program(manifest, pm["module"]),
        "made_with": made_with(manifest),
        # what a plan's prediction is joined on where run.json names no program
        # (overlap.analysis.plan_join)
        "copy_modules": copy_module_names(trace), "device_kinds": device_kinds_of(trace),
        "session": Path(str(trace.sources[0])).parent.name if trace.sources else None,
        "session_note": session_note,
        "peak_bytes": peak, "peak_source": peak_source, "peak_module": pm["module"],
        "peak_others": pm["others"],
        "memory_analysis": mem or None,
        "d2h_bytes_per_step": executed["D2H"]["bytes_per_step"],
        "h2d_bytes_per_step": executed["H2D"]["bytes_per_step"],
        "d2h_overlap": by_dir.get("D2H", {}).get("overlap_ratio"),
        "h2d_overlap": by_dir.get("H2D", {}).get("overlap_ratio"),
        "overlap_ratio": summ.get("overlap_ratio"),
        "exposed_ps_per_step": step_summary.get("mean_exposed_wall_ps"),
        "in_flight_ps_per_step": (summ.get("span_ps") or 0) // n_steps,
        "transfers": summ.get("transfers", 0), "status": result.get("status"),
        "verdict_overlap": result.get("verdict"),
        "planned": planned, "executed": executed,
        "offload_happened": offload_check(planned, executed, bool(policy.get("offloaded"))),
        # loss and gradient fingerprint (overlap.analysis.answers); None: not recorded
        "answer": (manifest or {}).get("answer"),
    }


def copy_module_names(trace) -> list[str]:
    """Names (`module(id)`) of the programs whose host copies the capture shows."""
    # (the tables' columns, not their DataFrames: `overlap compare` loaded pandas for these,
    # ~0.15 s and ~40 MiB of each process, issue 32; a missing id is None there)
    if trace is None:
        return []
    pids = {int(p) for p in trace.columns("transfers")["program_id"] if p is not None}
    out = []
    for name in map(str, trace.columns("modules")["name"]):
        head, _, tail = name.rpartition("(")
        if head and tail.rstrip(")").isdigit() and int(tail.rstrip(")")) in pids:
            out.append(name)
    return sorted(set(out))


def device_kinds_of(trace) -> list[str]:
    """The device kinds the capture names (e.g. "TPU v6 Lite")."""
    if trace is None:
        return []
    return sorted({str(k) for k in trace.columns("devices")["name"] if k is not None})


def _platform(result: dict) -> str:
    """`gpu (AMD)`, `tpu (Google)`: the backend and its devices' vendors."""
    from overlap.analysis.overlap import vendor_names

    names = [n.replace(" (inferred)", ", inferred")
             for n in vendor_names(result.get("vendors") or {})]
    backend = str(result.get("backend") or "unknown")
    return f"{backend} ({', '.join(names)})" if names else backend


def planned_copies(manifest: dict | None) -> dict[str, dict]:
    """Per direction, the compiled HLO's offload inventory from a run manifest ({} if none)."""
    inv = (manifest or {}).get("offload_inventory") or {}
    return {d: (inv.get(d) or {}) for d in ("D2H", "H2D")} if isinstance(inv, dict) else {}


def executed_copies(result: dict) -> dict[str, dict]:
    """Per direction, the transfers the trace shows per step (steps from the step annotations)."""
    n_steps = max(len(result.get("steps") or []), 1)
    by_dir = result.get("by_direction", {})
    return {d: {"count_per_step": by_dir.get(d, {}).get("count", 0) / n_steps,
                "bytes_per_step": by_dir.get(d, {}).get("bytes", 0) / n_steps}
            for d in ("D2H", "H2D")}


OFFLOAD_ANSWERS = {
    "yes": "yes: the compiled HLO plans host copies and the trace shows them",
    "partly": "partly: the compiled HLO's copies and the trace's differ",
    "no": "no",
    "unknown": "unknown: no compiled-HLO inventory for this run (nothing says what should move)",
}


def offload_check(planned: dict, executed: dict, policy_offloads: bool) -> dict[str, Any]:
    """Did offload happen? The compiled HLO's copies per step against the trace's transfers.

    `status`: "yes" only when copies were planned and the trace executed them as planned;
    "partly" when both exist but differ; "no" when the inventory is known and nothing was
    planned or nothing executed; "unknown" without an inventory (a bare capture, attach())."""
    lines = []
    known = any((planned.get(d) or {}) for d in ("D2H", "H2D"))
    differ = False
    for d in ("D2H", "H2D"):
        plan = planned.get(d) or {}
        want = plan.get("executed_count", plan.get("count"))
        want_bytes = plan.get("executed_bytes", plan.get("bytes"))
        got = executed.get(d, {}).get("count_per_step", 0)
        got_bytes = executed.get(d, {}).get("bytes_per_step", 0)
        if want is None:
            lines.append(f"{d}: no compiled-HLO inventory; trace shows {got:g} copies per step")
            continue
        if want == 0 and got == 0:
            lines.append(f"{d}: no copies planned, none executed")
            continue
        same = abs(got - want) < 0.5 and (not want_bytes or abs(got_bytes - want_bytes)
                                         <= 0.01 * want_bytes)
        lines.append(f"{d}: HLO plans {want} copies ({_mib(want_bytes)}) per step, trace shows "
                     f"{got:g} ({_mib(got_bytes)})" + ("" if same else "  <- differ"))
        differ |= not same
    planned_any = any((planned.get(d) or {}).get("executed_count", (planned.get(d) or {}).get(
        "count", 0)) for d in ("D2H", "H2D"))
    executed_any = any(executed.get(d, {}).get("count_per_step", 0) for d in ("D2H", "H2D"))
    if not known:
        status = "unknown"
    elif planned_any and executed_any:
        status = "partly" if differ else "yes"
    else:
        status = "no"
    if policy_offloads and known and not planned_any and not executed_any:
        lines.append("the policy asks for offload, but the compiled program has no host copies "
                     "(XLA:CPU compiles offload away; on GPU/TPU check the names exist)")
    return {"status": status, "answer": OFFLOAD_ANSWERS[status], "lines": lines}


def _mib(n) -> str:
    return "?" if n is None else f"{n / (1 << 20):.1f} MiB"


def _pick_baseline(rows: list[dict], baseline: str | None) -> dict | None:
    if baseline:
        # A run's own name first: "full" is full's, not the first run of policy full (full_cb).
        for r in rows:
            if baseline in (r["label"], r["run"], Path(r["run"]).name):
                return r
        for r in rows:
            if baseline == r["policy"]:
                return r
        names = ", ".join(r["label"] for r in rows)
        raise UsageError(f"--baseline {baseline!r} is none of the runs ({names})")
    for want in FULL_REMAT:
        for r in rows:
            if r["policy"] == want:
                return r
    return next((r for r in rows if r["category"] == "remat"), None)


def _frac(a, b) -> float | None:
    if a is None or b in (None, 0):
        return None
    return (a - b) / b


def compare(rows: list[dict], baseline: str | None = None) -> dict[str, Any]:
    """Deltas and verdicts for run summaries (pure)."""
    if not rows:
        raise UsageError("compare needs at least one run")
    base = _pick_baseline(rows, baseline)
    # The no-remat reference must be the baseline's program: another program's memory says
    # nothing about this one's.
    no_remat = next((r for r in rows if r["category"] == "no-remat"
                     and (base is None or same_program(r, base))), None)
    out_rows = []
    for r in rows:
        row = dict(r)
        row["is_baseline"] = base is not None and r is base
        diff = step_difference(r, base) if base else None
        row["step_delta"] = diff["delta"] if diff else None
        row["step_delta_ci"] = diff["ci"] if diff else None
        row["step_called"] = bool(diff and diff["called"])
        row["step_noise"] = None if not diff or diff["called"] else diff.get("reason")
        row["peak_delta"] = (_frac(r["peak_bytes"], base["peak_bytes"])
                             if base is not None and r["peak_source"] == base["peak_source"]
                             else None)
        row["peak_delta_vs_no_remat"] = (
            _frac(r["peak_bytes"], no_remat["peak_bytes"])
            if no_remat is not None and r["peak_source"] == no_remat["peak_source"] else None)
        row["verdict"] = None if row["is_baseline"] else _verdict(row, base, no_remat)
        out_rows.append(row)
    breakeven: dict[str, Any] | None = None
    if base is not None and no_remat is not None and base is not no_remat:
        rc = step_difference(base, no_remat)
        if not rc["called"]:
            breakeven = {"recompute_ns_per_step": None, "from": f"{base['label']} - "
                         f"{no_remat['label']}", "note": "recomputing costs nothing measurable: "
                         + str(rc.get("reason")), "offload": []}
        elif base["step_ns_median"] is not None and no_remat["step_ns_median"] is not None:
            recompute = base["step_ns_median"] - no_remat["step_ns_median"]
            breakeven = {
                "recompute_ns_per_step": recompute,
                "from": f"{base['label']} - {no_remat['label']}",
                "offload": [{"label": r["label"],
                             "exposed_ns_per_step": None if r["exposed_ps_per_step"] is None
                             else r["exposed_ps_per_step"] // 1000,
                             "in_flight_ns_per_step": r["in_flight_ps_per_step"] // 1000,
                             # No transfers means no offload happened: nothing to weigh.
                             "pays": None if r["exposed_ps_per_step"] is None or not r["transfers"]
                             else r["exposed_ps_per_step"] // 1000 < recompute}
                            for r in rows if r["offloads"]],
            }
    # Different programs: different module names, or the same name over different input shapes.
    mods = {(r.get("program") or {}).get("module") or r.get("peak_module") for r in rows} - {None}
    inputs = {(r.get("program") or {}).get("inputs") for r in rows} - {None}
    mixed = len(mods) > 1 or len(inputs) > 1
    modules = sorted({_program_key(r) for r in rows}) if mixed else []
    # Different backends or vendors: not one experiment, whatever the programs are called.
    platforms = sorted({r.get("platform") or str(r.get("backend")) for r in rows})
    if len(platforms) > 1:
        mixed = True
        modules = modules or sorted({_program_key(r) for r in rows})
    # Other XLA flags or another runtime: another experiment, even for one program.
    made = sorted({(r.get("made_with") or {}).get("text") or "" for r in rows
                   if r.get("made_with") is not None})
    made_mixed = len({made_key(r.get("made_with")) for r in rows}) > 1
    mixed = mixed or made_mixed
    if mixed:
        # Runs of the baseline's program (same module, inputs and platform) keep their verdicts;
        # any other run is flagged with what differs, never judged: its deltas would compare
        # different work.
        for row in out_rows:
            if row["is_baseline"] or (base is not None and same_program(row, base)):
                continue
            row["verdict"] = f"{row['label']}: not compared: {what_differs(row, base)}"
            row["step_called"] = False
            row["step_delta"] = row["peak_delta"] = row["peak_delta_vs_no_remat"] = None
        if breakeven is not None and (base is None or any(
                not same_program(r, base) for r in rows if r["offloads"])):
            breakeven = None
    # Same answer? Each run of the baseline's experiment against the baseline's loss and
    # gradients (overlap.analysis.answers); runs of other experiments get theirs in `groups`.
    from overlap.analysis import answers

    same = [r for r in rows if base is not None and (r is base or same_program(r, base))]
    checked = answers.check_rows(same, base)
    for row, r in zip(out_rows, rows):
        row["answer_check"] = checked.get(r["label"]) or {
            "status": answers.NOT_COMPARABLE, "text": "not compared (another experiment)"}
        if row["answer_check"]["status"] == answers.DIFFERS and base is not None:
            said = (f"ANSWER DIFFERS from {base['label']}'s "
                    + row["answer_check"]["text"].removeprefix("DIFFERS "))
            row["verdict"] = (f"{row['verdict']}; {said}" if row["verdict"]
                              else f"{row['label']}: {said}")
    return {
        "answer_mismatch": [r["label"] for r in out_rows
                            if r["answer_check"]["status"] == answers.DIFFERS] or None,
        "mixed_programs": modules if modules else None,
        "mixed_platforms": platforms if len(platforms) > 1 else None,
        "mixed_made": made if made_mixed else None,
        # each set of runs made alike (program, platform, flags, runtime), judged against a
        # baseline of its own; None when all runs are one such set
        "groups": experiment_groups(rows, base) if mixed else None,
        "baseline": base["label"] if base else None,
        "no_remat": no_remat["label"] if no_remat else None,
        "synthetic": any(r["synthetic"] for r in rows),
        "runs": out_rows,
        "breakeven": breakeven,
        "verdicts": [r["verdict"] for r in out_rows if r["verdict"]],
        "step_timing": timing_note(rows),
    }


def experiment_groups(rows: list[dict], base: dict | None) -> list[dict[str, Any]]:
    """The runs split into experiments (`same_program`: one program, platform, XLA flags and
    runtime), the baseline's first; each one compared on its own (`compare` of its rows, its
    default baseline), so no run is judged against a run made another way."""
    parts: list[list[dict]] = []
    for r in rows:
        for p in parts:
            if same_program(r, p[0]):
                p.append(r)
                break
        else:
            parts.append([r])
    parts.sort(key=lambda p: base is None or not any(r is base for r in p))
    out = []
    for p in parts:
        sub = compare(p, base["label"] if base is not None and any(r is base for r in p)
                      else None)
        made = (p[0].get("made_with") or {}).get("text") or "flags and runtime not recorded"
        out.append({"program": _program_key(p[0]),
                    "platform": p[0].get("platform") or str(p[0].get("backend")),
                    "made_with": made, "runs": [r["label"] for r in p],
                    "baseline": sub["baseline"], "verdicts": sub["verdicts"],
                    "breakeven": sub["breakeven"], "answer_mismatch": sub["answer_mismatch"],
                    "answers": {r["label"]: r["answer_check"] for r in sub["runs"]}})
    return out


def _step_timing(manifest: dict | None) -> dict[str, Any]:
    """How the run's step samples were taken: interleaved with other runs of one sweep (`group`
    names the sweep), or alone (drift of the machine between runs is then not in any CI)."""
    t = (manifest or {}).get("step_timing")
    if isinstance(t, dict) and t.get("mode") == "interleaved" and isinstance(t.get("group"), str):
        return {"mode": "interleaved", "group": t["group"]}
    return {"mode": "alone", "group": None}


def timing_note(rows: list[dict]) -> str | None:
    """One line on whether the runs' step times can share drift: all interleaved in one sweep,
    or measured at different times (None for a single run: nothing to compare)."""
    if len(rows) < 2:
        return None
    groups = {(r.get("step_timing") or {}).get("group") for r in rows}
    if len(groups) == 1 and None not in groups:
        return ("interleaved in one sweep (one step of each run in turn), so drift of the "
                "machine hits every run alike")
    return ("measured at different times: a slowdown of the machine during one run "
            "(other load, clocks) is not in the CI; sweep the runs together to rule it out")


def _program(manifest: dict | None, module: str | None) -> dict:
    """The run's program fingerprint: the capture's (module + input shapes) when recorded,
    else the module that ran in the trace."""
    prog = (manifest or {}).get("program")
    if isinstance(prog, dict) and prog.get("module"):
        return {"module": str(prog["module"]), "inputs": prog.get("inputs")}
    return {"module": module, "inputs": None}


# Flags that only say where XLA writes files: the program and its runtime are the same.
_OUTPUT_ONLY_FLAGS = ("--xla_dump",)


def made_with(manifest: dict | None) -> dict[str, Any]:
    """How a run was made (see the module docstring): `xla_flags` (sorted tuple of the flags in
    force, or None when not recorded), `runtime` ("jax X, jaxlib Y", or None), `text` (one
    line for a label)."""
    import shlex

    m = manifest or {}
    raw = m.get("xla_flags")
    flags_s = raw.get("XLA_FLAGS") if isinstance(raw, dict) else raw
    flags: tuple[str, ...] | None = None
    if isinstance(flags_s, str):
        try:
            parts = shlex.split(flags_s)
        except ValueError:  # unbalanced quotes: the words as written
            parts = flags_s.split()
        flags = tuple(sorted(f for f in parts if not f.startswith(_OUTPUT_ONLY_FLAGS)))
    v: dict = m["versions"] if isinstance(m.get("versions"), dict) else {}
    rt = ", ".join(f"{k} {v[k]}" for k in ("jax", "jaxlib") if isinstance(v.get(k), str)) or None
    return {"xla_flags": None if flags is None else list(flags), "runtime": rt,
            "text": made_text(flags, rt)}


def made_text(flags, runtime: str | None) -> str:
    """`command buffers off (--xla_gpu_enable_command_buffer=), jax 0.11.2, jaxlib 0.11.2`."""
    if flags is None and runtime is None:
        return "flags and runtime not recorded"
    words = []
    if flags is not None:
        shown = [_flag_words(f) for f in flags]
        words.append("XLA_FLAGS: " + " ".join(shown) if shown else "default XLA flags")
    else:
        words.append("XLA flags not recorded")
    if runtime:
        words.append(runtime)
    return ", ".join(words)


def _flag_words(flag: str) -> str:
    """A flag as a user reads it: the command-buffer flag with what it does."""
    if flag.split("=", 1)[0] == "--xla_gpu_enable_command_buffer":
        return f"command buffers {'off' if flag.endswith('=') else 'limited to ' + flag}"
    return flag


def made_key(made: dict | None) -> str:
    """A string equal for runs made the same way (flags and runtime)."""
    made = made or {}
    fl = made.get("xla_flags")
    return f"{'?' if fl is None else ' '.join(fl)}|{made.get('runtime') or '?'}"


def made_differs(a: dict | None, b: dict | None) -> str | None:
    """What differs in how two runs were made, in words, or None when nothing does."""
    a, b = a or {}, b or {}
    if made_key(a) == made_key(b):
        return None
    fa, fb = a.get("xla_flags"), b.get("xla_flags")
    out = []
    if fa != fb:
        if fa is None or fb is None:
            out.append("XLA flags recorded for one run only")
        else:
            only_a = sorted(set(fa) - set(fb))
            only_b = sorted(set(fb) - set(fa))
            out.append("XLA flags differ (" + "; ".join(
                f"{who}: {' '.join(_flag_words(f) for f in fl)} ({' '.join(fl)})"
                for who, fl in (("this run only", only_a), ("the baseline only", only_b))
                if fl) + ")")
    if a.get("runtime") != b.get("runtime"):
        out.append(f"runtime {a.get('runtime') or 'not recorded'} vs "
                   f"{b.get('runtime') or 'not recorded'}")
    return ", ".join(out)


def same_program(a: dict, b: dict) -> bool:
    """Whether two run summaries ran one program on one platform, made the same way: the same
    module name, input fingerprints equal where both are recorded, the same backend and vendor,
    the same XLA flags and runtime (`made_with`)."""
    if made_differs(a.get("made_with"), b.get("made_with")):
        return False
    pa = a.get("program") or {"module": a.get("peak_module")}
    pb = b.get("program") or {"module": b.get("peak_module")}
    if pa.get("module") != pb.get("module"):
        return False
    if pa.get("inputs") and pb.get("inputs") and pa["inputs"] != pb["inputs"]:
        return False
    return (a.get("platform") or a.get("backend")) == (b.get("platform") or b.get("backend"))


def what_differs(row: dict, base: dict | None) -> str:
    """Why `row` is not compared with `base`, in words: the platform, the module, or (same
    module name) the input shapes and dtypes."""
    if base is None:
        return "no baseline of its program"
    pr = row.get("platform") or row.get("backend")
    pb = base.get("platform") or base.get("backend")
    ma = (row.get("program") or {}).get("module") or row.get("peak_module")
    mb = (base.get("program") or {}).get("module") or base.get("peak_module")
    if ma != mb:
        def name(m):
            return m or "a capture naming no HLO module"
        return f"a different program from the baseline {base['label']} ({name(ma)} vs {name(mb)})"
    ia, ib = (row.get("program") or {}).get("inputs"), (base.get("program") or {}).get("inputs")
    if ia and ib and ia != ib:
        return (f"the same module {ma} as the baseline {base['label']} but different input "
                f"shapes or dtypes (input fingerprints {ia} vs {ib})")
    if pr != pb:
        return f"another platform than the baseline {base['label']} ({pr} vs {pb})"
    how = made_differs(row.get("made_with"), base.get("made_with"))
    if how:
        return (f"the same program as the baseline {base['label']}, made another way: {how} "
                "(another experiment)")
    return f"a different program from the baseline {base['label']}"


def _program_key(row: dict) -> str:
    prog = row.get("program") or {"module": row.get("peak_module")}
    mod = prog.get("module")
    return str(mod) + (f" [inputs {prog['inputs']}]" if prog.get("inputs") else "")


def step_difference(a: dict, b: dict) -> dict[str, Any]:
    """`overlap.analysis.steps.difference` of two run summaries (a against b)."""
    from overlap.analysis import steps as step_stats

    return step_stats.difference(a.get("step_ns_samples"), b.get("step_ns_samples"))


def _pct(x: float) -> str:
    return f"{abs(x) * 100:.1f}%"


def _verdict(row: dict, base: dict | None, no_remat: dict | None) -> str | None:
    parts = []
    if row["step_delta"] is not None and base is not None:
        if row.get("step_called"):
            word = "faster" if row["step_delta"] < 0 else "slower"
            parts.append(f"{_pct(row['step_delta'])} {word} than {base['label']}")
        else:
            parts.append(f"step time vs {base['label']}: "
                         f"{row.get('step_noise') or 'within noise'}")
    ref = no_remat if row["peak_delta_vs_no_remat"] is not None else None
    if ref is not None and row["run"] != ref["run"]:
        d = row["peak_delta_vs_no_remat"]
        parts.append(f"{_pct(d)} {'less' if d < 0 else 'more'} peak memory than {ref['label']}")
    elif row["peak_delta"] is not None and base is not None:
        d = row["peak_delta"]
        parts.append(f"{_pct(d)} {'less' if d < 0 else 'more'} peak memory than {base['label']}")
    if row["transfers"]:
        parts.append(f"{(row['overlap_ratio'] or 0) * 100:.0f}% of transfer time hidden")
    elif row["offloads"]:
        parts.append("no transfers in the trace")
    if not parts:
        return None
    return f"{row['label']}: " + ", ".join(parts)


def _loose_captures(p: Path) -> list[Path]:
    """The `.xplane.pb` files of a plain directory (no run.json, not a
    `plugins/profile/<session>` directory), when it holds more than one; else []."""
    from overlap.runs.rundir import is_complete

    if not p.is_dir() or is_complete(p) or (p.parent.name == "profile"
                                            and p.parent.parent.name == "plugins"):
        return []
    files = sorted(f for f in p.glob("*.xplane.pb") if f.is_file())
    return files if len(files) > 1 else []


def _distinct_labels(rows: list[dict[str, Any]]) -> None:
    """Runs that share a label (two sweeps' `offload_x`) get the shortest tail of their path
    that tells them apart, in parentheses, so no two rows of a comparison read the same."""
    by_label: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_label.setdefault(r["label"], []).append(r)
    for label, same in by_label.items():
        if len(same) < 2:
            continue
        parts = [Path(r["run"]).parts for r in same]
        for n in range(1, max(len(p) for p in parts) + 1):
            tails = ["/".join(p[-n:]) for p in parts]
            if len(set(tails)) == len(tails):
                break
        for r, tail in zip(same, tails):
            r["label"] = f"{label} ({tail})"


def compare_dirs(paths: list[str | os.PathLike], baseline: str | None = None,
                 target_of: Callable[[str], str | None] | None = None) -> dict[str, Any]:
    """Expand log directories into runs, summarize each, compare. `target_of`: the plan target
    a device kind names (`overlap.plan.targets.target_for_device_kind`), for joining plans of a
    run's program to it on the right target only (`overlap.analysis.plan_join`)."""
    from overlap.runs.rundir import find_runs, is_complete, is_logdir_run

    runs: list[Path] = []
    listed: set[Path] = set()  # found in a directory, not named by the user
    if any(not os.fspath(raw).strip() for raw in paths):
        # Path("") is the current directory: refused, as report, check and inspect do.
        raise InputError(None, "empty path: name a run directory, log directory or capture")
    for p in map(Path, paths):
        if not p.exists():
            raise InputError(p, "no such file or directory")
        loose = _loose_captures(p)
        if loose:
            # Files side by side in a plain directory are not one capture's hosts (those sit
            # in plugins/profile/<session>/): each is its own run, never a "multi-host run".
            runs.extend(loose)
            listed.update(loose)
        elif p.is_dir() and not is_complete(p) and not is_logdir_run(p) \
                and not list(p.glob("*" + ".xplane.pb")):
            found = find_runs(p)  # a directory of runs, at any depth
            if not found:
                raise InputError(p, "no runs here (a run is a run directory with run.json, a "
                                    "jax.profiler log directory, or an .xplane.pb file)")
            runs.extend(found)
            listed.update(found)
        else:
            runs.append(p)
    from overlap.analysis.plans import plan_row, refuse_impossible
    from overlap.runs.rundir import is_failed_capture, is_plan, load_manifest

    plans, captures, did_not_run = [], [], []
    left_out: list[str] = []
    for r in runs:
        try:
            m = load_manifest(r) if r.is_dir() else None
        except InputError as e:  # a damaged run.json: named, never read as a plain log dir
            if r not in listed:
                raise
            left_out.append(f"left out {r.name}: {e}")
            continue
        if is_plan(m):
            try:  # a damaged or forged plan: named, never read as written
                refuse_impossible(r, m)
            except InputError as e:
                if r not in listed:
                    raise
                left_out.append(f"left out {r.name}: {e}")
                continue
            plans.append({**m, "label": m.get("label") or r.name})
        elif is_failed_capture(m):
            # The step never completed: a row of its own, never summarized as a capture.
            from overlap.analysis.failed_runs import failed_row

            did_not_run.append(failed_row(m, r.name))
        else:
            captures.append(r)
    rows = []
    named_bad: list[dict[str, str]] = []  # unreadable host files of runs the user named
    for r in captures:
        try:
            rows.append(summarize_run(r))
            if r not in listed:
                named_bad += rows[-1].get("unreadable_hosts") or []
        except InputError as e:
            if r not in listed:  # a run the user named must be readable
                raise
            left_out.append(f"left out {r.name}: {e.problem}")  # one bad run, not the others
    if captures and not rows:
        raise InputError(None, "no readable runs: " + "; ".join(left_out))
    for row in rows:
        bad = row.get("unreadable_hosts") or []
        if bad:  # a partly read pod: compared on its readable hosts, and said so
            left_out.append(f"{row['label']}: {len(bad)} host file(s) unreadable, its numbers "
                            f"cover the other hosts ({bad[0]['path']}: {bad[0]['problem']})")
    _distinct_labels(rows)
    if rows:
        res = compare(rows, baseline)
    else:
        res = {"baseline": None, "no_remat": None, "synthetic": False, "runs": [],
               "breakeven": None, "verdicts": []}
    # Plans are compiled, never run: they sit beside the measurements, never mixed into them.
    res["left_out"] = left_out
    # `overlap compare` exits 3 after its output on these, as report/check/inspect do on a run
    # read in part; a run found in a directory is left out with a note instead
    res["named_unreadable"] = named_bad
    res["did_not_run"] = did_not_run  # overlap.analysis.failed_runs
    res["plans"] = [plan_row(m) for m in plans]
    if plans and rows:
        # A plan of a measured run's program: its prediction beside the measurement, labelled.
        from overlap.analysis.plan_join import join_rows

        res["prediction_notes"] = join_rows(res["runs"], plans, target_of)
    res["plan_manifests"] = plans
    return res


