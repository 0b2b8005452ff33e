"""`Cols` given its schema joins small chunks a run at a time as they come (`_join_tail`, issue
32 round 41: a TPU host file of 4,096 chips held a chunk dict of small arrays per chip, 11
MiB of a 6 MB file's read): `rows` of the joined chunks is `rows` of every chunk as added
(`Cols()` without a schema joins nothing): the same columns, dtypes, values (and their
types), and a `repeated` view exactly where the unjoined rows give one. Chunks mix arrays
of each kind, `Coded` columns (one shared by two columns), scalars, missing columns and
marks (`_cpu`, which `rows`' `keep` reads: only chunks of equal marks are joined)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from overlap.arrays import is_repeated, repeated
from overlap.trace import values as V

SCHEMA = {"host": "object", "device": "object", "start_ps": "int64", "name": "object",
          "hlo_op": "object", "flag": "boolean", "stream": "int64"}
SHARED = "GPU:0"
NAMES = np.array(["copy.1", "fusion.2", None], dtype=object)


def _chunk(draw, n: int) -> dict:
    cols: dict = {}
    for col, dtype in SCHEMA.items():
        kind = draw(st.sampled_from(["scalar", "array", "one", "missing"]
                                    + (["coded"] if dtype == "object" else [])))
        if kind == "missing":
            continue
        if kind == "scalar":
            cols[col] = draw(st.sampled_from([SHARED, "GPU:1", None] if dtype == "object"
                                             else [None, True, False, 0, 7, 2**62]))
        elif kind == "one":
            cols[col] = repeated(n, SHARED, object) if dtype == "object" else \
                repeated(n, 5, np.int64)
        elif kind == "array":
            if dtype == "object":
                cols[col] = np.array(draw(st.lists(st.sampled_from([SHARED, "x", None, 3]),
                                                   min_size=n, max_size=n)) + [0],
                                     dtype=object)[:n]
            else:
                dt = draw(st.sampled_from([np.int64, np.int32, bool]))
                cols[col] = np.array(draw(st.lists(st.integers(0, 9), min_size=n, max_size=n)),
                                     dtype=dt)
        else:
            cols[col] = V.Coded(np.array(draw(st.lists(st.integers(0, 2), min_size=n,
                                                       max_size=n)), np.int64), NAMES)
    if "name" in cols and isinstance(cols["name"], V.Coded) and draw(st.booleans()):
        cols["hlo_op"] = cols["name"]  # (one `Coded` for two columns, as the TPU reader gives)
    if draw(st.integers(0, 4)) == 0:
        cols["_cpu"] = True
    return cols


@st.composite
def _chunks(draw):
    sizes = draw(st.lists(st.integers(1, 4), min_size=0, max_size=40))
    return [(n, _chunk(draw, n)) for n in sizes]


def _typed(col) -> list:
    return [(type(x), x) for x in np.asarray(col).tolist()]


def _same(got: dict, want: dict) -> None:
    assert list(got) == list(want)
    for k in want:
        g, w = got[k], want[k]
        assert isinstance(g, np.ndarray) == isinstance(w, np.ndarray), k
        if not isinstance(w, np.ndarray):
            assert g == w
            continue
        assert g.dtype == w.dtype, k
        assert is_repeated(g) == is_repeated(w), k
        assert _typed(g) == _typed(w), k


@pytest.mark.parametrize("every", [2, 3, 5])
@settings(max_examples=150, deadline=None)
@given(chunks=_chunks(), keep=st.booleans())
def test_joined_chunks_give_the_rows_of_every_chunk(every, chunks, keep):
    joined, plain = V.Cols(SCHEMA), V.Cols()
    was, V.JOIN_EVERY = V.JOIN_EVERY, every
    try:
        for n, cols in chunks:
            joined.add(n, **cols)
            plain.add(n, **cols)
    finally:
        V.JOIN_EVERY = was
    assert len(joined.chunks) <= len(plain.chunks)
    sel = (lambda cols: not cols.get("_cpu")) if keep else None
    _same(joined.rows(SCHEMA, sel), plain.rows(SCHEMA, sel))


def test_a_chip_a_chunk_is_joined_and_large_chunks_are_not(monkeypatch):
    monkeypatch.setattr(V, "JOIN_ROWS", 100)
    c = V.Cols(SCHEMA)
    for i in range(V.JOIN_EVERY * 3):
        c.add(1, host=SHARED, device=f"TPU:{i}", start_ps=np.array([i], np.int64))
    assert len(c.chunks) == 3
    rows = c.rows(SCHEMA)
    assert rows["device"].tolist() == [f"TPU:{i}" for i in range(V.JOIN_EVERY * 3)]
    assert is_repeated(rows["host"]) and rows["start_ps"].tolist() == list(range(192))
    big = V.Cols(SCHEMA)
    for i in range(V.JOIN_EVERY):
        big.add(2, start_ps=np.array([i, i], np.int64))
    assert len(big.chunks) == V.JOIN_EVERY  # (128 rows > JOIN_ROWS: left as they are)


def _tables(path) -> dict:
    from overlap.trace import read_trace

    t = read_trace(path)
    return {name: t.columns(name) for name in ("transfers", "compute", "memory")}


def _synthetic(tmp_path: Path, kind: str) -> Path:
    """SYNTHETIC: 40 TPU chips, or 40 GPUs, each an op (kernel) and a copy beside it."""
    from overlap.trace.synthetic import SyntheticTrace

    us = 1_000_000
    t = SyntheticTrace()
    for c in range(40):
        if kind == "tpu":
            d = t.tpu(c)
            d.op(10 * us, 5 * us, name="fusion.1")
            d.async_copy("D2H" if c % 2 else "H2D", 11 * us, 14 * us)
        else:
            g = t.gpu(c)
            g.kernel(10 * us, 5 * us)
            g.memcpy("D2H" if c % 2 else "H2D", 11 * us, 3 * us, 4096 * (c + 1))
    return t.write(tmp_path / f"{kind}40.xplane.pb")


@pytest.mark.parametrize("sample", ["tpu-v6e-offload", "gpu-h100/scan-h100/offload_x",
                                    "rocm/mi300x-jax08-attention",
                                    "gpu-v100-tf-multiworker", "cpu-scan/offload_x",
                                    "tpu40", "gpu40"])
def test_captures_read_alike_joined_at_every_second_chunk_or_never(monkeypatch, tmp_path,
                                                                   sample):
    """The real samples' (and SYNTHETIC many-device files') tables with chunks joined two at
    a time (JOIN_ROWS raised: any size) are the tables with no chunk joined (JOIN_EVERY past
    any count of chunks); the TPU ones do join chunks (a chunk per chip)."""
    path = _synthetic(tmp_path, sample[:3]) if sample.endswith("40") else \
        Path(__file__).resolve().parents[2] / "sample_traces" / sample
    monkeypatch.setattr(V, "JOIN_EVERY", 1 << 30)
    never = _tables(path)
    joins = []
    real = V._joined_columns

    def counted(chunks, schema, join=False):
        got = real(chunks, schema, join)
        joins.append(join and got is not None)
        return got

    monkeypatch.setattr(V, "_joined_columns", counted)
    monkeypatch.setattr(V, "JOIN_EVERY", 2)
    monkeypatch.setattr(V, "JOIN_ROWS", 1 << 40)
    often = _tables(path)
    for name in never:
        _same(dict(often[name]), dict(never[name]))
    assert sum(len(next(iter(t.values()))) for t in never.values() if t)
    if sample.startswith("tpu"):  # (a GPU file's small lines are read as one group)
        assert sum(joins) >= 2
