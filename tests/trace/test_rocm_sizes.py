"""ROCm HIP calls' byte counts (`vendors.hip_sizes`) and correlation ids
(`vendors.correlation_ids`), read where their bytes lie (the scanner's `memcpy_details_at`
with the first `size` token) or through objects (upb, a value the bytes do not answer): one
answer, each copy's `_details_size` of the details its call carries. SYNTHETIC traces whose
answers are known by construction.
"""

from __future__ import annotations

import numpy as np
import pytest

from overlap.trace import read_trace, vendors, wire
from overlap.trace.synthetic import Ref, SyntheticTrace

US = 1_000_000
# Every form a call's details take: refs (the collector's) and text, the first `size` token
# not the last, a size of 0 (unknown), a size past 2**53, non-ASCII, bytes, a number.
DETAILS = [
    lambda i: Ref(f"kind:Unknown size:{4096 + i} dest:512 async:1"),
    lambda i: f"kind:Unknown size:{i + 1} dest:0 async:1",
    lambda i: Ref(f"size:{i + 5} size:9"),
    lambda i: "size:0 size:9",
    lambda i: Ref(f"size:\u00e9{i} size:3"),
    lambda i: b"size:7",
    lambda i: 5,
    lambda i: Ref("kind:Unknown size:0 dest:512"),
    lambda i: "size:9007199254740992",
    lambda i: Ref(f"size:{i}x size:{i + 2}"),
    lambda i: Ref(f"size:{2 ** 53 - 1 - i}"),
]


def _trace(n: int) -> tuple[SyntheticTrace, list]:
    st = SyntheticTrace()
    g = st.rocm(0)
    values = []
    for i in range(n):
        t0 = 10 * US + i * 4 * US
        g.kernel(t0, 2 * US)
        corr = g._rocm_kernel("__amd_rocclr_copyBuffer.kd", t0 + US, US, 17)
        v = DETAILS[i % len(DETAILS)](i)
        g._hip_call("hipMemcpyDtoHAsync", t0 + US, corr, {"memcpy_details": v})
        values.append(v.text if isinstance(v, Ref) else v)
    return st, values


@pytest.mark.parametrize("n", [3, 70, 300])
@pytest.mark.parametrize("scanner,long_lines", [(True, False), (False, False), (True, True)])
def test_each_copy_has_its_calls_first_size(tmp_path, monkeypatch, n, scanner, long_lines):
    st, values = _trace(n)
    path = st.write(tmp_path / "rocm.xplane.pb")
    if long_lines:  # (lines past `_GROUP_MAX_EVENTS` keep their stats as records: objects)
        from overlap.trace import host
        monkeypatch.setattr(host, "_GROUP_MAX_EVENTS", 2)
    if not scanner:
        monkeypatch.setattr(wire, "SCANNER", None)
    elif not long_lines and getattr(wire.SCANNER, "memcpy_details_at", None):
        # the bytes path: no column of the details as objects (`_details_sizes`) is made
        def refuse(values):
            raise AssertionError("details read as objects")
        monkeypatch.setattr(vendors, "_details_sizes", refuse)
    tr = read_trace(path).transfers.sort_values("start_ps")
    want = [vendors._details_size(v) for v in values]
    assert len(tr) == n
    assert tr["bytes"].tolist() == [w or 0 for w in want]
    assert tr["bytes_known"].tolist() == [w is not None for w in want]
    if n > 8:  # (the forms answered: the first size, not the last; none past 2**53)
        assert want[2] == 7 and want[3] is None and want[8] is None


def test_correlation_ids_are_typed_and_join_as_their_values(tmp_path):
    """Ids from 0 to 2**64 - 1, shared, missing: each copy joins the first call of its id."""
    st = SyntheticTrace()
    g = st.rocm(0)
    ids = [0, 7, 2**63, 2**64 - 1, 7]
    for i, cid in enumerate(ids):
        t0 = 10 * US + i * 4 * US
        g._correlation = cid - 1  # (`_rocm_kernel` numbers from the next one)
        corr = g._rocm_kernel("__amd_rocclr_copyBuffer.kd", t0, US, 17)
        assert corr == cid
        api = "hipMemcpyDtoHAsync" if i < 3 else "hipMemcpyHtoDAsync"
        g._hip_call(api, t0, corr, {"memcpy_details": Ref(f"size:{100 + i}")})
    tr = read_trace(st.write(tmp_path / "ids.xplane.pb")).transfers.sort_values("start_ps")
    # the second id-7 copy joins the first id-7 call (D2H, 101 bytes), as pandas' left join
    # after `drop_duplicates` did
    assert tr["direction"].tolist() == ["D2H", "D2H", "D2H", "H2D", "D2H"]
    assert tr["bytes"].tolist() == [100, 101, 102, 103, 101]
    codes, n = vendors._id_codes(np.array([5, 0, 5, 2**64 - 1, 0], np.uint64),
                                 np.array([True, False, True, True, True]))
    assert codes.tolist()[1] == -1 and codes[0] == codes[2] != codes[3] != codes[4] >= 0
    assert n == 3

