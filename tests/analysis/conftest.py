"""Fixtures of the analysis tests: a real (deviceless) H100 plan, made once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from overlap.cli.main import main as cli_main


@pytest.fixture(scope="session")
def h100_plan(tmp_path_factory) -> Path:
    """`overlap plan --target h100 --workload scan:small --policy offload:x` (deviceless).
    Read only: a test that damages it copies it first."""
    pytest.importorskip("jax_plugins.xla_cuda12")
    plans = tmp_path_factory.mktemp("plans")
    assert cli_main(["plan", "--target", "h100", "--workload", "scan:small", "--policy",
                     "offload:x", "--out", str(plans)]) == 0
    return plans / "h100-scan-offload_x"
