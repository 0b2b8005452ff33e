"""Did each checkpoint name offload (`overlap.analysis.names`), the trace-op -> HLO mapping
(`overlap.hlo.trace_ops`) and the label of copies outside any program
(`overlap.analysis.overlap.OUTSIDE_PROGRAM_OP`), on the real H100 captures, real CPU compiler
output and small cases whose answers are known by construction."""

from __future__ import annotations

import glob
import json
import subprocess
import sys
from pathlib import Path

import pytest

from overlap.analysis import names as nm
from overlap.analysis.overlap import DIRECTIONS, OUTSIDE_PROGRAM_OP, UNKNOWN_OP, analyze
from overlap.hlo import trace_ops
from overlap.trace import read_trace

REPO = Path(__file__).resolve().parents[2]
H100 = REPO / "sample_traces" / "gpu-h100"
CB = H100 / "transformer-h100-command-buffers" / "qkv_proj_offloaded_cb"
SCAN = H100 / "scan-h100" / "offload_x"
USER = H100 / "user-script" / "balanced-offload"
IO = H100 / "user-pageable" / "io"

def _report(path: Path) -> dict:
    out = subprocess.run([sys.executable, "-m", "overlap", "report", "--json", str(path)],
                         capture_output=True, text=True, timeout=600, check=True)
    return json.loads(out.stdout)


def _sums_cover_directions(result: dict) -> None:
    """Per direction, names + shared + other rows hold every copy exactly once."""
    sec = result["offload_by_name"]
    for d in DIRECTIONS:
        tot = {k: 0 for k in ("count", "bytes", "span_ps", "hidden_ps")}
        parts = [r["seen"][d] for r in sec["names"]] + [s["by_direction"][d]
                                                      for s in sec["shared"]]
        for b in parts:
            for k in tot:
                tot[k] += b[k]
            assert 0 <= b["hidden_ps"] <= b["span_ps"]
        want = result["by_direction"][d]
        assert tot["count"] <= want["count"]
    total = {k: sum(r["seen"][d][k] for r in sec["names"] for d in DIRECTIONS)
             + sum(s["by_direction"][d][k] for s in sec["shared"] for d in DIRECTIONS)
             + sum(o[k] for o in sec["other"]) for k in ("count", "bytes", "span_ps", "hidden_ps")}
    assert total["count"] == result["summary"]["transfers"]
    assert total["bytes"] == result["summary"]["bytes"]
    assert total["span_ps"] == result["summary"]["span_ps"]
    assert total["hidden_ps"] == result["summary"]["hidden_ps"]


# ---------------------------------------------------------------------------------------------
# Names in the source (by construction)


def test_name_at_finds_the_enclosing_call(tmp_path):
    src = tmp_path / "model.py"
    src.write_text(
        "from jax.ad_checkpoint import checkpoint_name as cn\n"
        "import jax\n"
        "def f(h, w, x):\n"
        "    q = cn(h @ w, 'query_proj')\n"
        "    k = jax.ad_checkpoint.checkpoint_name(jax.numpy.tanh(h @ w), name='act')\n"
        "    return q + k + x\n")
    at = trace_ops.Location(str(src), "f", 4, 11, 4, 16)  # `h @ w` on line 4
    assert nm.name_at(str(src), at) == "query_proj"
    inner = trace_ops.Location(str(src), "f", 5, 56, 5, 61)  # `h @ w` inside tanh
    assert nm.name_at(str(src), inner) == "act"
    outside = trace_ops.Location(str(src), "f", 6, 11, 6, 16)
    assert nm.name_at(str(src), outside) is None
    # a span wider than the call's first argument is not inside it
    assert nm.name_at(str(src), trace_ops.Location(str(src), "f", 4, 4, 4, 30)) is None


def test_source_file_rules(tmp_path):
    run = tmp_path / "runs" / "r1"
    run.mkdir(parents=True)
    (tmp_path / "runs" / "train.py").write_text("x = 1\n")
    got = nm.source_file("/elsewhere/train.py", nm._hints(run))
    assert got is not None and got[0] == str(tmp_path / "runs" / "train.py")
    mine = nm.source_file("/some/checkout/overlap/capture/workloads.py", ())
    assert mine is not None and mine[0].endswith("overlap/capture/workloads.py")
    assert nm.source_file("/nowhere/else.py", ()) is None


# ---------------------------------------------------------------------------------------------
# Trace op -> instructions, on a module written for the test


_MODULE = """HloModule m

%wrapped_dynamic-update-slice_computation.1 (p0: f32[4,8], p1: f32[1,8], p2: s32[], \
p3: s32[]) -> f32[4,8] {
  %p0 = f32[4,8]{1,0} parameter(0)
  %p1 = f32[1,8]{1,0} parameter(1)
  %p2 = s32[] parameter(2)
  %p3 = s32[] parameter(3)
  ROOT %dus = f32[4,8]{1,0} dynamic-update-slice(%p0, %p1, %p2, %p3)
}

ENTRY %main (a: f32[4,8], b: f32[1,8]) -> f32[4,8] {
  %a = f32[4,8]{1,0:S(5)} parameter(0)
  %b = f32[1,8]{1,0} parameter(1)
  %mul = f32[1,8]{1,0} multiply(%b, %b), metadata={op_name="jit(f)/mul" stack_frame_id=1}
  %bc = f32[1,8]{1,0} bitcast(%mul)
  %z = s32[] constant(0)
  %dus-start.1.0 = ((f32[4,8]{1,0:S(5)}, f32[1,8]{1,0}, s32[], s32[]), f32[4,8]{1,0:S(5)}, \
u32[]) fusion-start(%a, %bc, %z, %z), kind=kLoop, calls=%wrapped_dynamic-update-slice_computation.1
  ROOT %dus-done = f32[4,8]{1,0:S(5)} fusion-done(%dus-start.1.0)
  %copy-start.3.0 = (f32[1,8]{1,0:S(5)}, f32[1,8]{1,0}, u32[]) copy-start(%b)
}

FileNames
1 "{src}"

FunctionNames
1 "f"

FileLocations
1 {{file_name_id=1 function_name_id=1 line=2 end_line=2 column=24 end_column=29}}

StackFrames
1 {{file_location_id=1 parent_frame_id=1}}
"""


def test_trace_ops_and_names_on_a_written_module(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("def f(b):\n    y = checkpoint_name(b * b, 'act')\n    return y\n")
    text = _MODULE.replace("{src}", str(src)).replace("{{", "{").replace("}}", "}")
    prog = trace_ops.program_from_text(text)
    # the thunk is named after the wrapped computation, numbered after its suffix
    assert trace_ops.trace_op_instructions(prog, "wrapped_dynamic-update-slice.1") == (
        ["dus-start.1.0"], trace_ops.CALLED)
    assert trace_ops.trace_op_instructions(prog, "copy-start.3.0") == (["copy-start.3.0"],
                                                                       trace_ops.NAME)
    assert trace_ops.trace_op_instructions(prog, "command_buffer_7") == (
        None, trace_ops.COMMAND_BUFFER)
    assert trace_ops.trace_op_instructions(prog, "fusion.9") == (None, None)
    # frame 1 has no parent (the text prints parent_frame_id=1 for it)
    assert [loc.line for loc in trace_ops.frame_locations(prog, "mul")] == [2]
    ops = nm.op_names(prog, text, ())
    assert ops["dus-start.1.0"]["direction"] == "D2H"
    assert ops["dus-start.1.0"]["name"] == "act"
    assert ops["dus-start.1.0"]["evidence"]["instruction"] == "mul"
    # change the source so the location no longer lies inside the call: no name
    # (no cache to clear: named_spans reads a file again once its mtime or size changed)
    src.write_text("def f(b):\n    y = b * b + checkpoint_name(b, 'act')\n    return y\n")
    assert nm.op_names(prog, text, ())["dus-start.1.0"]["name"] is None


# ---------------------------------------------------------------------------------------------
# Real compiler output and captures


def test_text_and_proto_of_one_program_agree():
    """The run directory's HLO text and the capture's HloProto of the command-buffer run: the
    same name for every host-copy instruction (the text's frame parents are shifted by one)."""
    from overlap.hlo.program import hlo_protos_from_xspace

    raw_text = (CB / "hlo" / "jit_train_step.hlo.txt").read_text()
    t = nm.op_names(trace_ops.program_from_text(raw_text), raw_text, nm._hints(CB))
    f = glob.glob(str(CB / "plugins/profile/*/*.xplane.pb"))[0]
    protos = hlo_protos_from_xspace(f)
    raw = protos["jit_train_step(4664)"]
    p = nm.op_names(trace_ops.program_from_proto(raw), raw, nm._hints(CB))
    assert {k: v["name"] for k, v in t.items()} == {k: v["name"] for k, v in p.items()}
    assert sorted(v["name"] for v in t.values() if v["direction"] == "D2H") == [
        "key_proj", "query_proj", "value_proj"]
    assert sorted(v["name"] for v in t.values() if v["direction"] == "H2D") == [
        "key_proj", "query_proj", "value_proj"]
    assert all(v["executed_bytes"] == 8 * 64 << 20 for v in t.values())


def test_command_buffer_run_shares_time_and_flags_kv_proj():
    r = _report(CB)
    sec = r["offload_by_name"]
    rows = {x["name"]: x for x in sec["names"]}
    assert "never compiled" in rows["kv_proj"]["flag"] and rows["kv_proj"]["asked"]
    assert rows["query_proj"]["compiled"]["D2H"]["count"] == 1
    assert rows["query_proj"]["flag"] is None  # its copies are in the shared row
    (shared,) = sec["shared"]
    assert shared["names"] == ["key_proj", "query_proj", "value_proj"]
    assert shared["by_direction"]["D2H"]["count"] == 120
    assert shared["by_direction"]["H2D"]["bytes"] == 8_053_063_680
    _sums_cover_directions(r)


def test_scan_run_names_x_by_elimination():
    r = _report(SCAN)
    (row,) = r["offload_by_name"]["names"]
    assert row["name"] == "x" and row["asked"] is True and row["flag"] is None
    assert {e["how"] for e in row["evidence"]} == {nm.ONLY_LEFT}
    assert row["seen"]["D2H"]["bytes"] == row["seen"]["H2D"]["bytes"] == 6_710_886_400
    assert row["seen"]["D2H"]["hidden_ps"] == r["by_direction"]["D2H"]["hidden_ps"]
    _sums_cover_directions(r)


def test_user_script_names_act_from_the_script_beside_it():
    r = _report(USER)
    (row,) = r["offload_by_name"]["names"]
    assert row["name"] == "act" and row["asked"] is None  # a bare capture: no policy
    assert row["evidence"][0]["how"] == nm.SOURCE
    assert row["evidence"][0]["at"].startswith(str(H100 / "user-script" / "user_offload.py"))
    assert row["seen"]["D2H"]["count"] == row["seen"]["H2D"]["count"] == 80
    assert row["seen"]["D2H"]["bytes"] == 10_737_418_240
    _sums_cover_directions(r)


def test_full_archive_qkv_run_per_name(gpu_corpus):
    run = gpu_corpus / "gpu-h100" / "transformer-h100" / "qkv_proj_offloaded"
    r = _report(run)
    rows = {x["name"]: x for x in r["offload_by_name"]["names"]}
    assert set(rows) == {"query_proj", "key_proj", "value_proj", "kv_proj"}
    for n in ("query_proj", "key_proj", "value_proj"):
        assert rows[n]["seen"]["D2H"]["count"] == rows[n]["seen"]["H2D"]["count"] == 40
        assert rows[n]["flag"] is None
    assert not r["offload_by_name"]["shared"] and not r["offload_by_name"]["other"]
    _sums_cover_directions(r)


def test_cpu_compile_keeps_the_source_locations_not_the_names():
    """A program compiled here on XLA:CPU with an offload policy: the HLO carries no name
    (jax lowers checkpoint_name to nothing) and no host copy (XLA:CPU compiles offload away),
    but its stack frames lead to this file, whose checkpoint_name call the source rule reads."""
    import jax
    import jax.numpy as jnp
    from jax.ad_checkpoint import checkpoint_name

    pol = jax.checkpoint_policies.save_and_offload_only_these_names(
        names_which_can_be_saved=[], names_which_can_be_offloaded=["probe_act"],
        offload_src="device", offload_dst="pinned_host")

    def layer(x, w):
        a = checkpoint_name(jnp.tanh(x @ w), "probe_act")
        return x + a, None

    def loss(ws, x):
        y, _ = jax.lax.scan(jax.checkpoint(layer, policy=pol), x, ws)
        return jnp.sum(y)

    ws, x = jnp.ones((3, 8, 8)), jnp.ones((4, 8))
    text = jax.jit(jax.grad(loss)).lower(ws, x).compile().as_text()
    assert "probe_act" not in text
    prog = trace_ops.program_from_text(text)
    assert nm.op_names(prog, text, ()) == {}
    assert nm.tagged_names(prog, ())["probe_act"].startswith(__file__)
    here = [loc for ins in prog.instrs.values() for loc in trace_ops.frame_locations(
        prog, ins.name) if loc.file == __file__]
    assert any(nm.name_at(__file__, loc) == "probe_act" for loc in here)


# ---------------------------------------------------------------------------------------------
# Copies outside any program


def test_device_put_copies_are_outside_any_program():
    t = read_trace(IO)
    res = analyze(t)
    ops = {x["hlo_op"] for x in res["by_hlo_op"]["records"]}
    assert ops == {OUTSIDE_PROGRAM_OP}
    assert {x["hlo_op"] for x in res["top_exposed"]["records"]} == {OUTSIDE_PROGRAM_OP}
    # the same copies on a device whose vendor was only inferred: the evidence is gone
    for facts in t.capture.values():
        facts["vendors"] = {d: "NVIDIA (inferred)" for d in facts.get("vendors") or {}}
    assert {x["hlo_op"] for x in analyze(t)["by_hlo_op"]["records"]} == {UNKNOWN_OP}


@pytest.mark.parametrize("sample", ["gpu-v100-tf-multiworker", "rocm/mi300x-jax08-attention"])
def test_other_platforms_keep_unknown(sample):
    res = analyze(read_trace(REPO / "sample_traces" / sample))
    assert {x["hlo_op"] for x in res["by_hlo_op"]["records"]} == {UNKNOWN_OP}


def test_merged_dots_have_no_name_of_their_own(gpu_corpus):
    """transformer:control: XLA merged the query and value dots into one (one source location
    kept) and offloads slices of it: those copies are a merged row, not value_proj's."""
    run = gpu_corpus / "gpu-h100" / "transformer-control" / "qkv_proj_offloaded"
    r = _report(run)
    sec = r["offload_by_name"]
    rows = {x["name"]: x for x in sec["names"]}
    assert rows["key_proj"]["seen"]["D2H"]["count"] == 40
    assert rows["value_proj"]["compiled"]["D2H"]["count"] == 0
    assert "merged" in rows["query_proj"]["flag"] and "merged" in rows["value_proj"]["flag"]
    assert "never compiled" in rows["kv_proj"]["flag"]
    (merged,) = [o for o in sec["other"] if o["label"] == nm.MERGED_OP]
    assert merged["count"] == 160
    _sums_cover_directions(r)


# Texts around the `checkpoint_name` identifier: a call, an alias, the name inside a longer
# identifier, a docstring's mention, comments and line continuations between the name and its
# parenthesis, an f-string, a syntax error.
_SNIPPETS = [
    'from jax.ad_checkpoint import checkpoint_name\ny = checkpoint_name(x * 2, "y")\n',
    'from jax.ad_checkpoint import checkpoint_name as cn\ny = cn(x, "a")\n',
    'from jax.ad_checkpoint import (checkpoint_name  # c\n  as cn)\ny = cn(x, name="b")\n',
    'from jax.ad_checkpoint import checkpoint_name \\\n    as cn\ny = cn(x, "c")\n',
    'import jax\ny = jax.ad_checkpoint.checkpoint_name (x, "d")\n',
    'y = f(checkpoint_name  # why\n      (x, "e"))\n',
    'y = checkpoint_name\\\n(x, "f")\n',
    'z = f"{checkpoint_name(x, \'g\')}"\n',
    'def _checkpoint_names(t):\n    """checkpoint_name spans"""\n'
    '    return {"checkpoint_names": t}\n',
    '# checkpoint_name is jax\'s\nx = 1\n',
    'checkpoint_name asserts nothing\n',
    'y = checkpoint_name(x, "h"\n',
    'y = checkpoint_name(x, 3)\n',
    # non-ASCII: a comment's arrow, a fullwidth letter Python folds into `checkpoint_name`
    '# checkpoint_name \u2192 a call\nfrom jax.ad_checkpoint import checkpoint_name\n'
    'y = \uff43heckpoint_name(x, "i")\n',
    'z = 1  # checkpoint_name \u2192 nothing here\n',
]


@pytest.mark.parametrize("text", _SNIPPETS)
def test_texts_skipped_without_parsing_have_no_spans(text):
    """`_spans_of_text` parses a text only where `_MAYBE_CALL` finds the identifier before a
    `(` or an `as`: every text it skips has no span when parsed anyway."""
    import unicodedata

    parsed = _parse_spans(text)
    if nm._MAYBE_CALL.search(unicodedata.normalize("NFKC", text)) is None:
        assert parsed == ()
    assert nm._spans_of_text(text) == parsed


def test_every_python_file_here_skipped_has_no_spans():
    """The same over this repository's Python files and the sample workloads (the files a
    capture's stack frames name)."""
    root = Path(__file__).resolve().parents[2]
    files = [*root.glob("overlap/**/*.py"), *root.glob("sample_traces/**/*.py"),
             *root.glob("tests/**/*.py")]
    assert len(files) > 50
    skipped = 0
    for f in files:
        text = f.read_text(encoding="utf-8", errors="replace")
        if "checkpoint_name" in text and nm._MAYBE_CALL.search(text) is None:
            skipped += 1
            assert _parse_spans(text) == (), f
        assert nm._spans_of_text(text) == _parse_spans(text), f
    assert skipped  # (overlap/capture/api.py only mentions the name)


def _parse_spans(text: str):
    """`_spans_of_text` without its shortcut: every text parsed."""
    saved = nm._MAYBE_CALL
    nm._MAYBE_CALL = __import__("re").compile("")  # matches every text
    try:
        return nm._spans_of_text(text)
    finally:
        nm._MAYBE_CALL = saved


def test_calls_are_found_in_ast_walk_order():
    """`_checkpoint_aliases` walks the tree itself: the same calls, in `ast.walk`'s order (the
    spans' order decides ties between equal spans and the first file:line a name is tagged
    at), and the same aliases, on every Python file here and the snippets above."""
    import ast

    root = Path(__file__).resolve().parents[2]
    texts = [f.read_text(encoding="utf-8") for f in root.glob("overlap/**/*.py")]
    for text in [*texts, *_SNIPPETS[:8]]:
        tree = ast.parse(text)
        names, calls = nm._checkpoint_aliases(tree)
        want = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and n.args]
        assert [id(c) for c in calls] == [id(c) for c in want]
        assert names == {"checkpoint_name"} | {
            a.asname for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
            for a in n.names if a.name == "checkpoint_name" and a.asname}


def test_outside_copies_are_one_other_row_with_their_sums():
    """The copies outside any program are one `other` row whose count, bytes and times are
    the transfers' own sums (the per-group sums, `_exact_sum`, and the `==` test per group)."""
    t = read_trace(IO)
    res = analyze(t)
    sec = nm.offload_by_name(IO, t, res)
    assert sec is not None
    rows = {r["label"]: r for r in sec["other"]}
    assert list(rows) == [OUTSIDE_PROGRAM_OP]
    tr = t.columns("transfers")
    r = rows[OUTSIDE_PROGRAM_OP]
    assert r["count"] == len(tr["bytes"]) > 0
    assert r["bytes"] == sum(int(b) for b in tr["bytes"])
    assert 0 <= r["hidden_ps"] <= r["span_ps"]
    assert r["exposed_ps"] == r["span_ps"] - r["hidden_ps"]


def test_exact_sum_is_pythons_sum():
    """numpy's sum where no partial sum can leave int64, Python's elsewhere: always Python's
    answer, an int."""
    import numpy as np

    big = 2 ** 62
    for a in (np.array([1, 2, 3]), np.array([big, big, big]), np.array([-2 ** 63, -1]),
              np.array([big - 1, -big, big]), np.zeros(0, np.int64), np.array([7], np.uint64),
              np.array([2 ** 63 + 5, 2 ** 63], np.uint64), np.array([3, 4], object)):
        got = nm._exact_sum(a)
        assert type(got) is int and got == sum(int(x) for x in a.tolist())


def test_bucketed_programs_give_each_program_s_bytes_not_their_sum(gpu_large, tmp_path):
    """A step jitted for 32 batch sizes (the real H200 capture `buckets_offload_32`): each
    step runs one program, so the name's bytes per step are one program's, a range over the
    32, never their sum; one program's name keeps its plain `executed_bytes`."""
    import shutil

    from overlap.report.names_text import render_offload_by_name

    run = tmp_path / "buckets_offload_32"
    shutil.copytree(gpu_large / "buckets_offload_32", run)
    # the script whose checkpoint_name calls the stack frames name, beside the capture
    shutil.copy(REPO / "benchmarks" / "device" / "programs_capture.py", run)
    r = _report(run)
    (act,) = [n for n in r["offload_by_name"]["names"] if n["name"] == "act"]
    for d in DIRECTIONS:
        c = act["compiled"][d]
        assert c["count"] == 32 and c["programs"] == 32
        lo, hi = c["executed_bytes_range"]
        # batch 1024 to 3008 rows of 1024 bf16 values, 4 slices: 8 MiB to 23.5 MiB a program
        assert (lo, hi) == (4 * 1024 * 1024 * 2, 4 * 3008 * 1024 * 2)
        assert lo <= hi < c["executed_bytes"] == 528_482_304
    text = "\n".join(render_offload_by_name(r["offload_by_name"]))
    assert "8.0 MiB-23.5 MiB (32 programs)" in text and "504.0 MiB" not in text
    one = _report(SCAN)["offload_by_name"]
    assert all("executed_bytes_range" not in n["compiled"][d] and "programs" not in
               n["compiled"][d] for n in one["names"] for d in DIRECTIONS)
