"""`overlap inspect PATH`: what a capture holds, before any analysis.

Hosts, planes and lines with event counts, the backend, the devices, and per device the number
and bytes of D2H and H2D transfers and of compute ops. `--json` prints the same as one object.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np


def register(sub) -> None:
    p = sub.add_parser("inspect", help="show what a capture holds (planes, lines, transfers)",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("path", help=".xplane.pb file, plugins/profile/<session> dir or run dir")
    p.add_argument("--session", help="capture session (timestamp dir) to read; default newest")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(func=run)


def inspect_trace(trace) -> dict:
    """The JSON-ready summary that both output forms render.

    Read from the tables' columns (`Trace.columns`), not their DataFrames: pandas' import
    and frames were ~0.15 s and ~40 MiB of each `overlap inspect` of a small capture (issue
    32). Grouped as pandas' `groupby` groups: rows whose host, device or plane is missing
    (None) are in no group."""
    import numpy as np  # (here: `overlap --help` registers this command without numpy)

    lines = trace.columns("lines")
    planes: dict[tuple, list[dict[str, Any]]] = {}  # (host, plane) in order of first row
    for host, plane, i, n, c in zip(lines["host"], lines["plane"], lines["line_id"].tolist(),
                                    lines["line"], lines["events"].tolist()):
        if host is not None and plane is not None:
            planes.setdefault((host, plane), []).append({"id": i, "name": n, "events": c})
    devices: dict[Any, dict[str, Any]] = {}
    tr = trace.columns("transfers")
    ways = np.asarray(tr["direction"], object)
    nbytes = np.asarray(tr["bytes"], np.int64)
    unknown = ~np.asarray(tr["bytes_known"], bool)  # sizes the capture does not record
    cols = {}
    for way in ("D2H", "H2D"):
        m = ways == way
        cols[way] = m.astype(np.int64)
        cols[way + " bytes"] = np.where(m, nbytes, 0)
        cols[way + " unknown"] = (m & unknown).astype(np.int64)
    g = _per_device(tr, cols)
    for j, key in enumerate(zip(g["host"].tolist(), g["device"].tolist())):
        d = devices.setdefault(key, {"host": key[0], "device": key[1]})
        for way in ("D2H", "H2D"):
            d[way] = {"count": int(g[way][j]), "bytes": int(g[way + " bytes"][j]),
                      "unknown_bytes": int(g[way + " unknown"][j])}
    co = trace.columns("compute")
    g = _per_device(co, {"ops": np.ones(len(co["host"]), np.int64)})
    for key, n in zip(zip(g["host"].tolist(), g["device"].tolist()), g["ops"].tolist()):
        d = devices.setdefault(key, {"host": key[0], "device": key[1]})
        d["compute_ops"] = n
    for d in devices.values():
        for direction in ("D2H", "H2D"):
            d.setdefault(direction, {"count": 0, "bytes": 0, "unknown_bytes": 0})
        d.setdefault("compute_ops", 0)
    dv = trace.columns("devices")
    hw = {(h, dev): (name, size) for h, dev, name, size in zip(
        dv["host"], dv["device"], dv["name"], dv["memory_size"])}
    vendors = {(h, dev): v for h, c in trace.capture.items()
               for dev, v in (c.get("vendors") or {}).items()}
    for key, d in devices.items():
        d["vendor"] = vendors.get(key)
        if key in hw:
            d["name"], size = hw[key]
            d["memory_size"] = None if size is None else int(size)
    return {
        "sources": [str(s) for s in trace.sources],
        "synthetic": trace.synthetic,
        "backend": trace.backend,
        "vendors": sorted({v for v in vendors.values() if v},
                          key=lambda v: ("inferred" in v, v)),
        # "complete", or "cannot_tell" with the device shapes the rules do not read
        "transfer_status": _transfer_status(trace),
        "hosts": [{"host": h, **{k: v for k, v in c.items() if k in (
            "profile_start_time_ns", "profile_stop_time_ns", "jax_version", "jaxlib_version",
            "errors", "warnings")}} for h, c in sorted(trace.capture.items())],
        "planes": [{"host": h, "plane": pl, "lines": ls} for (h, pl), ls in planes.items()],
        "devices": [devices[k] for k in sorted(devices)],
        "steps": trace.rows("steps"),
        "memory_events": trace.rows("memory"),
        "modules": trace.rows("modules"),
        "unreadable_hosts": list(getattr(trace, "unreadable", None) or []),
        "events_dropped_invalid": {h: {"count": int(c.get("events_dropped_invalid") or 0),
                                       "by_reason": dict(c.get("events_dropped_reasons") or {})}
                                   for h, c in sorted(trace.capture.items())
                                   if c.get("events_dropped_invalid")},
    }


def _per_device(t, cols: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """`cols` summed per (host, device) of the table `t`'s rows, groups sorted, as pandas'
    `groupby(["host", "device"]).sum()` gives them: `group_sums` (sorted codes and one pass
    in numpy: a million copies, no Python per row), less the groups of rows whose host or
    device is missing (pandas drops them)."""
    from overlap.analysis.grouping import group_sums, is_none

    g = group_sums({"host": t["host"], "device": t["device"]}, ["host", "device"], cols,
                   sort=True)
    keep = ~(is_none(g["host"]) | is_none(g["device"]))
    return {k: v[keep] for k, v in g.items()}


def _transfer_status(trace) -> dict[str, Any]:
    unknown = [{"host": h, **u} for h, c in sorted(trace.capture.items())
               for u in c.get("transfer_unknowns") or ()]
    return {"status": "cannot_tell" if unknown else "complete", "unknown": unknown}


def _cell(b: dict) -> str:
    """Bytes of one direction; `+N?` when N transfers have no recorded size."""
    k = b.get("unknown_bytes") or 0
    return _fmt_bytes(b["bytes"]) + (f" +{k}?" if k else "")


def _fmt_bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def render_text(info: dict) -> str:
    out = []
    if info["synthetic"]:
        out.append("SYNTHETIC trace (written by overlap.trace.synthetic, not a real capture)")
    out.append(f"backend: {info['backend']}   "
               + (f"vendor: {', '.join(info['vendors'])}   " if info.get("vendors") else "")
               + f"steps: {info['steps']}   "
               f"memory events: {info['memory_events']}   HLO modules: {info['modules']}")
    for h in info["hosts"]:
        ver = h.get("jax_version")
        out.append(f"host {h['host']}" + (f"  (jax {ver})" if ver else ""))
    for host, d in info.get("events_dropped_invalid", {}).items():
        why = ", ".join(f"{k}: {v}" for k, v in sorted(d["by_reason"].items()))
        out.append(f"host {host}: {d['count']} event(s) dropped as invalid"
                   + (f" ({why})" if why else "") + "; they are in no table below")
    out.append("")
    for p in info["planes"]:
        out.append(f"{p['host']} {p['plane']}")
        for ln in p["lines"]:
            out.append(f"  {ln['events']:>9}  {ln['name'] or '(unnamed)'}  [line {ln['id']}]")
    out.append("")
    if info["devices"]:
        out.append(f"{'device':<14}{'D2H':>8}{'D2H bytes':>13}{'H2D':>8}{'H2D bytes':>13}"
                   f"{'compute ops':>13}")
        for d in info["devices"]:
            out.append(f"{d['host'] + ' ' + d['device']:<14}{d['D2H']['count']:>8}"
                       f"{_cell(d['D2H']):>13}{d['H2D']['count']:>8}"
                       f"{_cell(d['H2D']):>13}{d['compute_ops']:>13}")
    unknown = sum(d[k].get("unknown_bytes", 0) for d in info["devices"] for k in ("D2H", "H2D"))
    if unknown:
        out.append(f"{unknown} transfer(s) of unknown size: the capture records no byte count "
                   "for them (their bytes are not in the columns above)")
    ts = info.get("transfer_status") or {}
    if ts.get("status") == "cannot_tell":
        out.append("CANNOT TELL whether every transfer was found: device events outside the "
                   "rules overlap reads:")
        out += [f"  {u['host']} {u.get('device') or ''}: {u['reason']}".replace("  :", ":")
                for u in ts["unknown"]]
    elif not any(d["D2H"]["count"] or d["H2D"]["count"] for d in info["devices"]):
        if info["backend"] == "cpu":
            out.append("no host transfers: XLA:CPU compiles host offload away, so CPU captures "
                       "never have them (overlap plan shows what the GPU/TPU compilers do)")
        else:
            out.append("no host transfers in this capture")
    return "\n".join(out)


def run(args: argparse.Namespace) -> int:
    from overlap.cli.report import fail_on_unreadable
    from overlap.trace import read_trace

    trace = read_trace(args.path, session=args.session)
    info = inspect_trace(trace)
    if args.json:
        json.dump(info, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(render_text(info))
    sys.stdout.flush()
    fail_on_unreadable(trace)
    return 0
