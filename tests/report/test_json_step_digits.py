"""Step rows whose varying columns are ints >= 0 written from their int arrays
(`overlap.report.digits`, issue 32 round 12): the text is the plain rule's, each row its
constant pieces with `repr` of each value between them, rows apart by `,\\n` + indent, in
pieces of up to `_BATCH` rows; and `_emit` of such rows is the dicts' text. Values of every
digit count (0, 9, 10, 10**18 - 1, 10**18, int64's largest), runs of one layout that cross a
batch, and columns the digits path must leave to the plain one (a negative value, many runs,
a plain list, values other than ints) are drawn."""

from __future__ import annotations

import io
import json
import random

import numpy as np
import pytest

from overlap.analysis import step_rows as S
from overlap.report import digits
from overlap.report import text as T

EDGES = [0, 1, 9, 10, 99, 100, 10**9 - 1, 10**9, 10**18 - 1, 10**18, (1 << 63) - 1]


def _plain(pieces, cols, n, inner, batch):
    """The rule: each row `pieces[0] + repr(v0) + pieces[1] + ... + pieces[-1]`."""
    rows = ["".join(p + repr(int(c[i])) for p, c in zip(pieces, cols)) + pieces[-1]
            for i in range(n)]
    sep = ",\n" + inner
    return [inner + sep.join(rows[lo:lo + batch]) for lo in range(0, n, batch)]


def _values(rng: random.Random, n: int) -> np.ndarray:
    pick = rng.random()
    if pick < 0.4:  # ascending, as step numbers and times are: few runs
        v = sorted(rng.randrange(0, 10 ** rng.randrange(1, 19)) for _ in range(n))
    elif pick < 0.6:
        v = [rng.choice(EDGES) for _ in range(n)]
    else:
        v = [rng.randrange(0, 1 << 63) >> rng.randrange(0, 63) for _ in range(n)]
    return np.array(v, np.int64)


@pytest.mark.parametrize("seed", range(40))
def test_rows_text_is_the_plain_rule(seed):
    rng = random.Random(seed)
    n = rng.choice([1, 2, 7, 64, 511, 512, 513, 1100])
    k = rng.choice([1, 2, 3, 4])
    cols = [_values(rng, n) for _ in range(k)]
    pieces = [rng.choice(["{", '"a": 1, "b": ', ", ", "", '"x\\u00e9": null, "y": ']) for _ in
              range(k + 1)]
    inner = " " * rng.randrange(0, 7)
    batch = rng.choice([1, 3, 64, 512])
    counts = [digits.digit_counts(c) for c in cols]
    assert [c.tolist() for c in counts] == [[len(repr(int(v))) for v in c] for c in cols]
    got = list(digits.rows_text(pieces, cols, counts, digits.runs(counts), n, inner, batch))
    assert got == _plain(pieces, cols, n, inner, batch)


def test_runs_start_where_a_digit_count_changes():
    counts = [np.array([1, 1, 2, 2, 2, 2]), np.array([5, 5, 5, 6, 6, 6])]
    assert digits.runs(counts).tolist() == [0, 2, 3]
    assert digits.runs([np.array([3])]).tolist() == [0]


def _rows(n: int, ints: dict[str, list[int]], vary_other: dict[str, list] | None = None):
    """One host's StepRows of `n` rows: the given int columns as step_rows makes them (int64
    arrays), the other keys one value each (or `vary_other`'s lists)."""
    cols = []
    for k in S.STEP_KEYS:
        if k in ints:
            cols.append(np.array(ints[k], np.int64))
        elif vary_other and k in vary_other:
            cols.append(vary_other[k])
        elif k == "exposure_causes":
            cols.append([{} for _ in range(n)])
        elif k in ("host", "name", "worst_device"):
            cols.append(S._One("h" if k == "host" else None))
        elif k in ("overlap_ratio", "exposed_frac"):
            cols.append(S._One(0.5))
        else:
            cols.append(np.full(n, 3, np.int64))
    block = S.StepBlock("h", n, *S._split(cols))
    return S.StepRows(block.rows, [block])


def _dicts_text(rows, indent="  "):
    inner = indent + "  "
    return "[\n" + ",\n".join(inner + T._ENCODE(r) for r in rows) + "\n" + indent + "]"


def _emitted(rows, indent="  "):
    out = io.StringIO()
    T._emit(out, rows, indent, 1)
    return out.getvalue()


@pytest.mark.parametrize("n", [1, 2, T._BATCH - 1, T._BATCH + 1, 3000])
def test_step_rows_of_times_take_the_digits_path_and_write_the_dicts_text(n, monkeypatch):
    start = [10_000_000 + 100_000_000 * i for i in range(n)]
    rows = _rows(n, {"step": list(range(n)), "start_ps": start,
                     "end_ps": [s + 95_000_000 for s in start]})
    b = rows.blocks[0]
    assert type(b.vary["start_ps"]) is S.IntColumn
    assert b.vary["start_ps"] == start and b.vary["start_ps"].array.tolist() == start
    taken = []
    real = digits.rows_text
    monkeypatch.setattr(digits, "rows_text", lambda *a: taken.append(1) or real(*a))
    got = _emitted(rows)
    assert taken == [1]  # the digits path was the one taken
    assert got == _dicts_text(rows)
    assert json.loads(got) == rows


@pytest.mark.parametrize("case", ["negative", "many_runs", "plain_list", "floats", "dicts"])
def test_other_columns_go_the_plain_path_with_the_same_text(case, monkeypatch):
    rng = random.Random(7)
    n = 700
    ints = {"step": list(range(n)), "start_ps": list(range(0, 10 * n, 10))}
    other = None
    if case == "negative":
        ints["end_ps"] = [5 - i for i in range(n)]
    elif case == "many_runs":  # a digit count changing row after row
        ints["end_ps"] = [rng.choice([7, 10**12]) for _ in range(n)]
    elif case == "plain_list":
        other = {"end_ps": list(range(n))}
    elif case == "floats":
        other = {"overlap_ratio": [i / 7 for i in range(n)]}
    else:
        other = {"exposure_causes": [{"device_waits": i} for i in range(n)]}
    rows = _rows(n, ints, other)
    taken = []
    real = digits.rows_text
    monkeypatch.setattr(digits, "rows_text", lambda *a: taken.append(1) or real(*a))
    assert _emitted(rows) == _dicts_text(rows)
    assert taken == []


def test_a_changed_int_column_shows():
    """The digits are the array's: a block whose int column no longer says what its rows say
    writes another text (so a wrong array fails the pins above)."""
    n = 40
    rows = _rows(n, {"step": list(range(n)), "start_ps": list(range(100, 100 + n))})
    want = _dicts_text(rows)
    col = rows.blocks[0].vary["start_ps"]
    col.array = col.array + 1
    assert _emitted(rows) != want


def test_intact_blocks_sees_a_key_added_or_taken():
    rows = _rows(30, {"step": list(range(30)), "start_ps": list(range(30))})
    assert rows.intact_blocks() is not None
    rows[5]["note"] = 1
    assert rows.intact_blocks() is None
    del rows[6]["step"]  # one key more in one row, one fewer in another: as many in all
    assert rows.intact_blocks() is None
    assert _emitted(rows) == _dicts_text(rows)  # written from the dicts, as they now are
