"""The CI gate: pass/fail checks over an `overlap.analysis.overlap.analyze` result.

Checks (each is one JUnit testcase and one line of output):

* `no_transfers` (always on): a capture without device<->host transfers fails, because in CI
  that almost always means offload silently stopped happening (a policy or memory-kind change,
  or a backend that compiles it away). `allow_no_transfers=True` turns it into a pass, and then
  the ratio checks are skipped.
  A capture whose own compiled programs plan no host copy at all (`planned_host_copies`,
  `overlap.analysis.planned`: a remat or save baseline) passes: nothing was meant to move.
* `min_overlap` (on by default, 0.9): the duration-weighted overlap ratio over all transfers.
* `min_overlap_d2h` / `min_overlap_h2d`: the same per direction (skipped when that direction
  has no transfers: there is nothing to hide).
* `max_exposed_ms`: exposed wall time of the worst step, in milliseconds.
* `max_exposed_frac`: exposed wall time of the worst step as a fraction of that step.
* Against a baseline report (`overlap report --json` or `overlap check --json` output):
  `max_ratio_drop` (default 0.02 when a baseline is given): the overlap ratio may not fall by
  more than this many ratio points (absolute, 0.02 = 2 points), overall and per direction
  present in both; `max_exposed_growth` (default 0.05): mean exposed wall time per step may not
  grow by more than this fraction, plus `exposed_slack_ms` (default 0.01 ms) absolute so that a
  zero baseline does not fail on picoseconds of jitter. Without steps in both reports the
  growth check compares exposed time per transfer instead, and says so.

* `max_host_skew` (opt-in): the most-exposing host's exposed transfer time per step may be
  at most this multiple of the median host's (`overlap.analysis.hosts`).
* The opposite gate, for hot loops that must not move data at all (an implicit `device_get`,
  a Python scalar uploaded every step): `max_transfers` / `max_transfer_bytes`, per step (per
  capture without step annotations), over `transfer_direction` ("both", "D2H" or "H2D"). A
  failure names the offending copies (HLO op, direction, bytes, step). With either set, a
  capture without transfers passes `no_transfers` (that is what was asked for) and the default
  `min_overlap` is not applied.

* `transfers_readable` (always on when it applies): the capture holds device events outside
  the reader's rules (`result["transfer_status"]`, see `overlap.trace.vendors`), so what it
  says about transfers may be incomplete: fails unless `allow_unknown=True`. Transfers of
  unknown size (ROCm calls that record `size:0`) fail `max_transfer_bytes` the same way (with
  `allow_unknown`, the known bytes are checked and the message says how many were left out).

A step check asked for on a capture without step annotations fails (fail closed): a gate that
cannot be evaluated must not pass silently.

Times in the result stay integer picoseconds; limits given in ms are converted once here.
"""

from __future__ import annotations

import dataclasses
import os
from operator import methodcaller
from pathlib import Path
from typing import Any, cast

from overlap.analysis import causes
from overlap.analysis import overlap as analysis
from overlap.errors import InputError, UsageError

PS_PER_MS = 1_000_000_000

# the gate's defaults, defined beside the analysis defaults (no pandas: `check --help`)
from overlap.analysis.thresholds import (  # noqa: E402
    DEFAULT_EXPOSED_SLACK_MS,
    DEFAULT_MAX_EXPOSED_GROWTH,
    DEFAULT_MAX_RATIO_DROP,
    DEFAULT_MIN_OVERLAP,
)

PASS, FAIL, SKIP = "pass", "fail", "skip"


@dataclasses.dataclass(frozen=True)
class CheckConfig:
    """Which checks run and their limits. `None` turns a check off."""

    min_overlap: float | None = DEFAULT_MIN_OVERLAP
    min_overlap_d2h: float | None = None
    min_overlap_h2d: float | None = None
    max_exposed_ms: float | None = None
    max_exposed_frac: float | None = None
    # A parsed baseline report (dict); the ratio/growth limits apply only when it is set.
    baseline: dict[str, Any] | None = dataclasses.field(default=None, compare=False, repr=False)
    baseline_path: str | None = None
    max_ratio_drop: float | None = DEFAULT_MAX_RATIO_DROP
    max_exposed_growth: float | None = DEFAULT_MAX_EXPOSED_GROWTH
    exposed_slack_ms: float = DEFAULT_EXPOSED_SLACK_MS
    allow_no_transfers: bool = False
    max_host_skew: float | None = None
    max_transfers: int | None = None
    max_transfer_bytes: int | None = None
    transfer_direction: str = "both"
    allow_unknown: bool = False

    def validate(self) -> None:
        """Raise UsageError for values no gate can mean (negative times, ratios out of [0, 1])."""
        for name in ("min_overlap", "min_overlap_d2h", "min_overlap_h2d", "max_exposed_frac",
                     "max_ratio_drop"):
            v = getattr(self, name)
            if v is not None and not 0.0 <= v <= 1.0:
                raise UsageError(f"--{name.replace('_', '-')} must be in [0, 1], got {v}")
        if self.transfer_direction not in ("both", "D2H", "H2D"):
            raise UsageError(f"--transfer-direction must be both, D2H or H2D, got "
                             f"{self.transfer_direction!r}")
        for name in ("max_transfers", "max_transfer_bytes"):
            v = getattr(self, name)
            if v is not None and not (isinstance(v, int) and v >= 0):
                raise UsageError(f"--{name.replace('_', '-')} must be an integer >= 0, got {v}")
        for name in ("max_exposed_ms", "max_exposed_growth", "exposed_slack_ms"):
            v = getattr(self, name)
            if v is not None and not v >= 0.0:  # also rejects NaN
                raise UsageError(f"--{name.replace('_', '-')} must be >= 0, got {v}")


def load_baseline(path: str | os.PathLike) -> dict[str, Any]:
    """Read a baseline report; any problem is an InputError naming the file (exit 3)."""
    from overlap.trace.paths import read_side_json

    p = Path(path)
    if p.is_dir():
        raise InputError(p, "a directory; --baseline takes a saved `overlap report --json` "
                            "(or, for `report --html`, a run)")
    # A regular file of bounded size only: a FIFO or /dev/zero is refused, never read.
    data = read_side_json(p, "baseline report")
    # `overlap check --json` nests the analysis under "analysis"; `overlap report --json` is it.
    if isinstance(data, dict) and isinstance(data.get("analysis"), dict):
        data = data["analysis"]
    if not isinstance(data, dict) or "summary" not in data or "status" not in data:
        raise InputError(p, "not an overlap report (expected `overlap report --json` output)")
    return data


def _check(name: str, status: str, message: str, value=None, limit=None) -> dict[str, Any]:
    return {"name": name, "status": status, "passed": status != FAIL, "value": value,
            "limit": limit, "message": message}


def _fmt_ratio(r: float | None) -> str:
    return "n/a" if r is None else f"{r:.3f}"


def _mean_exposed_basis(result: dict[str, Any]) -> tuple[str, float | None]:
    ss = result.get("step_summary") or {}
    if ss.get("count"):
        return "step", ss.get("mean_exposed_wall_ps")
    s = result["summary"]
    return "transfer", (s["exposed_ps"] / s["transfers"]) if s.get("transfers") else None


def _transfer_gates(result: dict[str, Any], config: CheckConfig, trace) -> list[dict]:
    """`max_transfers` / `max_transfer_bytes`: copies per step, with the offenders named."""
    dirs = ("D2H", "H2D") if config.transfer_direction == "both" else (config.transfer_direction,)
    where = "" if config.transfer_direction == "both" else f" {config.transfer_direction}"
    steps = result.get("steps") or []
    if steps:
        # per step, the sums over `dirs` a column at a time; only the worst step is named
        # (thousands of steps: one tuple, name and two generators each cost 20 ms)
        per_step = [[sum(v) for v in zip(*[list(map(methodcaller("get", f"{d.lower()}_{w}", 0),
                                                       steps)) for d in dirs])]
                    for w in ("transfers", "bytes")]
        multi = len(result.get("hosts", [])) > 1

        def step_unit(i: int) -> tuple:
            s = steps[i]
            return (f"step {s['step']}" + (f" on {s['host']}" if multi else ""),
                    per_step[0][i], per_step[1][i], s)
    else:
        bd = result.get("by_direction", {})
        units = [("the capture (no step annotations)", sum(bd.get(d, {}).get("count", 0)
                                                          for d in dirs),
                  sum(bd.get(d, {}).get("bytes", 0) for d in dirs), None)]
    out = []
    unknown = sum((result.get("by_direction", {}).get(d) or {}).get("unknown_bytes", 0)
                  for d in dirs)
    for name, idx, limit in (("max_transfers", 1, config.max_transfers),
                             ("max_transfer_bytes", 2, config.max_transfer_bytes)):
        if limit is None:
            continue
        if steps:  # the first step with the most, as max(units, key=...) picks
            worst = step_unit(per_step[idx - 1].index(max(per_step[idx - 1])))
        else:
            worst = max(units, key=lambda u: u[idx])
        value = cast(int, worst[idx])
        what = "transfer(s)" if idx == 1 else "bytes"
        msg = (f"worst: {worst[0]} has {value}{where} {what} (limit {limit} per "
               f"{'step' if steps else 'capture'})")
        offenders = _offenders(trace, worst[3], dirs) if value > limit else []
        if offenders:
            msg += ": " + ", ".join(
                f"{o['hlo_op']} {o['direction']} "
                + (f"{o['bytes']} B" if o.get("bytes_known", True) else "? B (size unknown)")
                for o in offenders[:5])
            if len(offenders) > 5:
                msg += f" (+{len(offenders) - 5} more)"
        status = PASS if value <= limit else FAIL
        if idx == 2 and unknown:
            # Bytes the capture does not record cannot be shown to be under the limit.
            msg += (f"; {unknown} transfer(s) of unknown size "
                    + ("not counted (--allow-unknown)" if config.allow_unknown else
                       "cannot be checked: fails unless --allow-unknown"))
            if not config.allow_unknown:
                status = FAIL
        c = _check(name, status, msg, value, limit)
        c["offenders"] = offenders
        out.append(c)
    return out


def _offenders(trace, step: dict | None, dirs) -> list[dict[str, Any]]:
    """The copies of one step (or the capture): HLO op, direction, bytes, step."""
    if trace is None or not len(trace.transfers):
        return []
    tr = trace.transfers
    m = tr["direction"].isin(list(dirs))
    if step is not None:
        m &= (tr["host"] == step["host"]) & (tr["start_ps"] >= step["start_ps"]) & \
             (tr["start_ps"] < step["end_ps"])
    sel = tr[m]
    # a copy with no op is labelled as the report labels it: outside any program (a
    # device_put/device_get, where the capture shows it) or unknown (analysis.missing_op_labels)
    ops = analysis.missing_op_labels(trace, trace.columns("transfers"))[m.to_numpy(bool)]
    known = analysis._bytes_known(sel).tolist()
    return [{"hlo_op": str(op), "direction": str(d), "bytes": int(b), "bytes_known": k,
             "step": None if step is None else step["step"], "start_ps": int(t)}
            for op, d, b, k, t in zip(ops.tolist(), sel["direction"].tolist(),
                                      sel["bytes"].tolist(), known,
                                      sel["start_ps"].tolist())][:100]


def _readable_check(result: dict[str, Any], config: CheckConfig) -> dict[str, Any] | None:
    """`transfers_readable`: None when every device event was read by a rule."""
    ts = result.get("transfer_status") or {}
    if ts.get("status") != analysis.TRANSFERS_CANNOT_TELL:
        return None
    unknown = ts.get("unknown") or []
    what = "; ".join((f"{u.get('host')} {u['device']}: " if u.get("device") else
                      f"{u.get('host')}: ") + str(u.get("reason")) for u in unknown[:3])
    if len(unknown) > 3:
        what += f" (+{len(unknown) - 3} more)"
    if config.allow_unknown:
        return _check("transfers_readable", PASS, f"cannot tell, allowed (--allow-unknown): "
                      f"{what}", len(unknown), 0)
    return _check("transfers_readable", FAIL, "cannot tell: device events outside the rules "
                  f"overlap reads ({what}); --allow-unknown to accept", len(unknown), 0)


def _baseline_without_offload(result: dict[str, Any]) -> bool:
    """No transfers, and the capture's compiled programs plan none (`overlap.analysis.planned`):
    a remat/save baseline, for which "no transfers" is the expected answer, not offload that
    stopped happening."""
    from overlap.analysis.planned import is_baseline

    return (result["status"] == analysis.STATUS_NO_TRANSFERS
            and is_baseline(result.get("planned_host_copies")))


def run_checks(result: dict[str, Any], config: CheckConfig | None = None,
               trace=None) -> dict[str, Any]:
    """Evaluate `config` against an analysis result.

    Returns a JSON-serializable dict: `passed` (bool), `checks` (list of `{name, status
    (pass/fail/skip), passed, value, limit, message}`), `failed` (names), `verdict` (one line).
    """
    config = config or CheckConfig()
    config.validate()
    checks: list[dict[str, Any]] = []
    ok = result["status"] == analysis.STATUS_OK
    no_transfers_wanted = config.max_transfers is not None or \
        config.max_transfer_bytes is not None
    cannot_tell = result["status"] == analysis.STATUS_CANNOT_TELL

    unread = _readable_check(result, config)
    if unread is not None:
        checks.append(unread)
    if cannot_tell and not config.allow_unknown:
        checks.append(_check("no_transfers", SKIP, "cannot tell whether there are transfers "
                             "(see transfers_readable)"))
    elif ok:
        checks.append(_check("no_transfers", PASS,
                             f"{result['summary']['transfers']} transfer(s) found"))
    elif no_transfers_wanted:
        checks.append(_check("no_transfers", PASS,
                             f"{result['status']}: none found, as the transfer gates ask"))
    elif config.allow_no_transfers:
        checks.append(_check("no_transfers", PASS,
                             f"{result['status']} allowed (--allow-no-transfers)"))
    elif _baseline_without_offload(result):
        planned = result["planned_host_copies"]
        checks.append(_check("no_transfers", PASS,
                             f"{result['status']}: a baseline without offload (no host copy "
                             f"planned, per {planned['source']})"))
    else:
        checks.append(_check("no_transfers", FAIL,
                             f"offload silently stopped happening? {result['reason']}"))

    def skip_all(name: str) -> None:
        checks.append(_check(name, SKIP, f"skipped: {result['status']}"))

    def ratio_check(name: str, ratio: float | None, limit: float, what: str) -> None:
        if ratio is None and what == "all transfers" and not config.allow_no_transfers:
            # A gate that measured nothing must not pass: every transfer lasted 0 ps.
            checks.append(_check(name, FAIL, f"{what}: no transfer has a measurable duration "
                                 "(all 0 ps), so overlap cannot be checked; "
                                 "--allow-no-transfers to accept", None, limit))
        elif ratio is None:
            checks.append(_check(name, SKIP, f"{what}: no timed transfers", None, limit))
        else:
            checks.append(_check(name, PASS if ratio >= limit else FAIL,
                                 f"{what} overlap {_fmt_ratio(ratio)} (min {limit:.3f})",
                                 ratio, limit))

    if config.min_overlap is not None:
        if ok:
            ratio_check("min_overlap", result["summary"]["overlap_ratio"], config.min_overlap,
                        "all transfers")
        else:
            skip_all("min_overlap")
    for d, limit in (("D2H", config.min_overlap_d2h), ("H2D", config.min_overlap_h2d)):
        if limit is None:
            continue
        name = f"min_overlap_{d.lower()}"
        if ok:
            ratio_check(name, result["by_direction"][d]["overlap_ratio"], limit, d)
        else:
            skip_all(name)

    steps_ok = ok and bool(result["step_summary"]["count"])
    no_steps = "capture has no step annotations (jax.profiler.StepTraceAnnotation), so it " \
               "cannot be evaluated"
    if config.max_exposed_ms is not None:
        limit_ps = round(config.max_exposed_ms * PS_PER_MS)
        if not ok:
            skip_all("max_exposed_ms")
        elif not steps_ok:
            checks.append(_check("max_exposed_ms", FAIL, no_steps, None, limit_ps))
        else:
            worst = result["step_summary"]["max_exposed_wall_ps"]
            ws = result["step_summary"]["worst_step"]
            checks.append(_check(
                "max_exposed_ms", PASS if worst <= limit_ps else FAIL,
                f"worst step ({ws['step']}) exposed {analysis.format_ps(worst)} "
                f"(max {analysis.format_ps(limit_ps)})", worst, limit_ps))
    if config.max_exposed_frac is not None:
        if not ok:
            skip_all("max_exposed_frac")
        elif not steps_ok:
            checks.append(_check("max_exposed_frac", FAIL, no_steps, None,
                                 config.max_exposed_frac))
        else:
            frac = result["step_summary"]["max_exposed_frac"] or 0.0
            checks.append(_check(
                "max_exposed_frac", PASS if frac <= config.max_exposed_frac else FAIL,
                f"worst step exposed {frac:.1%} of the step (max {config.max_exposed_frac:.1%})",
                frac, config.max_exposed_frac))

    base = config.baseline
    if base is not None:
        bname = config.baseline_path or "baseline"
        base_ok = base.get("status") == analysis.STATUS_OK
        if config.max_ratio_drop is not None:
            pairs = [("max_ratio_drop", result["summary"]["overlap_ratio"] if ok else None,
                      base["summary"].get("overlap_ratio") if base_ok else None, "overall")]
            for d in analysis.DIRECTIONS:
                cur = result["by_direction"][d]["overlap_ratio"] if ok else None
                old = (base.get("by_direction") or {}).get(d, {}).get("overlap_ratio") \
                    if base_ok else None
                if cur is not None and old is not None:
                    pairs.append((f"max_ratio_drop_{d.lower()}", cur, old, d))
            for name, cur, old, what in pairs:
                if cur is None or old is None:
                    checks.append(_check(name, SKIP, f"{what}: no overlap ratio in "
                                         f"{'this capture' if cur is None else bname}"))
                    continue
                drop = old - cur
                checks.append(_check(
                    name, PASS if drop <= config.max_ratio_drop + 1e-12 else FAIL,
                    f"{what} overlap {_fmt_ratio(old)} -> {_fmt_ratio(cur)} "
                    f"(drop {drop:+.3f}, max {config.max_ratio_drop:.3f})",
                    drop, config.max_ratio_drop))
        if config.max_exposed_growth is not None:
            if not (ok and base_ok):
                checks.append(_check("max_exposed_growth", SKIP,
                                     "skipped: no transfers in this capture or the baseline"))
            else:
                basis_cur, cur = _mean_exposed_basis(result)
                basis_old, old = _mean_exposed_basis(base)
                if basis_cur != basis_old:
                    checks.append(_check(
                        "max_exposed_growth", FAIL,
                        f"cannot compare: exposed time is per {basis_cur} here but per "
                        f"{basis_old} in {bname} (step annotations added or removed)"))
                elif cur is None or old is None:
                    checks.append(_check(
                        "max_exposed_growth", SKIP, "skipped: no mean exposed time in "
                        f"{'this capture' if cur is None else bname}"))
                else:
                    slack = config.exposed_slack_ms * PS_PER_MS
                    limit = old * (1 + config.max_exposed_growth) + slack
                    growth = (cur - old) / old if old else None
                    checks.append(_check(
                        "max_exposed_growth", PASS if cur <= limit else FAIL,
                        f"exposed per {basis_cur} {analysis.format_ps(old)} -> "
                        f"{analysis.format_ps(cur)}"
                        + (f" ({growth:+.1%}" if growth is not None else " (")
                        + f", max +{config.max_exposed_growth:.0%} + "
                        f"{analysis.format_ps(slack)})", int(round(cur)), int(round(limit))))

    checks.extend(_transfer_gates(result, config, trace))
    if config.max_host_skew is not None:
        sv = result.get("stragglers")
        if not sv or sv.get("max_skew") is None:
            checks.append(_check("max_host_skew", SKIP if not sv else PASS,
                                 "single-host capture: no skew to check" if not sv else
                                 sv["verdict"], None, config.max_host_skew))
        else:
            checks.append(_check(
                "max_host_skew", PASS if sv["max_skew"] <= config.max_host_skew else FAIL,
                f"{sv['verdict']} (limit {config.max_host_skew:g}x)", sv["max_skew"],
                config.max_host_skew))

    _name_causes(result, checks)
    failed = [c["name"] for c in checks if c["status"] == FAIL]
    passed = not failed
    head = "PASS" if passed else "FAIL (" + ", ".join(failed) + ")"
    return {"passed": passed, "checks": checks, "failed": failed,
            "verdict": f"{head}: {analysis.verdict(result)}"}


# The gates that fail on exposed transfer time, and the directions whose causes explain it.
_EXPOSURE_GATES = {"min_overlap": analysis.DIRECTIONS, "min_overlap_d2h": ("D2H",),
                   "min_overlap_h2d": ("H2D",), "max_exposed_ms": analysis.DIRECTIONS,
                   "max_exposed_frac": analysis.DIRECTIONS, "max_ratio_drop": analysis.DIRECTIONS,
                   "max_ratio_drop_d2h": ("D2H",), "max_ratio_drop_h2d": ("H2D",),
                   "max_exposed_growth": analysis.DIRECTIONS}


def _name_causes(result: dict[str, Any], checks: list[dict[str, Any]]) -> None:
    """A failed exposure gate's message names the dominant cause of the exposed time
    (`overlap.analysis.causes`) and its evidence, and the check carries it as `cause`."""
    for c in checks:
        dirs = _EXPOSURE_GATES.get(c["name"])
        if c["status"] != FAIL or dirs is None or result.get("status") != analysis.STATUS_OK:
            continue
        why = causes.dominant(result, dirs)
        if why:
            c["message"] += f"; {why}"
            c["cause"] = why.split(" ", 3)[2]


def assert_hidden(path_or_trace, min_overlap: float | None = DEFAULT_MIN_OVERLAP, *,
                  baseline: str | os.PathLike | dict | None = None,
                  hidden_threshold: float = analysis.DEFAULT_HIDDEN_THRESHOLD,
                  exposed_threshold: float = analysis.DEFAULT_EXPOSED_THRESHOLD,
                  **checks: Any) -> dict[str, Any]:
    """Assert that a capture's transfers hide behind compute; for tests and notebooks.

        >>> overlap.assert_hidden("runs/offload", min_overlap=0.95,
        ...                       max_exposed_ms=2.0)  # doctest: +SKIP

    Args:
      path_or_trace: a path `overlap.read_trace` accepts, or a `Trace`.
      min_overlap: minimum duration-weighted overlap ratio (None: off).
      baseline: a baseline report (path or parsed dict) for the regression checks.
      **checks: any other `CheckConfig` field (`max_exposed_ms=`, `min_overlap_h2d=`, ...).

    Returns:
      The analysis result, when every check passes.

    Raises:
      AssertionError: with the verdict (and failing checks) as its message.
    """
    if isinstance(path_or_trace, (str, os.PathLike)):
        from overlap.trace import read_trace

        trace = read_trace(path_or_trace)
    else:
        trace = path_or_trace
    base_path = None
    if isinstance(baseline, (str, os.PathLike)):
        base_path = os.fspath(baseline)
        baseline = load_baseline(baseline)
    fields = {f.name for f in dataclasses.fields(CheckConfig)}
    unknown = set(checks) - fields
    if unknown:
        raise TypeError(f"unknown check(s): {', '.join(sorted(unknown))}")
    config = CheckConfig(min_overlap=min_overlap, baseline=baseline, baseline_path=base_path,
                         **checks)
    result = analysis.analyze(trace, hidden_threshold=hidden_threshold,
                              exposed_threshold=exposed_threshold)
    outcome = run_checks(result, config, trace)
    if not outcome["passed"]:
        # The verdict carries the analysis (and, without transfers, the reason); add each
        # failing check's message unless it only repeats that reason.
        reason = str(result.get("reason") or "")
        details = "; ".join(c["message"] for c in outcome["checks"]
                            if c["status"] == FAIL and not (reason and reason in c["message"]))
        raise AssertionError(outcome["verdict"] + (f" [{details}]" if details else ""))
    return result


def assert_no_transfers(path_or_trace, max_transfers: int = 0, *,
                        max_bytes: int | None = None, direction: str = "both") -> dict[str, Any]:
    """Assert that a hot loop moves (almost) nothing between host and device, per step.

        >>> overlap.assert_no_transfers("runs/train", max_transfers=0)  # doctest: +SKIP

    Counts `MemcpyD2H`/`MemcpyH2D` copies per annotated step (their bytes from
    `memcpy_details`), so `size:8` scalar uploads count. Raises AssertionError naming the
    offending copies (HLO op, direction, bytes, step); returns the analysis result otherwise.
    """
    return assert_hidden(path_or_trace, min_overlap=None, max_transfers=max_transfers,
                         max_transfer_bytes=max_bytes, transfer_direction=direction)
