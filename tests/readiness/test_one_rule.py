"""One readiness rule: the sign-off service, the request page and the gate read the same list of
reasons. The scenario a new user hit: an fp8 request with no eval run was signed by both reviewers
(the page said "Nothing blocks approval") and then the gate denied it (`eval.missing`)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from governance.deployments.models import DeploymentRequest
from governance.gate.services import ci_token_issue
from tests.approvals.conftest import SignFlow
from tests.gate.conftest import bearer

pytestmark = pytest.mark.django_db


def test_a_quantized_request_without_an_eval_cannot_be_signed_and_every_reader_says_why(
    sign_flow: SignFlow,
    artifacts: dict[str, Any],
) -> None:
    code = sign_flow.ready(artifacts["apache"], with_eval=False)  # serving plan: fp8, no eval run
    deployment = DeploymentRequest.objects.get(code=code)
    assert deployment.serving_plan["precision"] == "fp8"

    refused = sign_flow.sign(sign_flow.p.legal, code, "legal")
    assert refused.status_code == 409, refused.json()
    assert "eval.missing" in [b["code"] for b in refused.json()["extra"]["blockers"]]

    # The request page lists the same reason, naming who acts.
    web = Client()
    web.force_login(sign_flow.p.legal)
    page = web.get(f"/requests/{code}/")
    assert page.status_code == 200
    assert 'data-code="eval.missing"' in page.content.decode()

    # The API's blockers are the same list.
    api_codes = [b["code"] for b in sign_flow.get(sign_flow.p.legal, code)["blockers"]]
    assert "eval.missing" in api_codes

    # The gate gives the same code.
    sign_flow.p.team.leads.add(sign_flow.p.requester)
    _, token = ci_token_issue(
        actor=sign_flow.p.requester,
        team=sign_flow.p.team,
        name="deploy",
        expires_at=timezone.now() + timedelta(days=1),
    )
    assert deployment.evidence is not None
    layout = deployment.evidence["capacity_plan"]["result"]["parallel"]
    answer = bearer(token).post(
        "/api/v1/gate/check",
        {
            "deployment": code,
            "environment": "production",
            "artifact_digest": deployment.evidence["artifact"]["weights_digest"],
            "serving": {
                "engine": "vllm",
                "precision": "fp8",
                "gpu": "h200",
                "tp": layout["tp"],
                "pp": layout["pp"],
                "ep": layout["ep"],
                "max_model_len": 32768,
                "gpu_memory_utilization": 0.9,
            },
        },
        format="json",
    )
    assert answer.status_code == 200
    assert "eval.missing" in [r["code"] for r in answer.json()["reasons"]]
