"""Run directories: where a capture lives on disk, and its manifest.

Layout (TensorBoard/xprof-compatible: point ``xprof --logdir DIR`` at it)::

    DIR/
      plugins/profile/<YYYY_MM_DD_HH_MM_SS>/<host>.xplane.pb  # what jax.profiler.trace writes
      hlo/<module>.hlo.txt                                     # compiled HLO of the step (optional)
      run.json                                                 # the manifest, written last

``run.json`` (``schema_version`` 1) holds: ``label``, ``workload`` (name/size/description/notes
or null), ``policy`` (name/category/saved/offloaded or null), ``backend`` (platform,
device_kind, device_count, process_count), ``versions`` (jax, jaxlib, python), ``xla_flags``
(the ``XLA_FLAGS`` the process ran with, and whether overlap set the command-buffer flag),
``steps``/``warmup``, ``step_ns`` (wall-clock per step without the profiler, blocked, integer
nanoseconds), ``step_timing`` for runs of a sweep (``mode`` ``interleaved`` with the sweep's
``group`` id and the labels timed ``with`` it, or ``sequential`` and ``why``; see
:mod:`overlap.capture.sweep`) and ``step_ns_profiled`` (the same steps under the profiler),
``memory_analysis``
(``compiled.memory_analysis()`` fields as ints, device and host_*), ``offload_inventory``
(:func:`overlap.hlo.program.offload_inventory` of the compiled HLO), ``heap_simulator`` (the
:func:`overlap.hlo.program.memory_timeline` peak from the capture's HloProto), ``profile_options``,
``created_unix_ns`` and ``session`` (the ``plugins/profile`` directory name); ``answer`` (the
policy's loss and gradient fingerprint on the sweep's shared inputs, defined in
:mod:`overlap.capture.answers`; absent in runs made before it) and ``env`` (environment
variables that change what the runtime does, e.g. ``XLA_PJRT_GPU_HOST_MEMORY_LIMIT_GB``, None
when unset).

A *plan run* (``"kind": "plan"``, written by :mod:`overlap.plan`) was compiled for a target and
never run: it has ``run.json``, ``hlo/`` (optimized HLO text and HloProto) and
``program_memory.json`` (heap-simulator live bytes over program order), and no capture. Its
``program`` (``module``, ``inputs``) is the fingerprint a capture of the same step records, which
joins the plan's prediction to measured runs of that program (:mod:`overlap.analysis.plan_join`).

A *failed capture* (``status`` ``does_not_fit`` or ``failed``, written by
:mod:`overlap.capture.failures`) is a policy whose step ran out of memory or raised: ``run.json``
only (what was asked, ``error``, ``failure``: phase, the allocation that failed, the device's
memory), no capture. `compare` and the dashboard show it as a row that did not run.

Atomicity: a capture is written into a sibling ``DIR.partial-<random>`` directory, ``run.json``
goes in last (temp file + ``os.replace``), then the directory is renamed to ``DIR``. A run is
*complete* iff its name is not a ``.partial-`` name, ``run.json`` parses with a
``schema_version``, and an ``.xplane.pb`` exists (plans and failed captures: run.json only)
– so a crash at any point leaves either nothing at ``DIR`` or a complete run. An existing
``DIR`` is never overwritten.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, TypeGuard

from overlap.errors import InputError, UsageError
from overlap.trace import paths as _paths

SCHEMA_VERSION = 1
MANIFEST = "run.json"
PARTIAL_MARK = _paths.PARTIAL_MARK


class RunExistsError(FileExistsError):
    """The target run directory already exists; overlap never overwrites a run."""

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        super().__init__(f"{self.path}: run directory already exists; choose another --label or "
                         "--out, or delete it first (overlap never overwrites a run)")


# One implementation for every reader of captures: it refuses unfinished `.partial-` captures.
find_xplane_files = _paths.find_xplane_files


def check_label(label: str) -> str:
    """A run label is a directory *name*, never a path: no separators, no `..`, no dot files,
    and no control characters (a newline or an escape sequence in a name would forge lines
    and colours in every view that prints it)."""
    if not isinstance(label, str) or not label or label in (".", "..") or label.startswith(".") \
            or any(c in label for c in ("/", "\\", "\0")) or PARTIAL_MARK in label \
            or not label.isprintable():
        raise UsageError(f"run label {label!r} must be a plain name (no '/', '\\', '..', "
                         "leading '.' or control characters)")
    return label


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # someone else's live process: not ours to judge
    return True


def clean_stale_partials(parent: Path) -> list[Path]:
    """Remove `<name>.partial-<pid>-<token>` directories (only this format, which only overlap
    writes) whose writing process is gone; returns what was removed. A killed capture leaves
    one behind; a capture still running keeps its own."""
    removed: list[Path] = []
    try:
        entries = list(parent.iterdir())
    except OSError:
        return removed
    for d in entries:
        name = d.name
        if PARTIAL_MARK not in name or not d.is_dir() or d.is_symlink():
            continue
        tail = name.rsplit(PARTIAL_MARK, 1)[1]
        pid_txt, sep, token = tail.partition("-")
        if not sep or not pid_txt.isdigit() or len(token) != 8:
            continue
        if int(pid_txt) != os.getpid() and not _pid_alive(int(pid_txt)):
            import shutil  # here: a report that only reads a run never loads it

            shutil.rmtree(d, ignore_errors=True)
            removed.append(d)
    return removed


def _token() -> str:
    """8 random hex digits naming a partial directory or temp file (`secrets.token_hex(4)`,
    from the same `os.urandom`: `secrets` loads hashlib and OpenSSL, ~4 MiB and ~4 ms of every
    report of a run directory, which reads run.json through this module; issue 32)."""
    return os.urandom(4).hex()


def partial_dir_for(final: str | os.PathLike) -> Path:
    """Create and return a fresh ``<final>.partial-<pid>-<random>`` beside `final`.

    Raises :class:`RunExistsError` if `final` exists already (checked up front so that a long
    capture does not run only to fail at the rename), and UsageError when the output directory
    cannot be created (under a file, read-only, /proc)."""
    final = Path(final)
    if final.exists():
        raise RunExistsError(final)
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        clean_stale_partials(final.parent)
        tmp = final.parent / f"{final.name}{PARTIAL_MARK}{os.getpid()}-{_token()}"
        tmp.mkdir()
    except OSError as e:
        raise UsageError(f"{final.parent}: cannot create a run directory there: "
                         f"{e.strerror or e}") from None
    return tmp


def _json_default(o: Any):
    # numpy ints and Paths are the usual strays in a manifest.
    if hasattr(o, "item"):
        return o.item()
    if isinstance(o, os.PathLike):
        return os.fspath(o)
    raise TypeError(f"not JSON-serializable: {type(o).__name__}")


def write_run(partial: str | os.PathLike, final: str | os.PathLike, manifest: dict) -> Path:
    """Finish a capture: write ``run.json`` into `partial`, then rename `partial` to `final`.

    ``schema_version`` and ``session`` are filled in. Raises :class:`RunExistsError` (leaving
    `partial` in place, so nothing is lost) if `final` appeared meanwhile."""
    partial, final = Path(partial), Path(final)
    files = _paths.list_sessions(partial)
    if not files:
        raise InputError(partial, "capture wrote no .xplane.pb; nothing to finish")
    return _finish(partial, final, {"schema_version": SCHEMA_VERSION, **manifest,
                                    "session": files[-1].name})


def _finish(partial: Path, final: Path, data: dict) -> Path:
    """run.json last (temp file, fsync, replace), then the rename that makes the run exist."""
    tmp = partial / f".{MANIFEST}.tmp-{_token()}"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=2, sort_keys=True, default=_json_default)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, partial / MANIFEST)
    # rename(2) onto an existing *empty* directory succeeds on POSIX, so check first; the
    # remaining window (another writer creating `final` between check and rename) only matters
    # for two captures racing for one label.
    if final.exists():
        raise RunExistsError(final)
    os.rename(partial, final)
    return final


def write_plan_run(partial: str | os.PathLike, final: str | os.PathLike, manifest: dict) -> Path:
    """Finish a *plan* run (``"kind": "plan"``: compiled for a target, never run, so it has no
    ``.xplane.pb``): ``run.json`` last, then the rename, as :func:`write_run` does."""
    return _finish(Path(partial), Path(final),
                   {"schema_version": SCHEMA_VERSION, **manifest, "kind": "plan"})


# A capture whose step never completed (overlap.capture.failures): run.json, no trace.
FAILED_STATUSES = ("does_not_fit", "failed")


def write_failed_run(partial: str | os.PathLike, final: str | os.PathLike,
                     manifest: dict) -> Path:
    """Finish a run whose step did not complete (``status`` in :data:`FAILED_STATUSES`, written
    by :mod:`overlap.capture.failures`): ``run.json`` only, then the rename."""
    if manifest.get("status") not in FAILED_STATUSES:
        raise ValueError(f"a failed run needs a status in {FAILED_STATUSES}")
    return _finish(Path(partial), Path(final), {"schema_version": SCHEMA_VERSION, **manifest})


def is_failed_capture(manifest: dict | None) -> TypeGuard[dict]:
    """A capture run whose step did not fit or failed: it has run.json and no trace."""
    return (isinstance(manifest, dict) and not is_plan(manifest)
            and manifest.get("status") in FAILED_STATUSES)


def is_plan(manifest: dict | None) -> TypeGuard[dict]:
    """A plan run: compiled for a target without running (see overlap.plan)."""
    return isinstance(manifest, dict) and manifest.get("kind") == "plan"


def discard_partial(partial: str | os.PathLike) -> None:
    """Remove an unfinished capture directory (after a failure)."""
    p = Path(partial)
    if PARTIAL_MARK in p.name and p.is_dir():
        import shutil

        shutil.rmtree(p, ignore_errors=True)


def _count(v) -> int | None:
    """A byte count or nanosecond time from JSON: a non-negative int below 2**53, else None."""
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < (1 << 53):
        return None
    return v


def _counts(d) -> dict:
    return {k: c for k, v in d.items() if isinstance(k, str) and (c := _count(v)) is not None} \
        if isinstance(d, dict) else {}


def _num(v) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v)


def _answer(raw: Any) -> dict[str, Any] | None:
    """run.json's ``answer`` (`overlap.capture.answers`) with the types
    `overlap.analysis.answers` reads (anything else dropped), or None when there is none. A
    ``not_recorded`` answer keeps only its reason."""
    if not isinstance(raw, dict):
        return None
    if isinstance(raw.get("not_recorded"), str):
        return {"not_recorded": raw["not_recorded"][:400]}
    grads = raw.get("grads")
    leaves = []
    if isinstance(grads, list):
        for g in grads:
            if not isinstance(g, dict):
                return {"not_recorded": "run.json's answer has a malformed gradient entry"}
            leaf = {"path": str(g.get("path")), "dtype": str(g.get("dtype")),
                    "size": g.get("size") if isinstance(g.get("size"), int) else None,
                    "nonfinite": g.get("nonfinite") if isinstance(g.get("nonfinite"), int)
                    else 0}
            for k in ("sum", "abs_sum", "l2"):
                leaf[k] = _num(g.get(k))
            leaves.append(leaf)
    loss = _num(raw.get("loss"))
    if loss is None and not leaves:
        return {"not_recorded": "run.json's answer has neither a loss nor gradients"}
    return {"loss": loss, "grads": leaves, "global_l2": _num(raw.get("global_l2")),
            "low_precision": bool(raw.get("low_precision")),
            "inputs": raw.get("inputs") if isinstance(raw.get("inputs"), str) else None,
            "definition": raw.get("definition") if isinstance(raw.get("definition"), str)
            else None}


def _env(raw: Any) -> dict[str, str | None] | None:
    """run.json's ``env``: the environment variables a capture recorded (name -> value, None
    when unset)."""
    if not isinstance(raw, dict):
        return None
    return {k: v for k, v in raw.items() if isinstance(k, str) and isinstance(v, (str, type(None)))}


def _failure(data: dict) -> dict[str, Any]:
    """``status`` (a string or None), ``error`` (a string) and a failed capture's ``failure``
    (`overlap.capture.failures`) with the types the views read."""
    st = data.get("status")
    out: dict[str, Any] = {"status": st if isinstance(st, str) else None}
    if "error" in data:
        out["error"] = str(data.get("error"))[:2000] if data.get("error") is not None else None
    f = data.get("failure")
    if "failure" in data:
        if isinstance(f, dict):
            dm: dict[str, Any] = f["device_memory"] if isinstance(
                f.get("device_memory"), dict) else {}
            out["failure"] = {
                "phase": str(f.get("phase") or "")[:100],
                "exception": str(f.get("exception") or "")[:100],
                "allocation_bytes": _count(f.get("allocation_bytes")),
                "device_memory": {"bytes": _count(dm.get("bytes")),
                                  "source": str(dm.get("source") or "")[:200]}}
        else:
            out["failure"] = {}
    return out


def _checkpoint_names(raw: Any) -> dict[str, dict[str, Any]] | None:
    """run.json's ``checkpoint_names`` (`overlap.analysis.names.record_sources`): per source
    file, a hex ``sha256`` and ``spans`` of [line, col, end_line, end_col, name] (four
    non-negative ints and a str); a file whose record has another shape is dropped."""
    if not isinstance(raw, dict):
        return None
    out: dict[str, dict[str, Any]] = {}
    for f, rec in raw.items():
        if not (isinstance(f, str) and isinstance(rec, dict) and isinstance(rec.get("sha256"), str)
                and isinstance(rec.get("spans"), list)):
            continue
        spans = rec["spans"]
        if all(isinstance(s, list) and len(s) == 5 and isinstance(s[4], str)
               and all(_count(v) is not None for v in s[:4]) for s in spans):
            out[f] = {"sha256": rec["sha256"], "spans": spans}
    return out


def normalize_manifest(data: dict) -> dict:
    """The fields every view reads, with the types they expect; anything else is dropped
    (a hand-edited or foreign run.json must not crash report, compare or the dashboard).

    `label` str; `policy` {name, category, offloaded...} (a bare string is its name);
    `workload` dict (a bare string is its name); `step_ns` the valid integer times only
    (None when not measured);
    `memory_analysis`, `offload_inventory.D2H/H2D` and `heap_simulator` byte counts only;
    `answer` (loss and gradient fingerprint) numbers only; `env` string values only;
    `status`/`error`/`failure` (a failed capture) with their types."""
    out = dict(data)
    label = data.get("label")
    # A label with control characters (not one overlap wrote: check_label refuses them) is
    # no label: the views fall back to the directory name rather than print it.
    out["label"] = label if isinstance(label, str) and label and label.isprintable() else None
    pol = data.get("policy")
    if isinstance(pol, str):
        pol = {"name": pol}
    if isinstance(pol, dict):
        pol = {k: v for k, v in pol.items() if isinstance(v, (str, bool, type(None)))
               or (k in ("saved", "offloaded") and isinstance(v, list)
                   and all(isinstance(x, str) for x in v))}
    out["policy"] = pol if isinstance(pol, dict) else None
    wl = data.get("workload")
    out["workload"] = {"name": wl} if isinstance(wl, str) else (wl if isinstance(wl, dict)
                                                                 else None)
    steps = data.get("step_ns")
    # None (not measured, e.g. capture()) stays None; a list keeps its valid times only.
    out["step_ns"] = [v for v in steps if _count(v) is not None] if isinstance(steps, list) \
        else None
    if "memory_analysis" in data:
        out["memory_analysis"] = _counts(data.get("memory_analysis")) or None
    inv = data.get("offload_inventory")
    if inv is not None:
        if isinstance(inv, dict):
            inv = {**inv, **{d: _counts(inv.get(d)) for d in ("D2H", "H2D")}}
            out["offload_inventory"] = inv
        else:
            out["offload_inventory"] = None
    heap = data.get("heap_simulator")
    if heap is not None:
        out["heap_simulator"] = ({**heap, "peak_bytes": _count(heap.get("peak_bytes"))}
                                 if isinstance(heap, dict) else None)
    if "answer" in data:
        out["answer"] = _answer(data.get("answer"))
    if "env" in data:
        out["env"] = _env(data.get("env"))
    if "checkpoint_names" in data:
        out["checkpoint_names"] = _checkpoint_names(data.get("checkpoint_names"))
    if "status" in data or "failure" in data:
        out.update(_failure(data))
    be = data.get("backend")
    out["backend"] = be if isinstance(be, dict) else ({"platform": be} if isinstance(be, str)
                                                      else {})
    return out


def has_manifest(run_dir: str | os.PathLike) -> bool:
    """Whether `run_dir` holds a ``run.json`` entry at all (readable or not)."""
    return os.path.lexists(Path(run_dir) / MANIFEST)


def load_manifest(run_dir: str | os.PathLike) -> dict | None:
    """The parsed, type-checked ``run.json`` of `run_dir` (see `normalize_manifest`); None when
    there is none, or when it is JSON of another tool (an object without ``schema_version``).

    A ``run.json`` that is there but damaged (not JSON, not an object, not a regular file, too
    large) raises `InputError` naming it: it is written last and atomically, so it is never
    half written, and treating its run as a plain log directory would hide the damage.
    """
    p = Path(run_dir) / MANIFEST
    if not has_manifest(run_dir):
        return None
    data = _paths.read_side_json(p, "run manifest (run.json)")
    if not isinstance(data, dict):
        raise InputError(p, f"run manifest is a JSON {type(data).__name__}, not an object")
    if "schema_version" not in data:
        return None
    return normalize_manifest(data)


def is_complete(run_dir: str | os.PathLike) -> bool:
    """True iff `run_dir` is a finished capture (see the module docstring)."""
    p = Path(run_dir)
    if PARTIAL_MARK in p.name or not p.is_dir():
        return False
    try:
        m = load_manifest(p)
    except InputError:
        return False  # damaged: listed by find_runs all the same, so that it gets named
    if m is None:
        return False
    return is_plan(m) or is_failed_capture(m) or bool(_paths.list_sessions(p))


def list_runs(logdir: str | os.PathLike) -> list[Path]:
    """Complete runs directly under `logdir` (and `logdir` itself if it is one), sorted by name."""
    root = Path(logdir)
    if not root.is_dir():
        raise InputError(root, "no such directory")
    runs = [root] if is_complete(root) else []
    runs += sorted(p for p in root.iterdir() if p.is_dir() and is_complete(p))
    return runs


MAX_DEPTH = 6  # log dirs are shallow; stops a walk into a huge unrelated tree


def is_logdir_run(d: Path) -> bool:
    """A plain `jax.profiler`/TensorBoard log directory: captures, no run.json."""
    return d.is_dir() and bool(_paths.list_sessions(d))


def find_runs(path: str | os.PathLike) -> list[Path]:
    """Every run at or below `path`, sorted: run directories (run.json; plans too), plain
    profile log directories (`plugins/profile/<session>/` without run.json) and bare
    `.xplane.pb` files outside any `plugins/` tree. Unfinished (`.partial-`) and hidden
    directories are skipped; a run's own tree is not searched for more runs."""
    root = Path(path)
    if root.is_file():
        return [root] if root.name.endswith(_paths.XPLANE_SUFFIX) else []
    out: list[Path] = []
    seen: set[str] = set()

    def walk(d: Path, depth: int) -> None:
        real = os.path.realpath(d)
        if real in seen or depth > MAX_DEPTH:
            return
        seen.add(real)
        # A run.json that cannot be read still marks a run: it is listed, and whoever loads it
        # names the damage (load_manifest) instead of passing it over.
        if is_complete(d) or has_manifest(d) or is_logdir_run(d):
            out.append(d)
            return
        if d.parent.name == "profile" and d.parent.parent.name == "plugins":
            return  # a session directory: its log directory is the run
        try:
            entries = sorted(d.iterdir())
        except OSError:
            return
        for e in entries:
            if e.name.startswith(".") or PARTIAL_MARK in e.name or e.name == "plugins":
                continue
            if e.is_dir():
                walk(e, depth + 1)
            elif e.name.endswith(_paths.XPLANE_SUFFIX) and e.is_file():
                out.append(e)

    walk(root, 0)
    return sorted(out)
