"""Like with like: which loaded runs can be compared, and the one-sentence verdict on a group.

A run's *group* is (program, target, made with):

* program: run.json's program fingerprint (module name + input shapes and dtypes) where the
  capture recorded it, else its `module`, else the module that ran in the capture
  (`overlap.analysis.memory.executed_program`); for a plan, its module and workload;
* target: the device the numbers are for: a capture's backend and device names, a plan's
  target (`h100`, `v5e`);
* made with: the XLA flags and jax/jaxlib versions in force (`overlap.analysis.compare.made_with`,
  from run.json): runs of one program made with command buffers on and off are two experiments,
  each with a baseline of its own.

Runs of one group ran (or were compiled as) the same program for the same device under
different policies: their step time and memory can be set side by side. A run of another
group is flagged with what differs, never judged.

The verdict sentence (`group_verdict`) opens with what users came for (`offload_answer`): does
offload pay here, i.e. is the fastest offloading run with measured transfers faster than the
baseline outside the noise (`overlap.analysis.steps.difference`); if not, why not in a short
phrase: its transfers' hidden share (duration-weighted overlap ratio) and exposed time per step
(`step_summary.mean_exposed_wall_ps`) against the slowdown, and the largest exposure cause
where the report carries `by_direction[...]['exposure_causes']`. Then it says, for a group and
its baseline: which run is fastest and by how much, with the 99% interval
(`overlap.analysis.steps.difference`: called only outside the noise); which uses the least
peak memory (`overlap.analysis.memory`, one source only); and whether each offloading
policy's transfers hide, measured (the capture's duration-weighted overlap ratio) or predicted
(a plan's roofline estimate), saying which.
Pure: RunData in, strings out.
"""

from __future__ import annotations

from typing import Any

from overlap.report.rundata import manifest_policy, manifest_workload


def _is_plan(data) -> bool:
    return (data.result or {}).get("status") == "PLAN"


def program_of(data) -> dict[str, Any]:
    """`{"module", "inputs", "workload"}` of a loaded run (see the module docstring)."""
    m = data.manifest or {}
    raw = m.get("program")
    prog: dict[str, Any] = raw if isinstance(raw, dict) else {}
    module = prog.get("module") or m.get("module") or \
        ((data.result or {}).get("program") or {}).get("module")
    return {"module": module if isinstance(module, str) else None,
            "inputs": prog.get("inputs") if isinstance(prog.get("inputs"), str) else None,
            "workload": manifest_workload(m)}


def target_of(data) -> str:
    """The device a run's numbers are for (a plan's target name, else backend: devices)."""
    if _is_plan(data):
        return f"{(data.result.get('plan') or {}).get('target') or 'plan'} (plan)"
    names = ", ".join(data.device_names or [])
    return f"{data.backend}: {names}" if names and names != data.backend else str(data.backend)


def made_of(data) -> dict[str, Any]:
    """How a loaded run was made: `overlap.analysis.compare.made_with` of its manifest."""
    from overlap.analysis.compare import made_with

    return made_with(data.manifest)


def group_key(data) -> tuple[str, str, str, str]:
    """(module, inputs, target, made with): runs with equal keys form one comparison group."""
    from overlap.analysis.compare import made_key

    p = program_of(data)
    return (str(p["module"] or p["workload"] or "?"), str(p["inputs"] or ""), target_of(data),
            made_key(made_of(data)))


def group_label(data) -> str:
    p = program_of(data)
    what = p["workload"] or p["module"] or "unnamed program"
    if p["workload"] and p["module"]:
        what = f"{p['workload']} ({p['module']})"
    return f"{what} on {target_of(data)} · {made_of(data)['text']}"


def groups(items: list[tuple[str, Any, float]]) -> list[dict[str, Any]]:
    """Group `(name, RunData, made)` items (`made`: when the run was made); groups of two or
    more runs first, newest first (by their newest run).

    Each group: `key`, `label` (with the run count), `runs` (names), `newest` (mtime)."""
    by: dict[tuple, dict[str, Any]] = {}
    for name, data, mtime in items:
        k = group_key(data)
        g = by.setdefault(k, {"key": "|".join(k), "label": group_label(data), "runs": [],
                              "newest": mtime})
        g["runs"].append(name)
        g["newest"] = max(g["newest"], mtime)
    # A comparison needs two runs: groups of several come first, newest first.
    out = sorted(by.values(), key=lambda g: (len(g["runs"]) < 2, -g["newest"], g["label"]))
    for g in out:
        g["label"] = f"{g['label']} ({len(g['runs'])} run{'s' if len(g['runs']) != 1 else ''})"
    return out


def what_differs(data, base) -> str:
    """Why a run is not compared with the baseline, in words."""
    a, b = group_key(data), group_key(base)
    if a[2] != b[2]:
        return f"another device ({a[2]} vs {b[2]})"
    if a[0] != b[0]:
        return f"another program ({a[0]} vs {b[0]})"
    if a[1] != b[1]:
        return (f"the same module {a[0]} with other input shapes or dtypes (input fingerprints "
                f"{a[1] or 'not recorded'} vs {b[1] or 'not recorded'})")
    from overlap.analysis.compare import made_differs

    how = made_differs(made_of(data), made_of(base))
    if how:
        return f"the same program made another way: {how} (another experiment)"
    return "another program"


def _offloads(data) -> bool:
    m = data.manifest or {}
    pol = m.get("policy")
    if isinstance(pol, dict):
        return bool(pol.get("offloaded")) or pol.get("category") == "offload"
    name = manifest_policy(m)[0]
    return "offload" in name or bool((data.result.get("summary") or {}).get("transfers"))


def _mem(n: int) -> str:
    from overlap.report.units import format_bytes

    return format_bytes(n)


def _top_cause(result: dict) -> str | None:
    """The exposure cause holding the most exposed time (or copies) over both directions, where
    the report has `by_direction[d]['exposure_causes']` ({cause: number or dict} or a list of
    dicts with `cause`)."""
    tally: dict[str, float] = {}
    for d in ("D2H", "H2D"):
        causes = ((result.get("by_direction") or {}).get(d) or {}).get("exposure_causes")
        items = causes.items() if isinstance(causes, dict) else (
            ((c.get("cause") or c.get("name"), c) for c in causes if isinstance(c, dict))
            if isinstance(causes, list) else ())
        for name, v in items:
            if isinstance(v, dict):
                v = next((v[k] for k in ("exposed_ps", "ps", "count", "copies") if
                          isinstance(v.get(k), (int, float))), None)
            if isinstance(name, str) and isinstance(v, (int, float)) and v > 0:
                tally[name] = tally.get(name, 0) + float(v)
    return max(sorted(tally), key=lambda k: tally[k]) if tally else None


def _speed(name: str, base_name: str, diff: dict) -> str:
    """`X is 9.2% faster than B (99% CI 8.1-10.3%)` from a called `steps.difference`."""
    from overlap.analysis import steps as step_stats

    lo, hi = diff["ci"]
    word = "faster" if diff["delta"] < 0 else "slower"
    return (f"{name} is {abs(diff['delta']) * 100:.1f}% {word} than {base_name} "
            f"({step_stats.CONFIDENCE:.0%} CI {abs(hi if word == 'faster' else lo) * 100:.1f}-"
            f"{abs(lo if word == 'faster' else hi) * 100:.1f}%)")


def offload_answer(datas: list[tuple[str, Any]], base_name: str) -> str | None:
    """Does offload pay here, and if not why not, in one phrase (module docstring); None when
    no run of the group offloads."""
    from overlap.analysis import steps as step_stats
    from overlap.report.units import format_ps

    runs = dict(datas)
    base = runs.get(base_name)
    offl = [(n, d) for n, d in datas if n != base_name and not _is_plan(d) and _offloads(d)]
    if base is None or not offl or _is_plan(base):
        return None
    moved = [(n, d) for n, d in offl if (d.result.get("summary") or {}).get("transfers")]
    if not moved:
        gone = "XLA:CPU compiles offload away" if all(d.backend == "cpu" for _, d in offl) \
            else "no host transfers in the trace"
        return f"offload is not measured here ({gone})"
    if _offloads(base) and (base.result.get("summary") or {}).get("transfers"):
        return None  # an offloading baseline: which policy pays is not this question
    b = step_stats.run_step_time(base.manifest, base.result.get("steps"))
    timed = {n: step_stats.run_step_time(d.manifest, d.result.get("steps")) for n, d in moved}
    timed = {n: t for n, t in timed.items() if t["median_ns"] is not None}
    if b["median_ns"] is None or not timed:
        return "whether offload pays here is unknown (no step times to compare)"
    best = min(sorted(timed), key=lambda n: timed[n]["median_ns"])
    diff = step_stats.difference(timed[best]["samples_ns"], b["samples_ns"])
    if diff["called"] and diff["delta"] < 0:
        return f"offload pays here: {_speed(best, base_name, diff)}"
    d = runs[best].result
    ratio = (d.get("summary") or {}).get("overlap_ratio")
    exposed = (d.get("step_summary") or {}).get("mean_exposed_wall_ps")
    hidden = "?" if ratio is None else f"{ratio * 100:.0f}%"
    why = [f"its copies are {hidden} hidden"]
    slow_ps = (timed[best]["median_ns"] - b["median_ns"]) * 1000
    if exposed is not None:
        part = f"{format_ps(int(exposed))} exposed per step"
        if diff["called"] and slow_ps > 0:
            part += (" (enough to explain the slowdown)" if exposed >= 0.8 * slow_ps else
                     f" of a {format_ps(int(slow_ps))} slowdown: the rest is not the copies' "
                     "waiting")
        why.append(part)
    cause = _top_cause(d)
    if cause:
        why.append(f"mostly {cause}")
    head = (f"offload does not pay here: {_speed(best, base_name, diff)}, the fastest "
            "offloading run" if diff["called"] else
            f"offload does not pay here: {best} is no faster than {base_name} ({diff['reason']})")
    return f"{head} (why: {', '.join(why)})"


def group_verdict(datas: list[tuple[str, Any]], baseline: str | None) -> str:
    """One sentence on runs of one group against `baseline` (see the module docstring)."""
    from overlap.analysis import steps as step_stats
    from overlap.analysis.memory import peak_memory_bytes

    if not datas:
        return "No runs to compare."
    names = [n for n, _ in datas]
    base_name = baseline if baseline in names else names[0]
    plans = all(_is_plan(d) for _, d in datas)
    parts: list[str] = []
    answer = offload_answer(datas, base_name)
    if answer:
        parts.append(answer)
    # Speed: measured runs only (a plan is never run).
    if plans:
        parts.append("step time: not measured (plans are compiled, not run)")
    elif len(datas) > 1:
        samples = {n: step_stats.run_step_time(d.manifest, d.result.get("steps"))
                   for n, d in datas if not _is_plan(d)}
        timed = {n: s for n, s in samples.items() if s["median_ns"] is not None}
        if len(timed) < 2 or base_name not in timed:
            parts.append("step time: too few runs with step times to compare")
        else:
            fastest = min(sorted(timed), key=lambda n: timed[n]["median_ns"])
            other = fastest if fastest != base_name else min(
                (n for n in sorted(timed) if n != base_name),
                key=lambda n: timed[n]["median_ns"])
            diff = step_stats.difference(timed[other]["samples_ns"],
                                         timed[base_name]["samples_ns"])
            if diff["called"]:
                said = _speed(other, base_name, diff)
                if not (answer and said in answer):  # the offload answer said it already
                    parts.append(said)
            else:
                parts.append(f"no run is faster or slower than {base_name} outside the noise "
                             f"(closest: {other}, {diff['reason']})")
    # Memory: the least peak among runs whose peak has the baseline's source.
    peaks = {n: peak_memory_bytes(d) for n, d in datas}
    src = peaks[base_name][1]
    same = {n: p for n, (p, s) in peaks.items() if p is not None and s == src}
    if len(same) > 1:
        least = min(sorted(same), key=lambda n: same[n])
        if least == base_name:
            parts.append(f"{least} uses the least memory ({_mem(same[least])}, {src})")
        else:
            d = (same[least] - same[base_name]) / same[base_name] if same[base_name] else 0
            parts.append(f"{least} uses the least memory ({_mem(same[least])}, "
                         f"{abs(d) * 100:.1f}% less than {base_name}; {src})")
    # Transfers of each offloading policy: measured or predicted, said so.
    for n, d in datas:
        if not _offloads(d):
            continue
        if _is_plan(d):
            hf = (d.result.get("plan") or {}).get("predicted_hidden_fraction")
            parts.append(f"{n}'s planned transfers: " + (
                "none planned (predicted)" if hf is None else
                f"{hf * 100:.0f}% hidden (PREDICTED by the roofline estimate, not measured)"))
            continue
        summ = d.result.get("summary") or {}
        if not summ.get("transfers"):
            why = " (XLA:CPU compiles offload away)" if d.backend == "cpu" else ""
            parts.append(f"{n}'s transfers: none in the trace{why} (measured)")
        else:
            ratio = summ.get("overlap_ratio")
            parts.append(f"{n}'s transfers: " + ("hiding unknown" if ratio is None else
                                                 f"{ratio * 100:.0f}% hidden") + " (measured)")
    return "; ".join(parts) + "." if parts else f"Only {base_name}: nothing to compare."
