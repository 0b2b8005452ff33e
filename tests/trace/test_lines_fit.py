"""The up-front memory check counts a capture's timeline lines (`files.check_lines_fit`): a
file of a million one-event lines needed ~0.9 KiB per line (959 MiB for 36 MB, fuzz round 3)
where the size-only estimate said 4x the file. Synthetic captures, labelled so."""

from __future__ import annotations

import numpy as np
import pytest

from overlap.errors import InputError
from overlap.trace import files, read_trace
from overlap.trace.protos import XSpace


def _many_lines(path, n: int):
    sp = XSpace()
    pl = sp.planes.add(id=1, name="/device:GPU:0")
    md = pl.event_metadata[1]
    md.id, md.name = 1, "kernel_x"
    for i in range(n):
        ln = pl.lines.add(id=i, name=f"Stream #{i}", timestamp_ns=1000)
        ln.events.add(metadata_id=1, offset_ps=i * 10, duration_ps=5)
    sp.planes.add(id=2, name="/host:CPU")
    path.write_bytes(sp.SerializeToString())
    return path


@pytest.mark.parametrize("scanner", ["1", "0"])
def test_a_capture_of_many_lines_is_refused_before_it_is_read(tmp_path, monkeypatch, scanner):
    monkeypatch.setenv("OVERLAP_SCANNER", scanner)
    f = _many_lines(tmp_path / "lines.xplane.pb", 2000)
    size = f.stat().st_size
    # room for 4x the file, not for 2000 lines at _BYTES_PER_LINE each
    monkeypatch.setattr(files, "_available_memory", lambda: 4 * size + 1000 * files._BYTES_PER_LINE)
    with pytest.raises(InputError, match="2000 timeline lines"):
        read_trace(f)
    monkeypatch.setattr(files, "_available_memory", lambda: 4 * size + 3000 * files._BYTES_PER_LINE)
    t = read_trace(f)
    assert t.rows("lines") >= 2000


def test_unknown_events_of_many_lines_are_one_entry(tmp_path):
    """2000 lines of one unread event each: one "cannot tell" entry naming how many lines, not
    2000 (each was a dict and a sentence)."""
    from overlap.analysis.overlap import analyze

    r = analyze(read_trace(_many_lines(tmp_path / "lines.xplane.pb", 2000)))
    (u,) = r["transfer_status"]["unknown"]
    assert u["events"] == 2000 and "on 2000 lines (Stream #0, ...)" in u["reason"]


def test_a_scanned_line_keeps_its_payload_as_two_ints(tmp_path):
    """A scanned line holds its payload's start and end as ints, made arrays when read
    (two one-element arrays per line were half the read's memory on 100k one-event lines);
    a segment of lines and the check of unread lines see the same offsets as before."""
    from overlap.trace import wire

    if wire.SCANNER is None:
        pytest.skip("the scanner was not built")
    f = _many_lines(tmp_path / "lines.xplane.pb", 50)
    raw = f.read_bytes()
    _, planes, _ = wire.parse_space(wire.padded(raw), len(raw))
    lines = planes[0].lines
    assert len(lines) == 50 and all(type(ln._s) is int and type(ln._e) is int for ln in lines)
    starts = np.concatenate([ln.pay_s for ln in lines])
    ends = np.concatenate([ln.pay_e for ln in lines])
    assert starts.dtype == np.int64 and (ends > starts).all() and (starts[1:] > ends[:-1]).all()
    seg = wire.merge_lines(lines)
    assert (seg.pay_s == starts).all() and (seg.pay_e == ends).all()
    # a segment of segments: arrays and ints side by side
    mixed = wire.merge_lines([seg, lines[0]])
    assert (mixed.pay_s == np.concatenate([starts, starts[:1]])).all()
    wire.check_lines(planes[0])
    assert all(ln.decoded for ln in lines)
