"""Finding 1: rendering and signing a packet run in the heavy worker, never in the web request and
never while the audit chain head or the request row is locked; a render past its time limit fails
cleanly, naming the field, with nothing half-written."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from celery.exceptions import SoftTimeLimitExceeded
from django.db import connection

from governance.approvals.choices import PacketStatus, SignatureStatus
from governance.approvals.models import ApprovalPacket
from governance.approvals.services import packet_complete
from governance.audit.actions import AuditAction
from governance.audit.models import AuditEvent
from governance.core.models import OutboxMessage
from governance.deployments.models import DeploymentRequest, SignOff
from tests.approvals.conftest import SignFlow


@pytest.fixture
def ready(sign_flow: SignFlow, artifacts: dict[str, Any]) -> str:
    return sign_flow.ready(artifacts["apache"])


def _no_render(*args: Any, **kwargs: Any) -> bytes:
    raise AssertionError("the packet was rendered in the web request")


def test_signoff_answers_202_without_rendering(
    sign_flow: SignFlow, ready: str, personas: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import governance.approvals.packet_render as packet_module

    monkeypatch.setattr(packet_module, "render_packet", _no_render)
    monkeypatch.setattr(packet_module, "html_to_pdfa", _no_render)
    response = sign_flow.sign(personas.legal, ready, "legal")
    assert response.status_code == 202, response.json()
    body = response.json()
    assert body["signature_status"] == "pending"
    assert body["status_url"].endswith(f"/deployments/{ready}/signoffs")
    # The decision is recorded; the heavy task that signs it is queued in the same transaction.
    assert SignOff.objects.get(deployment__code=ready).signature.status == SignatureStatus.PENDING
    assert OutboxMessage.objects.filter(task="approvals.packet_complete").count() == 1
    packet = ApprovalPacket.objects.get(deployment__code=ready)
    assert packet.status == PacketStatus.RENDERING
    assert sign_flow.client(personas.legal).get(f"/api/v1/approvals/deployments/{ready}/packet").status_code == 202


def test_render_for_review_is_queued(
    sign_flow: SignFlow, ready: str, personas: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import governance.approvals.packet_render as packet_module

    monkeypatch.setattr(packet_module, "render_packet", _no_render)
    response = sign_flow.client(personas.legal).post(f"/api/v1/approvals/deployments/{ready}/packet")
    assert response.status_code == 202, response.json()
    assert response.json()["status"] == "rendering"


def test_render_past_its_time_limit_names_the_field(
    sign_flow: SignFlow, artifacts: dict[str, Any], personas: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import governance.approvals.packet_render as packet_module

    ready = sign_flow.ready(artifacts["llama"], how_met="义" * 4000)

    def too_slow(*args: Any, **kwargs: Any) -> bytes:
        raise SoftTimeLimitExceeded()

    assert sign_flow.sign(personas.legal, ready, "legal").status_code == 202
    monkeypatch.setattr(packet_module, "html_to_pdfa", too_slow)
    packet = ApprovalPacket.objects.get(deployment__code=ready)
    assert packet_complete(packet_id=packet.pk) == PacketStatus.FAILED
    packet.refresh_from_db()
    assert packet.status == PacketStatus.FAILED
    assert packet.voided_at is not None
    assert bytes(packet.pdf) == b""  # nothing half-written
    assert "obligations[0].how_met" in packet.void_reason
    signoff = SignOff.objects.select_related("signature").get(deployment__code=ready)
    assert signoff.signature.status == SignatureStatus.FAILED
    assert signoff.voided_at is not None
    event = AuditEvent.objects.filter(action=AuditAction.PACKET_RENDER_FAILED).get()
    assert "obligations[0].how_met" in event.data["reason"]
    body = sign_flow.client(personas.legal).get(f"/api/v1/approvals/deployments/{ready}/signoffs").json()
    assert body["signoffs"][0]["signature_status"] == "failed"
    assert "how_met" in body["signoffs"][0]["signature_error"]
    # The reviewer can sign again: a fresh packet is queued.
    assert sign_flow.sign(personas.legal, ready, "legal").status_code == 202


def _probe_locks(deployment_pk: int) -> None:
    """From a second connection: neither the audit chain head nor the request row may be locked."""
    settings = connection.settings_dict
    with psycopg.connect(
        host=settings["HOST"] or "127.0.0.1",
        port=settings["PORT"] or 5432,
        user=settings["USER"],
        dbname=settings["NAME"],
        autocommit=False,
    ) as other:
        other.execute("SET lock_timeout = '200ms'")
        other.execute("SELECT 1 FROM audit_auditchainhead WHERE id = 1 FOR UPDATE")
        other.execute("SELECT 1 FROM deployments_deploymentrequest WHERE id = %s FOR UPDATE", [deployment_pk])
        other.rollback()


@pytest.mark.postgres
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_render_and_sign_hold_no_shared_lock(
    sign_flow: SignFlow, ready: str, personas: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("row locks are PostgreSQL's")
    import governance.approvals.packet_render as packet_module
    import governance.approvals.signing as signing_module

    deployment = DeploymentRequest.objects.get(code=ready)
    probes: list[str] = []
    real_render, real_sign = packet_module.html_to_pdfa, signing_module.sign_packet

    def render_probing(*args: Any, **kwargs: Any) -> bytes:
        _probe_locks(deployment.pk)
        probes.append("render")
        return real_render(*args, **kwargs)

    def sign_probing(*args: Any, **kwargs: Any) -> bytes:
        _probe_locks(deployment.pk)
        probes.append("sign")
        return real_sign(*args, **kwargs)

    monkeypatch.setattr(packet_module, "html_to_pdfa", render_probing)
    monkeypatch.setattr(signing_module, "sign_packet", sign_probing)
    sign_flow.approve_signed(ready)
    assert probes == ["render", "sign", "sign"]
    deployment.refresh_from_db()
    assert deployment.status == "approved"
    assert ApprovalPacket.objects.get(deployment=deployment).status == PacketStatus.COMPLETE
