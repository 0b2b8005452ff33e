"""The Compare tab's "hidden, predicted (plan)" column (issue 20): a plan run of a measured
run's program puts its predicted hidden share beside the measured columns, labelled
"predicted (plan for TARGET)" and naming the plan; a plan of another target or other inputs
gives no cell. Data: the SYNTHETIC capture and plan runs of tests/cli/test_plan_join.py
(50% hidden measured, 25% predicted, by construction)."""

from __future__ import annotations

import json

from overlap.dashboard import data
from overlap.dashboard.app import create_app
from overlap.dashboard.predicted import predicted_cells
from tests.cli.test_plan_join import _capture, _plan
from tests.dashboard.test_dashboard_security import _post


def test_predicted_column_beside_the_measured_run(tmp_path):
    logdir = tmp_path / "logs"
    _capture(logdir)
    _plan(logdir, "plan_v6e")
    _plan(logdir, "plan_v5e", target="v5e")
    _plan(logdir, "plan_other_inputs", inputs="ffffffffffffffff")
    data.clear_cache()
    runs = data.discover_runs([logdir])
    datas = [(r.name, data.load_run(r)) for r in runs]
    cells = predicted_cells(datas, runs)
    assert cells == {"measured": "25.0% hidden, predicted (plan for v6e): plan_v6e"}

    app = create_app([logdir])
    client = app.server.test_client()
    client.get("/")
    out = next(k for k in app.callback_map if k.startswith("..fig-memory.figure"))
    r = _post(client, out, [{"id": "compare-select", "property": "value", "value": ["measured"]},
                            {"id": "baseline", "property": "value", "value": "measured"},
                            {"id": "tabs", "property": "value", "value": "compare"}],
              [{"id": "compare-drawn", "property": "data", "value": None}])
    assert r.status_code == 200
    rows = json.loads(r.get_data(as_text=True))["response"]["compare-table"]["data"]
    (row,) = rows
    assert row["predicted_plan"] == "25.0% hidden, predicted (plan for v6e): plan_v6e"
    assert row["D2H"] == 50.0  # the measured share, in its own column
