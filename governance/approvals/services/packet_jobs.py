"""The heavy worker's side of a sign-off: render the packet, then sign each recorded decision into
it in turn, each PDF step outside every transaction. Only the short writes that store a result
take locks, in the documented order: the request row, the packet row, the audit chain head last.

A stored result is compared-and-swapped: the packet's hash must still be the one the signature
was made over, and nothing voided meanwhile; otherwise the work is dropped and looked at again."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone, translation
from django.utils.translation import gettext, gettext_noop, pgettext_lazy

from governance.approvals import pki

if TYPE_CHECKING:
    from governance.approvals.signing import StampText
from governance.approvals.choices import SIGNATURE_FIELDS, AuthorityKind, PacketStatus, SignatureStatus
from governance.approvals.models import ApprovalPacket, Authority, PacketSignature
from governance.approvals.selectors import printed_name, signoff_meaning_short
from governance.approvals.services.certificates import load_issued, require_pki
from governance.approvals.services.packet_queue import packet_facts, packet_input
from governance.approvals.services.verifications import verification_record, verify_bytes
from governance.audit.actions import AuditAction
from governance.audit.services import audit_checkpoint_create, audit_record
from governance.core.services import write_service
from governance.deployments.choices import ReviewRole, SignOffDecision, Status
from governance.deployments.models import SignOff
from governance.deployments.services import deployment_lock, deployment_transition

# Rounds of "sign the next pending decision" one task run makes at most (two roles, and a retry
# for each lost compare-and-swap); whatever is left is picked up by the next run.
MAX_ROUNDS = 6


def _texts(value: Any, path: str) -> Iterator[tuple[str, int]]:
    if isinstance(value, str):
        yield path, len(value)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _texts(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _texts(item, f"{path}[{index}]")


def longest_text(evidence: dict[str, Any]) -> tuple[str, int]:
    """The evidence field with the longest text (JSON path, characters): what a slow render names."""
    return max(_texts(evidence, ""), key=lambda item: item[1], default=("evidence", 0))


def render_failure_reason(evidence: dict[str, Any], seconds: int) -> str:
    field, length = longest_text(evidence)
    return (
        f"the packet did not render within {seconds} s; the longest text is {field} ({length} characters): "
        "shorten it and sign again"
    )


def packet_complete(*, packet_id: int) -> str:
    """The task's service: render the packet when it has no PDF yet, then sign the pending
    decisions in the order they were made. Idempotent; returns the packet's status. A render past
    the soft time limit (SoftTimeLimitExceeded, raised inside WeasyPrint) marks the packet failed."""
    from celery.exceptions import SoftTimeLimitExceeded

    packet = ApprovalPacket.objects.filter(pk=packet_id).defer("pdf").first()
    if packet is None:
        return "missing"
    if packet.voided_at is None and packet.status == PacketStatus.RENDERING:
        try:
            packet_render(packet_id=packet.pk)
        except SoftTimeLimitExceeded:
            return packet_render_timed_out(packet_id=packet.pk, seconds=settings.APPROVALS_RENDER_SOFT_TIME_LIMIT_S)
    for _ in range(MAX_ROUNDS):
        pending = (
            PacketSignature.objects.filter(
                packet_id=packet.pk, signoff__voided_at__isnull=True, status=SignatureStatus.PENDING
            )
            .order_by("signoff__signed_at", "id")
            .first()
        )
        packet.refresh_from_db(fields=["status", "voided_at"])
        if pending is None or packet.voided_at is not None or packet.status == PacketStatus.RENDERING:
            break
        signoff_sign(signature_id=pending.pk)
    packet.refresh_from_db(fields=["status"])
    return str(packet.status)


def packet_render(*, packet_id: int) -> None:
    """Render outside any transaction; store the PDF in a short one. The packet's audit checkpoint
    is signed first in a transaction of its own, so the chain head is locked only while it is signed."""
    from governance.approvals.packet_render import render_packet

    packet = ApprovalPacket.objects.select_related("deployment").defer("pdf").get(pk=packet_id)
    deployment = packet.deployment
    if deployment.evidence_digest != packet.evidence_digest:
        return  # superseded (approvals.selectors.current_packets): its sign-offs are voided
    pdf = render_packet(packet_input(deployment))
    with transaction.atomic():
        deployment = deployment_lock(deployment)
        packet = ApprovalPacket.objects.select_for_update(of=("self",)).defer("pdf").get(pk=packet_id)
        if packet.voided_at is not None or packet.status != PacketStatus.RENDERING:
            return
        if deployment.evidence_digest != packet.evidence_digest:
            return
        packet.pdf, packet.pdf_sha256 = pdf, hashlib.sha256(pdf).hexdigest()
        packet.status, packet.rendered_at = PacketStatus.RENDERED, timezone.now()
        packet.save(update_fields=["pdf", "pdf_sha256", "status", "rendered_at", "updated_at"])
        facts = packet_facts(packet, evidence_digest=packet.evidence_digest)
        audit_record(actor="system:approvals", action=AuditAction.PACKET_RENDERED, obj=deployment, data=facts)


def packet_render_timed_out(*, packet_id: int, seconds: int) -> str:
    """The soft time limit struck while rendering: fail the packet, naming the longest text."""
    packet = ApprovalPacket.objects.select_related("deployment").defer("pdf").get(pk=packet_id)
    packet_render_failed(packet_id=packet_id, reason=render_failure_reason(packet.deployment.evidence or {}, seconds))
    packet.refresh_from_db(fields=["status"])
    return str(packet.status)


@write_service
def packet_render_failed(*, packet_id: int, reason: str) -> None:
    """The render failed or ran past its limit: the packet is marked failed (no PDF), and the
    decisions waiting for it are voided with the reason, so the reviewers can decide again."""
    with transaction.atomic():
        packet = ApprovalPacket.objects.select_related("deployment").defer("pdf").get(pk=packet_id)
        deployment = deployment_lock(packet.deployment)
        packet = ApprovalPacket.objects.select_for_update(of=("self",)).defer("pdf").get(pk=packet_id)
        if packet.status != PacketStatus.RENDERING:
            return
        now = timezone.now()
        packet.status, packet.voided_at, packet.void_reason = PacketStatus.FAILED, now, reason
        packet.save(update_fields=["status", "voided_at", "void_reason", "updated_at"])
        _fail_pending(packet, reason, now)
        audit_record(
            actor="system:approvals",
            action=AuditAction.PACKET_RENDER_FAILED,
            obj=deployment,
            data={"packet": str(packet.code), "evidence_digest": packet.evidence_digest, "reason": reason},
        )


def _fail_pending(packet: ApprovalPacket, reason: str, now: Any) -> None:
    """The pending signatures of a packet failed: each is marked failed and its sign-off voided, so
    the reviewer decides again (the decision without its signature does not count)."""
    pending = (
        PacketSignature.objects.select_for_update(of=("self",))
        .filter(packet=packet, signoff__voided_at__isnull=True, status=SignatureStatus.PENDING)
        .select_related("signoff")
    )
    for signature in pending:
        signature.status, signature.error = SignatureStatus.FAILED, reason
        signature.save(update_fields=["status", "error", "updated_at"])
        signoff = signature.signoff
        SignOff.objects.filter(pk=signoff.pk, voided_at__isnull=True).update(
            voided_at=now, void_reason=reason, updated_at=now
        )
        audit_record(
            actor="system:approvals",
            action=AuditAction.SIGNOFF_VOIDED,
            obj=packet.deployment,
            data={"role": signoff.role, "verdict": signoff.decision, "reason": reason},
        )


def _new_status(signature: PacketSignature) -> PacketStatus:
    signoff = signature.signoff
    if signoff.decision == SignOffDecision.REJECT:
        return PacketStatus.REJECTED
    signed = set(
        PacketSignature.objects.filter(
            packet_id=signature.packet_id,
            signoff__voided_at__isnull=True,
            status=SignatureStatus.SIGNED,
            signoff__decision=SignOffDecision.APPROVE,
        ).values_list("signoff__role", flat=True)
    )
    return PacketStatus.COMPLETE if signed | {signoff.role} == set(ReviewRole.values) else PacketStatus.PARTIAL


# The signature box's template and time format as the catalog translates them: in English they are
# signing.STAMP_TEXT and signing.STAMP_TIME_FORMAT (tests/approvals/test_stamp_font.py keeps them equal).
STAMP_TEXT_MSGID = gettext_noop(
    "%(signer_name)s\n%(role)s reviewer: %(decision)s\nMeaning: %(meaning_short)s\n%(signed_at)s\ncert %(fingerprint)s"
)
# Translators: strftime format of the signing time in a signature box; the time is always UTC.
STAMP_TIME_MSGID = gettext_noop("%Y-%m-%d %H:%M UTC")
STAMP_WORDS = {
    "legal": pgettext_lazy("signature stamp", "legal"),
    "engineering": pgettext_lazy("signature stamp", "engineering"),
    "approve": pgettext_lazy("signature stamp", "approve"),
    "reject": pgettext_lazy("signature stamp", "reject"),
    "approval": pgettext_lazy("signature stamp", "approval"),
    "rejection": pgettext_lazy("signature stamp", "rejection"),
}


def stamp_text(signature: PacketSignature) -> StampText:
    """What the signature box prints, in the packet's language (the request's), like the rest of it."""
    from governance.approvals.signing import StampText

    signoff = signature.signoff

    def word(code: str) -> str:
        return str(STAMP_WORDS.get(code, code))

    with translation.override(signoff.deployment.language):
        return StampText(
            signer_name=printed_name(signoff.signer),
            role=word(signoff.role),
            decision=word(signoff.decision),
            meaning_short=word(signoff_meaning_short(signoff.decision)),
            fingerprint=signature.certificate.fingerprint_sha256[:16],
            template=gettext(STAMP_TEXT_MSGID),
            time_format=gettext(STAMP_TIME_MSGID),
        )


def signature_reason(signoff: SignOff) -> str:
    """The signature's /Reason: the meaning text the reviewer signed under and, where they wrote
    one, their comment, in the packet's language. The comment is recorded after the packet was
    rendered (each reviewer signs the same PDF incrementally): inside their own signature
    dictionary it is covered by their signature and shown by every PDF reader's signature panel."""
    if not signoff.comment.strip():
        return signoff.meaning
    with translation.override(signoff.deployment.language):
        # Translators: appended to the meaning text in a signature's reason; keep %(comment)s.
        return signoff.meaning + "\n" + gettext("Reviewer's comment: %(comment)s") % {"comment": signoff.comment}


def signoff_sign(*, signature_id: int) -> None:
    """Sign one recorded decision into the packet (pyHanko outside any lock), then store it."""
    from governance.approvals.signing import SigningParty, sign_packet

    signature = PacketSignature.objects.select_related("certificate", "signoff__signer", "signoff__deployment").get(
        pk=signature_id
    )
    signoff = signature.signoff
    packet = ApprovalPacket.objects.get(pk=signature.packet_id)
    if packet.status in (PacketStatus.RENDERING, PacketStatus.FAILED) or packet.voided_at is not None:
        return
    if packet.evidence_digest != signoff.deployment.evidence_digest:
        return  # superseded: the evidence changed and the sign-off was voided with it
    before = packet.pdf_sha256
    signer = load_issued(signature.certificate)
    root = require_pki()
    tsa = load_issued(Authority.objects.get(kind=AuthorityKind.TSA))
    signed = sign_packet(
        bytes(packet.pdf),
        field_name=SIGNATURE_FIELDS[signoff.role],
        certify=packet.status == PacketStatus.RENDERED,  # the first signature certifies
        signer=SigningParty(signer.certificate, signer.key),
        ca_certificate=pki.load_cert(root.certificate_pem),
        tsa=SigningParty(tsa.certificate, tsa.key),
        reason=signature_reason(signoff),
        stamp=stamp_text(signature),
    )
    status = _new_status(signature)
    # Never approve on a packet that does not verify; verified here, outside the lock.
    report = verify_bytes(signed) if status == PacketStatus.COMPLETE else None
    approved = False
    with transaction.atomic():
        deployment = deployment_lock(signoff.deployment)
        packet = ApprovalPacket.objects.select_for_update(of=("self",)).defer("pdf").get(pk=packet.pk)
        signature = PacketSignature.objects.select_for_update(of=("self",)).get(pk=signature_id)
        signoff = SignOff.objects.select_related("signer").get(pk=signature.signoff_id)
        if packet.voided_at is not None or packet.pdf_sha256 != before:
            return  # voided, or another run signed first: looked at again
        if signoff.voided_at is not None or signature.status != SignatureStatus.PENDING:
            return
        if report is not None and not (report.valid_for(ReviewRole.LEGAL) and report.valid_for(ReviewRole.ENGINEERING)):
            reason = "the signed packet did not verify; the signature was not kept: " + "; ".join(report.problems)
            _fail_pending(packet, reason, timezone.now())
            return
        signed_at = timezone.now()
        packet.pdf, packet.pdf_sha256, packet.status = signed, hashlib.sha256(signed).hexdigest(), status
        if status == PacketStatus.COMPLETE:
            packet.completed_at = signed_at
        packet.save(update_fields=["pdf", "pdf_sha256", "status", "completed_at", "updated_at"])
        signature.pdf_sha256, signature.status = packet.pdf_sha256, SignatureStatus.SIGNED
        signature.save(update_fields=["pdf_sha256", "status", "updated_at"])
        audit_record(
            actor=signoff.signer,
            action=AuditAction.PACKET_SIGNED,
            obj=deployment,
            data=packet_facts(packet, field=SIGNATURE_FIELDS[signoff.role]),
        )
        if report is not None:
            verification_record(report, deployment=deployment, actor=signoff.signer)
            if deployment.status == Status.IN_REVIEW:
                deployment_transition(
                    deployment, Status.APPROVED, signoff.signer, "legal and engineering signed the packet"
                )
                approved = True
    if approved:
        audit_checkpoint_create(force=True)  # the final PDF's hash under a signed checkpoint, its own transaction
