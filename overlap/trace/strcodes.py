"""`str_codes`: `arrays.factorize` of a column of strings (op names) by the compiled scanner.

Why: the analysis groups transfers by HLO op several times (`by_hlo_op`, the per-name and
first-use sections), and a capture where every copy is its own op has tens of thousands of
distinct names: the dict pass of `arrays.factorize` cost 6-10 ms per grouping there, the
scanner's table 0.5-1.5 ms. Same codes and uniques (first appearance, or sorted); None where
a value is not a `str`, where the scanner was not built, or with `OVERLAP_SCANNER=0`
(`wire.SCANNER`): the caller factorizes as before.
"""

from __future__ import annotations

import numpy as np


def str_codes(values: np.ndarray, sort: bool) -> tuple[np.ndarray, np.ndarray] | None:
    """(codes int64, uniques as an object array) of the object column `values`, each value a
    `str`, as `arrays.factorize(values, sort)` gives them; else None."""
    from overlap.trace import wire  # (here: the analysis alone need not load the reader)

    fn = getattr(wire.SCANNER, "str_codes", None)  # (an older build has none)
    if fn is None:
        return None
    got = fn(np.asarray(values, dtype=object).reshape(-1).tolist(), sort)
    if got is None:
        return None
    codes, uniq = got
    out = np.empty(len(uniq), object)
    out[:] = uniq
    return codes, out
