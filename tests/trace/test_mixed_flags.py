"""`inspect` and `report --html` on one host file with a ROCm copy and a CUPTI memcpy (fuzz
round 3, N3): the two copy rules write the `async` flag as 1 and as True; the transfers table
must read both as the same flag (it raised "Need to pass bool-like values", exit 4)."""

from __future__ import annotations

import contextlib
import io

import numpy as np

from overlap.cli.main import main
from overlap.trace.synthetic import SyntheticTrace
from overlap.trace.tables import _convert

US = 1_000_000


def test_a_flag_written_as_0_1_and_as_bools_is_one_boolean_column():
    got = _convert(np.array([True, 1, None, 0, False], object), "boolean")
    assert got.tolist()[:2] == [True, True] and got.tolist()[3:] == [False, False]


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
