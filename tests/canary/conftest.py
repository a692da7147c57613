"""Canary fixtures: a W4A16 derivative approved for staging and production, and a CI token of its team."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from governance.artifacts.models import Derivation, ModelArtifact
from governance.artifacts.services import artifact_register
from governance.deployments.models import DeploymentRequest
from governance.gate.services import ci_token_issue
from tests.conftest import Personas
from tests.deployments.conftest import SERVING, Flow, artifacts, catalog, digest_of, flow  # noqa: F401 (fixtures)
from tests.gate.conftest import bearer

# What llm-compressor writes into a W4A16 derivative's config.json (tests/deployments/test_weights_precision.py).
W4A16_CONFIG: dict[str, Any] = {
    "quant_method": "compressed-tensors",
    "format": "pack-quantized",
    "config_groups": {
        "group_0": {
            "targets": ["Linear"],
            "weights": {"num_bits": 4, "type": "int", "symmetric": True, "strategy": "group", "group_size": 128},
            "input_activations": None,
        }
    },
    "ignore": ["lm_head"],
}


class Rollout:
    """An approved request and its team's CI token; `check` asks the gate as the pipeline would."""

    def __init__(self, code: str, token: str, serving: dict[str, Any] | None = None) -> None:
        self.code, self.token = code, token
        self.deployment = DeploymentRequest.objects.get(code=code)
        self.evidence: dict[str, Any] = self.deployment.evidence or {}
        self.base_serving = serving  # the pipeline's `serving`, where not the vLLM one below

    def serving(self, **changes: Any) -> dict[str, Any]:
        if self.base_serving is not None:
            return {**self.base_serving, **changes}
        layout = self.evidence["capacity_plan"]["result"]["parallel"]
        return {
            "engine": "vllm",
            "precision": "w4a16",
            "gpu": "h200",
            "tp": layout["tp"],
            "pp": layout["pp"],
            "ep": layout["ep"],
            "max_model_len": 32768,
            "gpu_memory_utilization": 0.9,
            # the approval is bound to the version its eval served (tests.deployments.conftest.record_eval)
            "engine_version": "0.11.0",
            **changes,
        }

    @property
    def digest(self) -> str:
        return str(self.evidence["artifact"]["weights_digest"])

    def check(self, environment: str, **serving: Any) -> dict[str, Any]:
        body = {
            "deployment": self.code,
            "environment": environment,
            "artifact_digest": self.digest,
            "serving": self.serving(**serving),
        }
        response = bearer(self.token).post("/api/v1/gate/check", body, format="json")
        assert response.status_code == 200, response.json()
        return dict(response.json())

    def codes(self, environment: str, **serving: Any) -> list[str]:
        return [reason["code"] for reason in self.check(environment, **serving)["reasons"]]


def w4a16_derivative(personas: Personas, parent: ModelArtifact, name: str = "Qwen3-30B-A3B-W4A16") -> ModelArtifact:
    data = {
        "name": name,
        "source_repo": f"org/{name}",
        "revision": "q1",
        "weights_digest": digest_of(name),
        "license": "apache-2.0",
        "architecture_key": "qwen3-30b-a3b",
        "quantization_config": W4A16_CONFIG,
        "derivation": Derivation.QUANTIZE,
        "parent": parent,
    }
    return artifact_register(actor=personas.requester, team=personas.team, data=data)


@pytest.fixture
def rollout(flow: Flow, personas: Personas, artifacts: dict[str, ModelArtifact]) -> Rollout:  # noqa: F811
    derivative = w4a16_derivative(personas, artifacts["apache"])
    code = flow.create(
        derivative, serving_plan={**SERVING, "precision": "w4a16"}, environments=["staging", "production"]
    )["code"]
    assert flow.post(personas.requester, code, "submit").status_code == 200
    assert flow.post(personas.legal, code, "start-review").status_code == 200
    assert flow.approve(code)["status"] == "approved"
    personas.team.leads.add(personas.requester)
    _, clear_text = ci_token_issue(
        actor=personas.requester, team=personas.team, name="deploy", expires_at=timezone.now() + timedelta(days=30)
    )
    return Rollout(code, clear_text)
