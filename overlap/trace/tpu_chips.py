"""Many small TPU chips of one host file read as one (`tpu._read_tpu_chips`).

Why: a file of thousands of small chips paid ~0.25 ms a chip in the TPU read, numpy's fixed
cost on arrays of a few events each (4,096 chips of four events: 1.0 s of the report's 1.35
s; benchmarks/README.md, round 42). Twin chips (`tpu_twins`: the same metadata bytes) whose
lines hold events of the same ops (a pod's chips run one SPMD program) give every per-op
rule the same question, so their lines' events are decoded side by side (one `merge_lines`
segment a line name) and each rule runs once for all of them.

The rule (`run_end`, `decode`): a run of consecutive chips of one twin group (at most
`SMALL_CHIP` events each, `BATCH_EVENTS` events and `BATCH_CHIPS` chips in all) whose op and
Async lines are alike (names, ids, which ones have events), with at most one op line of
events (its rows are then in chip order, as one chip at a time gives them), every such line
scanned and not decoded yet. After the decode each chip's events of a line must be of the
same distinct ops (in any order and number: the rules ask of a line's distinct ops, so each
chip then asks what the batch asks); else the chips are read one at a time as if the decode
had never been (the counters and the lines' decoded flags it set are put back).
Anything raised while preparing does the same, so a damaged chip is refused where reading
one at a time refuses it, with the same message.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from overlap.arrays import sorted_unique
from overlap.trace.lines import merge_lines
from overlap.trace.names import TPU_ASYNC_LINE, TPU_OPS_LINES, TPU_PLANE_RE
from overlap.trace.planeview import BAD_STRINGS
from overlap.trace.tpu import _read_tpu_chips, line_wanted
from overlap.trace.wire import INVALID_EVENTS, INVALID_REASONS, LineEvents, Plane, check_lines

# A chip of more events than this is read by itself: its own arrays amortize numpy's
# fixed costs, and a batch of large chips would hold all their events at once.
SMALL_CHIP = 4096
# Events and chips of one batch at most: what it holds at once (its arrays, and each chip's
# `Plane`, lines and plane stats: ~1.5 KiB a chip, 6 MiB of 4,096 chips read as one batch)
BATCH_EVENTS = 1 << 16
BATCH_CHIPS = 256
_LINES = (*sorted(TPU_OPS_LINES), TPU_ASYNC_LINE)  # (the order the TPU read takes them)


def run_end(planes: list, i: int, twin_of: dict) -> int:
    """The end of the run of chips from `planes[i]` that may be read as one: consecutive
    TPU planes of `planes[i]`'s twin group, each of at most `SMALL_CHIP` events, at most
    `BATCH_EVENTS` in all and `BATCH_CHIPS` chips (i + 1 where there is no such run)."""
    group = twin_of.get(i)
    if group is None:
        return i + 1
    j, total = i, 0
    while j < len(planes):
        pl = planes[j]
        if pl is None or twin_of.get(j) is not group or not TPU_PLANE_RE.match(pl.name):
            break
        n = pl.lines.events()
        if n > SMALL_CHIP or total + n > BATCH_EVENTS or j - i >= BATCH_CHIPS:
            break
        total += n
        j += 1
    return max(j, i + 1)


def _layout(P: Plane) -> tuple[dict, tuple] | None:
    """A chip's lines the TPU read takes, by name (the last of a name, as that read's), and
    what must be alike across a batch: (name, id, has events) of each; None where a line
    with events was decoded by upb or decoded already."""
    by_name = {line.name: line for line in P.plane.lines if line.name in _LINES}
    sig = []
    for name in _LINES:
        line = by_name.get(name)
        if line is None:
            continue
        if line.n_events and (line.events is not None or line.decoded):
            return None
        sig.append((name, line.id, bool(line.n_events)))
    return by_name, tuple(sig)


def decode(Ps: list[Plane], line_base_ps: Callable, wanted: Callable[[str], Any]
           ) -> dict[str, tuple[LineEvents, np.ndarray]] | None:
    """Per line name with events: the chips' events as one `LineEvents` (each chip's lines
    in turn, in the chips' order) and each event's chip; None where the chips are not to be
    read as one (see the module docstring). `wanted`: the stat ids a line's read keeps."""
    if len(Ps) < 2:
        return None
    layouts = [_layout(P) for P in Ps]
    if any(x is None for x in layouts):
        return None
    if any(x[1] != layouts[0][1] for x in layouts):  # type: ignore[index]
        return None
    sig = layouts[0][1]  # type: ignore[index]
    names = [name for name, _, has in sig if has]
    if sum(name in TPU_OPS_LINES for name in names) > 1:
        return None
    # what the decode may change, put back where the chips are read one at a time
    saved = (INVALID_EVENTS[0], dict(INVALID_REASONS), BAD_STRINGS[0])
    touched: list = []
    try:
        got = _decode(Ps, layouts, names, line_base_ps, wanted, touched)
    except Exception:  # (reading one chip at a time raises it, where it would)
        got = None
    if got is None:
        INVALID_EVENTS[0], BAD_STRINGS[0] = saved[0], saved[2]
        INVALID_REASONS.clear()
        INVALID_REASONS.update(saved[1])
        for line in touched:
            line.decoded = False
    return got


def _decode(Ps: list[Plane], layouts: list, names: list[str], line_base_ps: Callable,
            wanted: Callable[[str], Any], touched: list
            ) -> dict[str, tuple[LineEvents, np.ndarray]] | None:
    k = len(Ps)
    for P in Ps:  # (what reading each chip asks first: its row of the devices table)
        if "SparseCore" not in P.plane.name:
            P.plane_stats()
    # each chip's lines' origins, in the order reading each chip asks for them
    bases = [[line_base_ps(layout[0][name]) for name in names] for layout in layouts]
    out = {}
    for j, name in enumerate(names):
        lines = [layout[0][name] for layout in layouts]
        touched += lines
        counts = np.array([line.n_events for line in lines], np.int64)
        chip = np.repeat(np.arange(k, dtype=np.intp), counts)
        base = np.repeat(np.array([b[j] for b in bases], np.int64), counts)
        ev = LineEvents(merge_lines(lines), base, wanted=wanted(name))
        chip = ev.kept(chip)
        if not _same_ops(ev.mids, chip, k):
            return None
        out[name] = ev, chip
    return out


def _same_ops(mids: np.ndarray, chip: np.ndarray, k: int) -> bool:
    """Whether each of the `k` chips' events (`chip`, ascending) are of the same distinct ops
    (`mids`), each chip at least one: what every per-op rule is asked of a chip's line."""
    if not len(mids):
        return False
    lo, hi = int(mids.min()), int(mids.max())
    span = hi - lo + 1
    if span > (1 << 62) // k:  # (ids too far apart to key with the chip: read chip by chip)
        return False
    key = sorted_unique(chip.astype(np.int64) * span + (mids.astype(np.int64) - lo))
    per_chip = np.bincount(key // span, minlength=k)
    ops = key % span
    return bool((per_chip == per_chip[0]).all()) and \
        bool((ops.reshape(k, -1) == ops[:per_chip[0]]).all())


def read_run(planes: list, i: int, j: int, chip_rows: Callable[..., str], host: str,
             line_base_ps: Callable, tr, co, programs: Callable, twins) -> bool:
    """Chips `planes[i:j]` (a `run_end` run) read as one: each chip's rows of the lines,
    devices and vendors tables (`chip_rows`, the reader's, in the chips' order), then their
    transfers and compute rows, their unread lines checked, and each dropped from `planes`
    (its bytes can go). False, nothing read, where they are not to be read as one."""
    Ps = [Plane(planes[x]) for x in range(i, j)]
    merged = decode(Ps, line_base_ps, lambda name: line_wanted(Ps[0], name))
    if merged is None:
        return False
    devices = [chip_rows(P, True) for P in Ps]
    _read_tpu_chips(Ps, devices, host, line_base_ps, tr, co, programs, twins, merged)
    del merged
    check_lines(*[P.plane for P in Ps])
    for x in range(i, j):
        planes[x] = None
    return True
