"""The "cannot tell" entries of many small planes (issue 32, round 26): the reader writes each
one starting with its host, as the analysis' result has them, and the result keeps those
dicts instead of a copy of each; equal reasons are one text. The entries themselves are what
they were: the analysis' and `inspect`'s lists equal `{"host": h, **u}` of the hostless
entries `vendors` gives (tests/trace/test_other_unknowns.py holds those to their
definition). Inputs are SYNTHETIC, written here."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from overlap.analysis.overlap import _vendor_facts
from overlap.trace import vendors
from overlap.trace.reader import read_host_file
from overlap.trace.values import object_array


def _tiny_planes(path, n: int, odd_every: int = 3):
    """`n` GPU planes of one line of one event that no rule reads (`kernel_x`), every
    `odd_every`-th on a stream line of an odd kind (another reason), marked SYNTHETIC."""
    from overlap.trace.synthetic import tiny_planes

    path.write_bytes(tiny_planes(n, odd_every))
    return path


def test_entries_start_with_their_host_and_share_equal_reasons(tmp_path):
    part = read_host_file(_tiny_planes(tmp_path / "tiny.xplane.pb", 60))
    entries = part["capture"]["transfer_unknowns"]
    assert len(entries) == 60
    assert all(list(u) == ["host", "device", "events", "reason"] and u["host"] == part["host"]
               for u in entries)
    by_text: dict[str, object] = {}
    for u in entries:
        assert by_text.setdefault(u["reason"], u["reason"]) is u["reason"]
    assert len(by_text) == 2  # (two reasons: the odd stream kind and the plain stream)
    assert {u["device"] for u in entries} == {f"GPU:{d}" for d in range(60)}


def test_result_keeps_the_readers_entries_and_copies_others():
    """`_vendor_facts` keeps an entry that starts with its host (the same dict) and writes
    any other (a hand-made capture's, another host's) as `{"host": h, **u}`, in order."""
    mine = {"host": "a", "device": "GPU:0", "events": 1, "reason": "r"}
    bare = {"device": "GPU:1", "events": 2, "reason": "s"}
    other = {"host": "z", "device": "GPU:2", "events": 3, "reason": "t"}
    trace = SimpleNamespace(backend="gpu", capture={
        "a": {"backend": "gpu", "vendors": {"GPU:0": "NVIDIA"},
              "transfer_unknowns": [mine, bare, other]}})
    got = _vendor_facts(trace)["unknowns"]
    assert got[0] is mine
    assert got == [mine, {"host": "a", **bare}, {"host": "a", **other}]
    assert list(got[1]) == ["host", "device", "events", "reason"]


def test_hosted_entries_equal_the_hostless_ones():
    """`_other_event_unknowns(host=)` and `shape_unknowns(host=)`: the same entries as without
    a host, each with the host in front; a name's repr in the reason follows its own type."""
    rng = np.random.default_rng(3)
    n = 400
    lines = object_array([f"Stream #{i % 7}" + ("(Odd)" if i % 5 == 0 else "")
                          for i in rng.integers(0, 40, n)])
    names = object_array([("k%d" % i) if i % 4 else np.str_("k%d" % i)
                          for i in rng.integers(0, 9, n)])
    other = {"device": object_array([f"GPU:{i}" for i in rng.integers(0, 3, n)]),
             "line": lines, "name": names}
    plain = vendors._other_event_unknowns(other)
    hosted = vendors._other_event_unknowns(other, host="hx")
    assert hosted == [{"host": "hx", **u} for u in plain]
    assert [list(u) for u in hosted] == [["host", "device", "events", "reason"]] * len(plain)
    side = vendors.GpuSide()
    assert vendors.shape_unknowns(side, {"GPU:0": ("acme", 3)}, [("/device:X:0", 2)],
                                  "hy") == [
        {"host": "hy", **u}
        for u in vendors.shape_unknowns(side, {"GPU:0": ("acme", 3)}, [("/device:X:0", 2)])]
