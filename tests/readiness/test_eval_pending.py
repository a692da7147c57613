"""An eval in progress is `eval.pending`, not `eval.missing` (issue 46): the page and the API said
"no eval" while the run was answering cases. Running runs stay out of the evidence (its digest, and
so the sign-offs, must not depend on when it was rebuilt); the readiness state carries them beside it."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from governance.deployments.models import DeploymentRequest
from governance.deployments.readiness import ReadinessState, readiness
from governance.evaluations.models import Cluster, EvalKind, EvalRun, EvalStatus, ExecutorKind
from tests.approvals.conftest import SignFlow

DIGEST = "sha256:" + "c" * 64


def _evidence() -> dict[str, Any]:
    return {
        "artifact": {"weights_digest": DIGEST},
        "serving_envelope": {"engine": "vllm", "precision": "fp8", "tp": 2},
        "capacity_plan": {"status": "done", "fits": True, "result": {"parallel": {"tp": 2, "pp": 1, "ep": 1}}},
        "eval_results": [],
    }


def _running(**changes: Any) -> dict[str, Any]:
    return {
        "kind": "served",
        "scheme": "fp8",
        "status": "running",
        "candidate_digest": DIGEST,
        "engine": "vllm",
        "serving": {"tp": 2, "pp": 1, "ep": 1},
        **changes,
    }


def _codes(running: tuple[dict[str, Any], ...]) -> list[str]:
    state = ReadinessState(evidence=_evidence(), evidence_digest="d", signatures={}, running_evals=running)
    return [r.code for r in readiness(state, timezone.now()) if r.code.startswith("eval.")]


def test_a_running_eval_of_the_approved_config_is_pending() -> None:
    assert _codes(()) == ["eval.missing"]
    assert _codes((_running(),)) == ["eval.pending"]


@pytest.mark.parametrize(
    "changes",
    [{"kind": "screening"}, {"scheme": "w4a16"}, {"candidate_digest": "sha256:" + "d" * 64}, {"serving": {"tp": 4}}],
)
def test_a_running_eval_of_something_else_leaves_the_eval_missing(changes: dict[str, Any]) -> None:
    assert _codes((_running(**changes),)) == ["eval.missing"]


@pytest.mark.django_db
def test_the_page_and_the_api_say_pending_while_the_run_is_in_progress(
    sign_flow: SignFlow, artifacts: dict[str, Any]
) -> None:
    code = sign_flow.ready(artifacts["apache"], with_eval=False)
    deployment = DeploymentRequest.objects.get(code=code)
    layout = (deployment.evidence or {})["capacity_plan"]["result"]["parallel"]
    cluster, _ = Cluster.objects.get_or_create(
        name="local", defaults={"executor": ExecutorKind.LOCAL, "remote_root": "/tmp/governance-test-runs"}
    )
    digest_before = deployment.evidence_digest
    EvalRun.objects.create(
        request=deployment,
        cluster=cluster,
        scheme="fp8",
        status=EvalStatus.RUNNING,
        kind=EvalKind.SERVED,
        candidate=deployment.artifact,
        candidate_digest=deployment.artifact.weights_digest,
        engine="vllm",
        serving={"precision": "fp8", **{n: layout.get(n, 1) for n in ("tp", "pp", "ep", "dp")}},
    )
    api_codes = [b["code"] for b in sign_flow.get(sign_flow.p.legal, code)["blockers"]]
    assert "eval.pending" in api_codes
    assert "eval.missing" not in api_codes
    web = Client()
    web.force_login(sign_flow.p.legal)
    page = web.get(f"/requests/{code}/").content.decode()
    assert 'data-code="eval.pending"' in page
    assert 'data-code="eval.missing"' not in page
    assert DeploymentRequest.objects.get(code=code).evidence_digest == digest_before  # evidence unchanged
