"""The up-front memory check counts a capture's timeline lines (`files.check_lines_fit`): a
file of a million one-event lines needed ~0.9 KiB per line (959 MiB for 36 MB, fuzz round 3)
where the size-only estimate said 4x the file. Synthetic captures, labelled so."""

from __future__ import annotations

import numpy as np
import pytest

from overlap.errors import InputError
from overlap.trace import files, read_trace
from overlap.trace.synthetic import one_event_lines


def _many_lines(path, n: int):
    path.write_bytes(one_event_lines(n))
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


def test_scanned_lines_are_one_block_of_records(tmp_path):
    """The scanner writes every line of a parse as one record in one int64 block (id,
    display id, timestamp, duration, payload start and end, events) plus its name: no
    Python object per line (a `_Line`, a tuple and five ints were ~0.5 KiB a line, fuzz
    round 3). Planes are ranges of the block; a line read on its own is a view whose
    `decoded` flag is the block's; a segment of rows sees the same payloads."""
    from overlap.trace import lines as lines_mod
    from overlap.trace import wire

    if wire.SCANNER is None:
        pytest.skip("the scanner was not built")
    f = _many_lines(tmp_path / "lines.xplane.pb", 50)
    raw = f.read_bytes()
    _, planes, _ = wire.parse_space(wire.padded(raw), len(raw))
    t = planes[0].lines
    assert isinstance(t, lines_mod.LineTable) and planes[1].lines.block is t.block
    assert (t.a, t.b, len(planes[1].lines)) == (0, 50, 0)
    rec = t.block.rec
    assert rec[:].shape == (50, 7) and all(c.dtype == np.int64 for c in rec.cols)
    assert rec[t.a:t.b, lines_mod.ID].tolist() == list(range(50))
    assert t.block.names[t.a:t.b] == [f"Stream #{i}" for i in range(50)]
    assert t.n_events.tolist() == [1] * 50 and t.events() == 50
    starts, ends = rec[:, lines_mod.PAY_S], rec[:, lines_mod.PAY_E]
    assert (ends > starts).all() and (starts[1:] > ends[:-1]).all()
    ln = t.line(3)
    assert (ln.id, ln.name, ln.n_events, ln.timestamp_ns) == (3, "Stream #3", 1, 1000)
    assert type(ln._s) is int and (ln.pay_s == starts[3:4]).all()
    seg = lines_mod.merge_rows(t.block, np.arange(10, 20))
    assert (seg.pay_s == starts[10:20]).all() and (seg.pay_e == ends[10:20]).all()
    assert seg.n_events == 10 and not ln.decoded
    seg.parts[0].decoded = True  # what `LineEvents` does once the segment is decoded
    assert t.block.decoded[10:20].all() and not t.block.decoded[:10].any()
    ln.decoded = True
    assert t.block.decoded[3]
    wire.check_lines(*planes)  # the rest, in one pass over the block
    assert t.block.decoded.all() and all(x.decoded for x in t)


def test_many_planes_are_checked_in_one_pass(tmp_path, monkeypatch):
    """`check_lines` of many planes of one block calls the scanner once (100k small planes
    paid a call, and a numpy pass, each)."""
    from overlap.trace import wire
    from overlap.trace.synthetic import SyntheticTrace

    if wire.SCANNER is None:
        pytest.skip("the scanner was not built")
    t = SyntheticTrace()
    for d in range(30):
        t.gpu(d).kernel(10_000_000, 1_000_000)
    raw = t.to_bytes()
    _, planes, _ = wire.parse_space(wire.padded(raw), len(raw))
    calls = []
    real = wire.SCANNER.check_events

    class Counting:
        def __getattr__(self, name):
            return getattr(wire._scan, name)

        def check_events(self, *a):
            calls.append(len(a[1]))
            return real(*a)

    monkeypatch.setattr(wire, "SCANNER", Counting())
    wire.check_lines(*planes)
    gpu = [pv for pv in planes if pv.name.startswith("/device:GPU")]
    assert calls == [sum(len(pv.lines) for pv in gpu)] and len(gpu) == 30
