"""`step_summary` from intact step blocks (`step_rows._block_summary`: a column of one value
summed as the value times its rows, maxima from each block's, issue 32 round 11) equals the
plain rule over the rows' dicts: mean and largest exposed wall time, largest exposed
fraction (None skipped; the first of equal floats, 0.0 beside -0.0), the worst step (most
exposed wall, of those the earliest start, the first row of equals) and the mean duration.
Pinned on random blocks with one-valued and varying columns, ties of every kind and
several hosts; `joined_blocks` hands `reduce_parts` the blocks it found intact."""

from __future__ import annotations

import math
import random
from itertools import chain

import numpy as np
import pytest

from overlap.analysis import step_rows as S


def _block(rng: random.Random, host: str, n: int) -> S.StepBlock:
    def ints(lo: int, hi: int):
        if rng.random() < 0.4:
            return np.full(n, rng.randrange(lo, hi), np.int64)
        return np.array([rng.randrange(lo, hi) for _ in range(n)], np.int64)

    cols: list = [None] * len(S.STEP_KEYS)
    at = {k: i for i, k in enumerate(S.STEP_KEYS)}
    for k in S.STEP_KEYS:
        cols[at[k]] = ints(0, 5)
    cols[at["host"]] = S._One(host)
    cols[at["name"]] = S._objects(["train"] * n)
    cols[at["worst_device"]] = S._objects([None] * n)
    cols[at["exposure_causes"]] = [{} for _ in range(n)]
    cols[at["start_ps"]] = ints(0, 4)  # (few values: ties of start among tied walls)
    cols[at["exposed_wall_ps"]] = ints(0, 3 if rng.random() < 0.5 else 10**6)
    cols[at["duration_ps"]] = ints(0, 1 << 62)  # (sums past 2**63 stay exact ints)
    pick = rng.random()
    if pick < 0.25:
        frac = S._fractions(np.full(n, rng.choice([0.0, -0.0, 0.5])))
    elif pick < 0.4:
        frac = S._floats([None] * n)
    else:
        frac = S._fractions(np.array([rng.choice([np.nan, 0.0, -0.0, 0.25, 0.75])
                                      for _ in range(n)]))
    cols[at["exposed_frac"]] = frac
    cols[at["overlap_ratio"]] = S._floats([None] * n)
    return S.StepBlock(host, n, *S._split(cols))


def _plain(rows: list[dict], unassigned: int) -> dict:
    """The definitions, row by row."""
    walls = [r["exposed_wall_ps"] for r in rows]
    fracs = [r["exposed_frac"] for r in rows if r["exposed_frac"] is not None]
    worst = max(rows, key=lambda r: (r["exposed_wall_ps"], -r["start_ps"])) if rows else None
    return {
        "count": len(rows),
        "mean_exposed_wall_ps": int(round(sum(walls) / len(walls))) if walls else None,
        "max_exposed_wall_ps": max(walls) if walls else None,
        "max_exposed_frac": max(fracs) if fracs else None,
        "worst_step": None if worst is None else {"host": worst["host"], "step": worst["step"]},
        "mean_duration_ps": int(round(sum(r["duration_ps"] for r in rows) / len(rows)))
        if rows else None,
        "unassigned_transfers": unassigned,
    }


def _same(a: dict, b: dict) -> bool:
    """Equal, and floats of one sign (0.0 and -0.0 print apart)."""
    return a == b and all(
        math.copysign(1, x) == math.copysign(1, y) for x, y in
        ((a["max_exposed_frac"], b["max_exposed_frac"]),) if isinstance(x, float))


@pytest.mark.parametrize("seed", range(60))
def test_block_summary_is_the_plain_rule(seed):
    rng = random.Random(seed)
    blocks = [_block(rng, f"h{j}", rng.choice([1, 2, 3, 50])) for j in range(rng.choice([1, 2, 4]))]
    rows = S.StepRows(chain.from_iterable(b.rows for b in blocks), blocks)
    want = _plain(list(rows), 7)
    got = S.step_summary(rows, 7)
    assert _same(got, want), (got, want)
    assert _same(S.step_summary(list(rows), 7), want)  # the dict path
    assert _same(S.step_summary(rows, 7, rows.intact_blocks()), want)
    # the worst row is the rule's row itself
    if want["worst_step"] is not None:
        walls = [r["exposed_wall_ps"] for r in rows]
        assert got["worst_step"]["host"] in {b.host for b in blocks}
        assert max(walls) == got["max_exposed_wall_ps"]


def test_a_one_valued_column_counts_every_row():
    """A wall of one value over a block of n rows is n of them in the mean (a rule that took
    the value once would fail here)."""
    rng = random.Random(1)
    b1 = _block(rng, "a", 10)
    b2 = _block(rng, "b", 1)
    rows = S.StepRows(chain.from_iterable(b.rows for b in (b1, b2)), [b1, b2])
    assert S.step_summary(rows, 0) == _plain(list(rows), 0)


def test_joined_blocks_hands_the_intact_blocks():
    rng = random.Random(2)
    a = S.StepRows(_block(rng, "b", 5).rows, None)
    blk = _block(rng, "a", 4)
    one = S.StepRows(blk.rows, [blk])
    rows, blocks = S.joined_blocks([one])
    assert rows is one and blocks == [blk]
    blk2 = _block(rng, "c", 3)
    two = S.StepRows(blk2.rows, [blk2])
    rows, blocks = S.joined_blocks([two, one])
    assert [b.host for b in blocks] == ["a", "c"] and rows.intact_blocks() == blocks
    rows, blocks = S.joined_blocks([a, one])  # a list without blocks: a plain list
    assert blocks is None and rows == sorted([*a, *one], key=lambda r: r["host"])
    assert S.joined([two, one]) == rows_sorted([two, one])


def rows_sorted(parts):
    return sorted(chain.from_iterable(parts), key=lambda r: r["host"])
