"""Callback requests of the wrong shape get 400 (issue 34, fuzz round 3 N8): one input fewer or
more, state missing or extra, outputs of another shape made Dash raise (HTTP 500), and a list
nested 20k deep raised RecursionError in the guard itself. The real app's Flask test client,
every callback it defines; a well-formed request to each still gets its answer."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from overlap.dashboard.app import create_app

LOGDIR = Path(__file__).resolve().parents[2] / "sample_traces" / "cpu-scan"


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    import os

    os.environ.setdefault("OVERLAP_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    return create_app([LOGDIR])


def _slot(x) -> dict:
    return {"id": x["id"], "property": x["property"], "value": None}


def _request(key: str, cb: dict) -> dict:
    """The body Dash's renderer sends for callback `key` (values None)."""
    out = cb["output"]
    outputs = ([{"id": o.component_id, "property": o.component_property} for o in out]
               if isinstance(out, (list, tuple))
               else {"id": out.component_id, "property": out.component_property})
    inputs = [_slot(i) for i in cb["inputs"]]
    return {"output": key, "outputs": outputs, "inputs": inputs,
            "state": [_slot(s) for s in cb["state"]],
            "changedPropIds": [f"{inputs[0]['id']}.{inputs[0]['property']}"]}


def _post(client, body) -> int:
    data = body if isinstance(body, str) else json.dumps(body)
    return client.post("/_dash-update-component", data=data,
                       content_type="application/json").status_code


def _mutations(body: dict) -> dict[str, dict | str]:
    out: dict[str, dict | str] = {}

    def m(name, f):
        b = copy.deepcopy(body)
        f(b)
        out[name] = b

    m("one input fewer", lambda b: b.update(inputs=b["inputs"][:-1]))
    m("one input more", lambda b: b.update(inputs=b["inputs"] + [b["inputs"][0]]))
    m("input of another component", lambda b: b["inputs"][0].update(id="no-such-id"))
    m("state extra", lambda b: b.update(state=b["state"] + [b["inputs"][0]]))
    if body["state"]:
        m("state empty", lambda b: b.update(state=[]))
    m("outputs empty", lambda b: b.update(outputs=[]))
    m("outputs a wrong dict", lambda b: b.update(outputs={"id": "x", "property": "y"}))
    if isinstance(body["outputs"], list):
        m("outputs one fewer", lambda b: b.update(outputs=b["outputs"][:-1]))
    deep = "[" * 20000 + "]" * 20000
    out["a 20k-deep list in an input"] = json.dumps(body).replace(
        '"value": null', f'"value": {deep}', 1)
    return out


def test_every_callback_answers_a_well_formed_request_and_refuses_wrong_shapes(app):
    client = app.server.test_client()
    assert client.get("/").status_code == 200
    assert app.callback_map
    for key, cb in app.callback_map.items():
        body = _request(key, cb)
        # 204: the callback chose not to update (PreventUpdate) on empty values
        assert _post(client, body) in (200, 204), key
        for name, bad in _mutations(body).items():
            assert _post(client, bad) == 400, (key, name)
