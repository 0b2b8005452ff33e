"""Twin TPU chips read as one (`tpu_chips`, issue 32 round 42: 4,096 small chips took 1.0 s of
a 1.35 s report, a quarter of a millisecond a chip) give what reading each chip by itself
gives: every table (columns, dtypes, values and their types), the capture's facts (events
dropped, strings replaced), and the same refusal of a damaged file. (Not always as the same
kind of array: a column of one object over one-row chunks, a chip's one copy each, is a
`repeated` view, and over a batch's chunk an array of that object.) Files are SYNTHETIC
(`SyntheticTrace`) but for the real v6e sample; batches are cut small (`BATCH_CHIPS`) so
that a file is several batches and a single chip."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from overlap.trace import tpu, tpu_chips
from overlap.trace.planeview import BAD_STRINGS
from overlap.trace.reader import read_host_file
from overlap.trace.synthetic import SyntheticTrace
from overlap.trace.tables import made
from overlap.trace.wire import TIME_LIMIT_PS

US = 1_000_000
SAMPLE = (Path(__file__).resolve().parents[2] / "sample_traces" / "tpu-v6e-offload" / "plugins"
          / "profile" / "test_xplanes" / "tpu_inference_2.xplane.pb")


def _chips(tmp_path: Path, kind: str, n: int = 11) -> Path:
    """SYNTHETIC: `n` chips of one program, each chip's ops written in the same order (so
    their metadata is the same bytes: twins), their events as `kind` says."""
    t = SyntheticTrace()
    for c in range(n):
        d = t.tpu(c, async_line=kind != "pairing")
        t0 = 10 * US + (c % 3) * US  # (chips 0, 3, 6, ... at the same times)
        # ("dropped_one": that chip's op of an impossible time, dropped and counted: its
        # events are then not the others')
        d.op(t0, TIME_LIMIT_PS + 1 if kind == "dropped_one" and c == 2 else 5 * US)
        if kind == "no_copies":
            d.op(t0 + 6 * US, 2 * US, name="fusion.2")
            continue
        # (on the chip's own clock: each chip's span its own, chips at the same times too)
        span = None if kind == "no_clock" or (kind == "some_clock" and c % 2) else \
            (t0 + US + 7 * c, t0 + 4 * US + 11 * c)
        d.async_copy("D2H", t0 + US, t0 + 4 * US, device_span=span)
        if kind == "pairing":
            d.async_copy("H2D", t0 + 2 * US, t0 + 3 * US, device_span=(t0, t0 + 3 * US))
            if c == 4:  # (a done before its start: not paired; its ops in another order)
                d.async_copy("H2D", t0 + 6 * US, t0 + 5 * US)
            else:
                d.async_copy("H2D", t0 + 5 * US, t0 + 6 * US)
        if kind == "more_events" and c == 5:
            d.op(t0 + 7 * US, US)  # (one more event of an op the others ran too)
        if kind == "other_op":  # (every chip's metadata has it; chip 5 alone runs it)
            text = "%fusion.9 = f32[8,128]{1,0} fusion(f32[8,128]{1,0} %p0), kind=kLoop"
            mid = d.w.event_id(text, "fusion.9", {})
            if c == 5:
                d.w.event(d.ops_line, mid, t0 + 7 * US, US)
        if kind == "dropped_all" or (kind == "dropped" and c == 2):
            d.op(t0 + 8 * US, TIME_LIMIT_PS + 1)  # (an impossible time: dropped, counted)
    return t.write(tmp_path / f"{kind}.xplane.pb")


def _read(path: Path, monkeypatch, as_one: bool, batch: int = 3) -> tuple[dict, int]:
    """The file's tables and facts, and how many batches were read as one."""
    read = []
    with monkeypatch.context() as m:
        m.setattr(tpu_chips, "BATCH_CHIPS", batch)
        if not as_one:
            m.setattr(tpu_chips, "run_end", lambda planes, i, twin_of: i + 1)
        real = tpu_chips.decode

        def counted(*a, **k):
            got = real(*a, **k)
            read.append(got is not None)
            return got

        m.setattr(tpu_chips, "decode", counted)
        return read_host_file(path), sum(read)


def _same(got: dict, want: dict) -> None:
    assert list(got) == list(want)
    for key, w in want.items():
        g = got[key]
        g, w = made(g), made(w)  # (the `lines` table, `Deferred`)
        if not hasattr(w, "keys") or key == "capture":
            assert g == w, key
            continue
        assert list(g) == list(w), key
        for col in w:
            a, b = np.asarray(g[col]), np.asarray(w[col])
            assert a.dtype == b.dtype, (key, col)
            assert [(type(x), x) for x in a.tolist()] == \
                [(type(x), x) for x in b.tolist()], (key, col)


@pytest.mark.parametrize("kind", ["clock", "no_clock", "some_clock", "pairing", "no_copies",
                                  "more_events", "dropped", "dropped_all"])
def test_twin_chips_read_as_one_give_each_chips_rows(tmp_path, monkeypatch, kind):
    p = _chips(tmp_path, kind)
    want, none = _read(p, monkeypatch, as_one=False)
    got, batches = _read(p, monkeypatch, as_one=True)
    assert none == 0 and batches == 4  # (11 chips: 3 + 3 + 3 + 2)
    _same(got, want)
    if kind.startswith("dropped"):  # (the chips' events are alike once it is dropped)
        assert want["capture"]["events_dropped_invalid"] == (11 if kind == "dropped_all" else 1)
    n_tr = len(want["transfers"]["device"])
    assert n_tr == {"no_copies": 0, "pairing": 32}.get(kind, 11)
    # (more than one batch of 256: every chip of the file in one go)
    got, batches = _read(p, monkeypatch, as_one=True, batch=256)
    assert batches == 1
    _same(got, want)


@pytest.mark.parametrize("kind", ["other_op", "dropped_one"])
def test_chips_whose_events_differ_are_read_one_at_a_time(tmp_path, monkeypatch, kind):
    """A batch whose chips' events are of other ops (one chip runs one more, or one's is
    dropped) is read chip by chip, as if it had never been decoded as one: the same dropped
    count."""
    p = _chips(tmp_path, kind)
    want, _ = _read(p, monkeypatch, as_one=False)
    got, batches = _read(p, monkeypatch, as_one=True)
    assert batches == 3  # (chips 0-2 or 3-5 differ: that batch alone read chip by chip)
    _same(got, want)
    if kind == "dropped_one":
        assert got["capture"]["events_dropped_invalid"] == 1


def test_replaced_strings_are_counted_once_a_chip(tmp_path, monkeypatch):
    """An op name of invalid UTF-8 in every chip: replaced and counted per chip, as each
    chip's read counts it (the per-op rules run once for a batch: `tpu._each`)."""
    raw = _chips(tmp_path, "clock").read_bytes()
    assert raw.count(b"fusion.1") >= 11
    p = tmp_path / "bad_utf8.xplane.pb"
    p.write_bytes(raw.replace(b"fusion.1", b"fusion\xff1"))
    want, _ = _read(p, monkeypatch, as_one=False)
    got, batches = _read(p, monkeypatch, as_one=True)
    assert batches == 4 and want["capture"]["strings_replaced"] >= 11
    _same(got, want)


def test_chips_asking_of_other_ops_count_their_strings_as_each_chip(tmp_path, monkeypatch):
    """Twin chips (the same metadata) whose events are of other ops: each chip's per-op
    rules ask of its own ops only, so an op of invalid UTF-8 that one chip ran is counted
    once, not once a chip of the batch (the batch is read chip by chip)."""
    t = SyntheticTrace()
    for c in range(4):
        d = t.tpu(c)
        d.op(10 * US, 5 * US)
        d.async_copy("D2H", 11 * US, 14 * US, device_span=(US, 4 * US))
        text = "%fusion.9 = f32[8,128]{1,0} fusion(f32[8,128]{1,0} %p0), kind=kLoop"
        mid = d.w.event_id(text, "fusion.9", {})  # (every chip's metadata has it)
        if c == 0:
            d.w.event(d.ops_line, mid, 20 * US, US)
    raw = t.to_bytes()
    p = tmp_path / "other_ops.xplane.pb"
    p.write_bytes(raw.replace(b"fusion.9", b"fusion\xff9"))
    want, _ = _read(p, monkeypatch, as_one=False, batch=4)
    got, batches = _read(p, monkeypatch, as_one=True, batch=4)
    assert batches == 0 and want["capture"]["strings_replaced"] >= 1
    _same(got, want)


@pytest.mark.parametrize("kind", ["some_clock", "other_op"])
def test_strings_a_rule_replaces_are_counted_once_a_chip_that_asks(tmp_path, monkeypatch,
                                                                     kind):
    """A per-op rule that replaces strings (upb's sanitizing of a plane's metadata: here two
    an op asked, as `test_tpu_twins` counts them) is counted once a chip that asks it: every
    chip for the compute ops' columns, the chips with the device clock for the join's
    names; where one chip runs an op the others do not, each chip's own ops."""
    real_cols, real_names = tpu._op_columns, tpu._join_names

    def op_columns(P, ops):
        BAD_STRINGS[0] += 2 * len(ops)
        return real_cols(P, ops)

    def join_names(*a):
        BAD_STRINGS[0] += 1
        return real_names(*a)

    monkeypatch.setattr(tpu, "_op_columns", op_columns)
    monkeypatch.setattr(tpu, "_join_names", join_names)
    p = _chips(tmp_path, kind)
    want, _ = _read(p, monkeypatch, as_one=False)
    got, batches = _read(p, monkeypatch, as_one=True)
    assert batches == (4 if kind == "some_clock" else 3)
    assert want["capture"]["strings_replaced"] == \
        (2 * 11 + 6 if kind == "some_clock" else 2 * 12 + 11)
    _same(got, want)


def test_a_batch_read_chip_by_chip_counts_its_lines_strings_once(tmp_path, monkeypatch):
    """Chips decoded as one and then read chip by chip (their events differ) count their
    lines' replaced strings as that read does: the decode's count and flags are undone."""
    t = SyntheticTrace()
    for c in range(6):
        d = t.tpu(c)
        text = "%fusion.1 = f32[8,128]{1,0} fusion(f32[8,128]{1,0} %p0), kind=kLoop"
        mid = d.w.event_id(text, "fusion.1", {})
        d.w.event(d.ops_line, mid, 10 * US, US, {"note": "mark@1"})
        other = d.w.event_id(text.replace(".1", ".9"), "fusion.9", {})
        if c == 4:  # (an op the others do not run: chips 3-5 read chip by chip)
            d.w.event(d.ops_line, other, 12 * US, US)
        d.async_copy("D2H", 11 * US, 14 * US, device_span=(US, 4 * US))
    p = tmp_path / "bad_stat.xplane.pb"
    p.write_bytes(t.to_bytes().replace(b"mark@1", b"mark\xff1"))
    want, _ = _read(p, monkeypatch, as_one=False)
    got, batches = _read(p, monkeypatch, as_one=True)
    assert batches == 1 and want["capture"]["strings_replaced"] >= 6
    _same(got, want)


def test_anything_raised_while_decoding_a_batch_reads_it_chip_by_chip(tmp_path, monkeypatch):
    """Whatever the batch's decode raises, its chips are read one at a time as if it had
    never run (which refuses a damaged chip where that read does)."""
    p = _chips(tmp_path, "clock")
    want, _ = _read(p, monkeypatch, as_one=False)
    real = tpu_chips.LineEvents

    def refused(line, *a, **k):
        got = real(line, *a, **k)
        if got.n > 3:  # (a line of several chips, once its decode counted and marked it)
            raise ValueError("refused")
        return got

    monkeypatch.setattr(tpu_chips, "LineEvents", refused)
    got, batches = _read(p, monkeypatch, as_one=True)
    assert batches == 0
    _same(got, want)


def test_the_v6e_sample_reads_alike(monkeypatch):
    """The real v6e capture's four chips (1-3 are twins; their copies paired by name)."""
    want, _ = _read(SAMPLE, monkeypatch, as_one=False)
    got, _ = _read(SAMPLE, monkeypatch, as_one=True)
    _same(got, want)
    assert len(want["transfers"]["device"]) == 2400


def _outcome(p: Path, monkeypatch, as_one: bool):
    try:
        return _read(p, monkeypatch, as_one)[0]
    except Exception as e:  # (the refusal itself is the answer compared)
        return type(e).__name__, str(e)


@pytest.mark.parametrize("where", [0.3, 0.45, 0.6, 0.75, 0.9])
def test_a_damaged_chip_is_refused_as_chip_by_chip(tmp_path, monkeypatch, where):
    raw = bytearray(_chips(tmp_path, "clock", n=20).read_bytes())
    raw[int(len(raw) * where)] ^= 0xFF
    p = tmp_path / "damaged.xplane.pb"
    p.write_bytes(bytes(raw))
    want = _outcome(p, monkeypatch, False)
    got = _outcome(p, monkeypatch, True)
    if isinstance(want, tuple):
        assert got == want
    else:
        _same(got, want)
