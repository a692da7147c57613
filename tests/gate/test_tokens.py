"""Team CI tokens: issued by an admin or a team lead, shown once, stored hashed, limited,
expiring, revocable, last use recorded; a CI token holds only gate and usage scopes."""

from __future__ import annotations

import hashlib
from datetime import timedelta

from django.utils import timezone

from governance.audit.actions import AuditAction
from governance.audit.models import AuditEvent
from governance.core.models import ApiToken
from governance.core.roles import user_roles
from tests.conftest import Personas
from tests.deployments.conftest import Flow
from tests.gate.conftest import Gate, bearer


def _issue(client, **changes):
    body = {
        "name": "deploy",
        "team": "platform",
        "expires_at": (timezone.now() + timedelta(days=30)).isoformat(),
        **changes,
    }
    return client.post("/api/v1/gate/tokens", body, format="json")


def test_a_team_lead_issues_a_token_shown_once_and_stored_hashed(flow: Flow, personas: Personas) -> None:
    personas.team.leads.add(personas.requester)
    response = _issue(flow.client(personas.requester), environments=["production"])
    assert response.status_code == 201, response.json()
    body = response.json()
    clear = body["token"]
    assert clear.startswith("gov_")
    assert len(clear) > 40
    row = ApiToken.objects.get(code=body["code"])
    assert row.digest == hashlib.sha256(clear.encode()).hexdigest()
    assert clear not in str(ApiToken.objects.filter(pk=row.pk).values().get())
    assert (row.team, row.scopes, row.environments) == (personas.team, ["gate:check"], ["production"])
    assert not user_roles(row.user)
    assert not row.user.has_usable_password()
    listed = flow.client(personas.requester).get("/api/v1/gate/tokens").json()["results"]
    assert [t["code"] for t in listed] == [body["code"]]
    assert "token" not in listed[0]
    issued = AuditEvent.objects.get(action=AuditAction.API_TOKEN_ISSUED, object_id=body["code"])
    assert clear not in issued.body
    assert issued.data["prefix"] == clear[:12]


def test_who_may_issue_and_what_a_token_may_hold(flow: Flow, personas: Personas, artifacts) -> None:
    assert _issue(flow.client(personas.requester)).status_code == 403  # a member, not a lead
    assert _issue(flow.client(personas.legal)).status_code == 403
    admin = flow.client(personas.admin)
    assert _issue(admin).status_code == 201
    for changes, field in (
        ({"scopes": ["gate:check", "admin"]}, "scopes"),
        ({"scopes": ["audit:read"]}, "scopes"),
        ({"scopes": []}, "scopes"),
        ({"expires_at": (timezone.now() - timedelta(minutes=1)).isoformat()}, "expires_at"),
        ({"expires_at": (timezone.now() + timedelta(days=400)).isoformat()}, "expires_at"),
        ({"team": "nope"}, "team"),
        ({"environments": ["Prod!"]}, "environments[0]"),
        ({"expires_at": None}, "expires_at"),
    ):
        response = _issue(admin, **changes)
        assert response.status_code == 400, (changes, response.json())
        assert field in response.json()["extra"]["fields"], response.json()
    other_teams = flow.create(artifacts["apache"])["code"]  # a platform request...
    response = _issue(admin, team="research", deployments=[other_teams])  # ...is not research's
    assert response.status_code == 400
    assert "deployments" in response.json()["extra"]["fields"]
    assert _issue(admin, scopes=["gate:check", "usage:write"]).status_code == 201


def test_revoke_and_last_use(unsigned_gate: Gate) -> None:
    gate = unsigned_gate  # the token's answers, whatever the decision
    token = ApiToken.objects.get(prefix=gate.token[:12])
    assert token.last_used_at is None
    assert gate.check().status_code == 200
    token.refresh_from_db()
    assert token.last_used_at is not None
    outsider = gate.flow.client(gate.p.other_requester)
    assert outsider.post(f"/api/v1/gate/tokens/{token.code}/revoke").status_code == 404
    lead = gate.flow.client(gate.p.requester)
    response = lead.post(f"/api/v1/gate/tokens/{token.code}/revoke")
    assert response.status_code == 200
    assert response.json()["revoked_at"] is not None
    assert lead.post(f"/api/v1/gate/tokens/{token.code}/revoke").status_code == 409
    assert gate.check().status_code == 401
    assert AuditEvent.objects.filter(action=AuditAction.API_TOKEN_REVOKED, object_id=str(token.code)).exists()


def test_a_ci_token_reaches_the_gate_and_usage_only(unsigned_gate: Gate) -> None:
    gate = unsigned_gate  # the token's answers, whatever the decision
    client = bearer(gate.token)
    assert client.get("/api/v1/gate/tokens").status_code == 403
    assert client.get(f"/api/v1/deployments/{gate.code}").status_code == 403
    assert client.post(f"/api/v1/deployments/{gate.code}/revoke", {"reason": "x"}, format="json").status_code == 403


def test_a_non_admin_learns_nothing_about_which_teams_exist(flow: Flow, personas: Personas) -> None:
    """Finding 6 of issue 29: an unknown team and a team the caller may not manage answer alike."""
    for user in (personas.requester, personas.outsider, personas.legal):
        unknown = _issue(flow.client(user), team="no-such-team")
        existing = _issue(flow.client(user), team="research")
        assert unknown.status_code == existing.status_code == 403, (unknown.json(), existing.json())
        assert unknown.json() == existing.json()
    assert _issue(flow.client(personas.admin), team="no-such-team").status_code == 400  # an admin manages all
