"""The advisor's answer as text: the recommendation first, then one ranked row per policy.

Every number is defined in `overlap.analysis.advise` (fit, device peak, headroom, predicted
step time, difference from full remat, bytes moved, break-even host bandwidth); the header
says what was compiled and that nothing was run, the footer what the prediction assumes.
"""

from __future__ import annotations

import textwrap
from typing import Any

from overlap.report.units import format_bytes, format_ps, format_rate

_W_POLICY = 33
WIDTH = 110  # the table's width
BEYOND_ANY_LINK_BPS = 1e13


def _pct(f: float | None) -> str:
    if f is None:
        return "-"
    return "same" if abs(f) < 0.0005 else f"{100 * f:+.1f}%"


def _fit(r: dict) -> str:
    if r["status"] == "does_not_fit":
        return "OOM"
    if r["status"] != "ok":
        return "ERROR"
    return {True: "yes", False: "NO", None: "?"}[r["fits"]]


def render_advice(a: dict[str, Any]) -> str:
    what = a.get("workload") or a.get("subject") or "step"
    budget = a.get("budget") or {}
    out = [f"ADVICE for {what} on {a.get('target')} (compiled for {a.get('target')}, not run; "
           "step times are predicted)",
           f"budget: {format_bytes(budget.get('bytes'))} per device ({budget.get('source')})"]
    rec = a.get("recommended")
    if rec:
        row = next(r for r in a["rows"] if r["policy"] == rec)
        facts = [f"predicted step {format_ps(row['step_ps'])}"]
        if row["vs_full_fraction"] is not None and a.get("baseline") != rec:
            facts.append(f"{_pct(row['vs_full_fraction'])} vs {a['baseline']} remat")
        facts.append(f"peak {format_bytes(row['device_peak_bytes'])}, "
                     f"{format_bytes(row['headroom_bytes'])} free")
        if row["moved_bytes"]:
            facts.append(f"moves {format_bytes(row['moved_bytes'])}/step")
        out.append(f"RECOMMENDED: {rec} - {'; '.join(a.get('why') or [])} "
                   f"({', '.join(facts)})")
    else:
        out.append(f"RECOMMENDED: none - {'; '.join(a.get('why') or [])}")
    off = a.get("offload") or {}
    if off.get("pays") is not None:
        out.append(f"offload {'PAYS' if off['pays'] else 'does NOT pay'} here: {off['why']}")
    else:
        out.append(f"offload: cannot say ({off.get('why')})")
    out.append("")
    out.append(f"{'#':>3}  {'policy':<{_W_POLICY}}{'fits':>5}{'device peak':>13}"
               f"{'headroom':>11}{'step*':>10}{'vs full':>9}{'moved/step':>12}"
               f"{'break-even':>12}")
    notes = []
    for r in a["rows"]:
        name = str(r["policy"])
        if r.get("same_program_as"):
            name += " ="
        if len(name) > _W_POLICY - 1:
            name = name[:_W_POLICY - 2] + "~"
        head = f"{r['rank']:>3}  {name:<{_W_POLICY}}{_fit(r):>5}"
        if r["status"] != "ok" and r["device_peak_bytes"] is None:
            out.append(f"{head}  {r['reason'][:WIDTH - len(head) - 2]}")
            continue
        be = r["break_even_Bps"]
        moved = r["moved_bytes"] or 0
        # Beyond 10 TB/s no host link comes close (PCIe Gen6 x16 is 128 GB/s): say so
        # instead of printing a number wider than the column.
        be_text = (">10 TB/s" if be is not None and be > BEYOND_ANY_LINK_BPS else
                   format_rate(be) if be is not None else ("-" if not moved else "never"))
        out.append(
            f"{head}{format_bytes(r['device_peak_bytes']):>13}"
            f"{format_bytes(r['headroom_bytes']):>11}{format_ps(r['step_ps']):>10}"
            f"{_pct(r['vs_full_fraction']):>9}{format_bytes(moved):>12}"
            f"{be_text:>12}")
        if r.get("same_program_as"):
            notes.append(f"{r['policy']} = same program as {r['same_program_as']}")
    out.append("")
    out.append("* predicted step = compute of every scheduled instruction at the target's "
               "peaks (recomputation included) + time the compute waits for host copies; "
               "a roofline estimate from the compiled schedule, not a measurement. Peaks are "
               "the compiler's memory_analysis (temp + arguments + outputs - aliases).")
    out.append("  break-even = the slowest host link at which every copy still hides "
               "('never': some copy has no work beside it). 'vs full' = step time against "
               f"{a.get('baseline') or 'full remat (none compiled)'}.")
    for line in (a.get("assumptions") or [])[:6]:
        out.append(f"  assumes: {line}")
    # The assumptions above are one plan's; a plan whose async-op streams came from elsewhere
    # (e.g. the calibration run of its very program) says so beside its name.
    said = " ".join(a.get("assumptions") or [])
    own = [r for r in a["rows"] if r.get("streams") and r["status"] == "ok"
           and not r.get("same_program_as")
           and not r["streams"].startswith("the program has no async ops")]
    if len({r["streams"] for r in own}) > 1:
        out += [f"  streams of {r['policy']}: {r['streams']}" for r in own
                if f"({r['streams']})" not in said]
    if notes:
        out.append("  " + "; ".join(notes))
    out.append(f"{a.get('policies_considered')} policies considered, "
               f"{a.get('programs_compiled')} distinct programs compiled in "
               f"{a.get('seconds')} s")
    # Ten-second reading: nothing wider than the table; long sentences wrap, indented.
    wrapped: list[str] = []
    for line in out:
        wrapped += textwrap.wrap(line, WIDTH, subsequent_indent="    ",
                                 break_on_hyphens=False) if len(line) > WIDTH else [line]
    return "\n".join(wrapped)
