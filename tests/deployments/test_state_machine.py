"""Every transition, allowed and refused, and what each writes to the audit trail."""

import threading

import pytest
from django.db import connections

from governance.audit.actions import AuditAction
from governance.audit.models import AuditEvent
from governance.deployments.choices import TRANSITIONS, Status
from governance.deployments.models import DeploymentRequest
from governance.deployments.services import deployment_submit, deployments_expire_approvals
from tests.conftest import make_user
from tests.deployments.conftest import Flow


def _transitions(code: str) -> list[tuple[str, str]]:
    events = AuditEvent.objects.filter(action=AuditAction.DEPLOYMENT_TRANSITIONED, object_id=code).order_by("seq")
    return [(e.data["from"], e.data["to"]) for e in events]


def test_transition_table_is_the_documented_one() -> None:
    assert TRANSITIONS == {
        "draft": ("submitted", "withdrawn"),
        "submitted": ("in_review", "withdrawn"),
        "in_review": ("approved", "rejected"),
        "approved": ("revoked", "expired", "in_review"),
        "rejected": (),
        "revoked": (),
        "expired": (),
        "withdrawn": (),
    }


def test_full_approval_path_writes_audit_events(flow: Flow, artifacts) -> None:
    code = flow.to_review(artifacts["llama"])
    approved = flow.approve(code)
    assert approved["status"] == "approved"
    assert approved["approval_expires_at"] is not None
    assert _transitions(code) == [("draft", "submitted"), ("submitted", "in_review"), ("in_review", "approved")]
    actions = set(AuditEvent.objects.filter(object_id=code).values_list("action", flat=True))
    for action in (
        AuditAction.DEPLOYMENT_CREATED,
        AuditAction.LICENSE_EVALUATED,
        AuditAction.SIGNOFF_RECORDED,
        AuditAction.OBLIGATION_ACKNOWLEDGED,
        AuditAction.OBLIGATION_REVIEWED,
    ):
        assert action in actions, action
    signoffs = AuditEvent.objects.filter(action=AuditAction.SIGNOFF_RECORDED, object_id=code)
    assert {e.data["role"] for e in signoffs} == {"legal", "engineering"}


def test_refused_transitions_answer_409_and_change_nothing(flow: Flow, artifacts, personas) -> None:
    code = flow.create(artifacts["apache"])["code"]
    assert flow.post(personas.legal, code, "start-review").status_code == 404  # a draft is invisible to reviewers
    assert flow.post(personas.requester, code, "submit").status_code == 200
    again = flow.post(personas.requester, code, "submit")
    assert again.status_code == 409
    assert "status" in again.json()["extra"]["fields"]
    digest = flow.get(personas.legal, code)["evidence_digest"]
    assert (
        flow.post(
            personas.legal, code, "review", {"verdict": "approve", "evidence_digest": digest, "password": "pw-legal"}
        ).status_code
        == 409
    )
    assert flow.post(personas.legal, code, "revoke", {"reason": "x"}).status_code == 409
    assert DeploymentRequest.objects.get(code=code).status == Status.SUBMITTED


def test_a_requester_cannot_review(flow: Flow, artifacts, personas) -> None:
    code = flow.to_review(artifacts["apache"])
    digest = flow.get(personas.requester, code)["evidence_digest"]
    response = flow.post(
        personas.requester, code, "review", {"verdict": "approve", "evidence_digest": digest, "password": "pw-req"}
    )
    assert response.status_code == 403
    assert flow.post(personas.requester, code, "start-review").status_code == 403


def test_nobody_reviews_their_own_request(flow: Flow, artifacts, personas) -> None:
    both = make_user("both", "requester", "legal_reviewer", team=personas.team)
    body = {
        "artifact": str(artifacts["apache"].code),
        "product_name": "Self",
        "facts": flow.get(personas.requester, flow.create(artifacts["apache"])["code"])["facts"],
        "serving_plan": {"precision": "fp8", "gpu": "h200", "max_model_len": 4096},
    }
    created = flow.client(both).post("/api/v1/deployments/", body, format="json").json()
    flow.post(both, created["code"], "submit")
    response = flow.post(both, created["code"], "start-review")
    assert response.status_code == 403
    assert "separation of duties" in response.json()["message"]


def test_reject_is_final(flow: Flow, artifacts, personas) -> None:
    flow.ensure_pki()  # a rejection is a signature too
    code = flow.to_review(artifacts["apache"])
    digest = flow.get(personas.engineer, code)["evidence_digest"]
    response = flow.post(
        personas.engineer,
        code,
        "review",
        {"verdict": "reject", "evidence_digest": digest, "comment": "no", "password": "pw-eng"},
    )
    assert response.json()["status"] == "rejected"
    patch = flow.client(personas.requester).patch(f"/api/v1/deployments/{code}", {"product_name": "x"}, format="json")
    assert patch.status_code == 409
    assert _transitions(code)[-1] == ("in_review", "rejected")


def test_stale_evidence_digest_is_refused(flow: Flow, artifacts, personas) -> None:
    code = flow.to_review(artifacts["apache"])
    flow.compute_capacity(code)
    flow.meet_obligations(code)
    response = flow.post(
        personas.legal, code, "review", {"verdict": "approve", "evidence_digest": "0" * 64, "password": "pw-legal"}
    )
    assert response.status_code == 409
    assert "evidence_digest" in response.json()["extra"]["fields"]


def test_approval_needs_obligations_and_capacity(flow: Flow, artifacts, personas) -> None:
    code = flow.to_review(artifacts["llama"])
    digest = flow.get(personas.legal, code)["evidence_digest"]
    legal = flow.post(
        personas.legal, code, "review", {"verdict": "approve", "evidence_digest": digest, "password": "pw-legal"}
    )
    assert legal.status_code == 409
    # What refuses the sign-off: the obligations, and the evidence engineering still has to produce.
    assert {b["code"] for b in legal.json()["extra"]["blockers"]} == {
        "obligation.not_accepted",
        "capacity.pending",
        "eval.missing",
    }
    engineering = flow.post(
        personas.engineer, code, "review", {"verdict": "approve", "evidence_digest": digest, "password": "pw-eng"}
    )
    assert engineering.status_code == 409
    assert "capacity.pending" in [b["code"] for b in engineering.json()["extra"]["blockers"]]


def test_revoke_and_expiry(flow: Flow, artifacts, personas) -> None:
    code = flow.to_review(artifacts["apache"])
    flow.approve(code)
    assert flow.post(personas.requester, code, "revoke", {"reason": "x"}).status_code == 403
    assert flow.post(personas.legal, code, "revoke", {}).status_code == 400
    revoked = flow.post(personas.legal, code, "revoke", {"reason": "licensor complaint"})
    assert revoked.json()["status"] == "revoked"
    other = flow.to_review(artifacts["apache"])
    flow.approve(other)
    request = DeploymentRequest.objects.get(code=other)
    assert request.approval_expires_at is not None
    assert deployments_expire_approvals(now=request.approval_expires_at) == 1
    assert DeploymentRequest.objects.get(code=other).status == Status.EXPIRED
    assert _transitions(other)[-1] == ("approved", "expired")


@pytest.mark.django_db(transaction=True)
def test_concurrent_submits_submit_once(personas, artifacts) -> None:
    code = Flow(personas).create(artifacts["apache"])["code"]
    request = DeploymentRequest.objects.get(code=code)
    outcomes: list[str] = []
    barrier = threading.Barrier(4)

    def submit() -> None:
        try:
            barrier.wait()
            deployment_submit(deployment=request, actor=personas.requester)
            outcomes.append("ok")
        except Exception as exc:
            outcomes.append(type(exc).__name__)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=submit) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["ConflictError", "ConflictError", "ConflictError", "ok"]
    assert _transitions(code) == [("draft", "submitted")]
