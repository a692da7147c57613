"""The OpenAPI schema describes every operation and types every request body field; the facts
are an object with each documented fact, not a free-form JSON value."""

from __future__ import annotations

from typing import Any

import pytest
from drf_spectacular.generators import SchemaGenerator


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    return SchemaGenerator().get_schema(request=None, public=True)


def _resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node or len(node.get("allOf", [])) == 1:
        node = node["allOf"][0] if "allOf" in node else node
        if "$ref" in node:
            node = schema["components"]["schemas"][node["$ref"].rsplit("/", 1)[1]]
    return node


def test_every_operation_is_described(schema: dict[str, Any]) -> None:
    bare = [
        f"{method.upper()} {path}"
        for path, operations in schema["paths"].items()
        for method, operation in operations.items()
        if not (operation.get("summary") or operation.get("description"))
    ]
    assert bare == []


def test_every_request_body_field_is_typed(schema: dict[str, Any]) -> None:
    untyped = []
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            for content in operation.get("requestBody", {}).get("content", {}).values():
                body = _resolve(schema, content["schema"])
                for name, field in body.get("properties", {}).items():
                    if not {"type", "$ref", "allOf", "oneOf", "anyOf", "enum"} & set(field):
                        untyped.append(f"{method.upper()} {path}: {name}")
    assert sorted(set(untyped)) == []


def test_facts_are_a_typed_object(schema: dict[str, Any]) -> None:
    evaluate = schema["paths"]["/api/v1/licenses/evaluate"]["post"]["requestBody"]["content"]["application/json"]
    facts = _resolve(schema, _resolve(schema, evaluate["schema"])["properties"]["facts"])
    assert facts["type"] == "object"
    assert {"use_case", "monthly_active_users", "monthly_revenue", "derivative", "intended_uses"} <= set(
        facts["properties"]
    )
    assert set(_resolve(schema, facts["properties"]["use_case"])["enum"]) >= {"research", "external_commercial"}
    create = schema["paths"]["/api/v1/deployments/"]["post"]["requestBody"]["content"]["application/json"]
    assert _resolve(schema, _resolve(schema, create["schema"])["properties"]["facts"]) == facts


def test_plan_request_body_names_the_workload(schema: dict[str, Any]) -> None:
    for path in ("/api/v1/planner/plan", "/api/v1/capacity/plans"):
        body = schema["paths"][path]["post"]["requestBody"]["content"]["application/json"]
        properties = _resolve(schema, body["schema"])["properties"]
        assert {"input_len", "output_len", "cached_prefix_len"} <= set(properties), path
        assert properties["cached_prefix_len"]["minimum"] == 0


def test_plan_request_body_takes_the_engine_options(schema: dict[str, Any]) -> None:
    for path in ("/api/v1/planner/plan", "/api/v1/capacity/plans"):
        body = schema["paths"][path]["post"]["requestBody"]["content"]["application/json"]
        properties = _resolve(schema, body["schema"])["properties"]
        assert {"engine", "max_num_batched_tokens", "scheduler_recv_interval"} <= set(properties), path
        assert properties["max_num_batched_tokens"]["minimum"] == 1
        assert properties["scheduler_recv_interval"]["type"] == "integer"
        assert properties["scheduler_recv_interval"]["minimum"] == 1
