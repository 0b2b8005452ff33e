"""The text report's and the transfer gates' step tables, made a column at a time (issue 32),
give the texts of the per-cell definitions: `format_ps_column` is `format_ps` of each value,
`_table` the aligned lines, the worst step of a gate the first with the most."""

from __future__ import annotations

import random

from overlap.analysis.units import format_ps, format_ps_column
from overlap.report import gate
from overlap.report.text import _table


def test_format_ps_column_is_format_ps_of_each_value():
    rng = random.Random(11)
    vals: list = [None, 0, 1, -1, 999, 1000, 99_949, 99_950, 999_500, 10**12 - 1, 10**12,
                  -(10**13), 2**62, 0.5, -0.0, float("nan"), float("inf"), float("-inf"), True]
    for e in range(19):
        for _ in range(300):
            vals += [rng.randint(-(10**e), 10**e), rng.uniform(-(10**e), 10**e),
                     int(rng.choice([99.95, 99.949999, 9.995, 0.9995]) * 10**e)]
    assert format_ps_column(vals) == [format_ps(v) for v in vals]
    no_none = vals[1:]
    assert format_ps_column(no_none) == [format_ps(v) for v in no_none]
    assert format_ps_column([]) == [] and format_ps_column([None, None]) == ["-", "-"]


def _table_per_line(headers, rows, align):
    """The table as it was defined line by line."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(headers)]

    def line(cells):
        return "  ".join(f"{c:{a}{w}}" for c, a, w in zip(cells, align, widths)).rstrip()

    return [line(headers)] + [line(r) for r in rows]


def test_table_lines_are_the_per_line_definition():
    rng = random.Random(2)
    cell = lambda: "".join(rng.choice("ab {}%:") for _ in range(rng.randrange(0, 9)))  # noqa: E731
    for n in (0, 1, 5, 40):
        headers = [cell() or "h" for _ in range(4)]
        rows = [[cell() for _ in range(4)] for _ in range(n)]
        align = "".join(rng.choice("<>") for _ in range(4))
        assert _table(headers, rows, align) == _table_per_line(headers, rows, align)
        assert _table(headers, [tuple(r) for r in rows], align) == \
            _table_per_line(headers, rows, align)


def test_transfer_gate_names_the_first_step_with_the_most():
    steps = [{"host": "h", "step": s, "d2h_transfers": d, "h2d_transfers": h,
              "d2h_bytes": 10 * d, "h2d_bytes": 100 * h}
             for s, d, h in ((0, 1, 0), (1, 2, 1), (2, 0, 3), (3, 3, 0))]
    result = {"steps": steps, "hosts": ["h"], "by_direction": {}}
    cfg = gate.CheckConfig(max_transfers=9, max_transfer_bytes=10**6)
    checks = {c["name"]: c for c in gate._transfer_gates(result, cfg, None)}
    assert checks["max_transfers"]["value"] == 3  # steps 1, 2 and 3 tie: the first is named
    assert checks["max_transfers"]["message"].startswith("worst: step 1 has 3 transfer(s)")
    assert checks["max_transfer_bytes"]["message"].startswith("worst: step 2 has 300 bytes")
    h2d = gate.CheckConfig(max_transfers=9, transfer_direction="H2D")
    (only,) = gate._transfer_gates(result, h2d, None)
    assert only["message"].startswith("worst: step 2 has 3 H2D transfer(s)")
