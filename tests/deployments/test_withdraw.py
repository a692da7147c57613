"""Withdrawing a draft or submitted request: its requester or a team lead; audited; gone from every
queue; never after review began; outsiders get 404 and other members 403."""

from __future__ import annotations

from django.test import Client

from governance.audit.actions import AuditAction
from governance.audit.models import AuditEvent
from governance.deployments.choices import TERMINAL, TRANSITIONS, Status
from governance.deployments.models import DeploymentRequest
from governance.web.selectors.dashboard import dashboard
from tests.conftest import Personas, make_user
from tests.deployments.conftest import Flow


def test_the_requester_withdraws_a_submitted_request_and_it_leaves_every_queue(flow: Flow, artifacts: dict) -> None:
    p = flow.p
    code = flow.create(artifacts["apache"])["code"]
    assert flow.post(p.requester, code, "submit").status_code == 200
    assert [row["code"] for row in dashboard(p.legal).to_review or []] == [DeploymentRequest.objects.get().code]
    response = flow.post(p.requester, code, "withdraw", {"reason": "wrong model picked"})
    assert response.status_code == 200, response.json()
    assert response.json()["status"] == "withdrawn"
    event = AuditEvent.objects.filter(action=AuditAction.DEPLOYMENT_TRANSITIONED).order_by("-seq").first()
    assert event is not None
    assert event.data["to"] == "withdrawn"
    assert event.data["reason"] == "wrong model picked"
    assert event.actor_name == p.requester.username
    for user in (p.legal, p.engineer, p.requester):
        board = dashboard(user)
        assert (board.to_review or [], board.waiting_on_me, board.alerts) == ([], [], []), user
    # and nothing more happens to it
    assert flow.post(p.requester, code, "submit").status_code == 409
    assert flow.post(p.legal, code, "start-review").status_code == 409


def test_a_team_lead_withdraws_a_teammates_draft(flow: Flow, artifacts: dict) -> None:
    p = flow.p
    lead = make_user("lead", "requester", team=p.team)
    p.team.leads.add(lead)
    code = flow.create(artifacts["apache"])["code"]
    response = flow.post(lead, code, "withdraw")
    assert response.status_code == 200, response.json()
    assert response.json()["status"] == "withdrawn"


def test_only_the_requester_or_a_lead_may_withdraw(flow: Flow, artifacts: dict) -> None:
    p = flow.p
    teammate = make_user("teammate", "requester", team=p.team)
    code = flow.create(artifacts["apache"])["code"]
    assert flow.post(teammate, code, "withdraw").status_code == 403
    assert flow.post(p.other_requester, code, "withdraw").status_code == 404  # cannot see it
    assert flow.post(p.outsider, code, "withdraw").status_code in (403, 404)
    assert flow.post(p.legal, code, "withdraw").status_code == 404  # a draft: reviewers do not see it
    assert DeploymentRequest.objects.get().status == "draft"


def test_a_request_in_review_cannot_be_withdrawn(flow: Flow, artifacts: dict) -> None:
    code = flow.to_review(artifacts["apache"])
    response = flow.post(flow.p.requester, code, "withdraw")
    assert response.status_code == 409
    assert "in_review request cannot be withdrawn" in response.json()["message"]


def test_the_request_page_offers_withdraw_to_its_requester_only(
    flow: Flow, artifacts: dict, personas: Personas
) -> None:
    code = flow.create(artifacts["apache"])["code"]
    client = Client()
    client.force_login(personas.requester)
    page = client.get(f"/requests/{code}/")
    assert page.status_code == 200
    assert f"/requests/{code}/withdraw" in page.content.decode()
    teammate = make_user("teammate", "requester", team=personas.team)
    other = Client()
    other.force_login(teammate)
    assert f"/requests/{code}/withdraw" not in other.get(f"/requests/{code}/").content.decode()
    response = client.post(f"/requests/{code}/withdraw", {"reason": "duplicate"})
    assert response.status_code == 302
    assert DeploymentRequest.objects.get().status == "withdrawn"
    page = client.get(f"/requests/{code}/")
    assert "Withdrawn" in page.content.decode()
    assert f"/requests/{code}/withdraw" not in page.content.decode()


def test_a_plan_finishing_after_a_withdraw_leaves_the_withdrawn_request_alone(flow: Flow, artifacts: dict) -> None:
    """Issue 44: a withdrawn request is closed for evidence. Its capacity plan (queued at submit)
    finishing afterwards rewrites neither its evidence nor the audit trail."""
    p = flow.p
    code = flow.create(artifacts["apache"])["code"]
    assert flow.post(p.requester, code, "submit").status_code == 200
    assert flow.post(p.requester, code, "withdraw").status_code == 200
    before = DeploymentRequest.objects.get(code=code)
    last_event = AuditEvent.objects.order_by("-seq").values_list("seq", flat=True).first()
    flow.compute_capacity(code)  # the plan finishes, and its hook runs
    after = DeploymentRequest.objects.get(code=code)
    assert (after.status, after.evidence_digest, after.evidence) == (
        "withdrawn",
        before.evidence_digest,
        before.evidence,
    )
    written = AuditEvent.objects.filter(seq__gt=last_event).exclude(action=AuditAction.CAPACITY_PLAN_COMPUTED)
    assert list(written.values_list("action", flat=True)) == []  # the plan's own record only


def test_every_status_no_transition_leaves_is_closed_for_evidence() -> None:
    """The closed statuses are derived from the transitions table, not listed again."""
    assert set(TERMINAL) == {status for status in Status if not TRANSITIONS[status]}
    assert Status.WITHDRAWN in TERMINAL
