"""A pasted Hugging Face config.json (what the planner CLI's --model takes as a file): a JSON object
of bounded size with the fields the planner needs, each refusal naming the bad field; a good one is
stored with the request's artifact and sizes its capacity plan. An unknown architecture key
answers with the closest catalog entries."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from governance.capacity.models import CapacityPlan
from governance.capacity.services import capacity_plan_compute
from governance.deployments.models import DeploymentRequest
from tests.conftest import Personas
from tests.deployments.conftest import SERVING, Flow, digest_of

CONFIGS = Path(__file__).resolve().parents[1] / "planner" / "configs"
QWEN = json.loads((CONFIGS / "qwen3-30b-a3b.json").read_text())


def _register(flow: Flow, personas: Personas, **change: Any) -> Any:
    body = {
        "name": "pasted",
        "source_repo": "acme/pasted",
        "revision": "1",
        "weights_digest": digest_of("pasted"),
        "license": "apache-2.0",
        **change,
    }
    return flow.client(personas.requester).post("/api/v1/artifacts", body, format="json")


@pytest.mark.parametrize(
    ("config", "field", "says"),
    [
        ([QWEN], "config", "JSON object"),
        ("{}", "config", "JSON object"),
        ({k: v for k, v in QWEN.items() if k != "num_hidden_layers"}, "config.num_hidden_layers", "missing"),
        ({**QWEN, "hidden_size": "big"}, "config.hidden_size", ""),
        ({**QWEN, "padding": "x" * 300_000}, "config", "bytes"),
    ],
    ids=["list", "string", "missing-field", "wrong-type", "too-large"],
)
def test_a_bad_config_answers_400_naming_the_field(
    flow: Flow, personas: Personas, artifacts: dict[str, Any], config: Any, field: str, says: str
) -> None:
    response = _register(flow, personas, config=config)
    assert response.status_code == 400, response.json()
    fields = response.json()["extra"]["fields"]
    assert field in fields, fields
    assert says in str(fields[field])


def test_an_unknown_architecture_key_suggests_the_closest(
    flow: Flow, personas: Personas, artifacts: dict[str, Any]
) -> None:
    response = _register(flow, personas, architecture_key="meta-llama/Llama-3.3-70B-Instruct")
    assert response.status_code == 400
    message = str(response.json()["extra"]["fields"]["architecture_key"])
    assert "closest: llama-3.1-70b" in message


def test_a_pasted_config_sizes_the_capacity_plan(flow: Flow, personas: Personas, artifacts: dict[str, Any]) -> None:
    response = _register(flow, personas, config=QWEN)
    assert response.status_code == 201, response.json()
    from governance.artifacts.models import ModelArtifact

    artifact = ModelArtifact.objects.get(code=response.json()["code"])
    code = flow.create(artifact, serving_plan={**SERVING, "precision": "bf16"})["code"]
    assert flow.post(personas.requester, code, "submit").status_code == 200
    pending = CapacityPlan.objects.filter(deployment__code=code).latest("created_at")
    assert pending.inputs["model"] == QWEN
    computed = capacity_plan_compute(plan_id=pending.pk)
    assert computed.status == "done", computed.error
    assert computed.result is not None
    assert computed.result["params"]["total"] == pytest.approx(30.5e9, rel=0.01)
    assert DeploymentRequest.objects.get(code=code).artifact.config == QWEN
