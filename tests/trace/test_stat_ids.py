"""`Plane.stat_ids` (made when first asked, one `zip` where no name repeats) is the mapping
it was: stat name -> every id of that name, in `stat_names` order, names in order of first
appearance."""

from __future__ import annotations

from collections import defaultdict

from hypothesis import given, settings
from hypothesis import strategies as st

from overlap.trace import wire


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.integers(-5, 10**6), st.sampled_from(["a", "b", "hlo_op", "", "é"]),
                       max_size=12) | st.dictionaries(st.integers(0, 100), st.text(max_size=3),
                                                      max_size=30))
def test_stat_ids_as_lists_per_name(names):
    want: dict[str, list[int]] = defaultdict(list)
    for k, n in names.items():
        want[n].append(k)
    got = wire._StatIds(names)
    assert list(got) == list(want) and len(got) == len(want)
    for n, ids in want.items():
        assert got.get(n) == ids and got[n] == ids and n in got
    assert got.get("missing") is None and got.get("missing", ()) == ()
    assert "missing" not in got
