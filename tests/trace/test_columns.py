"""`Trace.columns` / `Trace.rows`: one representation of a table whether the Trace holds the
reader's columns or a DataFrame a caller gave, and the DataFrames built lazily from columns
equal the ones `_frame` builds (what the reader always returned).

Representation (see `Trace.columns`): "int64" -> int64 array; "object" -> object array with
None for every missing value; "UInt64"/"Int64" -> object array of Python int or None;
"boolean" -> object array of True/False/None; "bool" -> bool array with COLUMN_DEFAULTS.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from overlap.trace.reader import read_xspace
from overlap.trace.tables import (
    COMPUTE_COLUMNS,
    DEVICE_COLUMNS,
    TABLES,
    TRANSFER_COLUMNS,
    Trace,
    _frame,
    as_columns,
    frame_columns,
)

NAN = float("nan")
BIG = 12190760917235803885  # a real TPU program id: above int64

# Three transfers: missing values of every kind in object and nullable columns.
ROWS = {
    "host": ["h", "h", "h"], "device": ["TPU:0", "TPU:0", "TPU:1"],
    "direction": ["D2H", "H2D", None], "start_ps": [0, 5, 9], "end_ps": [4, 8, 20],
    "bytes": [1, 2, 3], "src_kind": ["device", NAN, "host"], "dst_kind": [pd.NA, "h", "d"],
    "async": [True, None, False], "stream": [1, 1, 2], "line": ["a", "b", None],
    "hlo_op": ["copy-start", None, NAN], "hlo_module": [NAN, "m", pd.NA],
    "program_id": [BIG, None, 7], "bytes_known": [True, None, False],
    "device_span_ps": [3, None, pd.NA],
}
WANT = {
    "host": ["h", "h", "h"], "device": ["TPU:0", "TPU:0", "TPU:1"],
    "direction": ["D2H", "H2D", None], "start_ps": [0, 5, 9], "end_ps": [4, 8, 20],
    "bytes": [1, 2, 3], "src_kind": ["device", None, "host"], "dst_kind": [None, "h", "d"],
    "async": [True, None, False], "stream": [1, 1, 2], "line": ["a", "b", None],
    "hlo_op": ["copy-start", None, None], "hlo_module": [None, "m", None],
    "program_id": [BIG, None, 7], "bytes_known": [True, True, False],
    "device_span_ps": [3, None, None],
}
WANT_DTYPES = {"int64": np.int64, "object": object, "UInt64": object, "Int64": object,
               "boolean": object, "bool": bool}


def _empty_tables() -> dict:
    return {name: _frame(None, schema) for name, schema in TABLES.items()}


def _trace(**tables) -> Trace:
    return Trace(sources=[], backend="tpu", **{**_empty_tables(), **tables}, capture={"h": {}})


def assert_same_columns(got: dict, want: dict) -> None:
    """Same keys, dtypes, values and value types (a numpy int is not a Python int here)."""
    assert list(got) == list(want)
    for k in want:
        g, w = got[k], want[k]
        assert isinstance(g, np.ndarray) and g.dtype == w.dtype and g.ndim == 1, k
        gl, wl = g.tolist(), w.tolist()
        assert [type(x) for x in gl] == [type(x) for x in wl], k
        assert gl == wl, k


def _check_representation(cols: dict, schema: dict, want: dict) -> None:
    assert list(cols) == list(schema)
    for k, dtype in schema.items():
        a = cols[k]
        assert a.dtype == WANT_DTYPES[dtype], k
        vals = a.tolist()
        assert vals == want[k], k
        if dtype in ("UInt64", "Int64"):
            assert {type(v) for v in vals} <= {int, type(None)}, k
        elif dtype == "boolean":
            assert {type(v) for v in vals} <= {bool, type(None)}, k


def test_both_storages_give_the_representation():
    from_frame = _trace(transfers=_frame(ROWS, TRANSFER_COLUMNS))
    from_cols = _trace(transfers=ROWS)  # a dict of column lists: kept as columns
    for t in (from_frame, from_cols):
        _check_representation(t.columns("transfers"), TRANSFER_COLUMNS, WANT)
        assert t.rows("transfers") == 3
    assert_same_columns(from_cols.columns("transfers"), from_frame.columns("transfers"))


def test_frame_built_from_columns_equals_the_readers_frame():
    t = _trace(transfers=ROWS)
    frame = t.transfers
    assert t.transfers is frame  # built once, kept
    # what the reader gives (None for missing names): the very frame `_frame` builds
    plain = {k: [None if v is NAN or v is pd.NA else v for v in col] for k, col in ROWS.items()}
    pd.testing.assert_frame_equal(_trace(transfers=plain).transfers,
                                  _frame(plain, TRANSFER_COLUMNS))
    # NaN and pd.NA in object columns come back as None (the columns' representation)
    want = _frame(ROWS, TRANSFER_COLUMNS)
    assert list(frame.dtypes) == list(want.dtypes)
    assert frame["hlo_module"].tolist() == [None, "m", None]
    pd.testing.assert_frame_equal(frame, _frame(plain, TRANSFER_COLUMNS))
    # the columns stay what they were after the frame is built
    _check_representation(t.columns("transfers"), TRANSFER_COLUMNS, WANT)


def test_numpy_columns_and_runs_of_objects():
    """Arrays as the reader gives them (uint64 ids, int64 flags, runs of one object, NaN
    inside long runs) take the array paths; the answer is the per-element one."""
    n = 40
    name = np.empty(n, object)
    name[:20], name[20:] = "a", NAN  # two runs of one object each
    ids = np.empty(n, object)
    ids[:30], ids[30:] = np.uint64(BIG), None
    flags = np.empty(n, object)
    flags[:10], flags[10:] = np.True_, 0
    rows = {"host": name, "device": name, "start_ps": np.arange(n), "end_ps": np.arange(n),
            "name": name, "hlo_op": name.copy(), "hlo_module": name, "stream": np.zeros(n, int),
            "line": name, "program_id": ids}
    cols = as_columns(rows, COMPUTE_COLUMNS)
    assert cols["name"].tolist() == ["a"] * 20 + [None] * 20
    assert cols["program_id"].tolist() == [BIG] * 30 + [None] * 10
    assert {type(v) for v in cols["program_id"].tolist()} == {int, type(None)}
    assert_same_columns(cols, frame_columns(_frame(rows, COMPUTE_COLUMNS), COMPUTE_COLUMNS))
    tr = as_columns({**ROWS, "async": np.array([1, 0, 1]), "program_id": np.array(
        [BIG, 1, 2], np.uint64), "bytes_known": flags[8:11]}, TRANSFER_COLUMNS)
    assert tr["async"].tolist() == [True, False, True]
    assert tr["program_id"].tolist() == [BIG, 1, 2]
    assert tr["bytes_known"].tolist() == [True, True, False]
    assert_same_columns(tr, frame_columns(_frame(tr, TRANSFER_COLUMNS), TRANSFER_COLUMNS))


def test_missing_columns_and_empty_tables():
    # bytes_known left out by a producer: its default; an empty table: empty typed arrays
    rows = {k: v for k, v in ROWS.items() if k != "bytes_known"}
    t = _trace(transfers=rows)
    assert t.columns("transfers")["bytes_known"].tolist() == [True, True, True]
    assert t.transfers["bytes_known"].tolist() == [True, True, True]
    e = _trace()
    for name, schema in TABLES.items():
        cols = e.columns(name)
        assert list(cols) == list(schema) and e.rows(name) == 0
        assert all(cols[k].dtype == WANT_DTYPES[d] for k, d in schema.items())
    # a caller's frame without some columns (tests build such): the object and nullable
    # ones read as missing, an int64 one it lacks is left out
    df = pd.DataFrame({"host": ["h"], "device": ["GPU:0"], "start_ps": [1], "end_ps": [2]})
    cols = _trace(compute=df, memory=pd.DataFrame()).columns("compute")
    assert "stream" not in cols and cols["name"].tolist() == [None]
    assert cols["program_id"].tolist() == [None]
    with pytest.raises(ValueError):
        as_columns({"host": ["h"]}, {"host": "object", "start_ps": "int64"})


def test_setting_a_table_replaces_its_columns():
    t = _trace(transfers=ROWS)
    df = _frame({k: v[:1] for k, v in ROWS.items()}, TRANSFER_COLUMNS)
    t.transfers = df
    assert t.transfers is df and t.rows("transfers") == 1
    assert t.columns("transfers")["direction"].tolist() == ["D2H"]


def test_devices_nullable_ints():
    rows = {"host": ["h", "h"], "device": ["GPU:0", "GPU:1"], "plane": ["p", "q"],
            "vendor": [None, "Nvidia"], "name": ["x", None], "memory_size": [1 << 40, None],
            "memory_bandwidth": [None, None], "clock_rate_khz": [-5, 6],
            "core_count": [np.int64(3), 4], "compute_capability": ["9.0", None]}
    a = _trace(devices=rows).columns("devices")
    b = _trace(devices=_frame(rows, DEVICE_COLUMNS)).columns("devices")
    assert_same_columns(a, b)
    assert a["core_count"].tolist() == [3, 4] and type(a["core_count"][0]) is int
    assert a["memory_bandwidth"].tolist() == [None, None]


def test_reader_tables_equal_their_frames(tmp_path):
    """Every table of a real read: the columns equal those of the DataFrame built from them."""
    from overlap.trace.protos import XSpace
    from overlap.trace.reader import combine_parts
    from overlap.trace.synthetic import gpu_offload_scenario

    t = gpu_offload_scenario()
    trace = combine_parts([read_xspace(XSpace.FromString(t.to_bytes()), host="h")], [])
    assert trace.rows("transfers") > 0 and trace.rows("compute") > 0
    for name, schema in TABLES.items():
        cols = trace.columns(name)
        frame = getattr(trace, name)
        assert trace.rows(name) == len(frame)
        assert_same_columns(cols, frame_columns(frame, schema))


def test_several_host_files_combine_as_pandas_did(tmp_path):
    """Parts of several host files (and a part held as DataFrames): the Trace's frames equal
    what `pd.concat` of the parts' frames and the stable (host, device, start) sort gave."""
    import pickle

    from overlap.trace.reader import (
        _sort_by_device_start,
        combine_parts,
        part_frames,
        read_host_file,
    )
    from overlap.trace.synthetic import SyntheticTrace

    US = 1_000_000
    files = []
    for host in ("w-1", "w-0"):  # file order is not host order
        t = SyntheticTrace(host)
        for ordinal in (1, 0):
            g = t.gpu(ordinal)
            for i in range(3):
                g.kernel((10 + 30 * i) * US, 10 * US, stream=7 + i % 2)
                g.memcpy("D2H" if i % 2 else "H2D", (40 - 10 * i) * US, 3 * US, 1000 * i,
                         stream=13 + i)
        t.step(0, 5 * US, 100 * US)
        files.append(tmp_path / f"{host}.xplane.pb")
        files[-1].write_bytes(t.to_bytes())
    parts = [read_host_file(f) for f in files]
    parts = pickle.loads(pickle.dumps(parts))  # what a worker sends back
    frames = [part_frames(p) for p in parts]
    for mixed in (parts, [parts[0], frames[1]]):
        trace = combine_parts(mixed, files)
        for name in TABLES:
            want = pd.concat([f[name] for f in frames], ignore_index=True)
            if name in ("transfers", "compute"):
                want = _sort_by_device_start(want)
            pd.testing.assert_frame_equal(getattr(trace, name), want, check_exact=True)
            assert_same_columns(trace.columns(name), frame_columns(want, TABLES[name]))
    assert trace.rows("transfers") == 12 and trace.rows("compute") == 12


def test_dataclass_helpers_and_pickle_keep_the_tables():
    import dataclasses
    import pickle

    t = _trace(transfers=ROWS)
    assert [f.name for f in dataclasses.fields(t)][:9] == [
        "sources", "backend", *TABLES]
    u = pickle.loads(pickle.dumps(t))  # columns travel, no frame built
    assert_same_columns(u.columns("transfers"), t.columns("transfers"))
    r = dataclasses.replace(t, backend="gpu")
    assert r.backend == "gpu"
    pd.testing.assert_frame_equal(r.transfers, t.transfers)
    assert_same_columns(r.columns("transfers"), t.columns("transfers"))


def _samples() -> list:
    from tests.conftest import SAMPLE_TRACES

    return sorted(SAMPLE_TRACES.rglob("*.xplane.pb"))


@pytest.mark.parametrize("path", _samples(), ids=lambda p: p.parts[-5] + "/" + p.name)
def test_real_captures_columns_are_in_the_representation(path):
    """On every sample capture (CPU, GPU, TPU, ROCm) the reader's columns, taken as they are
    where its rules made them, equal their frame's converted ones, value types included."""
    from overlap.trace.reader import combine_parts, read_host_file

    trace = combine_parts([read_host_file(path)], [path])
    for name, schema in TABLES.items():
        assert_same_columns(trace.columns(name), frame_columns(getattr(trace, name), schema))


def test_object_columns_hold_each_element_whole():
    """`_objects`: a list of values becomes an object array holding each element itself (the
    same object), a tuple, a list or an array as one element, never a second axis; None stays
    None; an empty list is an empty array."""
    from overlap.trace.tables import _objects

    arr = np.arange(3)
    vals = [None, "GPU:0", (1, 2), [3, 4], arr, 5, np.uint64(BIG), NAN, (), b"x"]
    got = _objects(vals)
    assert got.dtype == object and got.shape == (len(vals),)
    assert all(g is v for g, v in zip(got.tolist(), vals))
    assert _objects([None] * 1000).tolist() == [None] * 1000
    assert _objects([]).shape == (0,) and _objects([]).dtype == object
    assert _objects(("a", None)).tolist() == ["a", None]
    # an object array is kept, another array converted
    obj = np.array(["a", None], object)
    assert _objects(obj) is obj
    assert _objects(np.arange(2)).tolist() == [0, 1]
