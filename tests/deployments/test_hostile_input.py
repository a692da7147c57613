"""Hostile bodies answer a 4xx naming the field and save nothing (issue 18), checked once in the JSON parser."""

from __future__ import annotations

import json
from typing import Any

import pytest
from rest_framework import serializers

from governance.deployments.models import DeploymentRequest
from tests.deployments.conftest import FACTS, SERVING, Flow


def _body(artifacts: Any, **changes: Any) -> dict[str, Any]:
    return {
        "artifact": str(artifacts["apache"].code),
        "product_name": "X",
        "facts": FACTS,
        "serving_plan": SERVING,
        **changes,
    }


def _post_raw(flow: Flow, personas: Any, raw: str | bytes) -> Any:
    client = flow.client(personas.requester)
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    # Django's test client sends bytes as they are (the raw body under test); the stubs say str
    return client.generic("POST", "/api/v1/deployments/", data, content_type="application/json")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"facts": {**FACTS, "monthly_active_users": 2**60}}, "facts.monthly_active_users"),
        ({"facts": {**FACTS, "monthly_active_users": 10**400}}, "facts.monthly_active_users"),
        ({"facts": {**FACTS, "monthly_active_users": -(2**53)}}, "facts.monthly_active_users"),
        ({"product_name": "a\x00b"}, "product_name"),
        ({"product_name": "x\ud800y"}, "product_name"),
        ({"environments": ["prod"], "target_cluster": "c\udfff"}, "target_cluster"),
    ],
)
def test_out_of_range_integers_and_bad_strings_name_the_field(flow: Flow, artifacts, personas, changes, field) -> None:
    raw = json.dumps(_body(artifacts, **changes), ensure_ascii=True)  # a lone surrogate travels as \ud800
    response = _post_raw(flow, personas, raw)
    assert response.status_code == 400, response.content
    assert field in response.json()["extra"]["fields"], response.json()
    assert field in response.json()["message"]
    assert DeploymentRequest.objects.count() == 0


def test_the_largest_safe_integer_is_accepted_by_the_parser(flow: Flow, artifacts, personas) -> None:
    raw = json.dumps(_body(artifacts, facts={**FACTS, "monthly_active_users": 2**53 - 1}))
    assert _post_raw(flow, personas, raw).status_code == 201


def test_deeply_nested_json_is_a_400(flow: Flow, artifacts, personas) -> None:
    deep = "[" * 10_000 + "]" * 10_000
    response = _post_raw(flow, personas, '{"facts": ' + deep + "}")
    assert response.status_code == 400, response.content
    assert "nested deeper" in response.json()["message"]
    assert DeploymentRequest.objects.count() == 0


def test_oversized_body_is_a_413_with_a_message(flow: Flow, artifacts, personas, settings) -> None:
    settings.API_MAX_BODY_BYTES = settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100_000
    raw = json.dumps(_body(artifacts, product_name="x" * 200_000))
    response = _post_raw(flow, personas, raw)
    assert response.status_code == 413, response.content
    assert "100000 bytes" in response.json()["message"]
    assert DeploymentRequest.objects.count() == 0


def test_default_body_limit_admits_the_advertised_eval_set_upload(settings) -> None:
    from governance.deployments.api import EvalRequestInputSerializer

    field = EvalRequestInputSerializer().fields["eval_set"]
    assert isinstance(field, serializers.CharField)
    limit = field.max_length
    assert limit is not None
    assert 2 * limit <= settings.API_MAX_BODY_BYTES  # JSON escaping of a JSONL text can roughly double it
    assert settings.DATA_UPLOAD_MAX_MEMORY_SIZE == settings.API_MAX_BODY_BYTES
