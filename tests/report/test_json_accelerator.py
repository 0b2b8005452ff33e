"""The JSON writer's encoder made from the C accelerator `_json` without the `json` package
(issue 32 round 11: the package's decoder and scanner were ~1.5 ms of every report's
start-up, and a report reads no JSON): the same text and the same refusals as
`json.JSONEncoder(allow_nan=False)`, also where the accelerator is missing (the package's own
encoder), and a report of a capture file no longer imports `json`."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from overlap.report import text as T

_VALUES = [0, -1, 2**70, 1.5, -0.0, 1e300, None, True, "a\u00e9\n\"\\\x00\U0001f600",
           [], {}, (1, 2), [1, {"x": 2.0, "y": [None, "z"]}], {"k": 1, 3: 4, 2.5: "f", None: 0}]


class _Odd:
    pass


@pytest.mark.parametrize("without", [False, True])
def test_same_text_and_refusals_as_the_package(monkeypatch, without):
    if without:  # no accelerator: the package's encoder, as `json` itself would fall back
        monkeypatch.setitem(sys.modules, "_json", None)
    encode, ascii_ = T._c_encoder()
    ref = json.JSONEncoder(allow_nan=False)
    for v in _VALUES:
        assert encode(v) == ref.encode(v)
    for s in ("", "x", "é\u2028\"", "\U0001f600"):
        assert ascii_(s) == json.encoder.py_encode_basestring_ascii(s) == json.dumps(s)
    for bad, error in ((math.nan, ValueError), ([math.inf], ValueError), (_Odd(), TypeError),
                       ({1, 2}, TypeError)):
        with pytest.raises(error) as got:
            encode(bad)
        with pytest.raises(error) as want:
            ref.encode(bad)
        assert str(got.value) == str(want.value)
    assert encode([1, 2]) == "[1, 2]"  # still usable after a refusal


def test_the_writer_uses_the_accelerator_itself():
    import _json

    assert T._ASCII is _json.encode_basestring_ascii


def test_a_report_imports_no_json_package(tmp_path):
    """A capture file's `report --json` (and the text report) runs without `json`: a module
    that imports it at the top again costs every report its start-up."""
    from overlap.trace.synthetic import SyntheticTrace

    t = SyntheticTrace("h")
    g = t.gpu(0)
    g.kernel(1_000_000, 5_000_000, hlo_op="fusion.1")
    g.memcpy("D2H", 2_000_000, 1_000_000, 4096, hlo_op="copy-start.1")
    f = t.write(tmp_path / "h.xplane.pb")
    code = ("import sys, io, contextlib; from overlap.cli.main import main\n"
            "for a in (['--json'], []):\n"
            "    with contextlib.redirect_stdout(io.StringIO()) as out:\n"
            f"        assert main(['report', *a, {str(f)!r}]) == 0\n"
            "    assert out.getvalue()\n"
            "print('json' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"
