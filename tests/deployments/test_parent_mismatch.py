"""A fake parent (issue 42): a quantized derivative may name any artifact of its team as its parent, and
an eval against that artifact would measure nothing about the derivative. The two inspection reports are
compared; when they disagree readiness says so (`artifact.parent_mismatch`, engineering's) and an eval
whose baseline was that parent does not count."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from governance.artifacts.models import Derivation, ModelArtifact
from governance.artifacts.services import artifact_register
from governance.deployments import services as deployment_services
from governance.evaluations.models import (
    ArtifactInspection,
    Cluster,
    EvalKind,
    EvalRun,
    EvalStatus,
    ExecutorKind,
    InspectionStatus,
)
from planner.inspectjob import inspect_checkpoint
from tests.conftest import Personas
from tests.deployments.conftest import SERVING, Flow
from tests.deployments.test_weights_precision import W4A16_CONFIG
from tests.planner import inspect_checkpoints as ckpt

pytestmark = pytest.mark.django_db


def _register(personas: Personas, name: str, root: Path, **extra: Any) -> ModelArtifact:
    """An artifact whose files were read on a cluster: a passed inspection of `root`."""
    report = inspect_checkpoint(root).to_json()
    artifact = artifact_register(
        actor=personas.requester,
        team=personas.team,
        data={
            "name": name,
            "source_repo": f"org/{name}",
            "revision": "r1",
            "weights_digest": report["weights_digest"],
            "license": "apache-2.0",
            "architecture_key": "qwen3-30b-a3b",
            **extra,
        },
    )
    cluster, _ = Cluster.objects.get_or_create(
        name="local", defaults={"executor": ExecutorKind.LOCAL, "remote_root": "/tmp/governance-test-runs"}
    )
    ArtifactInspection.objects.create(
        artifact=artifact,
        cluster=cluster,
        path=str(root),
        status=InspectionStatus.PASSED,
        weights_digest=report["weights_digest"],
        precision=report["precision"],
        report=report,
    )
    return artifact


def _served_eval(code: str, baseline: ModelArtifact) -> None:
    """A passed served eval of the request's weights against `baseline`, as the eval job leaves it."""
    from governance.deployments.models import DeploymentRequest

    deployment = DeploymentRequest.objects.get(code=code)
    layout = ((deployment.evidence or {}).get("capacity_plan") or {}).get("result", {}).get("parallel") or {}
    evaluation = EvalRun.objects.create(
        request=deployment,
        cluster=Cluster.objects.get(name="local"),
        scheme="w4a16",
        status=EvalStatus.PASSED,
        kind=EvalKind.SERVED,
        candidate=deployment.artifact,
        candidate_digest=deployment.artifact.weights_digest,
        baseline=baseline,
        baseline_digest=baseline.weights_digest,
        engine=deployment.serving_plan.get("engine", "vllm"),
        engine_version="0.11.0",
        serving={"precision": "w4a16", **{n: layout.get(n, 1) for n in ("tp", "pp", "ep", "dp")}},
        summary={"pass": True, "overall": {"n": 400, "upper_bound_95": 0.02}},
        eval_set_sha256="e" * 64,
    )
    deployment_services.on_eval_finished(evaluation=evaluation)


def _request(flow: Flow, personas: Personas, derivative: ModelArtifact) -> str:
    code = flow.create(derivative, serving_plan={**SERVING, "precision": "w4a16"})["code"]
    assert flow.post(personas.requester, code, "submit").status_code == 200
    flow.compute_capacity(code)
    return code


def _blockers(flow: Flow, personas: Personas, code: str) -> dict[str, dict[str, Any]]:
    return {b["code"]: b for b in flow.get(personas.legal, code)["blockers"]}


def test_a_derivative_naming_another_model_as_its_parent_is_blocked_and_its_eval_does_not_count(
    flow: Flow, personas: Personas, tmp_path: Path
) -> None:
    other = _register(
        personas, "Other-bf16", ckpt.bf16(tmp_path / "other", hidden_size=96, architectures=["MistralForCausalLM"])
    )
    derivative = _register(
        personas,
        "Tiny-W4A16",
        ckpt.w4a16(tmp_path / "w4a16"),
        quantization_config=W4A16_CONFIG,
        derivation=Derivation.QUANTIZE,
        parent=other,
    )
    code = _request(flow, personas, derivative)

    blockers = _blockers(flow, personas, code)
    mismatch = blockers["artifact.parent_mismatch"]
    assert mismatch["role"] == "engineering"
    assert "Other-bf16" in mismatch["message"]
    assert "hidden_size 64" in mismatch["message"]
    assert "96" in mismatch["message"]
    assert "MistralForCausalLM" in mismatch["message"]

    refused = flow.post(personas.engineer, code, "evals", {"cluster": "local", "kind": "served"})
    assert refused.status_code == 400, refused.json()
    assert "Other-bf16" in str(refused.json())
    assert not EvalRun.objects.filter(request__code=code).exists()

    _served_eval(code, baseline=other)  # one run anyway (before the check, or by hand)

    blockers = _blockers(flow, personas, code)
    assert "artifact.parent_mismatch" in blockers
    assert "eval.missing" in blockers  # measured against another model: it covers nothing


def test_the_checkpoint_it_was_made_from_is_its_parent_and_its_eval_counts(
    flow: Flow, personas: Personas, tmp_path: Path
) -> None:
    parent = _register(personas, "Tiny-bf16", ckpt.bf16(tmp_path / "bf16"))
    derivative = _register(
        personas,
        "Tiny-W4A16",
        ckpt.w4a16(tmp_path / "w4a16"),
        quantization_config=W4A16_CONFIG,
        derivation=Derivation.QUANTIZE,
        parent=parent,
    )
    code = _request(flow, personas, derivative)
    assert "artifact.parent_mismatch" not in _blockers(flow, personas, code)

    _served_eval(code, baseline=parent)

    blockers = _blockers(flow, personas, code)
    assert not {"artifact.parent_mismatch", "eval.missing", "artifact.parent_missing"} & set(blockers), blockers
