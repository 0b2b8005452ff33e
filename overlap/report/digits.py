"""Rows of one JSON layout whose varying values are all ints >= 0, written with numpy.

The JSON writer (`overlap.report.text`) writes a host's step rows from the columns they were
made from: constant text where a column holds one value, and each varying value's text in
between. On a capture's step rows only the step number and the two times vary (3,000
many-ops rows: 9,000 ints, one `repr` each, then a join of ~20 pieces per row: ~16M
instructions). Here the rows are written into one byte buffer a run of rows at a time: a
run is rows whose values have the same number of digits in every column, so its rows have
one layout and are one 2-d block: the row's constant bytes copied into every row at once,
then each column's digits (`value // 10**k % 10`) into its place (many-ops: ~1M
instructions). The text is what `repr` gives each int (decimal digits, no sign, no leading
zero) between the same constants: the same characters as the caller's join.

Only where the rows fall into few runs (values ascend, as step numbers and step times do):
`runs` says how many; the caller writes other rows its own way.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

# 10 .. 10**18: a value >= 0 has 1 + (how many of these it reaches) digits
_TENS = 10 ** np.arange(1, 19, dtype=np.int64)
# 10**18 .. 1: a value of d digits is `value // _PLACES[19 - d:] % 10`, most significant first
_PLACES = 10 ** np.arange(18, -1, -1, dtype=np.int64)


def digit_counts(values: np.ndarray) -> np.ndarray:
    """How many decimal digits each int64 value >= 0 has (`len(repr(v))`)."""
    return np.searchsorted(_TENS, values, side="right") + 1


def runs(counts: Sequence[np.ndarray]) -> np.ndarray:
    """The rows (ascending, 0 first) where a run starts: where any column's digit count
    differs from the row before."""
    n = len(counts[0])
    start = np.zeros(n, bool)
    if n:
        start[0] = True
    for c in counts:
        start[1:] |= c[1:] != c[:-1]
    return np.flatnonzero(start)


def rows_text(pieces: Sequence[str], columns: Sequence[np.ndarray],
              counts: Sequence[np.ndarray], starts: np.ndarray, n: int, inner: str,
              batch: int) -> Iterator[str]:
    """`n` rows, each `pieces[0]` + column 0's value + `pieces[1]` + ... + `pieces[-1]`
    (ASCII pieces, one more than columns; int64 columns of values >= 0 with their
    `digit_counts` and `runs`), in texts of up to `batch` rows: each `inner` + its rows
    joined by `,\\n` + `inner`."""
    const = [p.encode("ascii") for p in pieces]
    sep = (",\n" + inner).encode("ascii")
    head = inner.encode("ascii")
    fixed = sum(map(len, const)) + len(sep)
    # where the runs and the batches start (not `np.union1d`: `np.unique` imports numpy.ma)
    cuts = sorted({*starts.tolist(), *range(0, n, batch)}) + [n]
    at_cut = 0
    places = _PLACES.view(np.uint64)
    ten, zero = np.uint64(10), np.uint64(48)
    for lo in range(0, n, batch):
        hi = min(lo + batch, n)
        size = len(head) + fixed * (hi - lo) + sum(int(c[lo:hi].sum()) for c in counts)
        out = np.empty(size, np.uint8)
        out[:len(head)] = np.frombuffer(head, np.uint8)
        pos = len(head)
        while cuts[at_cut] < hi:
            s, e = cuts[at_cut], cuts[at_cut + 1]
            at_cut += 1
            digits = [int(c[s]) for c in counts]
            row = b"".join(p + b"0" * d for p, d in zip(const, digits)) + const[-1] + sep
            block = out[pos:pos + (e - s) * len(row)].reshape(e - s, len(row))
            block[:] = np.frombuffer(row, np.uint8)  # the run's constant bytes, every row
            place = len(const[0])
            for col, d, p in zip(columns, digits, const[1:]):
                # v // 10**k for the d places, most significant first (one division pass;
                # as uint64: the values are >= 0); each digit is that less 10 times the one
                # before it. A place per row of `q`: every pass runs along the run's rows.
                q = col[s:e].view(np.uint64) // places[19 - d:, None]
                q[1:] -= q[:-1] * ten
                q += zero
                block[:, place:place + d] = q.T
                place += d + len(p)
            pos += (e - s) * len(row)
        yield str(out.data[:pos - len(sep)], "ascii")
