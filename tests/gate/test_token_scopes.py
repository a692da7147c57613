"""Issue 13, "token scopes are never enforced": each attack of the security review, replayed.

A scoped token reaches only its scopes' endpoints, and only the teams and requests it was issued
for. Each test failed on the code before the fix (the attack succeeded) and passes after.
"""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from governance.core.errors import ApplicationError
from governance.core.tokens import SCOPE_ENDPOINTS, TokenScope, api_token_issue
from governance.deployments.models import DeploymentRequest, UsageReport
from tests.conftest import Personas, make_user
from tests.deployments.conftest import FACTS, Flow

USAGE = {"month": "2026-10", "monthly_active_users": 5}


def bearer(clear_text: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {clear_text}")
    return client


def test_a_usage_token_of_a_legal_reviewer_cannot_revoke_an_approval(flow: Flow, artifacts, personas) -> None:
    code = flow.to_review(artifacts["apache"])
    assert flow.approve(code)["status"] == "approved"
    token = api_token_issue(user=personas.legal, name="billing", scopes=[TokenScope.USAGE_WRITE]).clear_text
    response = bearer(token).post(f"/api/v1/deployments/{code}/revoke", {"reason": "oops"}, format="json")
    assert response.status_code == 403
    assert "scopes" in response.json()["message"]
    assert DeploymentRequest.objects.get(code=code).status == "approved"


def test_a_usage_token_of_an_auditor_cannot_download_the_audit_bundle(personas: Personas) -> None:
    token = api_token_issue(user=personas.auditor, name="billing", scopes=[TokenScope.USAGE_WRITE]).clear_text
    assert bearer(token).get("/api/v1/audit/bundle").status_code == 403
    assert bearer(token).get("/api/v1/audit/events").status_code == 403
    # The same user's unscoped token acts as the auditor (scopes restrict, they never widen).
    personal = api_token_issue(user=personas.auditor, name="personal").clear_text
    assert bearer(personal).get("/api/v1/audit/events").status_code == 200


def test_a_requesters_usage_token_cannot_post_usage_to_another_teams_request(flow: Flow, artifacts, personas) -> None:
    code = flow.to_review(artifacts["apache"])
    assert flow.approve(code)["status"] == "approved"
    # A requester of the other team issues a usage token for themselves (no team given).
    token = api_token_issue(user=personas.other_requester, name="mine", scopes=[TokenScope.USAGE_WRITE]).clear_text
    response = bearer(token).post(f"/api/v1/deployments/{code}/usage", USAGE, format="json")
    assert response.status_code == 404
    assert DeploymentRequest.objects.get(code=code).status == "approved"
    assert not UsageReport.objects.filter(request__code=code).exists()
    # Bound to the other team explicitly: still not this team's request.
    bound = api_token_issue(
        user=personas.other_requester, name="bound", scopes=[TokenScope.USAGE_WRITE], team=personas.other_team
    ).clear_text
    assert bearer(bound).post(f"/api/v1/deployments/{code}/usage", USAGE, format="json").status_code == 404


def test_a_role_less_service_token_cannot_read_drafts_or_change_facts(flow: Flow, artifacts, personas) -> None:
    service = make_user("billing-bot")  # no role, no team
    token = api_token_issue(user=service, name="billing", scopes=[TokenScope.USAGE_WRITE]).clear_text
    draft = flow.create(artifacts["apache"])["code"]
    client = bearer(token)
    assert client.get(f"/api/v1/deployments/{draft}").status_code == 403
    response = client.post(f"/api/v1/deployments/{draft}/usage", USAGE, format="json")
    assert response.status_code == 404
    assert "facts" not in response.json()  # the draft's content never leaks
    assert DeploymentRequest.objects.get(code=draft).facts == FACTS
    assert client.patch(f"/api/v1/deployments/{draft}", {"product_name": "x"}, format="json").status_code == 403


def test_a_team_usage_token_reaches_only_the_requests_it_lists(flow: Flow, artifacts, personas) -> None:
    first = flow.to_review(artifacts["apache"])
    second = flow.to_review(artifacts["apache"])
    service = make_user("billing-bot")
    token = api_token_issue(
        user=service, name="billing", scopes=[TokenScope.USAGE_WRITE], team=personas.team, deployment_codes=[first]
    ).clear_text
    assert bearer(token).post(f"/api/v1/deployments/{second}/usage", USAGE, format="json").status_code == 404
    assert bearer(token).post(f"/api/v1/deployments/{first}/usage", USAGE, format="json").status_code == 201


def test_scoped_tokens_reach_nothing_outside_their_scopes(personas: Personas) -> None:
    token = api_token_issue(user=personas.admin, name="ci", scopes=[TokenScope.GATE_CHECK]).clear_text
    client = bearer(token)
    for path in (
        "/api/v1/me",
        "/api/v1/deployments/",
        "/api/v1/licenses/",
        "/api/v1/audit/events",
        "/api/v1/gate/decisions",
        "/api/v1/gate/tokens",
    ):
        assert client.get(path).status_code == 403, path
    assert client.post("/api/v1/licenses/evaluate", {"license": "mit", "facts": {}}, format="json").status_code == 403


def test_unknown_scopes_are_refused_at_issue(personas: Personas) -> None:
    with pytest.raises(ApplicationError) as caught:
        api_token_issue(user=personas.admin, name="x", scopes=["usage:write", "admin:*"])
    assert caught.value.status == 400
    assert "scopes" in caught.value.extra["fields"]
    assert set(SCOPE_ENDPOINTS) == set(TokenScope.values)  # every scope reaches something


def test_usage_cannot_change_facts_of_a_closed_request(flow: Flow, artifacts, personas) -> None:
    code = flow.to_review(artifacts["apache"])
    assert flow.approve(code)["status"] == "approved"
    assert flow.post(personas.legal, code, "revoke", {"reason": "withdrawn"}).status_code == 200
    token = api_token_issue(
        user=make_user("billing-bot"), name="billing", scopes=[TokenScope.USAGE_WRITE], team=personas.team
    ).clear_text
    response = bearer(token).post(f"/api/v1/deployments/{code}/usage", USAGE, format="json")
    assert response.status_code == 409
    assert DeploymentRequest.objects.get(code=code).facts == FACTS
