"""Tables as columns, grouped without pandas: what `overlap.analysis.overlap` computes with.

A table here is a `Columns`: a dict of equally long 1-d numpy arrays, object columns holding
Python objects with None for a missing value (the representation of `Trace.columns`). The
functions give the answers of the pandas calls they replace, in the same orders:

* `key_codes`, `dense_codes`, `sorted_codes`: `pd.factorize` of a key column, of non-negative
  int keys, ranks with `sort=True` (missing values -1).
* `group_sums`: `groupby(by, sort=..., dropna=False).sum()` of int64 columns (exact sums; a
  missing key is a key of its own, last when sorted).
* `group_codes`: one code per (host, device) over several tables, as one `pd.factorize` of
  the pairs numbers them (first appearance).
* `ends_after`: `np.maximum(end, start)`, without a copy where no end is before its start.
* `equal_to`: `values == value` of a key column, once per distinct value (`codes_equal`: of
  a column already numbered); `pair_codes`: one number per distinct (module, program id) of
  a table's copies (`copy_pairs`: the trace's, numbered once per trace).
* `take`, `concat`, `n_rows` (`overlap.trace.tables`, beside `Columns`): `DataFrame.take`,
  `pd.concat(..., ignore_index=True)`, `len`.
* `frame_of`: the DataFrame of a `Columns`, for callers that want one (pandas imported there).

Speed: a reader's host and device columns are a few long runs (numbered once per run), a
direction or class column a few shared objects (numbered by address, `few_objects`), op names
many distinct str values (`arrays.factorize`: one dict pass); no Python loop per row elsewhere.
`group_sums` sums integer columns without sorting the rows (`np.add.at`), and stops numbering
keys where one tells every row apart (a capture where every copy is its own op).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from overlap.analysis import memo
from overlap.arrays import (
    SeenColumns,
    factorize,
    is_repeated,
    object_addresses,
    repeated,
    run_starts,
    sorted_unique,
)
from overlap.trace.strcodes import str_codes
from overlap.trace.tables import missing_mask

if TYPE_CHECKING:
    import pandas as pd

# A table: one numpy array per column, all of one length (object columns hold Python
# objects, None where a value is missing).
Columns = dict[str, np.ndarray]


def is_none(values: np.ndarray) -> np.ndarray:
    """Per element of an object array: is it None (a missing value in `Trace.columns`)? By
    address: no Python comparison per element."""
    values = np.asarray(values, dtype=object)
    if not len(values):
        return np.zeros(0, bool)
    return object_addresses(values) == id(None)


def group_codes(*tables: Columns) -> tuple[list[np.ndarray], list[tuple[str, str]]]:
    """One integer code per (host, device) shared by all tables, and the key of each code
    (codes in order of first appearance over the tables, as `pd.factorize` numbers them).

    Only the first row of each run of equal (host, device) neighbours is factorized and its
    code spread over the run: the reader's tables are sorted by (host, device), so a million
    compute rows are a few runs (hashing every row's two names cost 0.1 s)."""
    heads_h, heads_d, counts = [], [], []
    for t in tables:
        h = np.asarray(t["host"], dtype=object)
        d = np.asarray(t["device"], dtype=object)
        starts = key_runs(h, d)
        heads_h.append(h[starts])
        heads_d.append(d[starts])
        counts.append(np.diff(np.append(starts, len(h))))
    hosts = np.concatenate(heads_h)
    devs = np.concatenate(heads_d)
    hc, hu = factorize(hosts)
    dc, du = factorize(devs)
    combined = hc.astype(np.int64) * max(len(du), 1) + dc
    codes, uniq = factorize(combined)
    keys = [(str(hu[c // max(len(du), 1)]), str(du[c % max(len(du), 1)]))
            for c in uniq.tolist()]
    out, pos = [], 0
    for cnt in counts:
        c = codes[pos:pos + len(cnt)].astype(np.int64)
        # one run (a host file's one device): a read-only broadcast of its code, not a
        # million-row array
        out.append(np.broadcast_to(c[0], int(cnt[0])) if len(c) == 1 else np.repeat(c, cnt))
        pos += len(cnt)
    return out, keys


def ends_after(start: Any, end: Any) -> np.ndarray:
    """`np.maximum(end, start)` as int64 (each interval's end, never before its start):
    `end` itself where no end lies before its start, as in the reader's tables (no copy of
    a million compute ends; like `Trace.columns`, not to be modified)."""
    start = np.asarray(start, np.int64)
    end = np.asarray(end, np.int64)
    return np.maximum(end, start) if (end < start).any() else end


def key_runs(*cols: np.ndarray) -> np.ndarray:
    """First row of each run of rows equal in every column (`arrays.run_starts`); every row
    where a column's values do not compare as True/False."""
    n = len(cols[0])
    new = np.zeros(n, bool)
    for c in cols:
        starts = run_starts(c)
        if starts is None:
            return np.arange(n)
        new[starts] = True
    return np.flatnonzero(new)


def key_codes(values: np.ndarray, sort: bool) -> tuple[np.ndarray, np.ndarray]:
    """`arrays.factorize(values, sort)` of a key column. A column that is not in runs but
    holds a few shared objects (directions, a pod's hosts in turn) is numbered by address
    (`few_objects`) and only its heads factorized: no dict lookup per row. Many distinct
    strs (op names) are numbered by the compiled scanner (`strcodes.str_codes`: the same
    codes, a tenth of the time).

    The codes are the caller's to read, not to write: those of a column of one run (a host
    file's host) are a read-only broadcast of one code, those of a few objects the read-only
    array kept for the column (`_FEW`); the uniques are the caller's own, except those of
    many distinct strs (`str_codes`' kept answer itself, read-only, with its codes: every
    caller only reads them, and a copy of 36k codes and names was ~0.6M instructions)."""
    v = np.asarray(values, dtype=object)
    n = len(v)
    if n > 8:
        if is_repeated(v):  # one object in every row (`arrays.repeated`): one run
            return _one_run(v, sort)
        got = _few_codes(v, sort, None)  # (a column seen before: no `run_starts`, whose
        if got is not None:              # ~n indices of a few objects cost ~0.1 ms)
            return got
        starts = run_starts(v)
        if starts is not None and len(starts) == 1:
            return _one_run(v, sort)
        if starts is not None and len(starts) > n // 8:  # no runs: factorize's case
            few = few_objects(v)
            got = None if few is None else _few_codes(v, sort, few)
            if got is None:
                got = str_codes(v, sort, copy=False)
            if got is not None:
                return got
    return factorize(v, sort=sort)


def _one_run(v: np.ndarray, sort: bool) -> tuple[np.ndarray, np.ndarray]:
    """`key_codes` of a column of one run of equal values (a reader's host or device
    column): the first value's code for every row, a read-only broadcast (no repeat of it
    per row)."""
    c, u = factorize(v[:1], sort=sort)
    return np.broadcast_to(c, (len(v),)), u


def _few_codes(v: np.ndarray, sort: bool, few: tuple[np.ndarray, np.ndarray] | None
               ) -> tuple[np.ndarray, np.ndarray] | None:
    """`key_codes` of a column of a few objects: the codes kept for it and `sort`, else made
    from its objects (`few`, `few_objects`' answer: the ones kept for the column where None,
    and None where none are kept) and kept read-only, as are the objects (`_FEW`): a column
    numbered both sorted and not is told apart once, and each later call gets the kept
    array, no copy."""
    kept = _FEW.get(v, sort)
    if kept is not None:
        return kept[0], kept[1].copy()
    if few is None:
        few = _FEW.get(v, _OBJECTS)
        if few is None:
            return None
    else:
        _FEW.put(v, _OBJECTS, few)
    code, heads = few
    hc, hu = factorize(v[heads], sort=sort)
    codes = hc[code]
    codes.flags.writeable = False
    _FEW.put(v, sort, (codes, hu.copy()))
    return codes, hu


# The last two columns numbered by `few_objects` in `key_codes`: per column its objects'
# numbers and first rows (under `_OBJECTS`) and its codes by `sort`. The analysis numbers one
# transfer table's direction column five times, sorted and not (its groups, the regroups of
# one host file's groups, which hold that column, the copy queues, the step rows): ~0.4 ms of
# 36k rows to tell the objects apart, where finding the same objects at the same rows takes
# ~0.01 ms, and a new int64 copy of the codes per call ~70 page faults.
_FEW = SeenColumns(2)
_OBJECTS = "objects"


def equal_to(values: np.ndarray, value: Any, most: int = 8) -> np.ndarray:
    """Per row of an object column, does it equal `value` (`values == value`; a missing value
    equals nothing, as `key_codes` numbers it -1)? One rule for the analysis' masks of a
    direction or memory-kind column. Where the column holds at most `most` distinct objects
    (a few shared strs), each object is compared once and its rows told by address: no
    Python comparison per row, and no numbering of the column (~0.1 ms of 36k rows, where
    `key_codes` took ~0.5-0.8 ms); else compared once per distinct value of its
    `key_codes`."""
    v = np.asarray(values, dtype=object)
    n = len(v)
    if n > 64:
        addr = object_addresses(v)
        if len(set(addr[:64].tolist())) <= most:  # (more in the first rows alone: no pass
            hit = np.zeros(n, bool)               # per object over every row)
            left = np.ones(n, bool)  # rows whose object was not compared yet
            i = 0
            for _ in range(most):
                same = addr == addr[i]
                if _equals_one(v[i:i + 1], value):
                    hit |= same
                left &= ~same
                i = int(left.argmax())
                if not left[i]:
                    return hit
    return codes_equal(*key_codes(v, sort=False), value)


def _equals_one(one: np.ndarray, value: Any) -> bool:
    """Whether the object in `one` (a 1-row object array) equals `value`; a missing object
    (`tables.missing_mask`: None, NaN, pd.NA) never does."""
    o = one[0]
    if type(o) is not str and (o is None or missing_mask(one)[0]):  # (a str: never)
        return False
    return bool(o == value)


def codes_equal(codes: np.ndarray, uniques: np.ndarray, value: Any) -> np.ndarray:
    """`equal_to` of a column already numbered by `key_codes` (`codes`, `uniques`: callers
    that compare one column with several values number it once). A missing value (code -1)
    equals nothing."""
    hit = [i for i, u in enumerate(uniques.tolist()) if u == value]
    if not hit:
        return np.zeros(len(codes), bool)
    return codes == hit[0] if len(hit) == 1 else np.isin(codes, hit)


def few_objects(v: np.ndarray, most: int = 8) -> tuple[np.ndarray, np.ndarray] | None:
    """A column of at most `most` distinct objects (directions, a pod's hosts in turn): per
    row the number of its object in order of first appearance, and each object's first row;
    None where there are more. By address (`arrays.object_addresses`): no Python call per
    row. Distinct objects may still be equal values: the caller factorizes the heads. The
    numbers are int8 (at most `most` <= 127 of them: a byte a row, where int64 cost ~70 page
    faults per 36k rows)."""
    assert most <= 127
    addr = object_addresses(v)
    if len(set(addr[:64].tolist())) > most:  # more in the first rows alone (op names): no
        return None                          # pass per object over every row
    code = np.full(len(v), -1, np.int8)
    heads = []
    i = 0
    for k in range(most):
        code[addr == addr[i]] = k
        heads.append(i)
        left = code < 0
        i = int(left.argmax())  # the first row not numbered yet
        if not left[i]:
            return code, np.array(heads, np.int64)
    return None


def dense_codes(x: np.ndarray, sort: bool) -> np.ndarray:
    """`factorize(x, sort)[0]` of non-negative int64 keys: each key's number in key order
    (`sort`) or in order of first appearance. Keys below a few times their count are
    numbered through a table indexed by key (linear: a sort per grouping key cost more than
    pandas' hash did); larger ones by `arrays.factorize`."""
    n = len(x)
    k = int(x.max()) + 1 if n else 0
    if k > 4 * n + 1024:
        return factorize(x, sort=sort)[0]
    seen = np.zeros(k, bool)
    seen[x] = True
    if sort:
        return (np.cumsum(seen) - 1)[x]
    if int(np.count_nonzero(seen)) == n:
        # every row its own key (a capture where every copy is its own op): each row is its
        # key's first appearance, numbered in row order (no search for first rows, 1 ms)
        return np.arange(n, dtype=np.int64)
    first = np.full(k, n, np.int64)
    np.minimum.at(first, x, np.arange(n))  # each key's first row
    present = np.flatnonzero(first < n)
    number = np.empty(k, np.int64)
    number[present[np.argsort(first[present], kind="stable")]] = np.arange(len(present))
    return number[x]


def one_hot(values: np.ndarray, labels: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Per label, 1 where `values` equals it, else 0 (int64; a read-only `arrays.repeated`
    column where every row gives the same). The class column holds a few shared label
    objects (`overlap.analysis.overlap.classify`): compared once per distinct object, not per
    row."""
    few = few_objects(values) if len(values) > 8 else None
    if few is None:
        return {label: (values == label).astype(np.int64) for label in labels}
    code, heads = few
    head_values = values[heads].tolist()
    out = {}
    for label in labels:
        hit = [v == label for v in head_values]
        # a label no row (or every row) holds: one value, read-only, no column of rows (the
        # classes of a capture that hides every copy: two of three are all 0)
        out[label] = repeated(len(values), int(hit[0]), np.int64) if hit.count(hit[0]) == \
            len(hit) else np.array(hit, np.int64)[code]
    return out


def group_sums(t: Columns, by: list[str], cols: dict[str, np.ndarray],
               sort: bool) -> Columns:
    """Exact int64 sums of `cols` per group of the key columns `by` (a missing key is a key of
    its own), as `t.groupby(by, sort=sort, dropna=False).sum()` gives them: groups in key order
    with `sort` (missing keys last), else in order of first appearance. Returns the key
    columns (each group's first row's values) and the sums, one row per group.

    Why not pandas' groupby: on a capture where every copy is its own op (tens of thousands of
    groups) its per-aggregation overhead was most of the analysis' time."""
    n = len(t[by[0]])
    if not n:
        return {**{k: t[k][:0] for k in by}, **{c: np.zeros(0, np.int64) for c in cols}}
    # Unsorted, the last key is numbered first: where it alone tells every row apart (the
    # op of a capture where every copy is its own op), every row is its own group, in row
    # order (as below), and the other keys are not numbered (~0.8 ms of 36k rows).
    coded: dict[int, tuple[np.ndarray, int]] = {}
    for i in ([len(by) - 1, *range(len(by) - 1)] if not sort else range(len(by))):
        c, u = key_codes(t[by[i]], sort=sort)
        m = len(u)
        if len(c) and c.min() < 0:
            # missing keys: a key of their own, after every value (pandas' use_na_sentinel=
            # False numbers them by first row unsorted: the same groups, in the same order
            # after the dense numbering below)
            c = np.where(c < 0, m, c)
            m += 1
        if not sort and m == n:  # n rows, n distinct codes
            return {**{k: t[k] for k in by}, **cols}
        coded[i] = (c, m)
    code = None
    for i in range(len(by)):
        c, m = coded.pop(i)  # (each key's codes let go once combined)
        if m == 1:  # one key for every row (a host file's host, its one device): no change
            continue
        # codes kept dense after each key, so they never overflow; numbering in key order
        # with `sort`, else by first row. The combined key is made in one array of its own,
        # the previous codes let go before it is numbered (no zeros times the first key's
        # count, no temporary product: 256k copies grouped by four keys, 4 MiB less on the
        # analysis' peak)
        if code is None:
            x = np.asarray(c, np.int64)  # (0 * m + c)
        else:
            x = code * m
            x += c
        del c
        code = None
        code = dense_codes(x, sort=sort)
        del x
    inv = np.zeros(n, np.int64) if code is None else code
    if int(inv.max()) == n - 1:
        # every row its own group (a capture where every copy is its own op regroups 36k
        # groups by op and direction): numbered by first appearance, the rows as they are;
        # in key order, the rows in the order of their codes (a permutation: its inverse is
        # what the stable sort below gives, without sorting, and each sum is the row's value)
        if not sort:
            return {**{k: t[k] for k in by}, **cols}
        order = np.empty(n, np.int64)
        order[inv] = np.arange(n)
        return {**{k: t[k][order] for k in by},
                **{col: np.asarray(v)[order] for col, v in cols.items()}}
    if n > 1 and bool((inv[1:] >= inv[:-1]).all()):
        # rows already in group order (one device's groups by (host, device)): the sort's
        # order is the rows' own, and no column is gathered
        starts = np.flatnonzero(np.r_[True, inv[1:] != inv[:-1]])
        out = {k: t[k][starts] for k in by}
        for col, v in cols.items():
            out[col] = np.add.reduceat(np.asarray(v), starts)
        return out
    if all(np.asarray(v).dtype.kind in "iu" for v in cols.values()):
        # Integer sums without sorting the rows: each row added into its group's sum in row
        # order (`np.add.at`: exact, the int64 wrap-around of the sorted `reduceat` below);
        # each group's first row its least row. A stable sort of the codes was most of this
        # (~1.5 ms of the TPU 1M file's 52k copies, 16 groups), and a gather per column.
        g = int(inv.max()) + 1  # (dense codes)
        first = np.full(g, n, np.int64)
        np.minimum.at(first, inv, np.arange(n))
        out = {k: t[k][first] for k in by}
        sizes = None
        for col, v in cols.items():
            v = np.asarray(v)
            out[col] = s = np.zeros(g, v.dtype)
            if v.dtype == np.int64 and is_repeated(v):
                # one value in every row (`arrays.repeated`: a count, a class no copy has):
                # each group's size times it (int64, the same wrap-around as adding it)
                if v[0]:
                    sizes = np.bincount(inv, minlength=g) if sizes is None else sizes
                    np.multiply(sizes, v[0], out=s)
            elif v.any():  # (a column of zeros sums to zeros: a cause no copy has)
                np.add.at(s, inv, v)
        return out
    order = np.argsort(inv, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(inv[order]) != 0])
    first = order[starts]  # each group's first row
    # with `sort` the codes follow the keys; else first appearance (each group's first row
    # rises with its code)
    out = {k: t[k][first] for k in by}
    for col, v in cols.items():
        out[col] = np.add.reduceat(v[order], starts)
    return out


def pair_codes(mods: np.ndarray, pids: np.ndarray) -> tuple[np.ndarray, list[tuple[Any, Any]]]:
    """Per row the number of its (module, program id) pair, and the pairs by number (each
    value as `arrays.factorize` keeps it; a missing one None): the programs of a table's
    copies (`overlap.analysis.names`, `first_use`). A few pairs: one sort of one int64 key
    per row, no Python step per copy. Both columns one value each (`arrays.repeated`: a
    line's copies outside any program): one pair, its code 0 a `repeated` column (a million
    copies' codes and keys were ~40 MB on the report's peak)."""
    if is_repeated(mods) and is_repeated(pids):
        code1, pairs = pair_codes(mods[:1], pids[:1])
        return repeated(len(mods), code1[0], np.intp), pairs
    mc, mu = factorize(mods)
    pc, pu = factorize(pids)
    w = len(pu) + 1
    key = (mc + 1) * w + (pc + 1)
    uniq = sorted_unique(key)
    code = np.searchsorted(uniq, key) if len(uniq) > 1 else np.zeros(len(key), np.intp)
    pairs = [(mu[a - 1] if a >= 1 else None, pu[b - 1] if b >= 1 else None)
             for a, b in zip((uniq // w).tolist(), (uniq % w).tolist())]
    return code, pairs


@memo.per_trace("copy_pairs", lambda v: (v[0], list(v[1])))
def copy_pairs(trace: Any) -> tuple[np.ndarray, list[tuple[Any, Any]]]:
    """`pair_codes` of the trace's transfers' (`hlo_module`, `program_id`) columns, numbered
    once per trace: the programs read for the report (`names.programs_of`), the per-name
    section and the first-use section each asked for the same numbers (~0.2 ms of 36k copies
    a time). The codes are shared: read them, never write to them."""
    tr = trace.columns("transfers")
    return pair_codes(np.asarray(tr["hlo_module"], dtype=object),
                      np.asarray(tr["program_id"], dtype=object))


def sorted_codes(col: Any) -> np.ndarray:
    """`pd.factorize(col, sort=True)[0]`: each value's rank among the distinct values, -1 for a
    missing one. All-string columns are ranked as fixed-width numpy strings (the same code-point
    order as Python's, sorted in C: twice as fast on 36k op names) unless a value holds a NUL,
    which numpy's strings drop at the end."""
    vals = np.asarray(col, dtype=object)
    if len(vals):
        as_list = vals.tolist()
        if set(map(type, as_list)) == {str} and "\0" not in "".join(as_list):
            return np.unique(np.array(as_list, dtype=str), return_inverse=True)[1].reshape(-1)
    return factorize(vals, sort=True)[0]


def frame_of(cols: Columns) -> pd.DataFrame:
    """A DataFrame of numpy columns, object columns kept as object, as the reader's tables
    are (pandas 3 would infer a string dtype, converting every name: 10 ms per 36k-row
    table and groups frame on the many-ops capture, and back again for every factorize)."""
    import pandas as pd  # for the callers that want a frame; the analysis itself never does

    return pd.DataFrame({k: pd.Series(v, dtype=object, copy=False) if v.dtype == object else v
                         for k, v in cols.items()}, copy=False)

