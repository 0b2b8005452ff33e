"""A list of like dicts written by `_emit` in pieces of up to `_BATCH` rows (`text._batches`:
one `str.join` per piece over one list holding the constant pieces and each column's texts,
put in place by slice assignment) gives what the plain rule gives: each element `_ENCODE`d,
after `inner`, elements apart by `,\\n`. Pinned on lists of 16 rows up to several batches
(a last batch of one row, of a full batch), columns of one text and of many, no varying
column at all, keys and values with `%` and non-ASCII text (issue 32 round 11)."""

from __future__ import annotations

import io
import json
import random

import pytest

from overlap.report import text as T


def _plain(rows: list, indent: str = "  ") -> str:
    """What `_emit` writes for a list at depth 1, element by element (the plain rule)."""
    inner = indent + "  "
    return "[\n" + ",\n".join(inner + T._ENCODE(r) for r in rows) + "\n" + indent + "]"


def _emitted(rows: list, indent: str = "  ") -> str:
    out = io.StringIO()
    T._emit(out, rows, indent, 1)
    return out.getvalue()


def _rows(rng: random.Random, n: int, varying: int) -> list[dict]:
    keys = ["a%d" % i for i in range(6)] + ["100%", "ü"]
    vary = set(rng.sample(range(len(keys)), varying))
    const = {k: rng.choice([1, "x%s", None, 2.5, "é"]) for k in keys}
    return [{k: (rng.choice([i, f"v{i}%d", -0.0, None, 1 << 70, "ü\n", 0.1 * i])
                 if j in vary else const[k]) for j, k in enumerate(keys)} for i in range(n)]


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("n", [16, 17, T._BATCH - 1, T._BATCH, T._BATCH + 1, 2 * T._BATCH + 300])
def test_batched_rows_are_the_plain_rule(seed, n):
    rng = random.Random(seed * 1000 + n)
    rows = _rows(rng, n, rng.choice([0, 1, 2, 5, 8]))
    assert T._rows_columns(rows) is not None  # the batch path is the one taken
    got = _emitted(rows)
    assert got == _plain(rows)
    assert json.loads(got) == json.loads(json.dumps(rows))
    buf = io.StringIO()
    T.write_json(buf, {"list": rows, "x": 1})
    assert json.loads(buf.getvalue())["list"] == json.loads(json.dumps(rows))


@pytest.mark.parametrize("n", [1, 3, T._BATCH, T._BATCH + 2, 3 * T._BATCH])
@pytest.mark.parametrize("varying", [0, 1, 3])
def test_batches_join_rows_as_the_rows_joined(n, varying):
    """`_batches` itself: its pieces joined with `,\\n` (as `_emit` writes them) are the
    rows' own texts (`_joined`) after `inner`, apart by `,\\n`, each piece at most `_BATCH`
    rows."""
    rng = random.Random(n * 10 + varying)
    rows = _rows(rng, n, varying)
    keys, texts = T._rows_columns(rows) if n >= 2 else (tuple(rows[0]), [
        T._texts([v]) for v in rows[0].values()])
    inner = "    "
    pieces = list(T._batches(keys, texts, n, inner))
    assert len(pieces) == -(-n // T._BATCH)
    keys2, texts2 = T._rows_columns(rows) if n >= 2 else (keys, [
        T._texts([v]) for v in rows[0].values()])
    want = list(T._joined(keys2, texts2, n))
    assert want == [T._ENCODE(r) for r in rows]
    assert ",\n".join(pieces) == inner + (",\n" + inner).join(want)
    for p in pieces:
        assert p.startswith(inner + "{") and p.endswith("}")


def test_a_changed_separator_shows():
    """The pin fails on a wrong piece: rows whose texts are swapped between two rows of one
    batch are not the plain rule's text."""
    rows = _rows(random.Random(4), 40, 2)
    want = _plain(rows)
    swapped = rows[:]
    swapped[3], swapped[4] = swapped[4], swapped[3]
    if swapped[3] != rows[3]:
        assert _emitted(swapped) != want
    assert _emitted(rows) == want


@pytest.mark.parametrize("bad, error", [(float("nan"), ValueError), ({1}, TypeError)])
def test_a_refused_value_raises_as_the_encoder_does(bad, error):
    rows = [{"a": i, "b": 0.5} for i in range(40)]
    rows[33]["b"] = bad
    assert T._rows_columns(rows) is None
    with pytest.raises(error):
        T.write_json(io.StringIO(), {"list": rows})


def _plain_object(d: dict, indent: str = "    ") -> str:
    """What `_emit` writes for an object at depth 2, entry by entry (the plain rule: each
    value compact, after its key)."""
    inner = indent + "  "
    return ("{\n" + ",\n".join(f"{inner}{T._ENCODE(str(k))}: {T._ENCODE(v)}"
                               for k, v in d.items()) + "\n" + indent + "}")


@pytest.mark.parametrize("n", [1, 2, T._BATCH - 1, T._BATCH, T._BATCH + 1, 2 * T._BATCH + 7])
def test_depth_two_objects_in_batches_are_the_plain_rule(n):
    """A depth-2 object (a capture's `vendors`: host -> device -> vendor) written a batch of
    entries at a time is the entry-by-entry text: keys made str, values of any kind compact,
    entries apart by `,\\n`, across batch boundaries."""
    rng = random.Random(n)
    d = {(f"GPU:{i}" if i % 3 else i): rng.choice(["NVIDIA (inferred)", None, 1.5, [1, "ü"],
                                                  {"a": 1}, "x%s\n"]) for i in range(n)}
    out = io.StringIO()
    T._emit(out, d, "    ", 2)
    assert out.getvalue() == _plain_object(d)
    buf = io.StringIO()
    T.write_json(buf, {"vendors": {"host": d}})
    assert json.loads(buf.getvalue()) == {"vendors": {"host": json.loads(json.dumps(d))}}
