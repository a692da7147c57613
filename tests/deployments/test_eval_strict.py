"""The eval request API is strict (issue 18): unknown keys and wrong JSON types are a 400 naming
the field (no `123` read as "123" or "8" as 8), and a malformed eval_set line a 400 naming the line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from governance.evaluations.models import Cluster, ExecutorKind, JobRun
from tests.conftest import Personas
from tests.deployments.conftest import Flow
from tests.evaluations.conftest import locate

BODY = {"cluster": "c2", "kind": "screening", "scheme": "w8a8"}


@pytest.fixture
def eval_url(flow: Flow, artifacts, tmp_path: Path) -> str:
    Cluster.objects.create(name="c2", executor=ExecutorKind.LOCAL, remote_root=str(tmp_path), model_roots=["/models"])
    code = flow.to_review(artifacts["apache"])
    locate(code, "c2", "/models/x")
    return f"/api/v1/deployments/{code}/evals"


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"bananas": 1}, "bananas"),
        ({"cluster": 123}, "cluster"),
        ({"kind": ["screening"]}, "kind"),
        ({"model_path": "/models/x"}, "model_path"),  # a free-text path is no longer accepted
        ({"max_new_tokens": "8"}, "max_new_tokens"),
        ({"max_cases_per_category": "2"}, "max_cases_per_category"),
        ({"max_new_tokens": 8.5}, "max_new_tokens"),
        ({"max_new_tokens": True}, "max_new_tokens"),
        ({"threshold": "0.1"}, "threshold"),
        ({"eval_set": 5}, "eval_set"),
    ],
)
def test_unknown_keys_and_wrong_types_are_400_naming_the_field(
    eval_url: str, personas: Personas, changes: dict, field: str
) -> None:
    response = personas.client(personas.engineer).post(eval_url, {**BODY, **changes}, format="json")
    assert response.status_code == 400, response.content[:300]
    assert field in response.json()["extra"]["fields"], response.json()
    assert JobRun.objects.count() == 0


def _line(**case: object) -> str:
    return json.dumps({"id": "c1", "category": "ops", "turns": ["hi"], "key_items": ["x"], **case})


@pytest.mark.parametrize(
    "bad",
    [
        "[1, 2]",
        '"just a string"',
        _line(id=["unhashable"]),
        _line(id={"a": 1}),
        _line(category=7),
        _line(turns="hi"),
        _line(turns=[1, 2]),
        _line(key_items="x"),
        "{not json",
        _line(id="../../runs/other/cache/x"),  # issue 43: an id became a file name on the cluster
        _line(id="a/b"),
        _line(id=".hidden"),
        _line(id="c0"),  # twice
    ],
)
def test_a_malformed_eval_set_line_is_400_naming_the_line(eval_url: str, personas: Personas, bad: str) -> None:
    text = _line(id="c0") + "\n" + bad + "\n"
    response = personas.client(personas.engineer).post(eval_url, {**BODY, "eval_set": text}, format="json")
    assert response.status_code == 400, response.content[:300]
    message = response.json()["extra"]["fields"]["eval_set"]
    assert "line 2" in json.dumps(message), message
    if "id" in bad and "c1" not in bad:  # the case id's problem names the field
        assert "id" in json.dumps(message), message
    assert JobRun.objects.count() == 0


def test_a_well_typed_request_is_accepted(eval_url: str, personas: Personas) -> None:
    body = {**BODY, "max_new_tokens": 8, "threshold": 0.1, "eval_set": _line() + "\n" + _line(id="c2")}
    response = personas.client(personas.engineer).post(eval_url, body, format="json")
    assert response.status_code == 202, response.json()
