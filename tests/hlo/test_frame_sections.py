"""`trace_ops._text_frames` reads a module's stack frame sections up to the last section word
and then only while a section is open (issue 32, round 30: XLA prints the sections before the
computations, and a 6 MB unrolled program's 36k lines were each split and tested). The same
frames as reading every line, on texts with sections first, last, twice, cut short and with
every line break `str.splitlines` knows; `hlotext.text_lines` gives `splitlines`' lines."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from overlap.hlo import trace_ops as T
from overlap.trace.hlotext import text_lines

BREAKS = ["\n", "\r\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028",
          "\u2029"]


def _frames_of(sections: dict) -> str:
    """The text of `sections` as XLA prints them."""
    return "\n".join(f"{name}\n" + "\n".join(f"{k} {v}" for k, v in rows.items())
                     for name, rows in sections.items())


SECTIONS = {"FileNames": {1: '"a.py"'}, "FunctionNames": {1: '"f"'},
            "FileLocations": {1: "{file_name_id=1 function_name_id=1 line=3 end_line=3 "
                                 "column=1 end_column=9}"},
            "StackFrames": {1: "{file_location_id=1 parent_frame_id=1}"}}
BODY = "ENTRY %main () -> f32[] {\n  ROOT %c = f32[] constant(0)\n}\n"


def test_sections_first_last_twice_or_missing():
    frames = _frames_of(SECTIONS)
    # (no function names: frames all the same, their functions "")
    nameless = _frames_of({k: v for k, v in SECTIONS.items() if k != "FunctionNames"})
    assert T._text_frames(nameless)[1][0].function == ""
    for text in (f"HloModule m\n{nameless}\n{BODY}", f"{BODY}{nameless}", nameless + BODY,
                 f"HloModule m\n\n{frames}\n\n{BODY}", f"HloModule m\n{BODY}{frames}",
                 f"HloModule m\n{BODY}{frames}\n{BODY}{frames}\n", f"HloModule m\n{BODY}",
                 f"HloModule m\n{frames}", frames.replace("\n", "\r\n") + "\r\n" + BODY, ""):
        got = T._text_frames(text)
        assert got == _frames_from(text)
    assert T._text_frames(f"HloModule m\n{frames}\n{BODY}")[1][0].line == 3


def _frames_from(text: str) -> dict:
    """`_text_frames`' answer from `_every_line`'s sections (its rows read as it reads them)."""
    import unittest.mock as mock

    with mock.patch.object(T, "text_lines", lambda t, head, more: iter(t.splitlines())):
        return T._text_frames(text)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["FileNames", "StackFrames", "1 {file_location_id=1}",
                                 "2 x", "%a = f32[] constant(0)", "ENTRY %m {", "}", "",
                                 "  FileLocations  ", "1 {file_name_id=1 line=2}", "junk"]),
                max_size=30),
       st.lists(st.sampled_from(BREAKS), min_size=1, max_size=30))
def test_any_text_reads_every_line_alike(lines, breaks):
    text = "".join(line + breaks[i % len(breaks)] for i, line in enumerate(lines))
    assert T._text_frames(text) == _frames_from(text)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["a", " ", *BREAKS]), max_size=40).map("".join),
       st.integers(1, 8), st.integers(0, 60))
def test_text_lines_gives_splitlines_lines(text, chunk, stop_after):
    want = text.splitlines()
    nl = [i + 1 for i, c in enumerate(text) if c == "\n"]
    for head in [0, *nl, len(text)]:
        assert list(text_lines(text, head, lambda: True, chunk=chunk)) == want
        assert list(text_lines(text, head, chunk=chunk)) == want
        got: list[str] = []

        def more(got: list[str] = got) -> bool:
            return len(got) < stop_after

        for line in text_lines(text, head, more, chunk=chunk):
            got.append(line)
        # the head's lines always; after them, lines only while `more` says yes; in order
        assert got == want[:len(got)]
        assert len(got) >= len(text[:head].splitlines())
        assert len(got) == len(want) or len(got) >= stop_after
