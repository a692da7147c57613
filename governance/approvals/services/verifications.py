"""Verifying signed packets (an upload, a local file, or the packet just completed) and storing
the result under the file's SHA-256."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import transaction

from governance.approvals import pki
from governance.approvals.models import PacketVerification
from governance.approvals.services.certificates import Actor, require_pki
from governance.audit.actions import AuditAction
from governance.audit.services import audit_record
from governance.deployments.choices import ReviewRole
from governance.deployments.models import DeploymentRequest

if TYPE_CHECKING:
    from governance.approvals.verification import PacketReport, VerifyLimits

# verification (pyHanko) is imported where it is used: it takes seconds to import.


def verify_limits() -> VerifyLimits:
    from governance.approvals.verification import VerifyLimits

    return VerifyLimits(
        max_signatures=settings.APPROVALS_VERIFY_MAX_SIGNATURES,
        max_revisions=settings.APPROVALS_VERIFY_MAX_REVISIONS,
        max_evidence_bytes=settings.APPROVALS_VERIFY_MAX_EVIDENCE_BYTES,
    )


def verify_bytes(data: bytes) -> PacketReport:
    """Verify a file within the configured bounds; a file over one raises UploadRefused."""
    from governance.approvals.verification import verify_packet

    root = require_pki()
    return verify_packet(
        data, trust_root=pki.load_cert(root.certificate_pem), crls=[bytes(root.crl_der or b"")], limits=verify_limits()
    )


def verification_store(
    data: bytes, *, deployment: DeploymentRequest | None, actor: Actor
) -> tuple[PacketReport, PacketVerification]:
    """Verify `data` and store the result (in the caller's transaction); the request is found from
    the packet's embedded evidence when not given."""
    return verification_record(verify_bytes(data), deployment=deployment, actor=actor)


def verification_record(
    report: PacketReport, *, deployment: DeploymentRequest | None, actor: Actor
) -> tuple[PacketReport, PacketVerification]:
    """Store a verification already made (pyHanko's work done outside any lock), with its audit event.
    The request named inside the file is linked (and the event put on its timeline) only when the
    actor may read that request; "evidence current" only for a valid, trusted packet."""
    if deployment is None and report.deployment_code:
        deployment = _readable_deployment(report.deployment_code, actor)
    current = bool(
        report.all_valid
        and deployment is not None
        and report.evidence_digest
        and report.evidence_digest == deployment.evidence_digest
    )
    verification, _ = PacketVerification.objects.update_or_create(
        pdf_sha256=report.pdf_sha256,
        defaults={
            "deployment": deployment,
            "evidence_digest": report.evidence_digest,
            "evidence_current": current,
            "signatures": report.as_dict()["signatures"],
            "legal_valid": report.valid_for(ReviewRole.LEGAL),
            "engineering_valid": report.valid_for(ReviewRole.ENGINEERING),
            "all_valid": report.all_valid,
            "problems": report.problems,
            "verified_at": datetime.now(UTC),
        },
    )
    audit_record(
        actor=actor,
        action=AuditAction.PACKET_VERIFIED,
        obj=deployment if deployment is not None else ("approvals.packet", report.pdf_sha256),
        data={
            "pdf_sha256": report.pdf_sha256,
            "all_valid": report.all_valid,
            "legal_valid": verification.legal_valid,
            "engineering_valid": verification.engineering_valid,
            "evidence_current": current,
        },
    )
    return report, verification


def _readable_deployment(code: str, actor: Actor) -> DeploymentRequest | None:
    """The request a file names, if the actor may read it (a system actor reads every request)."""
    from governance.deployments.selectors import deployments_visible_to

    try:
        parsed = uuid.UUID(code)
    except ValueError:
        return None
    requests = DeploymentRequest.objects.all() if isinstance(actor, str) else deployments_visible_to(actor)
    return requests.filter(code=parsed).first()


def packet_verify(*, data: bytes, actor: Actor) -> tuple[PacketReport, PacketVerification]:
    """Verify an uploaded (or local) PDF and store the result under its SHA-256."""
    with transaction.atomic():
        return verification_store(data, deployment=None, actor=actor)
