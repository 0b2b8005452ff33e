"""`strcodes.str_codes(..., copy=False)` (issue 32 round 11: `_fewest_tied` reads the op
codes kept for the column, no copy of 36k codes and names): the kept answer itself,
read-only, equal to `arrays.factorize`'s; the default still hands out the caller's own
writable copies, and writing to them changes no later answer."""

from __future__ import annotations

import numpy as np
import pytest

from overlap import arrays
from overlap.trace import strcodes, wire

pytestmark = pytest.mark.skipif(getattr(wire.SCANNER, "str_codes", None) is None,
                                reason="the scanner was not built")


@pytest.mark.parametrize("sort", [False, True])
@pytest.mark.parametrize("distinct", [False, True])
def test_kept_answer_is_read_only_and_right(sort, distinct):
    names = [f"copy-start.{i if distinct else (i * 7) % 13}" for i in range(200)]
    col = np.empty(len(names), object)
    col[:] = names
    want = arrays._factorize_objects(col, sort)
    codes, uniq = strcodes.str_codes(col, sort, copy=False)
    assert not codes.flags.writeable and not uniq.flags.writeable
    assert codes.tolist() == want[0].tolist() and uniq.tolist() == want[1].tolist()
    with pytest.raises(ValueError):
        codes[0] = 5
    again = strcodes.str_codes(col.copy(), sort, copy=False)  # the same objects, another array
    assert again[0] is codes and again[1] is uniq
    mine = strcodes.str_codes(col, sort)
    assert mine[0] is not codes and mine[0].flags.writeable and mine[1].flags.writeable
    mine[0][:] = -1
    mine[1][:] = "x"
    later = strcodes.str_codes(col, sort)
    assert later[0].tolist() == want[0].tolist() and later[1].tolist() == want[1].tolist()


def test_most_exposed_ops_reads_them_unchanged():
    """`by_hlo_op` where every op is its own and all tie at zero exposed (the many-ops shape):
    the kept codes of the op column are read, and the answer is the plain rule's (the
    `top` smallest op names)."""
    from overlap.analysis.group_records import most_exposed_ops

    n = 5000
    ops = np.empty(n, object)
    ops[:] = [f"copy-start.{(i * 7919) % n}" for i in range(n)]
    groups = {"hlo_op": ops, "direction": np.array(["D2H", "H2D"] * (n // 2), object)}
    for c in ("count", "bytes", "span_ps", "hidden_ps", "duration_ps", "hidden", "partial",
              "exposed", "zero_length", "pageable_transfers", "pageable_bytes",
              "unknown_bytes"):
        groups[c] = np.ones(n, np.int64) if c in ("count", "span_ps", "hidden_ps") \
            else np.zeros(n, np.int64)
    from overlap.analysis import causes

    for c in causes.CAUSE_COLUMNS:
        groups[c] = np.zeros(n, np.int64)
    strcodes.str_codes(ops, False)  # (kept, as group_transfers leaves it)
    got = [r["hlo_op"] for r in most_exposed_ops(groups, 20, one_device=True)["records"]]
    assert got == sorted(ops.tolist())[:20]


class _StrSub(str):
    """(a str subclass: `str_codes` answers None, the caller factorizes)"""


@pytest.mark.parametrize("sort", [False, True])
@pytest.mark.parametrize("distinct, rows", [(1, 10), (7, 8), (8, 9), (9, 1000), (16, 320),
                                            (100, 5000), (5000, 5000), (3000, 20000)])
def test_the_table_grows_with_the_distinct_keys(sort, distinct, rows):
    """The scanner's table starts small and grows as distinct keys come (round 40: it was
    sized for every row to be distinct): any number of keys, in any order, equal keys as
    distinct objects among them, numbers as `arrays.factorize` gives them."""
    rng = np.random.default_rng(distinct * 31 + rows)
    pick = rng.integers(0, distinct, rows)
    pick[:distinct] = rng.permutation(distinct)[:min(distinct, rows)]
    # each row its own str object (equal keys compared by `==`, not identity)
    keys = ["".join(["op.", str(int(k))]) for k in pick]
    got = wire.SCANNER.str_codes(keys, sort)
    col = np.empty(rows, object)
    col[:] = keys
    want = arrays._factorize_objects(col, sort)
    assert got[0].dtype == np.int64
    assert got[0].tolist() == want[0].tolist() and list(got[1]) == want[1].tolist()
    keys[-1] = _StrSub(keys[-1])
    assert wire.SCANNER.str_codes(keys, sort) is None
