"""The scanner's functions that read spans [fs[i], fe[i]) of a buffer refuse spans that do not
lie within it, and starts and ends of different lengths, before reading a byte
(`_scan._spans_within`, shared by `spans_text_ok`, `text_facts`, `boundary_names` and
`span_codes`): a bad table from a caller is a ValueError, never a read outside the buffer."""

from __future__ import annotations

import numpy as np
import pytest

from overlap.trace import wire

scan = getattr(wire, "SCANNER", None)
pytestmark = pytest.mark.skipif(scan is None, reason="the scanner is not used")

BUF = np.frombuffer(b"copy-start.1copy-done.1", np.uint8)
# (function, the spans' name in its length message)
READERS = [("spans_text_ok", "span"), ("text_facts", "text"), ("boundary_names", "name"),
           ("span_codes", "span")]


def _spans(*pairs):
    return (np.array([p[0] for p in pairs], np.int64), np.array([p[1] for p in pairs], np.int64))


@pytest.mark.parametrize("name,what", READERS)
def test_spans_within_the_buffer_are_read(name, what):
    fs, fe = _spans((0, 12), (12, 23))
    getattr(scan, name)(BUF, fs, fe)  # no refusal


@pytest.mark.parametrize("name,what", READERS)
@pytest.mark.parametrize("pair", [(-1, 3), (5, 4), (20, 24), (0, 10**6)])
def test_span_outside_the_buffer_is_refused(name, what, pair):
    fs, fe = _spans((0, 12), pair)
    with pytest.raises(ValueError, match="^span outside the buffer$"):
        getattr(scan, name)(BUF, fs, fe)


@pytest.mark.parametrize("name,what", READERS)
def test_starts_and_ends_of_different_lengths_are_refused(name, what):
    fs, fe = _spans((0, 12), (12, 23))
    with pytest.raises(ValueError, match=f"^{what} starts and ends differ in length$"):
        getattr(scan, name)(BUF, fs, fe[:1])
