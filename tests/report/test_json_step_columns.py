"""Step rows written to JSON from the columns they were made from (`step_rows.StepRows`,
`text._step_rows_text`, issue 32 round 10) give the text the dicts give: each row what
`_ENCODE` writes for its dict, rows apart as `_emit` puts a list's elements. Pinned against
the dict path on columns of every shape a step column takes (one value or many, ints past
2**53, floats beside None, 0.0 beside -0.0, non-ASCII and str-subclass names, exposure causes
of several layouts), hosts of one row and of more than one batch; a list no longer holding
its blocks' dicts, a copy, a pickle and a refused value all go the dict path."""

from __future__ import annotations

import copy
import io
import json
import pickle
import random
from itertools import chain
from operator import itemgetter

import numpy as np
import pytest

from overlap.analysis import step_rows as S
from overlap.analysis.overlap import host_part, reduce_parts
from overlap.report import text as T
from overlap.trace import read_trace
from overlap.trace.synthetic import SyntheticTrace

US = 1_000_000


def _column(rng: random.Random, key: str, n: int):
    """One step column as `step_rows` hands it to `_split`: an int64 array, a list of Python
    values or `_One`, one value in every row about a third of the time."""
    one = rng.random() < 0.35
    if key in ("host",):
        return S._One(rng.choice(["h", "hôst-ü", "x\"y"]))
    if key == "name":
        if one:
            return S._objects(["train"] * n)
        return S._objects([rng.choice(["a", "é\n", None]) if i % 2 else np.str_("s")
                           for i in range(n)])
    if key in ("overlap_ratio", "exposed_frac"):
        pick = rng.random()
        if pick < 0.2:
            return S._floats([0.25] * n)
        if pick < 0.3:
            return S._fractions(np.zeros(n))  # one +0.0 object in every row
        if pick < 0.4:
            return S._floats([0.0] * (n - 1) + [-0.0])  # equal, printed apart
        if pick < 0.5:
            return S._floats([None] * n)
        return S._fractions(np.where(np.arange(n) % 5 == 0, np.nan,
                                     np.array([rng.random() for _ in range(n)])))
    if key == "worst_device":
        return S._objects(["GPU:0"] * n if one else
                          [rng.choice([None, "GPU:1", "TPU:0"]) for _ in range(n)])
    if key == "exposure_causes":
        return [{} if i % 3 == 0 else {"device_waits": i} if i % 3 == 1 else
                {"device_waits": 2, "unknown": (1 << 60) + i} for i in range(n)]
    if one:
        return np.full(n, rng.choice([0, 7, (1 << 62) + 3]), np.int64)
    return np.array([rng.randrange(-(1 << 63), 1 << 63) if i % 7 == 0 else rng.randrange(10**12)
                     for i in range(n)], np.int64)


def _step_rows(rng: random.Random, sizes: list[int], hosts: list[str] | None = None
               ) -> S.StepRows:
    blocks = []
    for j, n in enumerate(sizes):
        host = hosts[j] if hosts else f"host-{j}"
        cols = [_column(rng, k, n) for k in S.STEP_KEYS]
        cols[0] = S._One(host)
        blocks.append(S.StepBlock(host, n, *S._split(cols)))
    return S.StepRows(chain.from_iterable(b.rows for b in blocks), blocks)


def _emitted(v, indent: str = "  ") -> str:
    out = io.StringIO()
    T._emit(out, v, indent, 1)
    return out.getvalue()


def _dicts_text(rows: list[dict], indent: str = "  ") -> str:
    """What `_emit` writes for `rows` as a list of dicts: each one `_ENCODE`d."""
    inner = indent + "  "
    return "[\n" + ",\n".join(inner + T._ENCODE(r) for r in rows) + "\n" + indent + "]"


@pytest.mark.parametrize("seed", range(12))
def test_rows_from_columns_are_the_dicts_text(seed):
    rng = random.Random(seed)
    sizes = rng.choice([[1], [40], [T._BATCH], [T._BATCH + 1, 3], [700, 1, 17], [5, 1200]])
    rows = _step_rows(rng, sizes)
    assert rows.intact_blocks() is not None
    assert T._step_rows_text(rows, "    ") is not None  # the column path is the one taken
    got = _emitted(rows)
    assert got == _dicts_text(rows) == _emitted(list(rows))
    assert json.loads(got) == rows
    buf = io.StringIO()
    T.write_json(buf, {"steps": rows, "other": 1})  # as a result's `steps`
    assert json.loads(buf.getvalue())["steps"] == rows


def test_a_wrong_column_shows():
    """The pin above is the dicts' text: a block's column that no longer says what its rows
    say writes another text (so a wrong column fails the test, not passes it)."""
    rows = _step_rows(random.Random(3), [50])
    want = _dicts_text(rows)
    b = rows.blocks[0]
    key = "start_ps" if "start_ps" in b.vary else next(iter(b.vary))
    col = b.vary[key]
    b.vary[key] = [*col[:-1], "changed"]
    assert _emitted(rows) != want
    b.vary[key] = col
    assert _emitted(rows) == want


@pytest.mark.parametrize("change", ["sort", "reverse", "append", "pop", "set", "extend"])
def test_a_changed_list_is_written_from_its_dicts(change):
    rows = _step_rows(random.Random(5), [30, 30])
    if change == "sort":
        rows.sort(key=itemgetter("step"))
    elif change == "reverse":
        rows.reverse()
    elif change == "append":
        rows.append({"host": "z", "step": 1})
    elif change == "pop":
        rows.pop(3)
    elif change == "set":
        rows[4] = dict(rows[4], step=-1)
    else:
        rows.extend(rows[:2])
    assert rows.intact_blocks() is None
    assert _emitted(rows) == _dicts_text(rows)


@pytest.mark.parametrize("change", ["add", "delete", "pop"])
def test_a_row_given_or_losing_a_key_is_written_from_its_dicts(change):
    """A caller annotating its steps (a key added to one row, or one taken away) is seen by
    the rows' sizes: the list goes the dict path and the text holds the change."""
    rows = _step_rows(random.Random(9), [40, 25])
    row = rows[30]
    if change == "add":
        row["note"] = "mine"
    elif change == "delete":
        del row["step"]
    else:
        row.pop("host")
    assert rows.intact_blocks() is None
    got = _emitted(rows)
    assert got == _dicts_text(rows)
    assert json.loads(got)[30] == row


def test_copies_and_pickles_are_plain_lists():
    rows = _step_rows(random.Random(1), [20])
    for other in (copy.copy(rows), copy.deepcopy(rows), pickle.loads(pickle.dumps(rows)),
                  rows[:], rows + []):
        assert type(other) is list and other == rows


@pytest.mark.parametrize("bad, error", [(float("nan"), ValueError), (float("inf"), ValueError),
                                        ({1, 2}, TypeError)])
def test_a_refused_value_raises_as_the_dicts_do(bad, error):
    rows = _step_rows(random.Random(2), [20])
    b = rows.blocks[0]
    col = [0.5] * 19 + [bad] if bad != {1, 2} else [{}] * 19 + [bad]
    key = "overlap_ratio" if bad != {1, 2} else "exposure_causes"
    b.one.pop(key, None)
    b.vary[key] = col
    for r, v in zip(rows, col):
        r[key] = v  # (a test's change, so the dicts say the same)
    assert T._step_rows_text(rows, "") is None
    for v in (rows, list(rows)):
        with pytest.raises(error):
            T.write_json(io.StringIO(), {"steps": v})


@pytest.mark.parametrize("col", [
    [None, 1.5, None, 2.0], [None, "x", "ü"], [None, 3, 1 << 70], [1.5, 2.5, -0.0, 0.0],
    [True, None, 1], [None, np.str_("s"), "s"], [1, 1.0, True], [None] * 4, [{}, {}],
])
def test_column_texts_are_the_encoders(col):
    rows = [{"a": 1, "v": v, "z": None} for v in col] * 5
    assert T._rows_text(rows) == [T._ENCODE(r) for r in rows]
    texts = T._texts(col)
    assert (([texts] * len(col)) if isinstance(texts, str) else list(texts)) == \
        [T._ENCODE(v) for v in col]
    with pytest.raises(ValueError):
        T._texts([None, 1.0, float("nan")])


def _part(tmp_path, host: str, steps: int, shift: int = 0):
    """One host file's part: steps with a copy half under compute, steps with no copy
    (ratios of None) and a zero-length step."""
    t = SyntheticTrace(host)
    g = t.gpu(0)
    for i in range(steps):
        lo = (100 + 100 * i + shift) * US
        t.step(i, lo, lo + (0 if i == 3 else 100 * US))
        if i % 4 == 1:
            continue
        g.kernel(lo, 15 * US)
        g.memcpy("D2H" if i % 2 else "H2D", lo + 10 * US, (10 + i % 3) * US, 1 << 20,
                 hlo_op=f"copy-start.{i % 3}")
    return host_part(read_trace(t.write(tmp_path / f"{host}-{shift}.xplane.pb")))


def test_parts_joined_are_the_dicts_sorted_by_host(tmp_path):
    parts = [_part(tmp_path, "b", 30), _part(tmp_path, "a", 600), _part(tmp_path, "a", 7, 5)]
    for p in parts:
        assert isinstance(p["steps"], S.StepRows) and p["steps"].intact_blocks()
    got = S.joined([p["steps"] for p in parts])
    want = list(chain.from_iterable(p["steps"] for p in parts))
    want.sort(key=itemgetter("host"))  # what the reduce step did with the parts' rows
    assert isinstance(got, S.StepRows) and len(got) == len(want)
    assert all(x is y for x, y in zip(got, want))
    assert _emitted(got) == _dicts_text(want)
    one = parts[1]["steps"]
    assert S.joined([one]) is one  # one part, in host order: its own list
    plain = S.joined([parts[0]["steps"], list(parts[1]["steps"])])  # one part not StepRows
    assert type(plain) is list and plain == [*parts[1]["steps"], *parts[0]["steps"]]
    assert S.joined([]) == []


@pytest.mark.parametrize("n_parts", [1, 3])
def test_a_result_of_parts_is_written_as_its_dicts(tmp_path, n_parts):
    """A result's steps (`reduce_parts`: `step_rows.joined` where the reduce step calls it,
    else a list of the dicts) written alone and under a check's outcome (a level deeper)."""
    parts = [_part(tmp_path, "b", 40), _part(tmp_path, "a", 530), _part(tmp_path, "a", 9, 7)]
    result = reduce_parts(parts[:n_parts])
    plain = {**result, "steps": list(result["steps"])}
    for outcome in (None, {"verdict": "ok", "checks": []}):
        got, want = io.StringIO(), io.StringIO()
        T.write_json(got, result, outcome)
        T.write_json(want, plain, outcome)
        assert got.getvalue() == want.getvalue()
    assert json.loads(got.getvalue())["analysis"]["steps"] == plain["steps"]


@pytest.mark.parametrize("a", [[0.0, -0.0, 0.0], [-0.0, -0.0], [0.0] * 3, [0.5, 0.5],
                               [np.nan, 0.5], [0.5, np.nan], [np.nan, np.nan], []])
def test_fractions_keep_nan_as_none_and_the_sign_of_zero(a):
    col = S._fractions(np.array(a, float))
    values = [col.v] * len(a) if isinstance(col, S._One) else col
    want = [None if np.isnan(x) else float(x) for x in a]
    assert [json.dumps(v) for v in values] == [json.dumps(v) for v in want]
    assert all(type(v) is type(w) for v, w in zip(values, want))


@pytest.mark.parametrize("hosts", [["a", "b", "c"], ["b", "a", "b"], ["c", "b", "a"]])
def test_hosts_of_one_part_joined_as_the_sorted_dicts(hosts):
    rows = _step_rows(random.Random(4), [3, 20, 5], hosts)
    got = S.joined([rows])
    want = sorted(rows, key=itemgetter("host"))  # stable
    assert all(x is y for x, y in zip(got, want)) and len(got) == len(want)
    assert (got is rows) == (hosts == sorted(hosts))
    assert isinstance(got, S.StepRows) and _emitted(got) == _dicts_text(want)
