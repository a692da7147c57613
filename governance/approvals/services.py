"""Writes for approvals: the PKI (init, issue, revoke + CRL), packet rendering, sign-offs, voiding
and stored verifications. Each runs in one transaction with its audit events.

`sign_off` is the one way a reviewer decides on a request (the API, the deployments review
endpoint and the UI call it). A refusal is written to the audit trail in a transaction of its
own, so it survives the refusal itself."""

from __future__ import annotations

import hashlib
import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from governance.approvals import pki
from governance.approvals.choices import (
    ROLE_GROUPS,
    SIGNATURE_FIELDS,
    AuthorityKind,
    Decision,
    PacketStatus,
    RefusalCode,
    RevocationReason,
    SigningRole,
)
from governance.approvals.keys import ensure_development_kek, key_encryption_key
from governance.approvals.models import ApprovalPacket, Authority, PacketVerification, SigningCertificate, SignOff
from governance.approvals.selectors import (
    certificate_for,
    live_packet,
    live_signoffs,
    meaning_templates,
    printed_name,
    root_ca,
    signoff_meaning,
    signoff_meaning_short,
)
from governance.audit.actions import AuditAction
from governance.audit.models import AuditCheckpoint
from governance.audit.services import audit_checkpoint_create, audit_record, format_time
from governance.core.errors import ApplicationError, ConflictError, PermissionDeniedError, invalid_input
from governance.core.roles import Role, has_role
from governance.deployments.choices import Status
from governance.deployments.models import DeploymentRequest, ReviewDecision
from governance.deployments.selectors import deployment_blockers
from governance.deployments.services import deployment_lock, deployment_transition

if TYPE_CHECKING:
    from governance.approvals.packet import PacketInput
    from governance.approvals.verification import PacketReport

# packet (WeasyPrint), signing and verification (pyHanko) are imported where they are used: they
# take seconds to import, and every request and every management command loads this module
# through the URL configuration.

logger = logging.getLogger(__name__)

Actor = User | str
_REVOCATION_FLAGS = {
    RevocationReason.ROLE_REMOVED: x509.ReasonFlags.affiliation_changed,
    RevocationReason.KEY_COMPROMISE: x509.ReasonFlags.key_compromise,
    RevocationReason.SUPERSEDED: x509.ReasonFlags.superseded,
    RevocationReason.CESSATION: x509.ReasonFlags.cessation_of_operation,
}


# --- PKI ----------------------------------------------------------------------------------------


def _issued(row: Authority | SigningCertificate) -> pki.Issued:
    return pki.Issued(pki.load_cert(row.certificate_pem), pki.decrypt_key(row.encrypted_key_pem, key_encryption_key()))


def _authority_row(kind: str, issued: pki.Issued, kek: bytes) -> Authority:
    return Authority.objects.create(
        kind=kind,
        certificate_pem=pki.cert_pem(issued.certificate),
        encrypted_key_pem=pki.encrypt_key(issued.key, kek),
        fingerprint_sha256=pki.fingerprint(issued.certificate),
    )


def pki_init(*, actor: Actor = "system:pki") -> tuple[Authority, bool]:
    """Create the root CA (RSA 3072), the timestamping authority and an empty CRL; idempotent.
    Returns the root CA and whether it was created now."""
    ensure_development_kek()
    kek = key_encryption_key()
    with transaction.atomic():
        existing = Authority.objects.select_for_update().filter(kind=AuthorityKind.ROOT_CA).first()
        if existing is not None:
            return existing, False
        organisation = settings.APPROVALS_ORGANISATION
        ca = pki.make_root_ca(organisation)
        tsa = pki.make_tsa(ca, organisation)
        root = _authority_row(AuthorityKind.ROOT_CA, ca, kek)
        _authority_row(AuthorityKind.TSA, tsa, kek)
        _publish_crl(root, ca)
        audit_record(
            actor=actor,
            action=AuditAction.PKI_INITIALISED,
            obj=("approvals.authority", str(root.code)),
            data={
                "root_ca_sha256": root.fingerprint_sha256,
                "tsa_sha256": pki.fingerprint(tsa.certificate),
                "organisation": organisation,
            },
        )
    return root, True


def _publish_crl(root: Authority, ca: pki.Issued) -> None:
    revoked = [
        pki.Revoked(int(serial), revoked_at, _REVOCATION_FLAGS[RevocationReason(reason)])
        for serial, revoked_at, reason in SigningCertificate.objects.filter(revoked_at__isnull=False).values_list(
            "serial_number", "revoked_at", "revocation_reason"
        )
        if revoked_at is not None
    ]
    root.crl_number += 1
    root.crl_der = pki.make_crl(ca, revoked, number=root.crl_number).public_bytes(serialization.Encoding.DER)
    root.save(update_fields=["crl_der", "crl_number", "updated_at"])


def _require_pki() -> Authority:
    root = root_ca()
    if root is None:
        raise ApplicationError("the approvals PKI is not initialised; run `manage.py pki_init`", status=503)
    return root


def certificate_issue(*, user: User, role: str, actor: Actor) -> SigningCertificate:
    """A personal signing certificate for `user` as `role`, from the root CA (key encrypted at rest)."""
    if role not in SigningRole.values:
        raise invalid_input("role", f"one of {', '.join(SigningRole.values)}")
    root = _require_pki()
    issued = pki.make_signer(
        _issued(root),
        settings.APPROVALS_ORGANISATION,
        full_name=printed_name(user),
        username=user.get_username(),
        role=role,
    )
    with transaction.atomic():
        certificate = SigningCertificate.objects.create(
            user=user,
            role=role,
            serial_number=str(issued.certificate.serial_number),
            subject=issued.certificate.subject.rfc4514_string(),
            certificate_pem=pki.cert_pem(issued.certificate),
            encrypted_key_pem=pki.encrypt_key(issued.key, key_encryption_key()),
            fingerprint_sha256=pki.fingerprint(issued.certificate),
            not_after=issued.certificate.not_valid_after_utc,
        )
        audit_record(
            actor=actor,
            action=AuditAction.CERTIFICATE_ISSUED,
            obj=certificate,
            data={
                "user": user.get_username(),
                "role": role,
                "serial": certificate.serial_number,
                "sha256": certificate.fingerprint_sha256,
            },
        )
    return certificate


def certificate_revoke(*, certificate: SigningCertificate, reason: str, actor: Actor) -> SigningCertificate:
    """Revoke and publish a new CRL in the same transaction (the verifier reads that CRL)."""
    with transaction.atomic():
        certificate = SigningCertificate.objects.select_for_update().get(pk=certificate.pk)
        if certificate.revoked_at is not None:
            return certificate
        certificate.revoked_at, certificate.revocation_reason = timezone.now(), RevocationReason(reason)
        certificate.save(update_fields=["revoked_at", "revocation_reason", "updated_at"])
        root = Authority.objects.select_for_update().get(kind=AuthorityKind.ROOT_CA)
        _publish_crl(root, _issued(root))
        audit_record(
            actor=actor,
            action=AuditAction.CERTIFICATE_REVOKED,
            obj=certificate,
            data={
                "user": certificate.user.get_username(),
                "role": certificate.role,
                "serial": certificate.serial_number,
                "reason": reason,
                "crl_number": root.crl_number,
            },
        )
    return certificate


def certificates_sync(*, user: User, actor: Actor, issue: bool = True) -> None:
    """Revoke the live certificates of roles the user no longer holds; issue for roles held without one."""
    if root_ca() is None:
        return
    for role, group in ROLE_GROUPS.items():
        holds = has_role(user, group)
        live = SigningCertificate.objects.filter(user=user, role=role, revoked_at__isnull=True)
        if not holds:
            for certificate in live:
                certificate_revoke(certificate=certificate, reason=RevocationReason.ROLE_REMOVED, actor=actor)
        elif issue and not live.exists():
            certificate_issue(user=user, role=role, actor=actor)


# --- packets --------------------------------------------------------------------------------------


def _checkpoint_dict(checkpoint: AuditCheckpoint | None) -> dict[str, Any] | None:
    if checkpoint is None:
        return None
    return {
        "origin": checkpoint.origin,
        "seq": checkpoint.seq,
        "head_hash": checkpoint.head_hash,
        "signed_at": format_time(checkpoint.signed_at),
        "key_id": checkpoint.key_id,
        "signature": checkpoint.signature,
    }


def _eval_categories(evidence: dict[str, Any]) -> dict[str, dict[str, Any]]:
    from governance.evaluations.models import EvalRun

    codes = [item["eval"] for item in evidence.get("eval_results", []) if item.get("eval")]
    return {str(run.code): (run.summary or {}).get("categories", {}) for run in EvalRun.objects.filter(code__in=codes)}


def _latest_checkpoint() -> AuditCheckpoint | None:
    """A checkpoint over the trail as it stands (signed now when the head moved), for the packet."""
    return audit_checkpoint_create() or AuditCheckpoint.objects.order_by("-seq", "-id").first()


def packet_input(deployment: DeploymentRequest) -> PacketInput:
    from governance.approvals.packet import PacketInput

    evidence = deployment.evidence or {}
    return PacketInput(
        deployment_code=str(deployment.code),
        evidence_digest=deployment.evidence_digest,
        evidence=evidence,
        eval_categories=_eval_categories(evidence),
        audit_checkpoint=_checkpoint_dict(_latest_checkpoint()),
        signatures=meaning_templates(),
        organisation=settings.APPROVALS_ORGANISATION,
    )


def packet_prepare(*, deployment: DeploymentRequest, actor: Actor) -> ApprovalPacket:
    """The live packet for the request's current evidence digest, rendered now when there is none.
    The caller's transaction should hold the request row lock."""
    with transaction.atomic():
        packet = live_packet(deployment, with_pdf=True)
        if packet is not None and packet.evidence_digest == deployment.evidence_digest:
            return packet
        if packet is not None:
            _void_packet(packet, "the evidence changed")
        from governance.approvals.packet import render_packet

        pdf = render_packet(packet_input(deployment))
        packet = ApprovalPacket.objects.create(
            deployment=deployment,
            evidence_digest=deployment.evidence_digest,
            pdf=pdf,
            pdf_sha256=hashlib.sha256(pdf).hexdigest(),
            rendered_at=timezone.now(),
        )
        audit_record(
            actor=actor,
            action=AuditAction.PACKET_RENDERED,
            obj=deployment,
            data={
                "packet": str(packet.code),
                "pdf_sha256": packet.pdf_sha256,
                "evidence_digest": packet.evidence_digest,
            },
        )
    return packet


def packet_render_for_review(*, deployment: DeploymentRequest, actor: User) -> ApprovalPacket:
    """A reviewer asks for the packet before signing (the UI shows it with the meaning text)."""
    if not has_role(actor, Role.LEGAL_REVIEWER, Role.ENGINEERING_REVIEWER, Role.ADMIN):
        raise PermissionDeniedError("only reviewers render approval packets")
    with transaction.atomic():
        deployment = deployment_lock(deployment)
        if deployment.status != Status.IN_REVIEW:
            raise ConflictError(
                f"a {deployment.status} request is not in review", extra={"fields": {"status": [deployment.status]}}
            )
        return packet_prepare(deployment=deployment, actor=actor)


def _void_packet(packet: ApprovalPacket, reason: str) -> None:
    packet.voided_at, packet.void_reason = timezone.now(), reason
    if packet.status != PacketStatus.REJECTED:
        packet.status = PacketStatus.VOID
    packet.save(update_fields=["voided_at", "void_reason", "status", "updated_at"])


def signoffs_void(*, deployment: DeploymentRequest, reason: str) -> int:
    """Evidence changed: void the sign-offs and packets bound to any other digest. Runs on the
    deployments void-on-change path (its `evidence_changed` signal, request row locked), which has
    just voided each sign-off's review decision and audited it (`approval.signoff_voided`).
    Returns how many sign-offs."""
    now = timezone.now()
    count = 0
    for signoff in live_signoffs(deployment).exclude(evidence_digest=deployment.evidence_digest):
        signoff.voided_at, signoff.void_reason = now, reason
        signoff.save(update_fields=["voided_at", "void_reason", "updated_at"])
        count += 1
    for packet in ApprovalPacket.objects.filter(deployment=deployment, voided_at__isnull=True).exclude(
        evidence_digest=deployment.evidence_digest
    ):
        _void_packet(packet, reason)
    return count


# --- sign-off ---------------------------------------------------------------------------------


class SignOffRefused(Exception):
    def __init__(self, code: RefusalCode, error: ApplicationError) -> None:
        super().__init__(error.message)
        self.code, self.error = code, error


def _refuse(
    code: RefusalCode, message: str, *, status: int = 409, extra: dict[str, Any] | None = None
) -> SignOffRefused:
    error_type = PermissionDeniedError if status == 403 else ConflictError
    error = error_type(message, extra={"code": str(code), **(extra or {})})
    if status not in (403, 409):
        error.status = status
    return SignOffRefused(code, error)


def sign_off(
    *,
    deployment: DeploymentRequest,
    user: User,
    role: str,
    decision: str,
    password: str,
    evidence_digest: str,
    comment: str = "",
) -> SignOff:
    """A reviewer signs the approval packet of `deployment` as `role` with `decision`.

    Rules, each refused with a message and an `approval.signoff_refused` audit event: the user
    holds the role; is not on the request's team; re-enters their password; the request is in
    review; `evidence_digest` is the current one; legal approves before engineering; each role
    signs once per digest; the certificate is not revoked; an approval has no blockers left.
    The second approval verifies the signed file, stores the result, moves the request to
    approved and signs an audit checkpoint."""
    if role not in SigningRole.values:
        raise invalid_input("role", f"one of {', '.join(SigningRole.values)}")
    if decision not in Decision.values:
        raise invalid_input("decision", f"one of {', '.join(Decision.values)}")
    if not isinstance(password, str) or not password:
        raise invalid_input("password", "signing needs your password again")
    if decision == Decision.REJECT and not comment.strip():
        raise invalid_input("comment", "say why you reject")
    try:
        with transaction.atomic():
            return _sign_off(deployment, user, role, decision, password, evidence_digest, comment.strip())
    except SignOffRefused as refusal:
        with transaction.atomic():
            audit_record(
                actor=user,
                action=AuditAction.SIGNOFF_REFUSED,
                obj=deployment,
                data={
                    "role": role,
                    "decision": decision,
                    "code": str(refusal.code),
                    "message": refusal.error.message,
                    "evidence_digest": evidence_digest,
                },
            )
        raise refusal.error from None


def _sign_off(
    deployment: DeploymentRequest,
    user: User,
    role: str,
    decision: str,
    password: str,
    evidence_digest: str,
    comment: str,
) -> SignOff:
    deployment = deployment_lock(deployment)
    if not has_role(user, ROLE_GROUPS[role]):
        raise _refuse(RefusalCode.ROLE_NOT_HELD, f"you do not hold the {role} reviewer role", status=403)
    if deployment.requester_id == user.pk or deployment.team.members.filter(pk=user.pk).exists():
        raise _refuse(
            RefusalCode.OWN_TEAM, "nobody signs off a request of their own team (separation of duties)", status=403
        )
    if not user.check_password(password):
        raise _refuse(
            RefusalCode.WRONG_PASSWORD, "the password is not correct; signing needs your password again", status=403
        )
    if deployment.status != Status.IN_REVIEW:
        raise _refuse(
            RefusalCode.NOT_IN_REVIEW,
            f"a {deployment.status} request is not in review",
            extra={"fields": {"status": [deployment.status]}},
        )
    if evidence_digest != deployment.evidence_digest:
        raise _refuse(
            RefusalCode.STALE_DIGEST,
            "the evidence changed since you looked; review the new packet",
            extra={"fields": {"evidence_digest": [f"current is {deployment.evidence_digest}"]}},
        )
    live = list(live_signoffs(deployment).filter(evidence_digest=deployment.evidence_digest))
    if any(s.role == role for s in live):
        raise _refuse(RefusalCode.ALREADY_SIGNED, f"the {role} sign-off on this evidence is already recorded")
    # Separation of duties: whoever holds both reviewer roles still signs only one of them.
    other = next((s for s in live_signoffs(deployment) if s.signer_id == user.pk and s.role != role), None)
    if other is not None:
        raise _refuse(
            RefusalCode.SAME_SIGNER,
            f"you already signed this request as {other.role}; each sign-off needs a distinct person "
            "(separation of duties)",
            status=403,
        )
    if decision == Decision.APPROVE:
        blockers = deployment_blockers(deployment, role)
        if blockers:
            raise _refuse(
                RefusalCode.BLOCKERS, f"{len(blockers)} blocker(s) stand in the way", extra={"blockers": blockers}
            )
    if (
        decision == Decision.APPROVE
        and role == SigningRole.ENGINEERING
        and not any(s.role == SigningRole.LEGAL and s.decision == Decision.APPROVE for s in live)
    ):
        raise _refuse(RefusalCode.WRONG_ORDER, "legal signs first; engineering signs after the legal approval")
    if root_ca() is None:
        raise _refuse(RefusalCode.NO_PKI, "the approvals PKI is not initialised; run `manage.py pki_init`", status=503)
    certificate = certificate_for(user, role)
    if certificate is not None and certificate.revoked_at is not None:
        raise _refuse(
            RefusalCode.CERTIFICATE_REVOKED,
            f"your {role} signing certificate was revoked ({certificate.revocation_reason}); "
            "an administrator must issue a new one",
        )
    if certificate is None:  # a reviewer who had the role before the PKI existed
        certificate = certificate_issue(user=user, role=role, actor=user)
    return _sign_packet(deployment, user, role, decision, comment, certificate, live)


def _sign_packet(
    deployment: DeploymentRequest,
    user: User,
    role: str,
    decision: str,
    comment: str,
    certificate: SigningCertificate,
    live: list[SignOff],
) -> SignOff:
    from governance.approvals.signing import SigningParty, StampText, sign_packet

    packet = packet_prepare(deployment=deployment, actor=user)
    meaning = signoff_meaning(role, decision, user)
    signer = _issued(certificate)
    root = _require_pki()
    tsa = _issued(Authority.objects.get(kind=AuthorityKind.TSA))
    signed = sign_packet(
        bytes(packet.pdf),
        field_name=SIGNATURE_FIELDS[role],
        certify=packet.status == PacketStatus.RENDERED,  # the first signature certifies
        signer=SigningParty(signer.certificate, signer.key),
        ca_certificate=pki.load_cert(root.certificate_pem),
        tsa=SigningParty(tsa.certificate, tsa.key),
        reason=meaning,
        stamp=StampText(
            signer_name=printed_name(user),
            role=role,
            decision=decision,
            meaning_short=signoff_meaning_short(decision),
            fingerprint=certificate.fingerprint_sha256[:16],
        ),
    )
    signed_at = timezone.now()
    packet.pdf, packet.pdf_sha256 = signed, hashlib.sha256(signed).hexdigest()
    approvals = {s.role for s in live if s.decision == Decision.APPROVE} | (
        {role} if decision == Decision.APPROVE else set()
    )
    if decision == Decision.REJECT:
        packet.status = PacketStatus.REJECTED
    elif approvals == set(SigningRole.values):
        packet.status, packet.completed_at = PacketStatus.COMPLETE, signed_at
    else:
        packet.status = PacketStatus.PARTIAL
    packet.save(update_fields=["pdf", "pdf_sha256", "status", "completed_at", "updated_at"])
    review_decision = ReviewDecision.objects.create(
        request=deployment,
        role=role,
        verdict=decision,
        reviewer=user,
        evidence_digest=deployment.evidence_digest,
        comment=comment,
    )
    signoff = SignOff.objects.create(
        deployment=deployment,
        review_decision=review_decision,
        packet=packet,
        role=role,
        decision=decision,
        signer=user,
        signer_name=printed_name(user),
        meaning=meaning,
        comment=comment,
        signed_at=signed_at,
        evidence_digest=deployment.evidence_digest,
        certificate=certificate,
        field_name=SIGNATURE_FIELDS[role],
        pdf_sha256=packet.pdf_sha256,
    )
    audit_record(
        actor=user,
        action=AuditAction.SIGNOFF_RECORDED,
        obj=deployment,
        data={
            "role": role,
            "verdict": decision,
            "evidence_digest": deployment.evidence_digest,
            "meaning": meaning,
            "comment": comment,
            "certificate_sha256": certificate.fingerprint_sha256,
            "signed_at": format_time(signed_at),
        },
    )
    audit_record(
        actor=user,
        action=AuditAction.PACKET_SIGNED,
        obj=deployment,
        data={"packet": str(packet.code), "field": SIGNATURE_FIELDS[role], "pdf_sha256": packet.pdf_sha256},
    )
    if decision == Decision.REJECT:
        deployment_transition(deployment, Status.REJECTED, user, f"{role} rejected: {comment}")
    elif packet.status == PacketStatus.COMPLETE:
        report, _ = _verification_store(signed, deployment=deployment, actor=user)
        if not (report.valid_for(SigningRole.LEGAL) and report.valid_for(SigningRole.ENGINEERING)):
            # Never approve on a packet that does not verify; roll the signature back.
            raise ConflictError(
                "the signed packet did not verify; nothing was recorded", extra={"verification": report.as_dict()}
            )
        deployment_transition(deployment, Status.APPROVED, user, "legal and engineering signed the packet")
        audit_checkpoint_create(force=True)  # the final PDF's hash is now under a signed checkpoint
    return signoff


# --- verification -----------------------------------------------------------------------------


def verify_bytes(data: bytes) -> PacketReport:
    from governance.approvals.verification import verify_packet

    root = _require_pki()
    return verify_packet(data, trust_root=pki.load_cert(root.certificate_pem), crls=[bytes(root.crl_der or b"")])


def _verification_store(
    data: bytes, *, deployment: DeploymentRequest | None, actor: Actor
) -> tuple[PacketReport, PacketVerification]:
    report = verify_bytes(data)
    if deployment is None and report.deployment_code:
        deployment = DeploymentRequest.objects.filter(code=report.deployment_code).first()
    current = bool(
        deployment is not None and report.evidence_digest and report.evidence_digest == deployment.evidence_digest
    )
    verification, _ = PacketVerification.objects.update_or_create(
        pdf_sha256=report.pdf_sha256,
        defaults={
            "deployment": deployment,
            "evidence_digest": report.evidence_digest,
            "evidence_current": current,
            "signatures": report.as_dict()["signatures"],
            "legal_valid": report.valid_for(SigningRole.LEGAL),
            "engineering_valid": report.valid_for(SigningRole.ENGINEERING),
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


def packet_verify(*, data: bytes, actor: Actor) -> tuple[PacketReport, PacketVerification]:
    """Verify an uploaded (or local) PDF and store the result under its SHA-256."""
    with transaction.atomic():
        return _verification_store(data, deployment=None, actor=actor)
