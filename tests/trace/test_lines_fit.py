"""The up-front memory check counts a capture's timeline lines (`files.check_lines_fit`): a
file of a million one-event lines needed ~0.9 KiB per line (959 MiB for 36 MB, fuzz round 3)
where the size-only estimate said 4x the file. Synthetic captures, labelled so."""

from __future__ import annotations

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
