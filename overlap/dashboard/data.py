"""Run discovery, loading and caching for the dashboard.

Discovery (`discover_runs`) walks each log directory and lists *complete* runs only:

* a run directory is one holding `run.json` (written last by `overlap capture`, so its presence
  marks the capture as finished) and `plugins/profile/<ts>/<host>.xplane.pb`; any directory
  named `*.partial-*` is half written and never listed. A `run.json` that cannot be read (not
  JSON, not an object, not a regular file, too large, or pointing outside the logdir) is
  damage, not a write in progress (it is written atomically): its run is listed, with the
  problem as its error row;
* a bare `*.xplane.pb` outside any `plugins/` tree (how `sample_traces/` ships captures) is a
  run of its own, named after the file.

Security: run names that come back from the browser are only ever looked up in the table
`discover_runs` returned (`find_run`), never joined into a path. Discovery itself refuses
anything whose real path leaves the log directory (`..` in names cannot occur in a walk;
symlinks pointing outside are dropped), so the table can only hold files under the logdirs.

Loading (`load_run`) reads the capture, analyses it once, and keeps only compact columnar arrays
(`RunData`); the reader's DataFrames are dropped. Results are cached in memory per run, keyed on
the (path, mtime, size) of every file the run is made of, so a rewritten capture is re-read and
an unchanged one never is. A run that fails to load caches its error the same way, and the app
shows an error card for it.

`prepare_run_view(run)` does every piece of server-side work the Run view needs for its first
render (load, analyse, aggregate the default step, build and serialise the figures); the
benchmarks time it.
"""

from __future__ import annotations

import json
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from overlap import cache
from overlap.analysis import overlap as analysis
from overlap.analysis.memory import peak_memory_bytes
from overlap.analysis.steps import run_step_time_ps
from overlap.cache import cache_dir  # noqa: F401 (re-exported: where loaded runs go)
from overlap.errors import InputError
from overlap.report.rundata import (  # noqa: F401 (re-exported)
    STEP_OPTIONS_LIMIT,
    RunData,
    default_step,
    manifest_policy,
    manifest_workload,
    parse_step,
    run_data,
    step_options,
)
from overlap.report.units import format_bytes
from overlap.trace.paths import open_regular, read_side_file, read_side_json

XPLANE_SUFFIX = ".xplane.pb"
MANIFEST = "run.json"
PARTIAL_MARK = ".partial-"
MAX_DEPTH = 6  # log dirs are shallow; stops a walk into a huge unrelated tree
CACHE_SIZE = 6  # loaded runs kept in memory (a 1M-event run holds ~100 MB of arrays)

# Policies that are remat baselines (MaxText `full` recomputes everything; JAX's
# `nothing_saveable` is the same thing under its JAX name).
BASELINE_POLICIES = ("full", "nothing_saveable")


class RunLoadError(Exception):
    """A run that cannot be read or analysed; the message is shown on the run's error card."""


@dataclass(frozen=True)
class Run:
    """A complete run found under a log directory. `name` is its id in the browser."""

    name: str
    path: Path  # the run directory, or the bare .xplane.pb file
    files: tuple[Path, ...]  # the capture's host files (newest session)
    manifest_path: Path | None
    logdir: Path

    def fingerprint(self) -> tuple:
        """(path, mtime_ns, size) of every file the run is made of: the cache key."""
        parts: list[tuple[str, int | None, int | None]] = []
        for p in (*self.files, *([self.manifest_path] if self.manifest_path else [])):
            try:
                st = p.stat()
                parts.append((str(p), st.st_mtime_ns, st.st_size))
            except OSError:
                parts.append((str(p), None, None))
        return tuple(parts)

    @property
    def is_plan(self) -> bool:
        return not self.files and self.manifest().get("kind") == "plan"

    @property
    def is_failed(self) -> bool:
        """A capture whose step did not fit or failed (overlap.capture.failures): no trace."""
        return not self.files and _failed(self.manifest())

    def manifest(self) -> dict[str, Any]:
        if not self.manifest_path or not _inside(self.manifest_path, self.logdir):
            return {}
        try:
            m = read_side_json(self.manifest_path, "run manifest (run.json)")
        except InputError:  # damaged: the run's load names it (`_manifest_problem`)
            return {}
        return m if isinstance(m, dict) else {}


# ---------------------------------------------------------------------------------------------
# Discovery


def _inside(path: Path, root: Path) -> bool:
    """Whether the real path of `path` lies under `root` (already a real path)."""
    try:
        real = Path(os.path.realpath(path))
    except OSError:
        return False
    return real == root or root in real.parents


def _sessions(run_dir: Path, root: Path) -> list[tuple[str, tuple[Path, ...]]]:
    """(session name, host files) of every capture session of a run dir with host files,
    oldest first, all inside `root`."""
    profile = run_dir / "plugins" / "profile"
    if not _inside(profile, root) or not profile.is_dir():
        return []
    out = []
    for s in sorted((s for s in profile.iterdir()
                     if s.is_dir() and PARTIAL_MARK not in s.name and _inside(s, root)),
                    key=lambda s: s.name):
        files = tuple(sorted(f for f in s.iterdir() if f.name.endswith(XPLANE_SUFFIX)
                             and f.is_file() and _inside(f, root)))
        if files:
            out.append((s.name, files))
    return out


def _session_files(run_dir: Path, root: Path) -> tuple[Path, ...]:
    """Host files of the newest capture session of a run dir, all inside `root`."""
    sessions = _sessions(run_dir, root)
    return sessions[-1][1] if sessions else ()


def _older_sessions(runs: list, name: str, here: Path, root: Path, manifest) -> None:
    """A log directory with several capture sessions: the newest is the run `name`; each older
    one is listed as `name@<session>`, so the user can pick it."""
    for sess, files in _sessions(here, root)[:-1]:
        runs.append(Run(f"{name}@{sess}", here, files, manifest, root))


def _is_plan_manifest(path: Path) -> bool:
    """A plan run (compiled for a target, never run): listed without a capture."""
    try:
        m = read_side_json(path, "run manifest (run.json)")
    except InputError:
        return False
    return isinstance(m, dict) and m.get("kind") == "plan"


def _failed(m: Any) -> bool:
    return isinstance(m, dict) and m.get("kind") != "plan" \
        and m.get("status") in ("does_not_fit", "failed")


def _is_failed_manifest(path: Path) -> bool:
    """A capture whose step did not complete: listed without a capture, as a row that did not
    run (overlap.analysis.failed_runs)."""
    try:
        return _failed(read_side_json(path, "run manifest (run.json)"))
    except InputError:
        return False


def failed_row(run: Run) -> dict[str, Any]:
    """`overlap.analysis.failed_runs.failed_row` of a failed run, from its normalized run.json."""
    from overlap.analysis.failed_runs import failed_row as row_of
    from overlap.runs.rundir import normalize_manifest

    return row_of(normalize_manifest(run.manifest()), run.name)


def _manifest_problem(path: Path) -> str | None:
    """What is wrong with a run.json (not a regular file, not JSON, not an object), or None.
    run.json is written last and atomically, so a damaged one is damage, not a write in
    progress: its run is listed, with this as its error."""
    try:
        m = read_side_json(path, "run manifest (run.json)")
    except InputError as e:
        return e.problem
    return None if isinstance(m, dict) else f"run.json is a JSON {type(m).__name__}, not an object"


def _manifest_ok(path: Path) -> bool:
    """A run.json that parses to an object."""
    return _manifest_problem(path) is None


def discover_runs(logdirs: Sequence[str | os.PathLike]) -> list[Run]:
    """Complete runs under `logdirs` (see the module docstring), sorted by name.

    With several logdirs, names are prefixed with the logdir's name (and its index when two
    logdirs share a name) so they stay unique.
    """
    runs: list[Run] = []
    roots = [Path(os.path.realpath(d)) for d in logdirs]
    names = [r.name for r in roots]
    for i, root in enumerate(roots):
        if not root.is_dir():
            if root.is_file() and root.name.endswith(XPLANE_SUFFIX):
                runs.append(Run(root.name, root, (root,), None, root.parent))
            continue
        prefix = ""
        if len(roots) > 1:
            prefix = (f"{root.name}/" if names.count(root.name) == 1 else f"{root.name}#{i}/")
        seen: set[Path] = set()
        for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
            here = Path(dirpath)
            real = Path(os.path.realpath(here))
            rel = here.relative_to(root)
            # Symlinked dirs are followed only while they stay inside the logdir, once each.
            if real in seen or not _inside(here, root) or len(rel.parts) > MAX_DEPTH:
                dirnames[:] = []
                continue
            seen.add(real)
            # Real dirs before symlinks, so a run reachable both ways is listed under its own
            # name and the alias is skipped as already seen.
            dirnames[:] = sorted((d for d in dirnames
                                  if not d.startswith(".") and PARTIAL_MARK not in d
                                  and d != "plugins"),  # a capture tree belongs to its run dir
                                 key=lambda d: ((here / d).is_symlink(), d))
            manifest = here / MANIFEST
            if MANIFEST in filenames and _inside(manifest, root) and _manifest_ok(manifest):
                files = _session_files(here, root)
                if files or _is_plan_manifest(manifest) or _is_failed_manifest(manifest):
                    name = prefix + (rel.as_posix() if rel.parts else root.name)
                    runs.append(Run(name, here, files, manifest, root))
                    _older_sessions(runs, name, here, root, manifest)
                continue
            if MANIFEST in filenames:
                # A damaged run.json, or one whose real path leaves the logdir: listed, and its
                # load is the error that names the file (never read outside the logdir).
                name = prefix + (rel.as_posix() if rel.parts else root.name)
                runs.append(Run(name, here, _session_files(here, root), manifest, root))
                continue
            # A plain jax.profiler / TensorBoard log directory (no run.json) is a run too,
            # named after its directory; the newest capture session is read.
            files = () if MANIFEST in filenames else _session_files(here, root)
            if files:
                name = prefix + (rel.as_posix() if rel.parts else root.name)
                runs.append(Run(name, here, files, None, root))
                _older_sessions(runs, name, here, root, None)
                continue
            for f in sorted(filenames):
                p = here / f
                if f.endswith(XPLANE_SUFFIX) and _inside(p, root) and p.is_file():
                    name = prefix + (rel / f).as_posix()[: -len(XPLANE_SUFFIX)]
                    runs.append(Run(name, p, (p,), None, root))
    runs.sort(key=lambda r: r.name)
    return runs


def find_run(runs: list[Run], name: Any) -> Run | None:
    """The run called `name` (a string from the browser) in the discovered table, else None."""
    if not isinstance(name, str):
        return None
    return next((r for r in runs if r.name == name), None)


# ---------------------------------------------------------------------------------------------
# Loaded data


_cache: OrderedDict[str, tuple[tuple, RunData | RunLoadError]] = OrderedDict()
_cache_lock = threading.Lock()
_load_locks: dict[str, threading.Lock] = {}


def load_run(run: Run) -> RunData:
    """RunData of `run`, cached on its files' fingerprint. Raises RunLoadError."""
    key = f"{run.logdir}::{run.name}"
    with _cache_lock:
        lock = _load_locks.setdefault(key, threading.Lock())
    with lock:  # two callbacks asking for the same run read it once
        fp = run.fingerprint()
        with _cache_lock:
            hit = _cache.get(key)
            if hit and hit[0] == fp:
                _cache.move_to_end(key)
                value = hit[1]
                if isinstance(value, RunLoadError):
                    raise value
                return value
        value = _load_uncached(run)
        with _cache_lock:
            _cache[key] = (fp, value)
            _cache.move_to_end(key)
            while len(_cache) > CACHE_SIZE:
                _cache.popitem(last=False)
    if isinstance(value, RunLoadError):
        raise value
    return value


def _load_plan(run: Run) -> RunData | RunLoadError:
    """A plan run as RunData: no timeline (nothing ran), program-order memory from the
    compiler's heap simulation, and a result that says compiled, not run."""
    from overlap.analysis.plans import plan_row, program_memory_bytes
    from overlap.runs.rundir import normalize_manifest

    m = normalize_manifest(run.manifest())  # the types every view reads (memory_analysis ...)
    row = plan_row({**m, "label": m.get("label") or run.name})
    target = row["target"]
    pm = None
    try:
        live = program_memory_bytes(read_side_json(run.path / "program_memory.json",
                                                   "program memory (program_memory.json)"))
    except InputError:  # (missing or unreadable: no curve; the plan's page still opens)
        live = None
    if live:
        pm = {"index": np.arange(len(live), dtype=np.int64),
              "bytes": np.asarray(live, dtype=np.int64)}
    hf = row["predicted_hidden_fraction"]
    verdict = (f"PLAN: compiled for {target}, not run; " + (
        "does not fit: " + str(row["error"] or "")[:200] if row["status"] == "does_not_fit" else
        "compile error" if row["status"] != "ok" else
        "plans no host transfers" if hf is None else
        f"estimated {100 * hf:.0f}% of planned transfer time hidden (roofline estimate)"))
    empty = np.zeros(0, np.int64)
    eo = np.zeros(0, object)
    result = {"status": "PLAN", "verdict": verdict, "plan": row, "steps": [], "hosts": [],
              "by_direction": {}, "summary": {"transfers": 0}, "sources": [str(run.path)],
              "notes": list(m.get("notes") or []),
              "plan_timeline": plan_timeline(run.path, m),
              "planned_copies": list((m.get("estimate") or {}).get("ops") or [])}
    return RunData(
        result=result, backend=str((m.get("target") or {}).get("platform") or "plan")
        if isinstance(m.get("target"), dict) else "plan", synthetic=False,
        compute={"host": eo, "device": eo, "stream": empty, "start_ps": empty, "end_ps": empty},
        transfers={c: (eo if c in ("host", "device", "direction", "hlo_op") else empty)
                   for c in ("host", "device", "direction", "start_ps", "end_ps", "span_ps",
                             "hidden_ps", "exposed_ps", "overlap_ratio", "bytes",
                             "bandwidth_Bps", "hlo_op", "stream")},
        memory={"time_ps": empty, "bytes_allocated": empty, "device": eo, "allocator": eo},
        program_memory=pm, device_names=[str((m.get("target") or {}).get("description") or target)
                                         if isinstance(m.get("target"), dict) else target],
        manifest=m)


def plan_timeline(run_dir: Path, m: dict[str, Any]) -> list[dict[str, Any]]:
    """The predicted step timeline of a plan run (`overlap.hlo.schedule.predicted_timeline` of
    its optimized HLO under the machine model its estimate used); [] when the plan has no
    HLO text, no estimate, or no planned transfers."""
    import dataclasses

    from overlap.hlo.schedule import Roofline, predicted_timeline

    model = (m.get("estimate") or {}).get("model")
    texts = sorted((run_dir / "hlo").glob("*.hlo.txt")) if (run_dir / "hlo").is_dir() else []
    if not isinstance(model, dict) or not texts:
        return []
    try:
        fields = {f.name: model[f.name] for f in dataclasses.fields(Roofline) if f.name in model}
        text = read_side_file(texts[0], "HLO text").decode("utf-8", "replace")
        return predicted_timeline(text, Roofline(**fields))
    except Exception:  # noqa: BLE001 - the plan's other views stand without the timeline
        return []


def program_facts(path: Path, trace, result: dict[str, Any], manifest: dict | None) -> None:
    """What the captured program adds, as `overlap report` adds it: `offload_by_name`
    (`overlap.analysis.names`) and the HLO first-use facts of `device_waits`
    (`overlap.analysis.first_use`). GPU/TPU runs only; where the program cannot be read the
    run keeps its other views and a note says why."""
    if result.get("backend") not in ("gpu", "tpu"):
        return
    try:
        from overlap.analysis.first_use import add_hlo_evidence
        from overlap.analysis.names import offload_by_name, programs_of

        programs = programs_of(path, trace)
        by_name = offload_by_name(path, trace, result, manifest, programs)
        if by_name is not None:
            result["offload_by_name"] = by_name
        add_hlo_evidence(trace, result, {k: v[0] for k, v in programs.items()})
    except Exception as e:  # noqa: BLE001 - the run's other views stand without these
        result.setdefault("notes", []).append(
            f"checkpoint names and first uses not available ({type(e).__name__}: {e})")


def _load_uncached(run: Run) -> RunData | RunLoadError:
    from overlap.trace import read_trace

    if run.manifest_path is not None:
        problem = ("run.json points outside the log directory"
                   if not _inside(run.manifest_path, run.logdir)
                   else _manifest_problem(run.manifest_path))
        if problem is not None:
            return RunLoadError(f"{run.name}: {problem}")
    if run.is_plan:
        from overlap.analysis.plans import plan_problem
        from overlap.runs.rundir import normalize_manifest

        # A hand-edited or foreign plan: its card names run.json and what is wrong with it, as
        # `overlap report`/`check` do, instead of a view failing on it (HTTP 500).
        problem = plan_problem(normalize_manifest(run.manifest()))
        if problem:
            return RunLoadError(f"{run.name}: run.json: impossible plan: {problem}")
        try:
            return _load_plan(run)
        except Exception as e:  # noqa: BLE001 - any other damage becomes this run's error card
            return RunLoadError(f"{run.name}: run.json: unreadable plan ({type(e).__name__}: "
                                f"{str(e)[:200]})")
    if run.is_failed:  # nothing was captured: the run's card says what happened
        from overlap.analysis.failed_runs import verdict

        row = failed_row(run)
        return RunLoadError(f"{run.name}: {verdict(row)}: {str(row['error'] or '')[:300]}")

    fp = _content_fp(run)
    cached = _disk_get(fp)
    if cached is not None:
        cached.manifest = run.manifest()
        return cached
    try:
        # The run's own session (a log directory may hold several; see _older_sessions).
        trace = read_trace(run.files[0].parent if run.path.is_dir() and run.files else run.path)
        result = analysis.analyze(trace)
        program_facts(run.path, trace, result, run.manifest())  # names, first use
        value = run_data(trace, result, run.manifest())
    except Exception as e:  # noqa: BLE001 - any failure becomes this run's error card
        # The problem without the absolute path: the card names the run, and the page may be
        # shown to people who need not see the server's directory layout.
        problem = getattr(e, "problem", None) or f"{type(e).__name__}: {e}"
        return RunLoadError(f"{run.name}: {problem}")
    _disk_put(fp, value)
    return value


# ---------------------------------------------------------------------------------------------
# On-disk cache: parsing a 1M-event capture takes ~10 s in the reader, reopening its RunData
# from here well under one. Plain .npz (strings as code + table columns) and JSON, loaded with
# allow_pickle=False, so a tampered cache file cannot run code. Keyed on the files' fingerprint
# plus the overlap version and this format's number; a stale entry is simply never looked up.

CACHE_FORMAT = 8  # 2: result carries peak_memory; 3: stragglers; 4: the executed program;
# 5: dropped_events and unreadable_hosts; 6: exposure_causes; 7: offload_by_name, first use;
# 8: TPU bandwidth on the chip's clock (duration_ps, device_span_ps)
_GROUPS = ("compute", "transfers", "memory", "program_memory")


def _cache_file(fp: tuple) -> Path | None:
    import hashlib

    from overlap import __version__

    d = cache_dir()
    if d is None:
        return None
    key = hashlib.sha256(repr((CACHE_FORMAT, __version__, fp)).encode()).hexdigest()[:32]
    return d / f"{key}.npz"


def _content_fp(run: Run) -> tuple:
    """The run's file fingerprint plus a hash of each capture file's head and tail: a cache
    entry is bound to the content it was computed from, not only to names and times."""
    import hashlib

    parts = []
    for p in run.files:
        h = hashlib.sha256()
        try:
            with open_regular(p, "capture file") as f:
                h.update(f.read(1 << 16))
                size = os.fstat(f.fileno()).st_size
                if size > 1 << 17:
                    f.seek(size - (1 << 16))
                h.update(f.read(1 << 16))
        except (OSError, InputError):  # the load that follows names the problem
            pass
        parts.append(h.hexdigest())
    return (run.fingerprint(), tuple(parts))


def _disk_put(fp: tuple, value: RunData) -> None:
    path = _cache_file(fp)
    if path is None:
        return
    arrays: dict[str, Any] = {}  # name -> np.ndarray (Any: np.savez's **kwds type)
    for g in _GROUPS:
        cols = getattr(value, g) or {}
        for c, a in cols.items():
            if a.dtype == object:  # strings (and None) -> codes + a table of unique strings
                codes, uniq = pd.factorize(pd.Series(a, dtype=object), use_na_sentinel=True)
                arrays[f"{g}.{c}.codes"] = codes.astype(np.int32)
                arrays[f"{g}.{c}.uniq"] = np.asarray([str(u) for u in uniq], dtype=str)
            else:
                arrays[f"{g}.{c}"] = a
    meta = {"result": value.result, "backend": value.backend, "synthetic": value.synthetic,
            "device_names": value.device_names, "has_program_memory":
            value.program_memory is not None}
    arrays["meta"] = np.asarray(json.dumps(meta))
    import io

    buf = io.BytesIO()
    np.savez(buf, **arrays)
    # A keyed checksum beside it (`overlap.cache.put`): an entry edited by hand (a forged
    # verdict) does not verify. A read-only home only costs speed.
    cache.put(path, buf.getvalue())


def _disk_get(fp: tuple) -> RunData | None:
    raw = cache.get(_cache_file(fp), limit=1 << 34)
    if raw is None:
        return None  # none, or not written by us, or edited since: rewritten on load
    try:
        import io

        with np.load(io.BytesIO(raw), allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            groups: dict[str, dict[str, np.ndarray]] = {g: {} for g in _GROUPS}
            for k in z.files:
                if k == "meta" or k.endswith(".uniq"):
                    continue
                g, c = k.split(".", 1)
                if c.endswith(".codes"):
                    c = c[: -len(".codes")]
                    codes = z[k]
                    uniq = np.concatenate([z[f"{g}.{c}.uniq"].astype(object),
                                           np.array([None], dtype=object)])
                    groups[g][c] = uniq[codes]  # code -1 (missing) picks the trailing None
                else:
                    groups[g][c] = z[k]
        return RunData(result=meta["result"], backend=meta["backend"],
                       synthetic=bool(meta["synthetic"]), compute=groups["compute"],
                       transfers=groups["transfers"], memory=groups["memory"],
                       program_memory=groups["program_memory"] if meta["has_program_memory"]
                       else None, device_names=list(meta["device_names"]))
    except Exception:  # noqa: BLE001 - any damage (truncated, bad codes, no result) is a miss
        return None


def clear_cache_memory() -> None:
    """Forget loaded runs in this process (the disk cache stays)."""
    with _cache_lock:
        _cache.clear()


def clear_cache() -> None:
    with _cache_lock:
        _cache.clear()


# ---------------------------------------------------------------------------------------------
# Per-run facts for the tables


def run_row(run: Run) -> dict[str, Any]:
    """One Runs-table row (display units); a broken run gets its error in `verdict`."""
    m = run.manifest()
    row: dict[str, Any] = {
        "run": run.name, "label": str(m.get("label") or ""),
        "workload": manifest_workload(m), "policy": manifest_policy(m)[0],
        "backend": "", "device": "", "step_ms": None, "step_source": "", "peak": None,
        "peak_source": "",
        "d2h_overlap": None, "h2d_overlap": None, "verdict": "", "synthetic": "",
        "error": "",
    }
    if run.is_failed:
        from overlap.analysis.failed_runs import verdict

        fr = failed_row(run)
        row.update(verdict=verdict(fr), backend=str(fr.get("platform") or ""),
                   device=str(fr.get("device_kind") or ""), error=str(fr.get("error") or "")[:200])
        return row
    try:
        data = load_run(run)
    except RunLoadError as e:
        row.update(verdict=f"ERROR: {e}", error=str(e))
        return row
    r = data.result
    # The one step time (overlap.analysis.steps): unprofiled wall clock when run.json has it.
    step_ps, step_src = run_step_time_ps(m, r.get("steps"))
    peak, peak_src = peak_memory_bytes(data)
    bd = r.get("by_direction", {})
    row.update(
        backend=data.backend,
        device=", ".join(data.device_names) or _vendor_device(r, data.backend),
        step_ms=None if step_ps is None else round(step_ps / 1e9, 3),
        step_source=step_src or "",
        peak=format_bytes(peak) if peak is not None else None, peak_source=peak_src,
        d2h_overlap=_pct(bd.get("D2H", {}).get("overlap_ratio")),
        h2d_overlap=_pct(bd.get("H2D", {}).get("overlap_ratio")),
        verdict=_short_verdict(r, data.backend),
        synthetic="SYNTHETIC" if data.synthetic else "")
    if r.get("status") == "PLAN":  # compiled, never run: say so where the data kind is shown
        dp = (r.get("plan") or {}).get("device_peak_bytes")
        plan = r.get("plan") or {}
        row.update(synthetic="PLAN (compiled, not run; hidden % predicted)",
                   peak=None if dp is None else format_bytes(dp),
                   peak_source="memory_analysis (compiled plan)",
                   d2h_overlap=_pct(plan.get("d2h_predicted_hidden_fraction")),
                   h2d_overlap=_pct(plan.get("h2d_predicted_hidden_fraction")))
    return row


def safe_run_row(run: Run) -> dict[str, Any]:
    """`run_row`, but a run whose manifest or data breaks it becomes an error row: one bad run
    never empties the table for the others."""
    try:
        return run_row(run)
    except Exception as e:  # noqa: BLE001 - shown on this run's row, the others keep working
        return {"run": run.name, "label": "", "workload": "", "policy": "", "backend": "",
                "device": "", "step_ms": None, "step_source": "", "peak": None, "peak_source": "",
                "d2h_overlap": None,
                "h2d_overlap": None, "verdict": f"ERROR: {run.name}: unreadable run.json or "
                f"data ({type(e).__name__})", "synthetic": "", "error": str(e)[:200]}


def _vendor_device(r: dict[str, Any], backend: str) -> str:
    """`AMD gpu` where the capture names no device model (ROCm planes have no
    gpu_device_name), else the backend."""
    from overlap.analysis.overlap import vendor_names

    names = vendor_names(r.get("vendors") or {})
    return f"{', '.join(names)} {backend}" if names else backend


def _short_verdict(r: dict[str, Any], backend: str) -> str:
    # The long reason repeats on every CPU row; the table needs the gist (the Run view has it all).
    if r.get("status") == "NO_TRANSFERS":
        return ("no transfers: XLA:CPU compiles offload away" if backend == "cpu"
                else "no transfers in this capture")
    return str(r.get("verdict", ""))


def _pct(ratio: float | None) -> float | None:
    return None if ratio is None else round(100.0 * ratio, 1)


def default_baseline(runs: list[Run]) -> str | None:
    """The remat run (policy `full` or `nothing_saveable`) if there is one, else the first."""
    policies = [(run.name, *manifest_policy(run.manifest())) for run in runs]
    for run_name, name, _ in policies:  # full remat first, whatever the run order
        if name in BASELINE_POLICIES:
            return run_name
    for run_name, _, category in policies:
        if category == "remat":
            return run_name
    return runs[0].name if runs else None


def prepare_run_view(run: Run, step: tuple[str, int] | None = None) -> dict[str, Any]:
    """All server-side work for the Run view's first render; returns its parts.

    Loads (or takes from the cache) the run, aggregates the chosen (default: worst) step, and
    builds and serialises every figure of the view. Keys: `data`, `step`, `figures` (name ->
    plotly Figure), `payload_bytes` (size of the JSON sent to the browser), `top_exposed`.
    """
    import plotly.io as pio

    from overlap.report import figures

    data = load_run(run)
    step = step or default_step(data)
    figs = figures.run_figures(data, step)
    payload = sum(len(pio.to_json(f, validate=False)) for f in figs.values())
    return {"data": data, "step": step, "figures": figs, "payload_bytes": payload,
            "top_exposed": figures.top_exposed_rows(data.result)}


def runs_frame(runs: list[Run]) -> pd.DataFrame:
    """The Runs table as a DataFrame (for tests and CSV)."""
    return pd.DataFrame([safe_run_row(r) for r in runs])
