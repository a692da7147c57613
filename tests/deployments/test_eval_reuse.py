"""An eval belongs to the weights and the serving envelope it served, not to one request (issue 42),
and only within the team whose request ran it (probe of issue 42: nothing tested the reuse). A
second request of the same team for the same digest, engine, version, layout and KV cache dtype
reuses the passed eval, named as reused; another team's request, or another KV cache dtype, needs
its own."""

from __future__ import annotations

from typing import Any

import pytest

from governance.artifacts.models import ModelArtifact
from governance.deployments import services as deployment_services
from governance.deployments.models import DeploymentRequest
from governance.evaluations.models import Cluster, EvalKind, EvalRun, EvalStatus, ExecutorKind
from tests.conftest import Personas
from tests.deployments.conftest import FACTS, SERVING, Flow

pytestmark = pytest.mark.django_db


def _passed_eval(code: str) -> EvalRun:
    """A passed served eval of the request's weights, as its job leaves it: the serving config is the
    one evals.serving_config takes from the plan (kv_dtype included)."""
    cluster, _ = Cluster.objects.get_or_create(
        name="local", defaults={"executor": ExecutorKind.LOCAL, "remote_root": "/tmp/governance-test-runs"}
    )
    deployment = DeploymentRequest.objects.get(code=code)
    plan = deployment.serving_plan
    layout = ((deployment.evidence or {}).get("capacity_plan") or {}).get("result", {}).get("parallel") or {}
    evaluation = EvalRun.objects.create(
        request=deployment,
        cluster=cluster,
        scheme=plan["precision"],
        status=EvalStatus.PASSED,
        kind=EvalKind.SERVED,
        candidate=deployment.artifact,
        candidate_digest=deployment.artifact.weights_digest,
        engine=plan.get("engine", "vllm"),
        engine_version="0.11.0",
        serving={
            "precision": plan["precision"],
            "kv_dtype": plan.get("kv_dtype", "bf16"),
            **{n: layout.get(n, 1) for n in ("tp", "pp", "ep", "dp")},
        },
        summary={"pass": True, "overall": {"n": 400, "upper_bound_95": 0.02}},
        eval_set_sha256="e" * 64,
    )
    deployment_services.on_eval_finished(evaluation=evaluation)
    return evaluation


def _reviewed(flow: Flow, artifact: ModelArtifact, requester: Any = None, **serving: Any) -> str:
    requester = requester or flow.p.requester
    body = {
        "artifact": str(artifact.code),
        "product_name": "Acme Assistant",
        "environments": ["production"],
        "facts": FACTS,
        "serving_plan": {**SERVING, **serving},
    }
    response = flow.client(requester).post("/api/v1/deployments/", body, format="json")
    assert response.status_code == 201, response.json()
    code = str(response.json()["code"])
    assert flow.post(requester, code, "submit").status_code == 200
    flow.compute_capacity(code)
    return code


def _eval_codes(flow: Flow, code: str) -> set[str]:
    return {b["code"] for b in flow.get(flow.p.legal, code)["blockers"] if b["code"].startswith("eval.")}


def _evidence_evals(code: str) -> list[dict[str, Any]]:
    return list((DeploymentRequest.objects.get(code=code).evidence or {}).get("eval_results") or [])


def test_a_second_request_of_the_team_reuses_the_passed_eval_named_as_reused(
    flow: Flow, artifacts: dict[str, ModelArtifact]
) -> None:
    first = _reviewed(flow, artifacts["apache"])
    assert "eval.missing" in _eval_codes(flow, first)
    evaluation = _passed_eval(first)
    assert _eval_codes(flow, first) == set()

    second = _reviewed(flow, artifacts["apache"])

    assert _eval_codes(flow, second) == set()
    [reused] = [item for item in _evidence_evals(second) if item["eval"] == str(evaluation.code)]
    assert reused["reused_from"] == first


def test_another_teams_request_for_the_same_weights_needs_its_own_eval(
    flow: Flow, personas: Personas, artifacts: dict[str, ModelArtifact]
) -> None:
    first = _reviewed(flow, artifacts["apache"])
    _passed_eval(first)
    # the artifact is shared with the other team (weights digests are unique: it is the same artifact)
    shared = flow.client(personas.requester).post(
        f"/api/v1/artifacts/{artifacts['apache'].code}/share", {"team": personas.other_team.name}, format="json"
    )
    assert shared.status_code in (200, 201), shared.json()
    theirs = artifacts["apache"]

    other = _reviewed(flow, theirs, requester=personas.other_requester)

    assert "eval.missing" in _eval_codes(flow, other)
    assert _evidence_evals(other) == []


def test_an_eval_with_another_kv_cache_dtype_does_not_cover_the_request(
    flow: Flow, artifacts: dict[str, ModelArtifact]
) -> None:
    """The KV cache dtype is part of what the gate holds the rollout to, and an FP8 KV cache answers
    differently from a BF16 one: an eval served with one does not cover a request serving the other."""
    first = _reviewed(flow, artifacts["apache"])  # kv_dtype: the gate's default, bf16
    _passed_eval(first)

    second = _reviewed(flow, artifacts["apache"], kv_dtype="fp8")

    assert _eval_codes(flow, second) == {"eval.stale"}
    [blocker] = [b for b in flow.get(flow.p.legal, second)["blockers"] if b["code"] == "eval.stale"]
    assert "kv_dtype bf16 -> fp8" in blocker["message"]
