"""A run directory's program text read a piece at a time (issue 32, round 31): the text read
whole stood beside its parse at a report's peak (a 6 MB unrolled program). `hlotext.
file_pieces` gives the same lines as `read_text().splitlines()` for any bytes (bad UTF-8
across the reader's buffers, every line break, lines longer than a piece);
`trace_ops.FrameSections` reads the same frames from the pieces as `_text_frames` from the
text; `names._programs` makes the same program and inventory from the file as from its text,
on every real program of the corpus. The instructions share their operand names with the
instructions they name, and one read-only empty list."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from overlap.analysis import names
from overlap.hlo import program as P
from overlap.hlo import trace_ops as T
from overlap.trace.hlotext import file_pieces
from tests.hlo.test_parsed_calls import _fields

REPO = Path(__file__).resolve().parents[2]
BREAKS = ["\n", "\r\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028",
          "\u2029"]


def _check_pieces(path: Path, chunk: int) -> None:
    pieces = list(file_pieces(path, chunk))
    raw = path.read_bytes().decode("utf-8", errors="replace")
    assert "".join(pieces) == raw  # (line ends as written)
    assert all(p.endswith("\n") for p in pieces[:-1]) and all(pieces)
    # no piece holds a line feed but at its end, where it is cut, except a line's own
    assert all("\n" not in p[:-1].rpartition("\n")[2] for p in pieces)
    got = [line for p in pieces for line in p.splitlines()]
    assert got == path.read_text(encoding="utf-8", errors="replace").splitlines()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.sampled_from([b"a", b"%x = f32[] c()", b"\xc3\xa9", b"\xe2\x82",
                                           b"\xff", b"\xf0\x9f\x98\x80", b"\xed\xa0\x80"]),
                          st.sampled_from(BREAKS).map(lambda b: b.encode())),
                max_size=40).map(b"".join),
       st.integers(1, 9))
def test_pieces_are_the_whole_texts_lines(tmp_path_factory, data, chunk):
    path = tmp_path_factory.mktemp("p") / "m.hlo.txt"
    path.write_bytes(data)
    _check_pieces(path, chunk)


def test_pieces_across_the_readers_buffers_and_long_lines(tmp_path):
    """Bad and multi-byte sequences at every place around the text reader's 8 KB buffers;
    a line of 300 KB, longer than a piece (gathered whole, once)."""
    path = tmp_path / "m.hlo.txt"
    body = bytearray()
    for i in range(40):
        body += b"x" * (8192 - len(body) % 8192 - (i % 5)) + [b"\xe2\x82\xac", b"\xff\xfe",
                                                               b"\xc3", b"\r\n", b"\r"][i % 5]
        body += b"\n" if i % 3 else b""
    body += b"y" * 300_000 + b"\n" + "\u2028é\n".encode() * 10
    path.write_bytes(bytes(body))
    for chunk in (1, 7, 4096, 1 << 16):
        _check_pieces(path, chunk)
    assert max(map(len, file_pieces(path, 4096))) >= 300_000


def _corpus_programs(gpu_corpus) -> list[Path]:
    files = sorted(gpu_corpus.rglob("*.hlo.txt"))
    assert len(files) >= 25
    return [*files, *sorted((REPO / "tests").rglob("*.hlo.txt"))]


def test_frame_sections_of_pieces_equal_the_texts(gpu_corpus):
    for f in _corpus_programs(gpu_corpus):
        text = f.read_text(encoding="utf-8", errors="replace")
        for chunk in (97, 1 << 16):
            s = T.FrameSections()
            assert "".join(s.pieces(file_pieces(f, chunk))) == \
                f.read_bytes().decode("utf-8", errors="replace")
            assert s.frames() == T._text_frames(text), f


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["FileNames", "StackFrames", "1 {file_location_id=1}",
                                 "2 x", "%a = f32[] constant(0)", "ENTRY %m {", "}", "",
                                 "  FileLocations  ", "1 {file_name_id=1 line=2}", "junk",
                                 "FunctionNames", '1 "f"']), max_size=30),
       st.lists(st.sampled_from(BREAKS), min_size=1, max_size=30), st.integers(1, 40))
def test_frame_sections_of_any_pieces(lines, breaks, chunk):
    """Pieces cut after any line feed: the sections read from the pieces' lines where they
    can hold one are `_text_frames`' (which reads up to the last section word, then while one
    is open)."""
    text = "".join(line + breaks[i % len(breaks)] for i, line in enumerate(lines))
    pieces, pos = [], 0
    while pos < len(text):
        cut = text.rfind("\n", pos, pos + chunk) + 1 or text.find("\n", pos + chunk) + 1 \
            or len(text)
        pieces.append(text[pos:cut])
        pos = cut
    s = T.FrameSections()
    assert "".join(s.pieces(pieces)) == text
    assert s.frames() == T._text_frames(text)


def _run_dir(tmp_path: Path, module: str, text_file: Path) -> Path:
    (tmp_path / "hlo").mkdir(parents=True, exist_ok=True)
    (tmp_path / "hlo" / f"{module}.hlo.txt").write_bytes(text_file.read_bytes())
    return tmp_path


def test_a_program_read_from_its_file_is_the_one_read_from_its_text(gpu_corpus, tmp_path):
    for f in _corpus_programs(gpu_corpus):
        text = f.read_text(encoding="utf-8", errors="replace")
        module = f.name[: -len(".hlo.txt")]
        d = _run_dir(tmp_path / f"r{abs(hash(str(f)))}", module, f)
        (prog, inv, where), = names._programs(d, None, [(module, 7)]).values()
        assert where == f"hlo/{module}.hlo.txt"
        assert _fields(prog) == _fields(T.program_from_text(text, module)), f
        assert inv.ops == P.offload_inventory(text).ops
    # a module named by its text alone (a file `.hlo.txt`): its `HloModule` line names it
    d = _run_dir(tmp_path / "nameless", "", _corpus_programs(gpu_corpus)[0])
    (prog, _, _), = names._programs(d, None, [("", 7)]).values()
    assert prog.name == T._module_name(_corpus_programs(gpu_corpus)[0].read_text()) != ""


def test_a_parse_of_lines_needs_its_frames_and_name():
    parsed = P.ParsedHlo.of_lines(["ENTRY %m {", "  ROOT %c = f32[] constant(0)", "}"])
    assert parsed.text is None and [i.name for i in parsed.comps["m"]] == ["c"]
    with pytest.raises(ValueError):
        T.program_from_text(parsed, "m")
    with pytest.raises(ValueError):
        T.program_from_text(parsed, "", frames={})
    assert T.program_from_text(parsed, "m", frames={}).instrs["c"].opcode == "constant"


def test_no_calls_and_no_operands_are_one_read_only_empty_list(gpu_corpus):
    """The instructions with no calls, and the parameters and constants, share one empty
    list (~30k lists, 1.6 MB of a 6 MB unrolled program's report): equal to `[]`, written as
    one, and any change refused (every instruction would see it)."""
    f = _corpus_programs(gpu_corpus)[0]
    for prog in (T.program_from_text(f.read_text(encoding="utf-8")),
                 T.program_from_text(P.ParsedHlo(f.read_text(encoding="utf-8")), "m",
                                     consume=True)):
        empty = [lst for ins in prog.instrs.values() for lst in (ins.operands, ins.calls)
                 if not lst]
        assert len(empty) > 1000 and len({id(x) for x in empty}) == 1
        lst = empty[0]
        assert lst == [] and json.dumps(lst) == "[]" and list(lst) == [] and [*lst, 1] == [1]
        for change in (lambda x: x.append("a"), lambda x: x.extend(["a"]),
                       lambda x: x.insert(0, "a"), lambda x: x.__iadd__(["a"]),
                       lambda x: x.__setitem__(slice(0, 0), ["a"]), lambda x: x.pop()):
            with pytest.raises(TypeError):
                change(lst)
        assert lst == []
        params = [i for i in prog.instrs.values() if i.opcode == "parameter"]
        assert params and all(i.operands == [] for i in params)
        # (a program pickles and copies whole, the shared list with it)
        again = pickle.loads(pickle.dumps(prog))
        assert again.instrs == prog.instrs and again.callers == prog.callers


def test_a_consumed_parse_hands_its_name_dict_to_the_program(gpu_corpus):
    """The inventory's name -> instruction dict becomes the program's (values replaced in
    place: the same names in the same order, a name given twice its last at its first's
    place), not a second dict of as many names; a parse not consumed keeps its own."""
    dup = ("HloModule m\n%c (p: f32[]) -> f32[] {\n  %x = f32[] parameter(0)\n"
           "  ROOT %y = f32[] negate(%x)\n}\nENTRY %e () -> f32[] {\n"
           "  %x = f32[] constant(1)\n  ROOT %z = f32[] call(%x), to_apply=%c\n}\n")
    for text in (_corpus_programs(gpu_corpus)[0].read_text(encoding="utf-8"), dup):
        want = T.program_from_text(text, "m")
        parsed = P.ParsedHlo(text)
        by = parsed.by_name()
        assert P.offload_inventory(parsed).ops == P.offload_inventory(text).ops
        assert parsed.by_name() is by
        prog = T.program_from_text(parsed, "m", consume=True)
        assert prog.instrs is by and parsed.take_by_name() is None
        assert list(prog.instrs) == list(want.instrs) and _fields(prog) == _fields(want)
        kept = P.ParsedHlo(text)
        kept_by = kept.by_name()
        again = T.program_from_text(kept, "m")
        assert again.instrs is not kept_by and kept.by_name() is kept_by
        assert all(isinstance(v, P._Instr) for v in kept_by.values())
        assert _fields(again) == _fields(want)
    assert want.instrs["x"].opcode == "constant" and list(want.instrs)[:2] == ["x", "y"]


def test_a_program_text_that_cannot_be_read_is_as_none(tmp_path):
    """A run directory's `hlo/<module>.hlo.txt` that is a directory or a dangling link: the
    report reads the run as one without that text (it ended in an internal error, exit 4)."""
    import shutil

    from tests.conftest import run_cli

    src = REPO / "sample_traces/gpu-h100/transformer-h100-command-buffers/qkv_proj_offloaded_cb"
    runs = {}
    for kind in ("none", "directory", "dangling"):
        d = runs[kind] = tmp_path / kind
        shutil.copytree(src, d)
        text = d / "hlo" / "jit_train_step.hlo.txt"
        text.unlink()
        if kind == "directory":
            text.mkdir()
        elif kind == "dangling":
            text.symlink_to(tmp_path / "gone.hlo.txt")
    out = {}
    for kind, d in runs.items():
        r = run_cli("report", "--json", str(d))
        assert r.returncode == 0 and r.stderr == "", (kind, r.stderr)
        out[kind] = json.loads(r.stdout.replace(str(d), "RUN"))
    assert out["directory"] == out["none"] == out["dangling"]
    with_text = json.loads(run_cli("report", "--json", str(src)).stdout.replace(str(src), "RUN"))
    assert with_text != out["none"]  # (the text is read where it can be)
