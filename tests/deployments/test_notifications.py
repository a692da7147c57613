"""Issue 13, notifications: reviewers hear when a request waits for them, requesters when it is
decided, everyone concerned when usage crosses a license threshold. Django's mail (locmem in
tests), sent after commit, one message per recipient."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from tests.approvals.conftest import run_packet_jobs
from tests.conftest import Personas
from tests.deployments.conftest import Flow, ensure_passed_eval


@pytest.fixture
def addressed(personas: Personas) -> Personas:
    for user in (personas.requester, personas.legal, personas.engineer, personas.auditor, personas.other_requester):
        user.email = f"{user.username}@example.com"
        user.save(update_fields=["email"])
    return personas


@dataclass
class Mail:
    """Django's outbox, with on-commit callbacks run for each action."""

    outbox: list[Any]
    capture: Any

    def sent_by(self, action: Callable[[], Any]) -> dict[str, str]:
        """Run `action` with its on-commit callbacks; return recipient -> subject of what was sent."""
        self.outbox.clear()
        with self.capture(execute=True):
            response = action()
        if hasattr(response, "status_code"):
            assert response.status_code in (200, 201, 202), response.json()
        sent: dict[str, str] = {}
        for message in self.outbox:
            assert len(message.to) == 1  # nobody sees the other recipients
            assert message.to[0] not in sent, [m.body[:150] for m in self.outbox]  # one message per event and person
            sent[message.to[0]] = message.subject
        return sent


@pytest.fixture
def mail(mailoutbox: list[Any], django_capture_on_commit_callbacks: Any) -> Mail:
    return Mail(mailoutbox, django_capture_on_commit_callbacks)


def test_reviewers_hear_when_a_request_waits_and_requesters_when_it_is_decided(
    flow: Flow, addressed: Personas, artifacts: dict[str, Any], mail: Mail
) -> None:
    p = addressed
    code = flow.create(artifacts["apache"])["code"]
    flow.ensure_pki()  # both reviews are recorded
    sent = mail.sent_by(lambda: flow.post(p.requester, code, "submit"))
    assert set(sent) == {"legal@example.com", "eng@example.com"}
    assert "waits for review" in sent["legal@example.com"]
    body = mail.outbox[0].body
    assert code in body
    assert "Acme Assistant" in body
    # The reviewer who takes it is not told; the other reviewer is.
    sent = mail.sent_by(lambda: flow.post(p.legal, code, "start-review"))
    assert set(sent) == {"eng@example.com"}
    flow.compute_capacity(code)  # its on-commit signal would change the evidence after the approval
    ensure_passed_eval(code)
    flow.meet_obligations(code)
    digest = flow.get(p.legal, code)["evidence_digest"]

    def sign_both() -> None:
        for user in (p.legal, p.engineer):
            body = {"verdict": "approve", "evidence_digest": digest, "password": f"pw-{user.username}"}
            assert flow.post(user, code, "review", body).status_code == 202
        run_packet_jobs(code)  # the heavy worker signs the packet; the approval follows

    sent = mail.sent_by(sign_both)
    assert flow.get(p.legal, code)["status"] == "approved"
    assert sent == {"req@example.com": "[governance] Acme Assistant is approved"}
    sent = mail.sent_by(lambda: flow.post(p.legal, code, "revoke", {"reason": "licence ended"}))
    assert sent == {"req@example.com": "[governance] Acme Assistant is revoked"}
    assert "licence ended" in mail.outbox[0].body


def test_a_rejection_reaches_the_requester(
    flow: Flow, addressed: Personas, artifacts: dict[str, Any], mail: Mail
) -> None:
    p = addressed
    code = flow.to_review(artifacts["apache"])
    flow.ensure_pki()  # a rejection is a signature too
    digest = flow.get(p.legal, code)["evidence_digest"]
    body = {"verdict": "reject", "evidence_digest": digest, "comment": "no", "password": "pw-legal"}
    sent = mail.sent_by(lambda: flow.post(p.legal, code, "review", body))
    assert sent == {"req@example.com": "[governance] Acme Assistant is rejected"}


def test_a_crossed_threshold_reaches_reviewers_and_the_team_once(
    flow: Flow, addressed: Personas, artifacts: dict[str, Any], mail: Mail
) -> None:
    p = addressed
    code = flow.to_review(artifacts["qwen"])
    assert flow.approve(code)["status"] == "approved"
    usage = {"month": "2026-11", "monthly_active_users": 100_000_001}
    sent = mail.sent_by(lambda: flow.post(p.requester, code, "usage", usage))
    # One message each (not a second "waits for review"); the other team and the auditor are not concerned.
    assert set(sent) == {"legal@example.com", "eng@example.com", "req@example.com"}
    assert all("threshold" in subject for subject in sent.values())
    assert "threshold.licensor_approval" in mail.outbox[0].body


def test_nothing_is_sent_for_a_change_that_rolled_back(
    flow: Flow, addressed: Personas, artifacts: dict[str, Any], mail: Mail
) -> None:
    from django.db import transaction

    from governance.deployments.models import DeploymentRequest
    from governance.deployments.services import deployment_submit

    code = flow.create(artifacts["apache"])["code"]
    mail.outbox.clear()
    with mail.capture(execute=True), pytest.raises(RuntimeError):  # noqa: PT012, SIM117
        with transaction.atomic():
            deployment_submit(deployment=DeploymentRequest.objects.get(code=code), actor=addressed.requester)
            raise RuntimeError("rolled back")
    assert mail.outbox == []
    assert DeploymentRequest.objects.get(code=code).status == "draft"
