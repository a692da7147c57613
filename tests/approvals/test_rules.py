"""Every sign-off rule: each refusal answers a clear message and leaves an audit event."""

from __future__ import annotations

from typing import Any

import pytest
from cryptography import x509
from django.contrib.auth.models import User

from governance.approvals.choices import RevocationReason
from governance.approvals.models import ApprovalPacket, Authority
from governance.approvals.selectors import certificate_for
from governance.approvals.services import certificate_revoke, certificates_sync, sign_off
from governance.audit.actions import AuditAction
from governance.audit.models import AuditEvent
from governance.core.errors import PermissionDeniedError
from governance.core.roles import Role
from governance.deployments.models import DeploymentRequest, SignOff
from tests.approvals.conftest import SignFlow, run_packet_jobs
from tests.conftest import make_user


def _refusals(code: str) -> list[dict[str, Any]]:
    return list(
        AuditEvent.objects.filter(action=AuditAction.SIGNOFF_REFUSED, object_id=code)
        .order_by("seq")
        .values_list("data", flat=True)
    )


def _refused(response: Any, status: int, code: str, refusal: str, words: str) -> None:
    assert response.status_code == status, response.json()
    body = response.json()
    assert words in body["message"]
    assert body["extra"]["code"] == refusal
    assert _refusals(code)[-1]["code"] == refusal
    assert _refusals(code)[-1]["message"] == body["message"]


@pytest.fixture
def ready(sign_flow: SignFlow, artifacts) -> str:
    return sign_flow.ready(artifacts["apache"])


def test_wrong_role(sign_flow: SignFlow, ready: str, personas) -> None:
    _refused(sign_flow.sign(personas.engineer, ready, "legal"), 403, ready, "role.not_held", "legal reviewer role")
    _refused(sign_flow.sign(personas.auditor, ready, "engineering"), 403, ready, "role.not_held", "engineering")
    assert not SignOff.objects.exists()


def test_own_team(sign_flow: SignFlow, ready: str, personas) -> None:
    insider = make_user("insider", Role.LEGAL_REVIEWER, team=personas.team)
    _refused(sign_flow.sign(insider, ready, "legal"), 403, ready, "team.own", "own team")


def test_wrong_order(sign_flow: SignFlow, ready: str, personas) -> None:
    _refused(
        sign_flow.sign(personas.engineer, ready, "engineering"), 409, ready, "order.legal_first", "legal signs first"
    )
    assert sign_flow.sign(personas.legal, ready, "legal").status_code == 202
    # Recorded (pending the worker's signature) counts: engineering may follow at once.
    assert sign_flow.sign(personas.engineer, ready, "engineering").status_code == 202
    _refused(sign_flow.sign(personas.legal, ready, "legal"), 409, ready, "signoff.already_signed", "already recorded")


def test_wrong_password(sign_flow: SignFlow, ready: str, personas) -> None:
    response = sign_flow.sign(personas.legal, ready, "legal", password="not-my-password")
    _refused(response, 403, ready, "password.wrong", "password is not correct")
    assert "not-my-password" not in str(_refusals(ready))  # never logged
    assert not ApprovalPacket.objects.filter(deployment__code=ready).exists()


def test_stale_digest(sign_flow: SignFlow, ready: str, personas) -> None:
    old = sign_flow.digest(ready)
    patch = sign_flow.client(personas.requester).patch(
        f"/api/v1/deployments/{ready}", {"target_cluster": "b"}, format="json"
    )
    assert patch.status_code == 200
    assert sign_flow.digest(ready) != old
    _refused(
        sign_flow.sign(personas.legal, ready, "legal", digest=old), 409, ready, "evidence.stale", "evidence changed"
    )


def test_revoked_certificate_before_signing(sign_flow: SignFlow, ready: str, personas, org_pki: Authority) -> None:
    certificates_sync(user=personas.legal, actor="system:test")
    certificate = certificate_for(personas.legal, "legal")
    assert certificate is not None
    certificate_revoke(certificate=certificate, reason=RevocationReason.KEY_COMPROMISE, actor="system:test")
    _refused(
        sign_flow.sign(personas.legal, ready, "legal"), 409, ready, "certificate.revoked", "certificate was revoked"
    )
    org_pki.refresh_from_db()
    assert org_pki.crl_der is not None
    crl = x509.load_der_x509_crl(bytes(org_pki.crl_der))
    assert crl.get_revoked_certificate_by_serial_number(int(certificate.serial_number)) is not None


def test_removing_the_role_revokes_the_certificate_and_lists_it_in_the_crl(
    sign_flow: SignFlow, ready: str, personas, org_pki: Authority
) -> None:
    certificates_sync(user=personas.legal, actor="system:test")
    certificate = certificate_for(personas.legal, "legal")
    assert certificate is not None
    assert certificate.revoked_at is None
    personas.legal.groups.remove(personas.legal.groups.get(name=Role.LEGAL_REVIEWER))
    certificate.refresh_from_db()
    assert certificate.revoked_at is not None
    assert certificate.revocation_reason == "role_removed"
    org_pki.refresh_from_db()
    crl = x509.load_der_x509_crl(bytes(org_pki.crl_der))
    assert crl.get_revoked_certificate_by_serial_number(int(certificate.serial_number)) is not None
    events = AuditEvent.objects.filter(action=AuditAction.CERTIFICATE_REVOKED, object_id=str(certificate.code))
    assert events.count() == 1
    # The API no longer shows the request to them (404); the service refuses and records it.
    assert sign_flow.sign(personas.legal, ready, "legal").status_code == 404
    with pytest.raises(PermissionDeniedError, match="legal reviewer role"):
        sign_off(
            deployment=DeploymentRequest.objects.get(code=ready),
            user=User.objects.get(pk=personas.legal.pk),
            role="legal",
            decision="approve",
            password="pw-legal",
            evidence_digest=sign_flow.digest(ready),
        )
    assert _refusals(ready)[-1]["code"] == "role.not_held"


def test_a_rejection_is_signed_and_ends_the_review(sign_flow: SignFlow, ready: str, personas) -> None:
    assert sign_flow.sign(personas.engineer, ready, "engineering", "reject").status_code == 400  # needs a comment
    response = sign_flow.sign(personas.engineer, ready, "engineering", "reject", comment="KV cache too small")
    assert response.status_code == 202, response.json()
    assert response.json()["deployment_status"] == "rejected"  # a rejection takes effect when made
    run_packet_jobs(ready)  # then the worker signs it into the packet
    packet = ApprovalPacket.objects.get(deployment__code=ready)
    assert packet.status == "rejected"
