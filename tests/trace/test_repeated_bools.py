"""A "bool" column of one value in every row (`arrays.repeated`, stride 0) is answered once
(`tables._bools`): the same bools as the same column written out row by row, for every kind
of value a reader's column can hold (missing ones take the column's default)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from overlap.arrays import repeated
from overlap.trace import tables

VALUES = [True, False, None, 0, 1, np.True_, np.False_, math.nan, pd.NA, "yes", "", 2, 0.0]


@pytest.mark.parametrize("value", VALUES, ids=repr)
@pytest.mark.parametrize("default", [True, False])
@pytest.mark.parametrize("n", [2, 3, 1000])
def test_repeated_bools_equal_rows_written_out(value, default, n):
    one = repeated(n, value, object)
    assert one.strides == (0,)  # (what the shortcut is for)
    rows = np.empty(n, object)
    rows[:] = [value] * n
    try:
        want = tables._bools(rows, default)
    except Exception as e:  # noqa: BLE001 - whatever the rows raise, one value raises too
        with pytest.raises(type(e)):
            tables._bools(one, default)
        return
    got = tables._bools(one, default)
    assert got.dtype == want.dtype == bool
    assert got.tolist() == want.tolist()
    assert got.flags.writeable
