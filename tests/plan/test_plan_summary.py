"""The plan summary never contradicts the plan table: every demo plan (h100 and v5e; the scan
and transformer:tiny, each under the policies the demo compiles) is rendered, and each
direction's sentence is checked against the table's column and the estimate it came from.
Also the physics check of issue 20 through the CLI, and budgets beside the verdict."""

from __future__ import annotations

import json
import os

import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")

from overlap.analysis.plans import plan_row  # noqa: E402
from overlap.cli.demo import DEMO_PLAN_TARGETS, DEMO_PLANS  # noqa: E402
from overlap.plan.compile import plan_workload  # noqa: E402
from overlap.report.plan_text import format_hidden, render_plans  # noqa: E402
from tests.conftest import run_cli  # noqa: E402


@pytest.fixture(scope="module")
def demo_manifests(tmp_path_factory) -> list[dict]:
    """Every plan the demo compiles (as `overlap.cli.demo._plans` does), compiled once."""
    out = tmp_path_factory.mktemp("demo_plans")
    manifests = []
    for target in DEMO_PLAN_TARGETS:
        for workload, policies in DEMO_PLANS:
            for p in plan_workload(workload, list(policies), target, out=out):
                assert p.status == "ok", p.error
                manifests.append(p.manifest | {"label": p.path.name if p.path else p.policy})
    return manifests


# The table's fixed columns (overlap.report.plan_text.render_plans): plan 34, device peak 13,
# temp, host temp, D2H/step, H2D/step 12 each, then D2H hid* and H2D hid* 10 each.
_D2H = slice(34 + 13 + 4 * 12, 34 + 13 + 4 * 12 + 10)
_H2D = slice(_D2H.stop, _D2H.stop + 10)


def _table(text: str) -> dict[str, tuple[str, str]]:
    """label -> (D2H hidden cell, H2D hidden cell) from the rendered table."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("plan "))
    assert lines[start][_D2H].strip() == "D2H hid*" and lines[start][_H2D].strip() == "H2D hid*"
    cells = {}
    for ln in lines[start + 1:]:
        if not ln or ln[0] == " " or ":" in ln[:34]:
            break
        cells[ln[:34].strip()] = (ln[_D2H].strip(), ln[_H2D].strip())
    return cells


def test_the_summary_agrees_with_the_table_for_every_demo_plan(demo_manifests):
    text = render_plans(demo_manifests)
    table = _table(text)
    lines = text.splitlines()
    checked = 0
    for m in demo_manifests:
        r = plan_row(m)
        cells = table[str(r["label"])[:33]]  # the table truncates labels to 33
        est = (m.get("estimate") or {}).get("per_step") or {}
        # The plan's summary block: its headline, then its indented direction sentences.
        head = next(i for i, ln in enumerate(lines)
                    if ln.startswith(f"{r['target']} {r['policy']}:") and _belongs(ln, r))
        block = []
        for ln in lines[head + 1:]:
            if not ln.startswith("  ") or ln.startswith("  assumes") or ln.startswith("  memory"):
                break
            block.append(ln)
        for j, d in enumerate(("D2H", "H2D")):
            sentences = [s for s in block if s.strip().startswith(f"{d} predicted")]
            per = est.get(d) or {}
            if not per.get("transfers"):
                assert cells[j] == "-" and not sentences, (r["label"], d, cells, block)
                continue
            (s,) = sentences
            checked += 1
            hf = per["hidden_fraction"]
            shown = format_hidden(hf)
            assert cells[j] == shown, (r["label"], d, cells[j], shown)
            assert f"{d} predicted {shown} hidden" in s, s
            if per["never_hides"]:
                assert hf < 1.0 and "no link hides every copy" in s, s
            elif hf >= 1.0:
                assert "still hides down to" in s, s
                assert per["break_even_Bps"] <= per["link_Bps"] * (1 + 1e-9), (s, per)
            else:
                assert "hides only if the link gives >=" in s, s
                assert per["break_even_Bps"] > per["link_Bps"], (s, per)
            assert "NOT to hide" not in s
    assert checked >= 4  # both targets' offload plans, both directions


def _belongs(line: str, r: dict) -> bool:
    # Two workloads plan the same policy name only with different baselines; the headline of
    # a plan that moves bytes names them.
    moved = (r["d2h_per_step"] or 0) + (r["h2d_per_step"] or 0)
    return ("moves" in line) == bool(moved)


def test_fit_is_against_the_named_budget(demo_manifests):
    text = render_plans(demo_manifests)
    for m in demo_manifests:
        r = plan_row(m)
        assert r["fits"] is (r["device_peak_bytes"] <= r["memory_budget_bytes"])
    assert "memory budget 59.7 GiB: JAX's default GPU preallocation, 0.75 of h100" in text
    assert "memory budget 16.0 GiB: all of v5e" in text
    assert "fits the 59.7 GiB budget" in text


def test_cli_h100_scan_is_not_all_hidden_at_pcie_gen5(tmp_path):
    """`overlap plan --target h100 --workload scan` at the default host bandwidth: the copies
    cannot all hide (the issue's physics check), and it says why next to the number."""
    p = run_cli("plan", "--target", "h100", "--workload", "scan", "--out", str(tmp_path / "a"),
                "--json", "--command-buffers", "off", timeout=300)
    assert p.returncode == 0, p.stderr
    (off,) = [m for m in json.loads(p.stdout) if m["policy"]["name"] == "offload:x"]
    est = off["estimate"]
    # The link measured on an H100 (54.7 GB/s one way, not the sheet's 64), partial duplex.
    assert est["model"]["host_link_Bps"] == 54.7e9 and est["model"]["kernel_floor_ps"] == 1_000_000
    assert est["model"]["command_buffers"] is False
    assert any("81% of its rate alone" in a for a in est["assumptions"])
    assert est["per_step"]["all"]["hidden_fraction"] < 1.0
    assert est["break_even_Bps"] > 64e9
    assert any("at least 1 us" in a for a in est["assumptions"])
    assert off["memory_budget"]["bytes"] == int(0.75 * (81559 << 20))
    # A plan run is not a capture: nothing measured to put a prediction beside.
    again = run_cli("report", str(tmp_path / "a" / "h100-scan-offload_x"), "--predict")
    assert again.returncode == 2 and "plan run" in again.stderr
    # The user's budget and floor replace the defaults, and say so.
    p = run_cli("plan", "--target", "h100", "--workload", "scan", "--policy", "offload:x",
                "--out", str(tmp_path / "b"), "--memory-budget", "0.001",
                "--kernel-floor-us", "0", timeout=300)
    assert p.returncode == 0, p.stderr
    assert "does NOT fit" in p.stdout and "given with --memory-budget" in p.stdout
    assert "kernel floor 0 us" in p.stdout
    bad = run_cli("plan", "--target", "h100", "--out", str(tmp_path / "c"),
                  "--memory-fraction", "2")
    assert bad.returncode == 2 and "--memory-fraction" in bad.stderr
