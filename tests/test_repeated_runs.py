"""Runs of one object in a `repeated` column (stride 0: a reader's host or device name, None)
are found without reading any address (issue 32 round 8): `run_starts` and `object_runs` give
what they give for the same values held in an ordinary array."""

from __future__ import annotations

import numpy as np
import pytest

from overlap.arrays import object_runs, repeated, run_starts


@pytest.mark.parametrize("value", ["GPU:0", None, 3, ("a", 1), float("nan")])
@pytest.mark.parametrize("n", [1, 2, 5, 70_000])
def test_runs_of_a_repeated_column_are_those_of_its_copy(value, n):
    r = repeated(n, value)
    full = np.empty(n, object)
    full[:] = [value] * n  # the same object in every row, each row its own slot
    assert run_starts(r).tolist() == run_starts(full).tolist() == [0]
    assert object_runs(r).tolist() == object_runs(full).tolist() == [0]
    assert run_starts(r, by_value=False).tolist() == [0]


def test_a_slice_of_a_repeated_column_and_an_ordinary_one_differ_where_objects_do():
    v = np.array(["a", "a", "b", "b", "a"], object)
    assert run_starts(v).tolist() == [0, 2, 4]
    assert object_runs(repeated(4, "x")[1:]).tolist() == [0]
