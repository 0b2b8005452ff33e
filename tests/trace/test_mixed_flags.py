"""`inspect` and `report --html` on one host file with a ROCm copy and a CUPTI memcpy (fuzz
round 3, N3): the ROCm rule's `async` flag (one True for its chunk) was filled as int64 1 beside
the CUPTI rule's True, and the transfers table raised "Need to pass bool-like values" (exit 4).
A scalar flag now stays a flag (`overlap.trace.values.Cols.rows`)."""

from __future__ import annotations

import contextlib
import io

import numpy as np

from overlap.cli.main import main
from overlap.trace.synthetic import SyntheticTrace
from overlap.trace.tables import _convert
from overlap.trace.values import Cols

US = 1_000_000


def test_a_scalar_flag_chunk_beside_a_column_of_flags_stays_bools():
    c = Cols()
    c.add(2, flag=np.array([True, None], object))
    c.add(3, flag=True)  # one value for the whole chunk, as the ROCm rule writes `async`
    got = c.rows({"flag": "boolean"})["flag"]
    assert [type(v) for v in got.tolist()] == [bool, type(None), bool, bool, bool]
    b = _convert(got, "boolean")
    assert b.isna().tolist() == [False, True, False, False, False] and b[2] and b[4]


def test_inspect_and_html_read_a_rocm_copy_beside_a_cupti_memcpy(tmp_path):
    t = SyntheticTrace()
    t.gpu(0).memcpy("H2D", 10 * US, 5 * US, 1 << 20, stream=13)
    r = t.rocm(1)
    r.kernel(10 * US, 30 * US, stream=7, name="rk")
    r.hip_copy("H2D", 12 * US, 20 * US, 1 << 20)
    t.step(0, 5 * US, 100 * US)
    f = tmp_path / "h.xplane.pb"
    f.write_bytes(t.to_bytes())
    for args in (["inspect", str(f)], ["inspect", "--json", str(f)],
                 ["report", "--html", str(tmp_path / "x.html"), str(f)]):
        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            rc = main(args)
        assert rc == 0, (args, err.getvalue())
