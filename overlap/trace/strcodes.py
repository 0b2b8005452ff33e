"""`str_codes`: `arrays.factorize` of a column of strings (op names) by the compiled scanner.

Why: the analysis groups transfers by HLO op several times (`by_hlo_op`, the per-name and
first-use sections), and a capture where every copy is its own op has tens of thousands of
distinct names: the dict pass of `arrays.factorize` cost 6-10 ms per grouping there, the
scanner's table 0.5-1.5 ms. Same codes and uniques (first appearance, or sorted); None where
a value is not a `str`, where the scanner was not built, or with `OVERLAP_SCANNER=0`
(`wire.SCANNER`): the caller factorizes as before.

A column is coded once: the many-ops report groups the same 36k-row `hlo_op` column three
times (by op, the transfer groups sorted, first use), 1-2 ms a time. The last few columns'
answers are kept (`arrays.SeenColumns`): a column holding the same objects at the same
rows gets them again, as copies. A new column, or one changed in place, is coded afresh.
"""

from __future__ import annotations

import numpy as np

from overlap.arrays import SeenColumns

Codes = tuple[np.ndarray, np.ndarray]

# the codes of the last two columns, by `sort` (the many-ops report codes one column repeatedly)
_seen = SeenColumns(2)


def str_codes(values: np.ndarray, sort: bool, copy: bool = True,
              keep: bool = True) -> Codes | None:
    """(codes int64, uniques as an object array) of the object column `values`, each value a
    `str`, as `arrays.factorize(values, sort)` gives them; else None. The caller's own
    arrays, or with `copy=False` the kept ones themselves, read-only (a caller that only
    reads them: no copy of 36k codes and names). `keep=False`: a column coded once, neither
    looked up among the kept answers nor kept (a million line names held to the next
    coding for nothing)."""
    from overlap.trace import wire  # (here: the analysis alone need not load the reader)

    fn = getattr(wire.SCANNER, "str_codes", None)  # (an older build has none)
    if fn is None:
        return None
    col = np.asarray(values, dtype=object).reshape(-1)
    kept = _seen.get(col, sort) if keep else None
    if kept is None:
        got = fn(col.tolist(), sort)
        if got is None:
            return None
        codes, uniq = got
        if len(uniq) == len(col):
            # every row its own value (a capture where every copy is its own op): the
            # uniques are the rows' objects, in row order or placed at their ranks, not a
            # new array filled from the scanner's list (~0.4 ms of 36k names)
            out = col.copy() if not sort else np.empty(len(col), object)
            if sort:
                out[codes] = col
        else:
            out = np.fromiter(uniq, object, len(uniq))  # (`out[:] = uniq`: ~1.5x as long)
        codes.flags.writeable = out.flags.writeable = False  # (kept: handed out as copies)
        kept = (codes, out)
        # (unsorted and every row its own value, the uniques are the column's objects in its
        # rows: they stand for the column, no second copy of it)
        if keep:
            _seen.put(col, sort, kept,
                      hold=out if not sort and len(uniq) == len(col) else None)
    codes, uniq = kept
    if not copy:
        return codes, uniq
    return codes.copy(), uniq.copy()  # (callers may write to what they get)
