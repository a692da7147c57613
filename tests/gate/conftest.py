"""Gate fixtures: a request driven to approved through the API (with a passed eval for the
served precision), a team CI token, and the check body a pipeline would send."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from governance.core.tokens import TokenScope, api_token_issue
from governance.deployments import services as deployment_services
from governance.deployments.models import DeploymentRequest
from governance.deployments.selectors import latest_capacity_plan
from governance.evaluations.models import EvalRun, EvalStatus
from governance.gate.services import ci_token_issue
from tests.conftest import Personas, make_user
from tests.deployments.conftest import Flow, artifacts, catalog, digest_of, flow  # noqa: F401
from tests.deployments.conftest import record_eval as shared_record_eval

__all__ = ["artifacts", "catalog", "flow"]


def bearer(clear_text: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {clear_text}")
    return client


def record_eval(code: str, scheme: str, status: str, tmp_path: Path | None = None) -> EvalRun:
    """A finished eval run (tests.deployments.conftest.record_eval); `tmp_path` is unused."""
    return shared_record_eval(code, scheme, status)


class Gate:
    """An approved request, a CI token for its team, and helpers to ask the gate."""

    def __init__(self, flow: Flow, personas: Personas, code: str, token: str) -> None:
        self.flow, self.p, self.code, self.token = flow, personas, code, token

    def body(self, **changes: Any) -> dict[str, Any]:
        deployment = DeploymentRequest.objects.get(code=self.code)
        assert deployment.evidence is not None
        layout = deployment.evidence["capacity_plan"]["result"]["parallel"]
        serving = {
            "engine": "vllm",
            "engine_version": "0.11.0",  # the version record_eval's passed eval served
            "precision": "fp8",
            "gpu": "h200",
            "tp": layout["tp"],
            "pp": layout["pp"],
            "ep": layout["ep"],
            "max_model_len": 32768,
            "gpu_memory_utilization": 0.9,
        }
        serving.update(changes.pop("serving", {}))
        serving = {name: value for name, value in serving.items() if value is not None}  # None: left out
        return {
            "deployment": self.code,
            "environment": "production",
            "artifact_digest": deployment.evidence["artifact"]["weights_digest"],
            "serving": serving,
            **changes,
        }

    def check(self, token: str | None = None, **changes: Any) -> Any:
        return bearer(token or self.token).post("/api/v1/gate/check", self.body(**changes), format="json")

    def codes(self, **changes: Any) -> list[str]:
        response = self.check(**changes)
        assert response.status_code == 200, response.json()
        return [reason["code"] for reason in response.json()["reasons"]]


def compute_capacity(flow: Flow, code: str) -> None:
    """Compute the request's plan and run the deployments hook that makes it evidence (the hook
    runs after commit in production; these tests run inside one transaction)."""
    flow.compute_capacity(code)
    stored = latest_capacity_plan(DeploymentRequest.objects.get(code=code))
    assert stored is not None
    deployment_services.on_capacity_plan_computed(plan=stored)


def approved_request(flow: Flow, artifact: Any, tmp_path: Path, facts: dict[str, Any] | None = None) -> str:
    code = flow.to_review(artifact, facts)
    compute_capacity(flow, code)
    record_eval(code, "fp8", EvalStatus.PASSED, tmp_path)
    assert flow.approve(code)["status"] == "approved"
    return code


@pytest.fixture
def gate(flow: Flow, artifacts, personas: Personas, tmp_path: Path) -> Gate:
    code = approved_request(flow, artifacts["apache"], tmp_path)
    personas.team.leads.add(personas.requester)
    _, clear_text = ci_token_issue(
        actor=personas.requester, team=personas.team, name="deploy", expires_at=timezone.now() + timedelta(days=30)
    )
    return Gate(flow, personas, code, clear_text)


@pytest.fixture
def unsigned_gate(flow: Flow, artifacts, personas: Personas) -> Gate:
    """A request in review with its capacity computed (so `body()` is a complete check) and a team
    CI token, without the two sign-offs (nor the PKI): for what the gate answers before it reads an
    approval, or whatever the decision (tokens, input, the decision log), where rendering and
    signing two PDF packets to reach `approved` would only slow each case down."""
    code = flow.to_review(artifacts["apache"])
    compute_capacity(flow, code)
    personas.team.leads.add(personas.requester)
    _, clear_text = ci_token_issue(
        actor=personas.requester, team=personas.team, name="deploy", expires_at=timezone.now() + timedelta(days=30)
    )
    return Gate(flow, personas, code, clear_text)


__all__ += [
    "Gate",
    "TokenScope",
    "api_token_issue",
    "approved_request",
    "bearer",
    "compute_capacity",
    "make_user",
    "record_eval",
]
