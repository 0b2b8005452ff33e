"""The scanner's word-at-a-time walks (issue 32, round 12) against the byte-at-a-time rules
they stand for.

* `_scan.text_facts` reads a text 8 bytes at a time and runs its rule at each byte of the
  word it stops at (NUL, >= 0x80, `=`, `-`, `S`; `_stop_bytes`), lowest first, the last 0-7
  bytes one at a time: every stop byte and every pattern, at every position of texts of
  lengths 0-40 made of other bytes and at every alignment, gives the numpy rule's facts
  (`tpu._text_facts_numpy`), so a stop byte missed anywhere in a word, taken out of order,
  or a tail walked wrong shows.
"""

from __future__ import annotations

import numpy as np
import pytest

from overlap.trace import tpu, wire

pytestmark = pytest.mark.skipif(getattr(wire, "SCANNER", None) is None,
                                reason="the scanner is not used")

_FILL = b"abcdefghijklmnopqrstuvwxyz0123456789(){}[],.:%_ "
_PLANTS = [b"\0", b"\x80", b"\xc3\xa9", b"\xff", b"=", b"-", b"S", b" = ", b"copy-start",
           b" copy-start(", b"slice-start(", b"S(5)", b"S(5", b"copy-star"]


def _texts():
    """Texts of lengths 0-40 (filler bytes none of which stops the walk) with one planted
    piece at every position, and some with two (an ` = ` then a ` copy-start(`)."""
    out = []
    for n in range(0, 41):
        base = (_FILL * 2)[:n]
        out.append(base)
        for piece in _PLANTS:
            for at in range(0, n + 1):
                out.append((base[:at] + piece + base[at:])[:max(n, len(piece))])
        if n >= 4:
            for at in range(0, n, 3):
                out.append(base[:at] + b" = " + base[at:] + b" copy-start(" + base[:5])
    return out


def _facts(texts):
    buf = np.frombuffer(b"".join(texts), np.uint8)
    cuts = np.cumsum([0] + [len(t) for t in texts])
    lo = cuts[:-1].astype(np.int64)
    hi = cuts[1:].astype(np.int64)
    return buf, lo, hi


def test_text_facts_words_equal_numpy_rule():
    buf, lo, hi = _facts(_texts())
    got = wire._scan.text_facts(buf, lo, hi)
    want = tpu._text_facts_numpy(buf, lo, hi)
    for g, w in zip(got, want):
        assert g.tolist() == np.asarray(w).tolist()


def test_text_facts_words_at_every_alignment():
    """The same texts read at every offset of the buffer (words start anywhere), and as one
    span that holds several texts' bytes (a pattern across the texts' seams counts)."""
    texts = _texts()[::7]
    for shift in range(8):
        buf, lo, hi = _facts([b"x" * shift] + texts)
        got = wire._scan.text_facts(buf, lo, hi)
        want = tpu._text_facts_numpy(buf, lo, hi)
        for g, w in zip(got, want):
            assert g.tolist() == np.asarray(w).tolist()
    buf, lo, hi = _facts(texts)
    whole = (np.array([0], np.int64), np.array([len(buf)], np.int64))
    for g, w in zip(wire._scan.text_facts(buf, *whole), tpu._text_facts_numpy(buf, *whole)):
        assert g.tolist() == np.asarray(w).tolist()

