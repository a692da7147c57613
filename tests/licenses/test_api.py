"""POST /api/v1/licenses/evaluate and the catalog endpoints, against the loaded catalog."""

import json
from io import StringIO
from pathlib import Path

import jsonschema
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from governance.licenses.choices import FACTS_ASSUMED, FindingCode
from governance.licenses.services import license_catalog_load
from tests.conftest import Personas
from tests.licenses.helpers import BASE_FACTS

# The response contract of docs/contracts.md, as JSON Schema.
RESPONSE_SCHEMA = {
    "type": "object",
    "required": ["decision", "license", "findings"],
    "properties": {
        "decision": {"enum": ["prohibited", "licensor_approval_required", "allowed_with_obligations", "allowed"]},
        "license": {
            "type": "object",
            "required": ["key", "version", "text_sha256"],
            "properties": {
                "key": {"type": "string"},
                "version": {"type": "string"},
                "text_sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
            },
            "additionalProperties": False,
        },
        "findings": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["code", "severity", "clause", "message", "params"],
                "properties": {
                    "code": {"enum": sorted([*FindingCode.values, FACTS_ASSUMED])},
                    "severity": {"enum": ["blocker", "approval", "obligation", "info"]},
                    "clause": {"type": "string"},
                    "message": {"type": "string", "minLength": 1},
                    "params": {"type": "object"},
                },
            },
        },
    },
    "additionalProperties": False,
}


@pytest.fixture
def catalog(db: None) -> None:
    license_catalog_load(actor="system:test")


def _evaluate(personas: Personas, body: object) -> tuple[int, dict]:
    response = personas.client(personas.requester).post("/api/v1/licenses/evaluate", body, format="json")
    return response.status_code, response.json()


@pytest.mark.parametrize(
    "key",
    [
        "llama-2",
        "llama-3",
        "llama-3.1",
        "llama-3.2",
        "llama-3.3",
        "llama-4",
        "gemma",
        "tongyi-qianwen",
        "tongyi-qianwen-research",
        "qwen",
        "qwen-research",
        "deepseek",
        "kimi-k2-modified-mit",
        "mrl",
        "mnpl",
        "nvidia-open-model",
        "falcon-180b-tii",
        "bigscience-openrail-m",
        "cc-by-nc-4.0",
        "apache-2.0",
        "mit",
        "minimax-2025-01",
        "minimax-2025-02",
        "glm-4",
        "yi-community-2.1",
    ],
)
def test_every_license_answers_in_the_documented_shape(personas: Personas, catalog: None, key: str) -> None:
    for facts in (
        BASE_FACTS,
        {},
        {
            **BASE_FACTS,
            "hosted_service": True,
            "intended_uses": ["military"],
            "derivative": {"kind": "distill", "distribution": "public", "name": "X"},
        },
    ):
        status, body = _evaluate(personas, {"license": key, "facts": facts})
        assert status == 200, body
        jsonschema.validate(body, RESPONSE_SCHEMA)
        assert body["license"]["key"] == key


def test_design_example_llama_31(personas: Personas, catalog: None) -> None:
    facts = {
        **BASE_FACTS,
        "hosted_service": True,
        "monthly_active_users": 12_000_000,
        "monthly_revenue": {"amount": 1_500_000, "currency": "USD"},
    }
    status, body = _evaluate(personas, {"license": "llama-3.1", "facts": facts})
    assert status == 200
    assert body["decision"] == "allowed_with_obligations"
    assert body["license"]["version"] == "2024-07-23.r2"
    assert body["findings"][0]["code"] == "attribution.display"
    assert body["findings"][0]["clause"] == "1.b.i"
    assert body["findings"][0]["params"]["text"] == "Built with Llama"


def test_unknown_license_is_404(personas: Personas, catalog: None) -> None:
    status, body = _evaluate(personas, {"license": "no-such-license", "facts": {}})
    assert status == 404
    assert "no-such-license" in body["message"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"license": "mit", "facts": {**BASE_FACTS, "monthly_active_users": -5}}, "facts.monthly_active_users"),
        ({"license": "mit", "facts": {**BASE_FACTS, "colour": "red"}}, "facts.colour"),
        (
            {"license": "mit", "facts": {**BASE_FACTS, "monthly_revenue": {"amount": 1, "currency": "ZZZ"}}},
            "facts.monthly_revenue.currency",
        ),
        ({"license": "mit", "facts": {**BASE_FACTS, "org_country": "Germany"}}, "facts.org_country"),
        ({"license": "mit", "facts": {**BASE_FACTS, "intended_uses": ["astrology"]}}, "facts.intended_uses[0]"),
        ({"license": "mit", "facts": [], "extra": 1}, "extra"),
        ({"facts": {}}, "license"),
        ({"license": "mit", "facts": "not an object"}, "facts"),
    ],
)
def test_bad_input_is_400_naming_the_field(personas: Personas, catalog: None, body: dict, field: str) -> None:
    status, answer = _evaluate(personas, body)
    assert status == 400
    assert field in answer["extra"]["fields"]
    assert field in answer["message"]


def test_evaluate_needs_a_role(personas: Personas, catalog: None) -> None:
    body = {"license": "mit", "facts": BASE_FACTS}
    assert personas.client(personas.outsider).post("/api/v1/licenses/evaluate", body, format="json").status_code == 403
    assert personas.client(None).post("/api/v1/licenses/evaluate", body, format="json").status_code in (401, 403)


def test_list_and_detail(personas: Personas, catalog: None) -> None:
    client = personas.client(personas.legal)
    listing = client.get("/api/v1/licenses/", {"page_size": 100}).json()
    assert listing["count"] == 25
    assert {row["key"] for row in listing["results"]} >= {"llama-3.1", "kimi-k2-modified-mit", "apache-2.0"}
    assert client.get("/api/v1/licenses/llama-3.1/").json()["current_version"]["version"] == "2024-07-23.r2"
    detail = client.get("/api/v1/licenses/kimi-k2-modified-mit/").json()
    assert detail["scancode_key"] == "moonshot-ai-modified-mit-2025"
    assert detail["current_version"]["version"] == "2025-07-11"
    assert [term["code"] for term in detail["terms"]] == ["attribution.display", "attribution.display", "license.copy"]
    assert detail["terms"][0]["params"]["limit"] == 100_000_000
    assert client.get("/api/v1/licenses/nope/").status_code == 404


def test_management_command_prints_the_api_json(personas: Personas, catalog: None, tmp_path: Path) -> None:
    facts_file = tmp_path / "facts.json"
    facts_file.write_text(json.dumps({**BASE_FACTS, "hosted_service": True}))
    out = StringIO()
    call_command("evaluate_license", "--license", "llama-3.1", "--facts", str(facts_file), stdout=out)
    printed = json.loads(out.getvalue())
    _status, body = _evaluate(personas, {"license": "llama-3.1", "facts": {**BASE_FACTS, "hosted_service": True}})
    assert printed == body
    facts_file.write_text(json.dumps({**BASE_FACTS, "monthly_active_users": -1}))
    with pytest.raises(CommandError, match=r"facts\.monthly_active_users"):
        call_command("evaluate_license", "--license", "llama-3.1", "--facts", str(facts_file))
    with pytest.raises(CommandError, match="unknown license"):
        call_command("evaluate_license", "--license", "nope", "--facts", str(facts_file))
