"""`overlap inspect PATH`: what a capture holds, before any analysis.

Hosts, planes and lines with event counts, the backend, the devices, and per device the number
and bytes of D2H and H2D transfers and of compute ops. `--json` prints the same as one object.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def register(sub) -> None:
    p = sub.add_parser("inspect", help="show what a capture holds (planes, lines, transfers)",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("path", help=".xplane.pb file, plugins/profile/<session> dir or run dir")
    p.add_argument("--session", help="capture session (timestamp dir) to read; default newest")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(func=run)


def inspect_trace(trace) -> dict:
    """The JSON-ready summary that both output forms render."""
    lines = trace.lines
    planes = []
    for (host, plane), grp in lines.groupby(["host", "plane"], sort=False):
        planes.append({
            "host": host, "plane": plane,
            "lines": [{"id": int(i), "name": n, "events": int(c)}
                      for i, n, c in zip(grp["line_id"], grp["line"], grp["events"])],
        })
    devices: dict[Any, dict[str, Any]] = {}
    tr = trace.transfers
    for (host, dev), grp in tr.groupby(["host", "device"], sort=True):
        d = devices.setdefault((host, dev), {"host": host, "device": dev})
        for direction in ("D2H", "H2D"):
            g = grp[grp["direction"] == direction]
            known = g["bytes_known"].to_numpy(bool) if "bytes_known" in g.columns else None
            d[direction] = {"count": int(len(g)), "bytes": int(g["bytes"].sum()),
                            # transfers whose size the capture does not record
                            "unknown_bytes": int((~known).sum()) if known is not None else 0}
    co = trace.compute
    counts = co.groupby(["host", "device"], sort=True).size()
    for (host, dev), n in counts.items():
        d = devices.setdefault((host, dev), {"host": host, "device": dev})
        d["compute_ops"] = int(n)
    for d in devices.values():
        for direction in ("D2H", "H2D"):
            d.setdefault(direction, {"count": 0, "bytes": 0, "unknown_bytes": 0})
        d.setdefault("compute_ops", 0)
    hw = {(h, dv): row for h, dv, row in zip(trace.devices["host"], trace.devices["device"],
                                             trace.devices.to_dict("records"))}
    vendors = {(h, dev): v for h, c in trace.capture.items()
               for dev, v in (c.get("vendors") or {}).items()}
    for key, d in devices.items():
        d["vendor"] = vendors.get(key)
        row = hw.get(key)
        if row:
            d["name"] = row.get("name")
            d["memory_size"] = None if row.get("memory_size") is None or str(
                row.get("memory_size")) == "<NA>" else int(row["memory_size"])
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
        "planes": planes,
        "devices": [devices[k] for k in sorted(devices)],
        "steps": int(len(trace.steps)),
        "memory_events": int(len(trace.memory)),
        "modules": int(len(trace.modules)),
        "unreadable_hosts": list(getattr(trace, "unreadable", None) or []),
        "events_dropped_invalid": {h: {"count": int(c.get("events_dropped_invalid") or 0),
                                       "by_reason": dict(c.get("events_dropped_reasons") or {})}
                                   for h, c in sorted(trace.capture.items())
                                   if c.get("events_dropped_invalid")},
    }


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
