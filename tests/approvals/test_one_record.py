"""One record per decision (issue 27): a reviewer's sign-off is stored once (deployments.SignOff);
the approvals app keeps only its PDF signature (PacketSignature). An evidence change voids it in one
place (deployments.services.evidence, a direct call), and nothing on the old digest stays live."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.apps import apps
from django.db import connection, models

from governance.approvals.choices import PacketStatus, SignatureStatus
from governance.approvals.models import ApprovalPacket, PacketSignature
from governance.approvals.selectors import (
    APPROVAL_STATE_COLUMNS,
    APPROVAL_STATE_JOINS,
    approval_bundle_files,
    approval_state,
    live_packet,
)
from governance.audit.actions import AuditAction
from governance.audit.models import AuditEvent
from governance.deployments.choices import SignOffDecision
from governance.deployments.models import DeploymentRequest, SignOff
from tests.approvals.conftest import SignFlow
from tests.deployments.conftest import FACTS

# Every model has these (core.BaseModel); anything else in common would be a fact stored twice.
_BASE = {"id", "code", "created_at", "updated_at"}


def _decision_models() -> list[str]:
    """Models storing a reviewer's approve/reject on an evidence digest."""
    found = []
    for model in apps.get_models():
        if not model.__module__.startswith("governance."):
            continue
        fields = {f.name: f for f in model._meta.concrete_fields}
        holds_verdict = any(
            isinstance(f, models.CharField) and set(SignOffDecision.values) <= {c for c, _ in f.choices or ()}
            for f in fields.values()
        )
        if holds_verdict and "evidence_digest" in fields:
            found.append(model._meta.label)
    return sorted(found)


def test_exactly_one_model_holds_a_reviewers_decision() -> None:
    # Failed before: deployments.ReviewDecision (verdict) and approvals.SignOff (decision) both did.
    assert _decision_models() == ["deployments.SignOff"]


def test_the_signature_row_repeats_no_fact_of_the_decision() -> None:
    decision = {f.name for f in SignOff._meta.concrete_fields} - _BASE
    signature = {f.name for f in PacketSignature._meta.concrete_fields} - _BASE
    assert decision & signature == set()
    # and it points at the decision, one-to-one
    link = PacketSignature._meta.get_field("signoff")
    assert link.one_to_one
    assert link.related_model is SignOff


def test_no_receiver_voids_on_an_evidence_change() -> None:
    # Voiding is a direct call in deployments.services.evidence; the approvals app listened to
    # deployments' `evidence_changed` signal before (and voided its own copy of each sign-off).
    import inspect

    import governance.approvals.signals as approvals_signals
    from governance.deployments.services import evidence

    assert not hasattr(approvals_signals, "on_evidence_changed")
    assert ".send(" not in inspect.getsource(evidence)


def _approved_pdf(deployment: DeploymentRequest) -> str | None:
    """The completed packet the ORM reads (approval_state), after checking that the gate's
    hand-written statement (APPROVAL_STATE_JOINS) reads the same one."""
    sql = (
        f"SELECT d.id,{APPROVAL_STATE_COLUMNS} FROM deployments_deploymentrequest d{APPROVAL_STATE_JOINS} "
        "WHERE d.id = %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [deployment.pk])
        names = [column[0] for column in cursor.description]
        row = dict(zip(names, cursor.fetchone(), strict=True))
    orm = approval_state(deployment)
    assert row["approval_verified_sha256"] == (orm.pdf_sha256 if orm else None)
    return orm.pdf_sha256 if orm else None


def _live_on(digest: str, code: str) -> dict[str, Any]:
    return {
        "signoffs": SignOff.objects.filter(
            deployment__code=code, evidence_digest=digest, voided_at__isnull=True
        ).count(),
        "signatures": PacketSignature.objects.filter(
            signoff__deployment__code=code, signoff__evidence_digest=digest, signoff__voided_at__isnull=True
        ).count(),
    }


@pytest.mark.django_db
def test_an_evidence_change_leaves_no_live_signature_on_the_old_digest(
    sign_flow: SignFlow, artifacts, personas
) -> None:
    code = sign_flow.ready(artifacts["apache"])
    sign_flow.approve_signed(code)
    deployment = DeploymentRequest.objects.get(code=code)
    assert deployment.status == "approved"
    old = deployment.evidence_digest
    signed = ApprovalPacket.objects.get(deployment=deployment, status=PacketStatus.COMPLETE)
    assert _live_on(old, code) == {"signoffs": 2, "signatures": 2}
    assert _approved_pdf(deployment) == signed.pdf_sha256

    facts = {**FACTS, "monthly_active_users": 5_000_000}
    response = sign_flow.client(personas.requester).patch(
        f"/api/v1/deployments/{code}", {"facts": facts}, format="json"
    )
    assert response.status_code == 200, response.json()
    deployment.refresh_from_db()
    assert deployment.status == "in_review"
    assert deployment.evidence_digest != old
    assert _live_on(old, code) == {"signoffs": 0, "signatures": 0}
    assert live_packet(deployment) is None  # the signed packet of the old digest is superseded
    assert _approved_pdf(deployment) is None
    assert AuditEvent.objects.filter(action=AuditAction.SIGNOFF_VOIDED, object_id=code).count() == 2
    body = sign_flow.client(personas.legal).get(f"/api/v1/approvals/deployments/{code}/signoffs").json()
    assert body["packet_status"] is None
    assert [s["voided_at"] is not None for s in body["signoffs"]] == [True, True]
    assert {s["signature_status"] for s in body["signoffs"]} == {SignatureStatus.SIGNED}
    index = json.loads(dict(approval_bundle_files())["approvals/index.json"])
    assert [e["current"] for e in index if e["packet"] == str(signed.code)] == [False]  # the audit bundle says so

    # Back to the same evidence (A -> B -> A): the signed packet of A carries voided sign-offs'
    # signatures, so it stays superseded and the next sign-off gets a fresh packet.
    response = sign_flow.client(personas.requester).patch(
        f"/api/v1/deployments/{code}", {"facts": FACTS}, format="json"
    )
    assert response.status_code == 200, response.json()
    deployment.refresh_from_db()
    assert deployment.evidence_digest == old
    assert live_packet(deployment) is None
    assert _approved_pdf(deployment) is None
    assert sign_flow.sign(personas.legal, code, "legal").status_code == 202
    fresh = live_packet(deployment)
    assert fresh is not None
    assert fresh.pk != signed.pk
    assert fresh.status == PacketStatus.RENDERING
    signed.refresh_from_db()
    assert signed.status == PacketStatus.VOID
    assert signed.voided_at is not None
