"""The TPU reader's per-op rules on name bytes (`overlap.trace.tpu` over a `wire.MetaTable`,
`overlap.trace.hlotext`'s byte rules) give exactly what the same rules give on Python strings,
the path the reader takes where a plane has no table (issue 24).

The byte rules decide only what they can decide exactly and leave the rest to the string
rules; these tests hold the two paths to the same tables for names a profiler writes and
names it never writes (no `%`, whitespace at either end, no ` = `, non-ASCII, a NUL, copy
texts with odd heads, slices, long digit runs), with and without an `Async XLA Ops` line and
with and without the programs' HLO protos.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from overlap.trace import hlotext, reader, tpu, wire
from overlap.trace.protos import HloProto, XSpace
from overlap.trace.synthetic import SyntheticTrace

pytestmark = pytest.mark.skipif(wire._scan is None, reason="the scanner was not built")

US = 1_000_000
PID = 12190760917235803885

# --- byte helpers against Python ---------------------------------------------------------------

_piece = st.sampled_from(["%", " = ", " ", "=", "copy-start", " copy-start(", "slice-start(",
                          "S(5)", "a", ".", "1", "\t", "(", ")", "\n", "é", "\0", "-done", ""])
_texts = st.lists(st.lists(_piece, max_size=8).map("".join), max_size=25)


def _joined(texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[bytes]]:
    raw = [t.encode() for t in texts]
    ln = np.array([len(r) for r in raw], np.int64)
    hi = np.cumsum(ln)
    return np.frombuffer(b"".join(raw), np.uint8), hi - ln, hi, raw


@settings(max_examples=300, deadline=None)
@given(_texts, st.sampled_from([b" = ", b"copy-start", b"S(5)", b"slice-start(", b"a"]))
def test_find_all_and_first_within_equal_str_find(texts, pat):
    b, lo, hi, raw = _joined(texts)
    occ = hlotext.find_all(b, pat, len(pat) // 2)
    whole = b.tobytes()
    assert occ.tolist() == [m.start() for m in re.finditer(b"(?=" + re.escape(pat) + b")",
                                                           whole)]
    first = hlotext.first_within(occ, lo, hi, len(pat))
    for r, p0, f in zip(raw, lo.tolist(), first.tolist()):
        k = r.find(pat)
        assert f == (-1 if k < 0 else p0 + k)


@settings(max_examples=200, deadline=None)
@given(_texts, st.sampled_from([b" = ", b"copy-start", b"S(5)", b"slice-start(", b"a"]),
       st.integers(1, 9))
def test_find_all_and_plain_texts_in_blocks_equal_one_pass(texts, pat, block):
    # (they run `_BLOCK` bytes at a time: a match or a bad byte across a block's end counts)
    b, lo, hi, _ = _joined(texts)
    occ = hlotext.find_all(b, pat, len(pat) // 2)
    plain = hlotext.plain_texts(b, lo, hi)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(hlotext, "_BLOCK", block)
        assert hlotext.find_all(b, pat, len(pat) // 2).tolist() == occ.tolist()
        assert hlotext.plain_texts(b, lo, hi).tolist() == plain.tolist()


@settings(max_examples=300, deadline=None)
@given(_texts)
def test_plain_texts_and_instruction_name_spans_equal_the_str_rule(texts):
    b, lo, hi, raw = _joined(texts)
    plain = hlotext.plain_texts(b, lo, hi)
    assert plain.tolist() == [t.isascii() and "\0" not in t for t in texts]
    eq = hlotext.first_within(hlotext.find_all(b, b" = ", 1), lo, hi, 3)
    ns, ne, ok = hlotext.instruction_name_spans(b, lo, hi, eq)
    want = hlotext.instruction_names(texts)
    for i, t in enumerate(texts):
        if not plain[i]:
            continue
        if re.match(r"%\S+ = ", t) and t.strip() == t:
            assert ok[i], t  # the names XLA writes are all decided on bytes
        if ok[i]:
            assert b[ns[i]:ne[i]].tobytes().decode() == want[i], t


@settings(max_examples=300, deadline=None)
@given(_texts, st.data())
def test_instruction_name_strings_equal_the_numpy_rule(texts, data):
    """The scanner's names of the texts asked (`tpu._names_from`'s fast path): where it
    answers, every one is the numpy rule's span as a str; it leaves a set (None) only where
    a text's span is not its answer or holds a NUL or a non-ASCII byte."""
    b, lo, hi, _ = _joined(texts)
    eq = hlotext.first_within(hlotext.find_all(b, b" = ", 1), lo, hi, 3)
    at = np.array(sorted(data.draw(st.sets(st.integers(0, max(len(texts) - 1, 0)))))
                  if texts else [], np.int64)
    got = wire._scan.instruction_name_strings(b, lo, hi, eq, at)
    ns, ne, ok = hlotext.instruction_name_spans(b, lo[at], hi[at], eq[at])
    spans = [b[p:q].tobytes() for p, q in zip(ns.tolist(), ne.tolist())]
    clean = [x.isascii() and b"\0" not in x for x in spans]
    if got is None:
        assert not (ok.all() and all(clean))
    else:
        assert ok.all() and all(clean)
        assert got == [x.decode() for x in spans]
        assert all(type(x) is str for x in got)
        # the reader's names are the same without the scanner's walk
        assert tpu._names_from(b, lo, hi, eq, at) == got
        with pytest.MonkeyPatch.context() as mp:
            mp.delattr(tpu._scan, "instruction_name_strings")
            assert tpu._names_from(b, lo, hi, eq, at) == got


_name = st.tuples(st.sampled_from(["copy", "all-reduce", "x", "", "send", "recv", "é", "a\nb"]),
                  st.sampled_from(["-start", "-done", "", "start", "-start\n"]),
                  st.sampled_from(["", ".", "-"]),
                  st.integers(0, 40)).map(lambda p: p[0] + p[1] + p[2] + "7" * p[3])


@settings(max_examples=300, deadline=None)
@given(st.lists(_name, max_size=30))
def test_async_boundaries_by_bytes_with_long_digit_runs(names):
    """Names ending in more digits than the byte rule walks back are left to the regex (-1);
    every other plain name is decided, as the regexes decide it."""
    b, lo, hi, raw = _joined(names)
    got = hlotext.async_boundaries_by_bytes(b, hi - lo)
    for n, g in zip(names, got.tolist()):
        digits = len(n) - len(n.rstrip("0123456789"))
        if n and n.isascii() and "\n" not in n and digits <= hlotext._DIGITS_MAX:
            assert g == int(hlotext.is_async_boundary(n)), n
        elif g != -1:
            assert g == int(hlotext.is_async_boundary(n)), n


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300), st.lists(st.tuples(st.integers(0, 300), st.integers(0, 120)),
                                         max_size=40), st.sampled_from([None, 0, 10]))
def test_gather_spans_equals_slices(data, spans, sep):
    buf = np.frombuffer(data + b"\0" * 8, np.uint8)[:len(data)]
    fs = np.array([min(p, len(data)) for p, _ in spans], np.int64)
    fe = np.array([min(p + n, len(data)) for p, n in spans], np.int64)
    got = wire.MetaTable.gather_spans(buf, fs, fe, sep).tobytes()
    parts = [data[p:q] for p, q in zip(fs.tolist(), fe.tolist())]
    if sep is None:
        assert got == b"".join(parts)
    else:
        assert got == b"".join(p + bytes((sep,)) for p in parts)


# --- whole TPU planes: bytes vs strings --------------------------------------------------------

MUTATIONS = [
    lambda n, d: (" " + n, d),
    lambda n, d: (n + " ", d),
    lambda n, d: (n, ""),
    lambda n, d: (n.replace("%", "", 1), ""),
    lambda n, d: (n.replace(" = ", " =", 1), ""),
    lambda n, d: (n.replace("fusion", "fusi\u00e9n"), d.replace("fusion", "fusi\u00e9n")),
    lambda n, d: (n + "\u00a0", ""),
    lambda n, d: (n.replace(".", "\n.", 1), ""),
    lambda n, d: (n.replace("%", "%\u2003", 1), ""),
    lambda n, d: (n.replace("S(5)", "S(5) ", 1), d),
    lambda n, d: (n.replace(") copy-start(", ")  copy-start(", 1), d),
    lambda n, d: (n.replace("copy-start(", "copy-start (", 1), d),
    lambda n, d: (n, d + ".x"),
    lambda n, d: (n, "send.3"),
    lambda n, d: (n, "a-start"),
    lambda n, d: (n, "x-done." + "9" * 30),
    lambda n, d: ("%send.5 = " + n.split(" = ", 1)[-1], ""),
    lambda n, d: (n.replace("u32[]", "(u32[], u32[])", 1), d),
    lambda n, d: (n.replace("f32[", "f32[ ", 1), d),
    lambda n, d: (n.replace("{1,0:T(8,128)S(5)}", "", 1), d),
    lambda n, d: (n.replace(" = ", " =  = ", 1), ""),
    lambda n, d: (n.replace("S(5)", "S(5)\u00e9", 1), d),
    lambda n, d: (n, d + "\u00e9"),
    lambda n, d: (n, " " + d),
    lambda n, d: (n, "123"),
    lambda n, d: ("", ""),
    lambda n, d: (n[:20], ""),
    lambda n, d: (n.replace("dynamic-update-slice-start(", "dynamic-update-slice-start (", 1),
                  d),
    lambda n, d: (n.replace("copy-start(", "copy-start(\0", 1), d),
    lambda n, d: (n + " metadata={op_name=\") dynamic-slice-start(\"}", d),
    lambda n, d: (n.replace("f32[", "s4[", 2), d),
]


def _capture(async_line: bool, steps: int, muts: list[tuple[int, int]],
             program: bool, slices: bool = True) -> XSpace:
    t = SyntheticTrace()
    dev = t.tpu(0, async_line=async_line)
    for s in range(steps):
        t0 = (10 + 100 * s) * US
        dev.op(t0, 6 * US, name=f"fusion.{s}")
        if slices and s % 3 == 2:
            dev.async_slice("D2H" if s % 2 else "H2D", t0 + 7 * US, t0 + 12 * US)
        else:
            dev.async_copy("D2H" if s % 2 else "H2D", t0 + 7 * US, t0 + 12 * US,
                           dims=(8, 128 + s), dtype=("f32", "bf16")[s % 2])
    xs = XSpace.FromString(t.to_bytes())
    plane = next(p for p in xs.planes if p.name.startswith("/device:TPU"))
    keys = sorted(plane.event_metadata)
    for at, which in muts:
        md = plane.event_metadata[keys[at % len(keys)]]
        md.name, md.display_name = MUTATIONS[which](md.name, md.display_name)
    if program:  # the program's own facts for some copies, disagreeing with the text's
        h = HloProto()
        comp = h.hlo_module.computations.add(name="main")
        for k in range(1, steps + 1, 2):
            ins = comp.instructions.add(name=f"copy-start.{k}", opcode="copy-start")
            for et, ms in ((11, 5 if k % 4 == 1 else 0), (11, 0), (8, 0)):
                e = ins.shape.tuple_shapes.add(element_type=et)
                e.dimensions.extend([4, k])
                e.layout.memory_space = ms
        meta = next(p for p in xs.planes if p.name == reader.METADATA_PLANE)
        sid = max(meta.stat_metadata, default=0) + 1
        meta.stat_metadata[sid].id = sid
        meta.stat_metadata[sid].name = "Hlo Proto"
        md = meta.event_metadata[PID - (1 << 64)]
        md.id, md.name = PID - (1 << 64), "jit_train_step"
        st_ = md.stats.add()
        st_.metadata_id, st_.bytes_value = sid, h.SerializeToString()
    return xs


def _read(xs: XSpace, tables: bool) -> dict:
    with pytest.MonkeyPatch.context() as mp:
        if not tables:  # every name and stat through upb, one id at a time
            mp.setattr(wire.Plane, "table", lambda self: None)
        try:
            return reader.read_xspace(xs)
        except Exception as e:  # noqa: BLE001 - both paths must refuse alike
            return {"error": f"{type(e).__name__}: {e}"}


def _same(a: dict, b: dict) -> None:
    assert ("error" in a) == ("error" in b), (a.get("error"), b.get("error"))
    if "error" in a:
        assert a["error"] == b["error"]
        return
    for k in ("transfers", "compute"):
        pd.testing.assert_frame_equal(a[k], b[k], check_exact=True)
        for c in a[k].columns:
            if a[k][c].dtype == object:
                assert [type(v) for v in a[k][c]] == [type(v) for v in b[k][c]], (k, c)


@settings(max_examples=60, deadline=None)
@given(st.booleans(), st.booleans(), st.integers(1, 14),
       st.lists(st.tuples(st.integers(0, 200), st.integers(0, len(MUTATIONS) - 1)),
                max_size=12))
def test_tpu_tables_from_bytes_equal_tables_from_strings(async_line, program, steps, muts):
    xs = _capture(async_line, steps, muts, program)
    got = _read(xs, tables=True)
    _same(got, _read(xs, tables=False))
    if not muts and not program:  # the canonical names, no program: every copy is found
        assert len(got["transfers"]) == steps


def test_all_mutations_at_once_both_lines():
    muts = [(k * 5 + j, k) for k in range(len(MUTATIONS)) for j in range(2)]
    for async_line in (True, False):
        for program in (False, True):
            xs = _capture(async_line, 20, muts, program)
            _same(_read(xs, tables=True), _read(xs, tables=False))


def test_copy_rules_in_small_blocks_equal_the_string_rules():
    # `_copy_columns_bytes` reads the texts `tpu._TEXTS` at a time, then the metadata columns
    # and programs once for all: blocks of 3 texts (and 7 bytes per byte pass) change nothing
    muts = [(k * 5 + j, k) for k in range(len(MUTATIONS)) for j in range(2)]
    for async_line in (True, False):
        for program in (False, True):
            xs = _capture(async_line, 20, muts, program)
            want = _read(xs, tables=False)
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(tpu, "_TEXTS", 3)
                mp.setattr(hlotext, "_BLOCK", 7)
                _same(_read(xs, tables=True), want)


@pytest.mark.skipif(wire.SCANNER is None, reason="scanner not used (OVERLAP_SCANNER=0)")
def test_copy_columns_decide_canonical_copies_on_bytes(monkeypatch):
    """The canonical copy-start texts XLA writes never reach the string rules (the async
    slices do: their rule is the string one)."""
    xs = _capture(True, 30, [], False, slices=False)
    raw = xs.SerializeToString()
    _, planes, _ = wire.parse_space(wire.padded(raw), len(raw), strip_meta=reader._strip_meta)
    P = wire.Plane(next(p for p in planes if p.name.startswith("/device:TPU")))
    t = P.table()
    assert t is not None
    keys = np.array(sorted(t.keys.tolist()), np.int64)
    # the ids the Async XLA Ops line's spans name (copy-starts, displayed as async-copy)
    mids = keys[[d == "async-copy" for d in P.names(keys, display=True)]]
    called: list[int] = []
    orig = wire.Plane.names  # (on the class: a Plane has slots, no instance attributes)
    monkeypatch.setattr(wire.Plane, "names", lambda self, m, display=False:
                        called.append(len(m)) or orig(self, m, display))
    ok, cols = tpu.copy_columns(P, mids)
    assert not any(called)
    assert int(ok.sum()) == 30 and set(cols["direction"][ok]) == {"D2H", "H2D"}


def test_invalid_utf8_in_a_copy_text_is_read_alike_on_both_paths(tmp_path):
    """A copy's HLO text with invalid UTF-8: read with U+FFFD and counted (the rule for
    damaged strings in overlap.trace.wire), the same tables with the scanner and with upb."""
    from overlap.trace import wire

    t = SyntheticTrace()
    dev = t.tpu(0)
    dev.async_copy("D2H", 10 * US, 20 * US)
    raw = t.to_bytes().replace(b"copy-start.1 ", b"copy-start\xff1 ", 1)
    f = tmp_path / "h.xplane.pb"
    f.write_bytes(raw)
    got = []
    for scanner in (wire._scan, None):
        old = wire.SCANNER
        wire.SCANNER = scanner
        try:
            part = reader.read_host_file(f)
        finally:
            wire.SCANNER = old
        assert part["capture"]["strings_replaced"] >= 1
        got.append((part["capture"]["strings_replaced"],
                    {k: list(v) for k, v in part["transfers"].items()}))
    assert repr(got[0]) == repr(got[1])


# --- copy-start/copy-done pairing without an Async XLA Ops line ------------------------------

def _pairs_one_at_a_time(starts, ends, mids, names) -> list[tuple[int, int, int]]:
    """The pairing rule event by event (the reader's loop before it was vectorized)."""
    from collections import defaultdict, deque

    ops = []
    for start, end, mid, ins in zip(starts, ends, mids, names):
        m = hlotext._START_DONE_RE.match(ins)
        if not m or not (m["base"].endswith("copy") or m["base"] in tpu._HOST_SLICE_OPS):
            continue
        ops.append((start, 0 if m["role"] == "start" else 1, end, mid,
                    m["base"] + (m["n"] or "")))
    ops.sort(key=lambda b: (b[0], b[1], b[2], b[3]))
    waiting: dict[str, deque] = defaultdict(deque)
    pairs = []
    for start, role, end, mid, key in ops:
        if role == 0:
            waiting[key].append((start, mid))
        elif waiting[key]:
            s0, smid = waiting[key].popleft()
            pairs.append((s0, end, smid))
    return pairs


_boundary_names = ["copy-start.1", "copy-done.1", "copy-start.2", "copy-done.2", "copy-start",
                   "copy-done", "dynamic-slice-start.3", "dynamic-slice-done.3",
                   "all-reduce-start.1", "all-reduce-done.1", "send.1", "xcopy-start.1",
                   "xcopy-done.1"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 3),
                          st.integers(0, len(_boundary_names) - 1)), max_size=60))
def test_vectorized_pairing_equals_the_queue_rule(events):
    """Ties on every sort key, dones before any start, several keys interleaved: the pairs
    and their order are the queue rule's."""
    starts = np.array([b for b, _, _ in events], np.int64)
    ends = starts + np.array([d for _, d, _ in events], np.int64)
    ops = np.array([k for _, _, k in events], np.intp)
    mids = ops.astype(np.int64) * 10 + 3
    names = np.array(_boundary_names, object)
    got = tpu.pair_copies(starts, ends, mids, ops, names)
    want = _pairs_one_at_a_time(starts.tolist(), ends.tolist(), mids.tolist(),
                                names[ops].tolist())
    assert list(zip(*(g.tolist() for g in got))) == want
