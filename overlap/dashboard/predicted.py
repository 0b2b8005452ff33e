"""The Compare tab's "predicted (plan)" column: a plan's estimate beside a measured run of the
same program.

Which plan predicts which run is `overlap.analysis.plan_join.match` (module, inputs, policy,
target), the rule `overlap compare` uses; the run's side comes from what the dashboard keeps
of it (run.json's program fingerprint and policy, else the module the capture's ops ran in;
the device kinds the capture names). The cell says "predicted (plan for TARGET)" and names the
plan, so a predicted number is never read as a measured one; the measured hidden shares are in
the columns beside it.
"""

from __future__ import annotations

from typing import Any

from overlap.analysis.plan_join import predicted_beside


def _measured(d: Any) -> dict[str, Any]:
    """`d` (report.rundata.RunData) as `plan_join.match` reads a run."""
    m = d.manifest or {}
    r = d.result or {}
    ran = r.get("program") or {}
    by_dir = r.get("by_direction") or {}
    return {
        "label": str(m.get("label") or ""),
        "program": m.get("program") if isinstance(m.get("program"), dict) else {},
        "policy": m.get("policy"),
        "copy_modules": [x for x in (ran.get("name"), ran.get("module")) if x],
        "device_kinds": list(d.device_names or []), "backend": d.backend,
        "overlap_ratio": (r.get("summary") or {}).get("overlap_ratio"),
        "exposed_ps_per_step": (r.get("step_summary") or {}).get("mean_exposed_wall_ps"),
        "per_step": bool(r.get("steps")),
        **{f"{k.lower()}_overlap": (by_dir.get(k) or {}).get("overlap_ratio")
           for k in ("D2H", "H2D")},
    }


def predicted_cells(datas: list[tuple[str, Any]], runs: list[Any]) -> dict[str, str]:
    """Run name -> the cell text for each measured run a plan among `runs` predicts, e.g.
    "25% hidden, predicted (plan for v6e: plan_v6e)"; runs without one are left out."""
    from overlap.analysis.plans import plan_problem
    from overlap.plan.targets import target_for_device_kind
    from overlap.runs.rundir import normalize_manifest

    # (a damaged plan predicts nothing: its own card names what is wrong, `data._load_uncached`)
    plans = [{**m, "label": m.get("label") or r.name}
             for r in runs if getattr(r, "is_plan", False)
             for m in [normalize_manifest(r.manifest())] if not plan_problem(m)]
    if not plans:
        return {}
    out = {}
    for name, d in datas:
        if (d.result or {}).get("status") == "PLAN":
            continue  # a plan's own numbers are predictions already, marked on its row
        pairs = predicted_beside(_measured(d), plans, target_for_device_kind)["pairs"]
        cells = []
        for p in pairs:
            hf = p["predicted_hidden_fraction"]
            share = "-" if hf is None else f"{100 * hf:.1f}%"
            cells.append(f"{share} hidden, {p['label']}: {p['plan']}")
        if cells:
            out[name] = "; ".join(cells)
    return out
