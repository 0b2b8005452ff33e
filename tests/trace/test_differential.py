"""One answer per file, whichever decoder reads it (issue 34).

Mutated captures of every backend (real ones from sample_traces/: GPU, TPU, ROCm, CPU; and
SYNTHETIC GPU, TPU, ROCm and CPU builds from overlap.trace.synthetic) are read by the CLI with
the compiled scanner and with upb (`wire.SCANNER = None`, what OVERLAP_SCANNER=0 sets): the exit
codes must be equal and the JSON byte-identical; a file refused by one is refused by `check`
with both, the same way. Each case's skeleton (`_scan.split_space`) is also decoded by the
pure-Python skeleton decoder, which must either decline or give upb's answer exactly (so what
a process read before cannot change whether a file is readable).

The mutations aim at the rule in overlap.trace.wire: tags and length prefixes written in 5
bytes (upb reads them) and 6 (it refuses), field numbers 2**29 - 1 and 2**29, unknown groups
nested to upb's limit and one beyond, at every level of the message tree; invalid UTF-8 in
every kind of string field (written once, or twice with only the first copy bad); and plain
byte damage. Bounded: 176 cases, ~10 s here.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
from pathlib import Path

import pytest

from overlap.cli.main import main
from overlap.trace import skeleton, wire
from overlap.trace.synthetic import SyntheticTrace

pytestmark = pytest.mark.skipif(wire._scan is None, reason="the compiled scanner is not built")

REPO = Path(__file__).resolve().parents[2]
US = 1_000_000
# OVERLAP_DIFF_SEED / OVERLAP_DIFF_SCALE: another seed, or N times the cases (a longer campaign)
SEED = int(os.environ.get("OVERLAP_DIFF_SEED", "3434"))
SCALE = int(os.environ.get("OVERLAP_DIFF_SCALE", "1"))

# --- a protobuf tree walker (field numbers of protos/xplane.proto) ----------------------------

# message kind -> {field number: child message kind}
SUB = {
    "space": {1: "plane"},
    "plane": {3: "line", 4: "ementry", 5: "smentry", 6: "stat"},
    "line": {4: "event"},
    "event": {4: "stat"},
    "ementry": {2: "emeta"},
    "emeta": {5: "stat"},
    "smentry": {2: "smeta"},
    "smeta": {},
    "stat": {},
}
# string fields of each kind
STRINGS = {"space": (2, 3, 4), "plane": (2,), "line": (2, 11), "stat": (5,), "emeta": (2, 4),
           "smeta": (2, 3)}
# upb's depth of a message of each kind, counted from the XSpace (its group limit is 100)
DEPTH = {"space": 0, "plane": 1, "line": 2, "ementry": 2, "smentry": 2, "event": 3,
         "emeta": 3, "smeta": 3, "stat": 4}


def _varint(v: int, width: int = 0) -> bytes:
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v or len(out) + 1 < width:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _read_varint(b: bytes, i: int) -> tuple[int, int]:
    v = shift = 0
    while True:
        x = b[i]
        i += 1
        v |= (x & 0x7F) << shift
        shift += 7
        if x < 0x80:
            return v, i


class Node:
    """A message: its fields as [fn, wt, value, tag width, length width]; a value is an int
    (varint), bytes, or a Node (a known sub-message)."""

    def __init__(self, kind: str, fields: list) -> None:
        self.kind = kind
        self.fields = fields

    def encode(self) -> bytes:
        out = []
        for fn, wt, v, tw, lw in self.fields:
            out.append(_varint(fn << 3 | wt, tw))
            if wt == 0:
                out.append(_varint(v))
            elif wt == 2:
                body = v.encode() if isinstance(v, Node) else v
                out.append(_varint(len(body), lw) + body)
            else:
                out.append(v)  # fixed bytes, or a raw group (ready bytes)
        return b"".join(out)

    def walk(self):
        yield self
        for f in self.fields:
            if isinstance(f[2], Node):
                yield from f[2].walk()


def parse(b: bytes, kind: str = "space") -> Node:
    i, fields = 0, []
    while i < len(b):
        t, i = _read_varint(b, i)
        fn, wt = t >> 3, t & 7
        if wt == 0:
            v, i = _read_varint(b, i)
        elif wt == 1:
            v, i = b[i:i + 8], i + 8
        elif wt == 5:
            v, i = b[i:i + 4], i + 4
        else:
            assert wt == 2, "the seeds are canonical"
            n, i = _read_varint(b, i)
            v, i = b[i:i + n], i + n
            sub = SUB[kind].get(fn)
            if sub is not None:
                v = parse(v, sub)
        fields.append([fn, wt, v, 0, 0])
    return Node(kind, fields)


def _groups(k: int, fn: int = 15) -> bytes:
    return _varint(fn << 3 | 3) * k + _varint(fn << 3 | 4) * k


def mutate(root: Node, rng: random.Random) -> tuple[bytes, str]:
    """One mutated encoding of `root` (left as it was) and what was done."""
    nodes = list(root.walk())
    node = rng.choice(nodes)
    saved = [list(f) for f in node.fields]
    op = rng.randrange(9)
    what = f"{op}:{node.kind}"
    try:
        at = rng.randrange(len(node.fields) + 1)
        if op == 0:  # an unknown varint field, its tag in 5 or 6 bytes
            node.fields.insert(at, [9, 0, 1, rng.choice((5, 6)), 0])
        elif op == 1 and node.fields:  # a length prefix in 5 or 6 bytes
            ld = [f for f in node.fields if f[1] == 2]
            if ld:
                rng.choice(ld)[4] = rng.choice((5, 6))
        elif op == 2:  # field number 2**29 - 1 or 2**29
            node.fields.insert(at, [(1 << 29) - rng.randrange(2), 0, 7, 0, 0])
        elif op == 3:  # unknown groups nested to upb's limit, or one beyond
            k = 100 - DEPTH[node.kind] + rng.choice((0, 1))
            node.fields.insert(at, [15, 3, _groups(k)[1:], 1, 0])
        elif op in (4, 5, 6):  # invalid UTF-8 in a string field (once; twice, first bad)
            fns = STRINGS.get(node.kind, ())
            strs = [f for f in node.fields if f[0] in fns and f[1] == 2]
            bad = rng.choice((b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80"))
            if strs:
                f = rng.choice(strs)
                if op == 6:  # the bad copy first, the good one last: upb reads the last
                    node.fields.insert(node.fields.index(f), [f[0], 2, f[2] + bad, 0, 0])
                else:
                    f[2] = f[2][: rng.randrange(len(f[2]) + 1)] + bad
            elif fns:
                node.fields.insert(at, [rng.choice(fns), 2, b"x" + bad, 0, 0])
        elif op == 7:  # a field of a known number with the wrong wire type
            node.fields.insert(at, [rng.choice(list(SUB[node.kind]) or [1]), 0, 3, 0, 0])
        data = root.encode()
        if op == 8 and data:  # plain byte damage
            b = bytearray(data)
            for _ in range(rng.randint(1, 3)):
                b[rng.randrange(len(b))] = rng.randrange(256)
            data = bytes(b)
        return data, what
    finally:
        node.fields[:] = saved


# --- seeds ------------------------------------------------------------------------------------

def _synthetic() -> list[tuple[str, bytes]]:
    g = SyntheticTrace()
    gd = g.gpu(0)
    for i in range(4):
        gd.kernel((10 + 40 * i) * US, 30 * US, stream=7, name=f"k{i}")
        gd.memcpy("D2H" if i % 2 else "H2D", (15 + 40 * i) * US, 20 * US, 1 << 20, stream=13,
                  hlo_op=f"copy-start.{i}")
    g.step(0, 5 * US, 200 * US)
    t = SyntheticTrace()
    td = t.tpu(0)
    for i in range(3):
        td.op((10 + 50 * i) * US, 40 * US, name=f"fusion.{i}")
        td.async_copy("D2H" if i % 2 else "H2D", (12 + 50 * i) * US, (48 + 50 * i) * US)
    t.step(0, 5 * US, 300 * US)
    r = SyntheticTrace()
    rd = r.rocm(0)
    rd.kernel(10 * US, 30 * US, stream=7, name="rk")
    rd.hip_copy("H2D", 12 * US, 20 * US, 1 << 20)
    r.step(0, 5 * US, 100 * US)
    c = SyntheticTrace()
    c.step(0, 5 * US, 100 * US)
    return [("syn-gpu", g.to_bytes()), ("syn-tpu", t.to_bytes()), ("syn-rocm", r.to_bytes()),
            ("syn-cpu", c.to_bytes())]


REAL = {  # the smallest real capture of each backend
    "gpu": "gpu-h100/user-pageable/io",
    "tpu": "tpu-v6e-offload",
    "rocm": "rocm/mi355-te-fused-attn",
    "cpu": "cpu-scan/offload_x",
}


def _seeds() -> list[tuple[str, bytes, int]]:
    out = [(n, b, 36 * SCALE) for n, b in _synthetic()]
    for name, rel in REAL.items():
        files = sorted((REPO / "sample_traces" / rel).rglob("*.xplane.pb"))
        if files:
            out.append((name, files[0].read_bytes(), 8 * SCALE))
    return out


# --- the comparison ---------------------------------------------------------------------------

def _cli(args: list[str], scanner) -> tuple[int, str]:
    old = wire.SCANNER
    wire.SCANNER = scanner
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(args)
    finally:
        wire.SCANNER = old
    assert rc in (0, 1, 3), err.getvalue()  # never a usage error or an internal one
    return rc, out.getvalue()


def _norm_stats(stats) -> list:
    return [(s.metadata_id, s.WhichOneof("value"),
             getattr(s, s.WhichOneof("value")) if s.WhichOneof("value") else None)
            for s in stats]


def _norm(xs) -> tuple:
    """A skeleton's fields, maps in iteration order."""
    planes = []
    for p in xs.planes:
        planes.append((p.id, p.name,
                       [(k, m.id, m.name, m.display_name, bytes(m.metadata),
                         _norm_stats(m.stats), list(m.child_id))
                        for k, m in p.event_metadata.items()],
                       [(k, m.id, m.name, m.description) for k, m in p.stat_metadata.items()],
                       _norm_stats(p.stats)))
    return planes, list(xs.errors), list(xs.warnings), list(xs.hostnames)


def _skeleton_agrees(data: bytes) -> None:
    from google.protobuf.message import DecodeError

    from overlap.trace.protos import XSpace

    buf = wire.padded(data)
    for strip in (None, lambda name: name.startswith("/device:TPU:")):
        try:
            skel = wire._scan.split_space(buf, len(data), strip)[0]
        except wire.Corrupt:
            continue
        mine = skeleton.decode_space(skel)
        try:
            upb = XSpace.FromString(skel)
        except DecodeError:
            assert mine is None, "the skeleton decoder read what upb refuses"
            continue
        if mine is not None:
            assert _norm(mine) == _norm(upb)


def test_scanner_and_upb_give_one_answer_on_mutated_captures(tmp_path):
    rng = random.Random(SEED)
    seen = {"read": 0, "refused": 0, "replaced": 0}
    for name, raw, n in _seeds():
        root = parse(raw)
        assert root.encode() == raw  # the walker is exact on the seeds
        for case in range(n):
            data, what = mutate(root, rng)
            f = tmp_path / f"{name}-{case}.xplane.pb"
            f.write_bytes(data)
            label = f"{name} case {case} ({what})"
            rc_s, js_s = _cli(["report", "--json", str(f)], wire._scan)
            rc_u, js_u = _cli(["report", "--json", str(f)], None)
            assert (rc_s, js_s) == (rc_u, js_u), label
            if rc_s == 3:
                seen["refused"] += 1
                # `check` fails the same way with both decoders
                assert _cli(["check", str(f)], wire._scan)[0] == 3, label
                assert _cli(["check", str(f)], None)[0] == 3, label
            else:
                seen["read"] += 1
                seen["replaced"] += json.loads(js_s)["replaced_strings"]["count"] > 0
            _skeleton_agrees(data)
    # every class of the rule was met: files read, files refused, strings replaced
    assert all(seen.values()), seen


def test_every_damaged_string_field_is_read_alike_and_counted(tmp_path):
    """Invalid UTF-8 in each kind of string field of a SYNTHETIC GPU and TPU capture: read by
    both decoders, the same JSON, `replaced_strings` counting exactly the fields damaged."""
    for name, raw, _ in _seeds()[:2]:
        root = parse(raw)
        for node in root.walk():
            for f in node.fields:
                if f[0] not in STRINGS.get(node.kind, ()) or f[1] != 2:
                    continue
                old = f[2]
                f[2] = old + b"\xff"
                data = root.encode()
                f[2] = old
                p = tmp_path / "s.xplane.pb"
                p.write_bytes(data)
                got = [_cli(["report", "--json", str(p)], s) for s in (wire._scan, None)]
                assert got[0] == got[1], (name, node.kind, f[0])
                assert got[0][0] == 0, (name, node.kind, f[0])
                assert json.loads(got[0][1])["replaced_strings"] == {"count": 1}, \
                    (name, node.kind, f[0])


@pytest.mark.parametrize("k, ok", [(97, True), (98, False)])
def test_groups_in_an_event_nest_as_deep_as_upb_allows(tmp_path, k, ok):
    raw = _seeds()[0][1]
    root = parse(raw)
    ev = next(n for n in root.walk() if n.kind == "event")
    ev.fields.append([15, 3, _groups(k)[1:], 1, 0])
    f = tmp_path / "g.xplane.pb"
    f.write_bytes(root.encode())
    got = [_cli(["report", "--json", str(f)], s) for s in (wire._scan, None)]
    assert got[0] == got[1] and (got[0][0] == 0) == ok
