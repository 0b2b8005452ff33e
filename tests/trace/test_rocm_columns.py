"""The ROCm join and the "cannot tell" groups without pandas (`vendors.rocm_transfers`,
`vendors.shape_unknowns`) equal the pandas code they replaced (a left merge on correlation_id
after `drop_duplicates`, `groupby(sort=True)`), kept below as the reference, on random copy
kernels and HIP calls: ids missing, repeated, shared by several calls and kernels; calls of
every kind; sizes, ops, modules and program ids missing on either side.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from overlap.arrays import factorize
from overlap.trace import vendors
from overlap.trace.tables import TRANSFER_COLUMNS, as_columns
from overlap.trace.wire import Cols, map_unique
from tests.trace.test_columns import assert_same_columns

NAN = float("nan")
APIS = ["hipMemcpyHtoDAsync", "hipMemcpyDtoHAsync", "hipMemcpyDtoH", "hipMemcpyAsync",
        "hipMemcpyDtoDAsync", "hipMemsetAsync", "hipMemcpyPeerAsync", "hipLaunchKernel"]
KERNELS = ["__amd_rocclr_copyBuffer", "__amd_rocclr_copyBufferAligned",
           "__amd_rocclr_fillBufferAligned"]



# ---- the pandas code these replaced (the reference) ----

def _cols_frame(c: Cols, names: tuple[str, ...]) -> pd.DataFrame:
    """The chunks as objects; the reader's typed columns as the objects they stand for
    (`correlation_id` None where `has_correlation_id` is False, `size` None where 0)."""
    typed = {"has_correlation_id": "bool", "correlation_id": "uint64", "size": "int64"}
    rows = c.rows({k: typed.get(k, "object") for k in names}
                  | ({"has_correlation_id": "bool"} if "correlation_id" in names else {}))
    n = max((len(v) for v in rows.values()), default=0)
    if "correlation_id" in names and len(rows["correlation_id"]):
        ids = np.array(rows["correlation_id"], np.uint64).astype(object)
        ids[~np.asarray(rows["has_correlation_id"], bool)] = None
        rows["correlation_id"] = ids
    if "size" in names and len(rows["size"]):
        size = np.array(rows["size"], np.int64).astype(object)
        size[size == 0] = None
        rows["size"] = size
    return pd.DataFrame({k: pd.Series(rows[k] if len(rows[k]) else [None] * n, dtype=object)
                         for k in names})


_BLIT_COLS = ("device", "start_ps", "end_ps", "name", "kind", "correlation_id", "stream",
              "line", "hlo_op", "hlo_module", "program_id")
_CALL_COLS = ("api", "correlation_id", "size", "hlo_op", "hlo_module", "program_id")


def _pandas_rocm_transfers(side: vendors.GpuSide, calls: Cols, host: str, tr: Cols
                           ) -> list[dict[str, Any]]:
    """Transfers from ROCm copy kernels and their correlated HIP calls (added to `tr`); returns
    the "cannot tell" entries for copies whose direction or device span the capture lacks."""
    blits = _cols_frame(side.blits, _BLIT_COLS)
    api = _cols_frame(calls, _CALL_COLS)
    unknown: list[dict[str, Any]] = []
    if api.empty and blits.empty:
        return unknown
    api = api[api["correlation_id"].notna()].drop_duplicates("correlation_id")
    kinds = [vendors.hip_api_kind(str(a)) or ("other", None) for a in api["api"].tolist()]
    api = api.assign(call=[k[0] for k in kinds],
                     direction=np.array([k[1] for k in kinds], dtype=object))
    copies = blits[blits["kind"] == "copy"]
    m = copies.merge(api, how="left", on="correlation_id", suffixes=("", "_api"))
    to_host = m["direction"].isin(list(vendors.HOST_DIRECTIONS)).to_numpy(bool)
    t = m[to_host]
    if len(t):
        size = t["size"].to_numpy(object)
        known = np.array([s is not None and not pd.isna(s) for s in size.tolist()], bool)
        direction = t["direction"].to_numpy(object)
        hlo = t["hlo_op"].where(t["hlo_op"].notna(), t["hlo_op_api"]).to_numpy(object)
        module = t["hlo_module"].where(t["hlo_module"].notna(), t["hlo_module_api"])
        pid = t["program_id"].where(t["program_id"].notna(), t["program_id_api"])
        tr.add(len(t), host=host, device=t["device"].to_numpy(object), direction=direction,
               start_ps=t["start_ps"].to_numpy(np.int64), end_ps=t["end_ps"].to_numpy(np.int64),
               bytes=np.where(known, size, 0).astype(np.int64), bytes_known=known,
               src_kind=np.where(direction == "H2D", "host", "device").astype(object),
               dst_kind=np.where(direction == "D2H", "host", "device").astype(object),
               **{"async": True}, stream=t["stream"].to_numpy(np.int64),
               line=t["line"].to_numpy(object),
               hlo_op=map_unique(hlo, vendors._last_hlo_op), hlo_module=module.to_numpy(object),
               program_id=pid.to_numpy(object))
    # Copy kernels whose direction the capture does not say.
    no_call = m["call"].isna().to_numpy(bool)
    no_dir = (~no_call) & m["direction"].isna().to_numpy(bool)
    for mask, why in ((no_call, "with no correlated hipMemcpy* call"),
                      (no_dir, "from calls that do not name a direction")):
        sub = m[mask]
        for (dev, name), g in sub.groupby(["device", "name"], sort=True):
            apis = sorted({str(a) for a in g["api"].dropna().tolist()})
            unknown.append({"device": dev, "events": int(len(g)), "reason": (
                f"{len(g)} {name} copy kernel(s) {why}"
                + (f" ({', '.join(apis)})" if apis else "")
                + ": direction unknown")})
    # Host copy calls with no device copy: no span to measure.
    seen = set(blits["correlation_id"].dropna().tolist())
    lost = api[(api["call"] == "copy") & api["direction"].isin(list(vendors.HOST_DIRECTIONS))
               & ~api["correlation_id"].isin(seen)]
    for name, g in lost.groupby("api", sort=True):
        unknown.append({"device": None, "events": int(len(g)), "reason": (
            f"{len(g)} {name!s} call(s) with no device copy event correlated: "
            "no device span to measure")})
    return unknown


def _pandas_shape_unknowns(side: vendors.GpuSide) -> list[dict[str, Any]]:
    """The groupby part of `shape_unknowns` (the planes' part never used pandas)."""
    out: list[dict[str, Any]] = []
    other = _cols_frame(side.other, ("device", "line", "name"))
    if len(other):
        def why(line, name):
            m = vendors._STREAM_RE.match(str(line))
            kinds = [k.strip() for k in (m["kinds"] or "").split(",") if k.strip()] if m else []
            odd = [k for k in kinds if k not in vendors.KNOWN_STREAM_KINDS]
            if odd:
                return f"stream kind(s) {', '.join(odd)} that overlap does not read"
            if vendors._NOT_HOST_COPY_RE.match(str(name)):
                return None  # a device copy or memset: neither a transfer nor compute
            return "neither a kernel nor a copy overlap reads"

        other["why"] = [why(ln, n) for ln, n in zip(other["line"], other["name"])]
        other = other[other["why"].notna()]
        # one entry per (device, name, reason), however many lines hold it
        for (dev, name, reason), g in other.groupby(["device", "name", "why"], sort=True):
            lines = g["line"].unique()
            where = f"on {lines[0]}" if len(lines) == 1 else \
                f"on {len(lines)} lines ({lines[0]}, ...)"
            out.append({"device": dev, "events": int(len(g)),
                        "reason": f"{len(g)} {name!r} event(s) {where}: {reason}"})
    like = _cols_frame(side.copy_like, ("device", "name"))
    if len(like):
        for (dev, name), g in like.groupby(["device", "name"], sort=True):
            out.append({"device": dev, "events": int(len(g)), "reason": (
                f"{len(g)} kernel(s) named like a copy ({str(name)[:80]}): whether they move "
                "host data cannot be told (counted as compute)")})
    return out


def _obj(values: list) -> np.ndarray:
    out = np.empty(len(values), object)
    out[:] = values
    return out


blit = st.tuples(st.sampled_from(["GPU:0", "GPU:1"]), st.integers(0, 10**6),
                 st.integers(0, 10**5), st.sampled_from(KERNELS),
                 st.one_of(st.none(), st.integers(0, 12)), st.integers(0, 3),
                 st.sampled_from([None, "fusion.1", "a::copy.2", NAN]),
                 st.sampled_from([None, "jit_f", NAN]), st.sampled_from([None, 7, 2**64 - 1]))
call = st.tuples(st.sampled_from(APIS), st.one_of(st.none(), st.integers(0, 12)),
                 st.sampled_from([None, 1, 4096, 1 << 40]),
                 st.sampled_from([None, "copy.3", "x::y"]),
                 st.sampled_from([None, "jit_g"]), st.sampled_from([None, 9]))
other = st.tuples(st.sampled_from(["GPU:0", "GPU:1"]),
                  st.sampled_from(["Stream #1(Kernel)", "Stream #2(Weird)", "Memcpy"]),
                  st.sampled_from(["MemcpyD2D", "Memset", "odd", "x"]))


def _ids(ids) -> dict[str, np.ndarray]:
    """Ids (ints in [0, 2**64) or None) as the reader's columns (`vendors.correlation_ids`)."""
    return {"correlation_id": np.array([x or 0 for x in ids], np.uint64),
            "has_correlation_id": np.array([x is not None for x in ids], bool)}


def _sides(blits: list, calls: list, others: list, likes: list
           ) -> tuple[vendors.GpuSide, Cols]:
    side, hip = vendors.GpuSide(), Cols()
    # two chunks each, as the reader adds them per line
    for part in (blits[: len(blits) // 2], blits[len(blits) // 2:]):
        if part:
            c = list(zip(*part))
            side.blits.add(len(part), device=_obj(list(c[0])),
                           start_ps=np.array(c[1], np.int64),
                           end_ps=np.array(c[1], np.int64) + np.array(c[2], np.int64),
                           name=_obj(list(c[3])),
                           kind=_obj([vendors.runtime_kernel_kind(n) for n in c[3]]),
                           **_ids(c[4]), stream=np.array(c[5], np.int64),
                           line="Stream #1(Kernel)", hlo_op=_obj(list(c[6])),
                           hlo_module=_obj(list(c[7])), program_id=_obj(list(c[8])))
    for part in (calls[: len(calls) // 2], calls[len(calls) // 2:]):
        if part:
            c = list(zip(*part))
            hip.add(len(part), api=_obj(list(c[0])), **_ids(c[1]),
                    size=np.array([x or 0 for x in c[2]], np.int64), hlo_op=_obj(list(c[3])),
                    hlo_module=_obj(list(c[4])),
                    program_id=_obj(list(c[5])))
    if others:
        c = list(zip(*others))
        side.other.add(len(others), device=_obj(list(c[0])), line=_obj(list(c[1])),
                       name=_obj(list(c[2])))
    if likes:
        c = list(zip(*likes))
        side.copy_like.add(len(likes), device=_obj(list(c[0])), name=_obj(list(c[1])))
    return side, hip


@settings(max_examples=300, deadline=None)
@given(st.lists(blit, max_size=30), st.lists(call, max_size=30), st.lists(other, max_size=12),
       st.lists(st.tuples(st.sampled_from(["GPU:0", "GPU:1"]),
                          st.sampled_from(["memcpy_k", "MyMemcpy"])), max_size=6))
def test_rocm_join_and_groups_equal_pandas(blits, calls, others, likes):
    got_tr, want_tr = Cols(), Cols()
    side, hip = _sides(blits, calls, others, likes)
    got = vendors.rocm_transfers(side, hip, "h", got_tr)
    got += vendors.shape_unknowns(side, {}, [])
    side, hip = _sides(blits, calls, others, likes)
    want = _pandas_rocm_transfers(side, hip, "h", want_tr)
    want += _pandas_shape_unknowns(side)
    assert got == want
    assert [type(u["device"]) for u in got] == [type(u["device"]) for u in want]
    g = as_columns(got_tr.rows(TRANSFER_COLUMNS), TRANSFER_COLUMNS)
    w = as_columns(want_tr.rows(TRANSFER_COLUMNS), TRANSFER_COLUMNS)
    assert_same_columns(g, w)


big_id = st.one_of(st.none(), st.integers(0, 40), st.sampled_from([2**63 - 1, 2**63, 2**64 - 1]))


@settings(max_examples=60, deadline=None)
@given(st.lists(blit, min_size=64, max_size=90), st.lists(call, min_size=64, max_size=90),
       st.data())
def test_rocm_join_of_many_ids_equals_pandas(blits, calls, data):
    """64 calls or more; ids up to 2**64 - 1, missing ones among them (`_id_codes`: a sort
    of their integers)."""
    calls = [(c[0], data.draw(big_id), *c[2:]) for c in calls]
    blits = [(*b[:4], data.draw(big_id), *b[5:]) for b in blits]
    got_tr, want_tr = Cols(), Cols()
    side, hip = _sides(blits, calls, [], [])
    got = vendors.rocm_transfers(side, hip, "h", got_tr)
    side, hip = _sides(blits, calls, [], [])
    want = _pandas_rocm_transfers(side, hip, "h", want_tr)
    assert got == want
    g = as_columns(got_tr.rows(TRANSFER_COLUMNS), TRANSFER_COLUMNS)
    w = as_columns(want_tr.rows(TRANSFER_COLUMNS), TRANSFER_COLUMNS)
    assert_same_columns(g, w)


def test_id_codes_number_as_factorize_does():
    values = [None, 5, 2**64 - 1, 5, 2**63, None, 0, 2**64 - 1] * 10
    got, n = vendors._id_codes(*_ids(values).values())
    want, uniq = factorize(_obj(values))
    assert len(uniq) == n == 4
    assert ((got[:, None] == got[None, :]) == (want[:, None] == want[None, :])).all()
    assert ((got < 0) == (want < 0)).all()
