"""The compiled descriptor sets must match the .proto files they are generated from."""

import subprocess
import sys

import pytest

from tests.conftest import REPO


def test_descriptor_sets_are_in_sync_with_proto_sources():
    pytest.importorskip("grpc_tools")
    r = subprocess.run([sys.executable, str(REPO / "tools" / "gen_protos.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_our_schema_coexists_with_xprof_in_one_process():
    # xprof registers tensorflow.profiler.XSpace in the default pool; ours lives in a private
    # pool under another package, so importing both must not raise "duplicate symbol".
    pytest.importorskip("xprof")
    from xprof.convert import raw_to_tool_data  # noqa: F401  (registers xprof's protos)

    from overlap.trace.protos import XSpace

    xs = XSpace()
    xs.planes.add().name = "/host:CPU"
    assert XSpace.FromString(xs.SerializeToString()).planes[0].name == "/host:CPU"
