"""What ships describes itself (issue 42): the precision a request is judged at is the one its weights
are stored in, not the one the requester types.

The scenario a new user hit: the quantize job's own w4a16 derivative (a compressed-tensors
`quantization_config`, int4 weights) was put in a request whose `serving_plan.precision` said `bf16`;
no eval was asked for, both reviewers signed and the gate allowed it."""

from __future__ import annotations

from typing import Any

import pytest

from governance.artifacts.models import Derivation, ModelArtifact
from governance.artifacts.services import artifact_register
from governance.deployments.models import DeploymentRequest
from tests.conftest import Personas
from tests.deployments.conftest import SERVING, Flow, digest_of

pytestmark = pytest.mark.django_db

# What llm-compressor writes into a W4A16 derivative's config.json (the quantize job's recipe).
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


def _derivative(personas: Personas, parent: ModelArtifact, **extra: Any) -> ModelArtifact:
    data = {
        "name": "Qwen3-30B-A3B-W4A16",
        "source_repo": "org/Qwen3-30B-A3B-W4A16",
        "revision": "q1",
        "weights_digest": digest_of("Qwen3-30B-A3B-W4A16"),
        "license": "apache-2.0",
        "architecture_key": "qwen3-30b-a3b",
        "quantization_config": W4A16_CONFIG,
        "derivation": Derivation.QUANTIZE,
        "parent": parent,
        **extra,
    }
    return artifact_register(actor=personas.requester, team=personas.team, data=data)


def test_a_w4a16_derivative_declared_bf16_is_refused_at_submit_naming_both(
    flow: Flow, personas: Personas, artifacts: dict[str, ModelArtifact]
) -> None:
    derivative = _derivative(personas, artifacts["apache"])
    code = flow.create(derivative, serving_plan={**SERVING, "precision": "bf16"})["code"]

    response = flow.post(personas.requester, code, "submit")

    assert response.status_code == 400, response.json()
    message = str(response.json()["extra"]["fields"]["serving_plan.precision"])
    assert "w4a16" in message, message
    assert "bf16" in message, message
    assert "group 128" in message, message
    assert DeploymentRequest.objects.get(code=code).status == "draft"


def test_the_same_derivative_declared_w4a16_is_blocked_until_an_eval_of_its_digest(
    flow: Flow, personas: Personas, artifacts: dict[str, ModelArtifact]
) -> None:
    derivative = _derivative(personas, artifacts["apache"])
    code = flow.create(derivative, serving_plan={**SERVING, "precision": "w4a16"})["code"]
    assert flow.post(personas.requester, code, "submit").status_code == 200
    flow.compute_capacity(code)

    blockers = [b["code"] for b in flow.get(personas.legal, code)["blockers"]]

    assert "eval.missing" in blockers


def test_the_evidence_names_the_precision_the_weights_are_stored_in(
    flow: Flow, personas: Personas, artifacts: dict[str, ModelArtifact]
) -> None:
    derivative = _derivative(personas, artifacts["apache"])
    code = flow.create(derivative, serving_plan={**SERVING, "precision": "w4a16"})["code"]

    evidence = DeploymentRequest.objects.get(code=code).evidence
    assert evidence is not None
    weights = evidence["artifact"]["weights"]

    assert weights["precision"] == "w4a16"
    assert weights["quantized"] is True
    assert "group 128" in weights["summary"]


def test_a_bf16_checkpoint_may_be_quantized_by_the_engine_at_load(
    flow: Flow, personas: Personas, artifacts: dict[str, ModelArtifact]
) -> None:
    """Online quantization (vLLM's `--quantization fp8` on BF16 weights) is a plan, not a mismatch:
    submitted, and the fp8 eval is still required."""
    code = flow.create(artifacts["apache"], serving_plan={**SERVING, "precision": "fp8"})["code"]
    assert flow.post(personas.requester, code, "submit").status_code == 200
    flow.compute_capacity(code)
    assert "eval.missing" in [b["code"] for b in flow.get(personas.legal, code)["blockers"]]


def test_a_quantized_checkpoint_registered_as_an_original_still_needs_its_eval(
    flow: Flow, personas: Personas, artifacts: dict[str, ModelArtifact]
) -> None:
    """`derivation` is what the requester says; the weights say quantized. Readiness follows the
    weights: a passed served eval of exactly this digest, and a baseline to compare it with."""
    original = artifact_register(
        actor=personas.requester,
        team=personas.team,
        data={
            "name": "Qwen3-30B-A3B-int4",
            "source_repo": "someone/Qwen3-30B-A3B-int4",
            "revision": "x",
            "weights_digest": digest_of("Qwen3-30B-A3B-int4"),
            "license": "apache-2.0",
            "architecture_key": "qwen3-30b-a3b",
            "quantization_config": W4A16_CONFIG,
        },
    )
    code = flow.create(original, serving_plan={**SERVING, "precision": "w4a16"})["code"]
    assert flow.post(personas.requester, code, "submit").status_code == 200
    flow.compute_capacity(code)

    blockers = {b["code"]: b for b in flow.get(personas.legal, code)["blockers"]}

    assert "eval.missing" in blockers
    assert "artifact.parent_missing" in blockers
    assert "w4a16" in blockers["artifact.parent_missing"]["message"]


def test_the_precision_cannot_be_edited_back_to_bf16_after_submit(
    flow: Flow, personas: Personas, artifacts: dict[str, ModelArtifact]
) -> None:
    """Probe of issue 42: the submit check must not be bypassed by editing the plan afterwards."""
    derivative = _derivative(personas, artifacts["apache"])
    code = flow.create(derivative, serving_plan={**SERVING, "precision": "w4a16"})["code"]
    assert flow.post(personas.requester, code, "submit").status_code == 200
    before = DeploymentRequest.objects.get(code=code)

    response = flow.client(personas.requester).patch(
        f"/api/v1/deployments/{code}", {"serving_plan": {**SERVING, "precision": "bf16"}}, format="json"
    )

    assert response.status_code == 400, response.json()
    assert "serving_plan.precision" in response.json()["extra"]["fields"]
    after = DeploymentRequest.objects.get(code=code)
    assert after.serving_plan["precision"] == "w4a16"
    assert after.status == before.status
