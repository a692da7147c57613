"""Reads for approvals. `approval_state` is what the CI gate asks: a few indexed queries, no PDF parsing."""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.db.models import QuerySet
from django.urls import reverse
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext_lazy

from governance.approvals.choices import AuthorityKind, PacketStatus, SignatureStatus
from governance.approvals.models import (
    ApprovalPacket,
    Authority,
    PacketSignature,
    PacketVerification,
    SigningCertificate,
    VerificationJob,
)
from governance.deployments.choices import ReviewRole, SignOffDecision
from governance.deployments.models import DeploymentRequest, SignOff

_MEANINGS: dict[tuple[str, str], str] = {
    (ReviewRole.LEGAL, SignOffDecision.APPROVE): (
        "I, {name}, approve this deployment on legal grounds: I reviewed the license terms, every finding and "
        "waiver, and the obligations checklist in this packet, and I take responsibility for this approval."
    ),
    (ReviewRole.ENGINEERING, SignOffDecision.APPROVE): (
        "I, {name}, approve this deployment on engineering grounds: I reviewed the capacity plan, the memory per "
        "GPU and the eval results in this packet, and I take responsibility for this approval."
    ),
}
_REJECT_MEANING = "I, {name}, reject this deployment request as its {role} reviewer, for the reason in my comment."
_SHORT: dict[str, str] = {
    SignOffDecision.APPROVE: "approval",
    SignOffDecision.REJECT: "rejection",
}


@dataclass(frozen=True, slots=True)
class ApprovalState:
    pdf_sha256: str
    pdf_url: str
    evidence_digest: str
    legal_valid: bool
    engineering_valid: bool
    verified_at: datetime


def printed_name(user: Any) -> str:
    return str(user.get_full_name() or user.get_username())


def signoff_meaning(role: str, decision: str, user: Any) -> str:
    """The text a signer is shown before signing and that the sign-off records (21 CFR 11.50)."""
    template = _MEANINGS.get((role, decision), _REJECT_MEANING)
    return template.format(name=printed_name(user), role=role)


def signoff_meaning_short(decision: str) -> str:
    return _SHORT.get(decision, decision)


# What each signature means, as the packet prints it before anyone has signed: the signer is the
# one whose name, UTC time and certificate the signature box prints (no "[signer]" placeholder);
# the signature's own /Reason and the sign-off record carry the first-person text with the name.
# Translated in the packet's language (the caller activates it); {organisation} and {field} are
# filled after translation.
_PACKET_MEANINGS: dict[str, Any] = {
    ReviewRole.LEGAL: gettext_lazy(
        "The legal reviewer of {organisation} whose name, UTC time and certificate the {field} signature box "
        "prints approves this deployment on legal grounds: they reviewed the license terms, every finding and "
        "waiver, and the obligations checklist in this packet, and take responsibility for this approval."
    ),
    ReviewRole.ENGINEERING: gettext_lazy(
        "The engineering reviewer of {organisation} whose name, UTC time and certificate the {field} signature "
        "box prints approves this deployment on engineering grounds: they reviewed the capacity plan, the memory "
        "per GPU, the serving envelope and the eval results in this packet, and take responsibility for this "
        "approval."
    ),
}


def meaning_templates(organisation: str = "the organisation") -> list[dict[str, str]]:
    """Per role: its signature field and what an approval there means, with nothing left to fill."""
    from governance.approvals.choices import SIGNATURE_FIELDS, SIGNING_ORDER

    return [
        {
            "role": role,
            "field": SIGNATURE_FIELDS[role],
            "approve": str(_PACKET_MEANINGS[role]).format(organisation=organisation, field=SIGNATURE_FIELDS[role]),
        }
        for role in SIGNING_ORDER
    ]


def only_signing_role(user: Any) -> str | None:
    """The role a reviewer signs as when they hold exactly one reviewer role, else None."""
    from governance.approvals.choices import ROLE_GROUPS
    from governance.core.roles import has_role

    held = [role for role, group in ROLE_GROUPS.items() if has_role(user, group)]
    return held[0] if len(held) == 1 else None


def authority(kind: str) -> Authority | None:
    return Authority.objects.filter(kind=kind).first()


def root_ca() -> Authority | None:
    return authority(AuthorityKind.ROOT_CA)


def certificate_for(user: Any, role: str) -> SigningCertificate | None:
    """The newest certificate of a user for a role (revoked or not: the caller decides)."""
    return SigningCertificate.objects.filter(user=user, role=role).order_by("-created_at").first()


def current_packets(deployment: DeploymentRequest) -> QuerySet[ApprovalPacket]:
    """The packets of the request's current evidence: not voided, of its current digest, and with no
    voided sign-off's signature in the PDF. Any other packet is superseded; that follows from the
    sign-offs (voided by the deployments app when the evidence changes), so nothing has to void it.
    (A pending or failed signature of a voided sign-off never reached the PDF: it does not count.)"""
    signed_then_voided = PacketSignature.objects.filter(
        status=SignatureStatus.SIGNED, signoff__voided_at__isnull=False
    ).values("packet_id")
    return (
        ApprovalPacket.objects.filter(
            deployment=deployment, voided_at__isnull=True, evidence_digest=deployment.evidence_digest
        )
        .exclude(pk__in=signed_then_voided)
        .order_by("-created_at")
    )


def live_packet(deployment: DeploymentRequest, *, with_pdf: bool = False) -> ApprovalPacket | None:
    """The newest current packet of the request (current_packets), or None."""
    packets = current_packets(deployment)
    if not with_pdf:
        packets = packets.defer("pdf")
    return packets.first()


def signoffs_of(deployment: DeploymentRequest) -> QuerySet[SignOff]:
    """Every sign-off of a request, voided ones included, with its PDF signature (the API's list)."""
    return (
        SignOff.objects.filter(deployment=deployment)
        .select_related("signer", "signature__certificate")
        .order_by("signed_at", "id")
    )


SHA256_HEX = re.compile(r"[0-9a-f]{64}")


def packet_by_sha256(pdf_sha256: str) -> ApprovalPacket | None:
    """A packet whose latest revision, or one of whose signed revisions, has this hash (without
    its PDF bytes: the caller checks who may read the request before anything is loaded). Anything
    but 64 lowercase hex digits finds nothing."""
    if not SHA256_HEX.fullmatch(pdf_sha256):
        return None
    packets = ApprovalPacket.objects.defer("pdf").select_related("deployment")
    found = packets.filter(pdf_sha256=pdf_sha256).first()
    if found is not None:
        return found
    packet_id = PacketSignature.objects.filter(pdf_sha256=pdf_sha256).values_list("packet_id", flat=True).first()
    return packets.filter(pk=packet_id).first() if packet_id is not None else None


def pdf_revision(packet: ApprovalPacket, pdf_sha256: str) -> bytes | None:
    """The bytes of the packet's revision with this hash: the latest revision is stored; an earlier
    signed revision is a prefix of it (incremental updates), cut at the end of that revision."""
    data = bytes(ApprovalPacket.objects.values_list("pdf", flat=True).get(pk=packet.pk))
    if packet.pdf_sha256 == pdf_sha256:
        return data
    marker = b"%%EOF"
    end = data.find(marker)
    while end != -1:
        cut = end + len(marker)
        for candidate in (data[:cut], data[: cut + 1], data[: cut + 2]):
            if hashlib.sha256(candidate).hexdigest() == pdf_sha256:
                return candidate
        end = data.find(marker, cut)
    return None


def packet_url(deployment: DeploymentRequest) -> str:
    return reverse("v1:approval-packet", kwargs={"code": deployment.code})


def signoffs_url(deployment: DeploymentRequest) -> str:
    """Where a client polls a sign-off's signature_status and the packet's status."""
    return reverse("v1:approval-signoffs", kwargs={"code": deployment.code})


def verification_url(job: VerificationJob) -> str:
    return reverse("v1:approval-verification", kwargs={"code": job.code})


def verification_job_of(user: Any, code: Any) -> VerificationJob | None:
    """An upload's verification job, for the user who uploaded it only (None for anyone else, so
    that another user's job answers exactly as one that does not exist). The bytes are not read."""
    try:
        parsed = code if isinstance(code, uuid.UUID) else uuid.UUID(str(code))
    except ValueError:
        return None
    return VerificationJob.objects.defer("upload").filter(code=parsed, requested_by_id=user.pk).first()


# approval_state() as SQL, for a caller that reads the request in one hand-written statement (the
# gate's hot path: gate/selectors._GATE_SQL). `d` is the deployment request; the columns read
# back through approval_state_from_row(). Same rule as approval_state(): the latest complete,
# current packet (current_packets: of the current digest, no voided sign-off's signature in it) and
# the stored verification of exactly its bytes.
APPROVAL_STATE_COLUMNS = """
       packet.pdf_sha256 AS approval_pdf_sha256, packet.evidence_digest AS approval_packet_digest,
       verification.pdf_sha256 AS approval_verified_sha256, verification.legal_valid AS approval_legal_valid,
       verification.engineering_valid AS approval_engineering_valid,
       verification.evidence_digest AS approval_verified_digest, verification.verified_at AS approval_verified_at"""
APPROVAL_STATE_JOINS = f"""
LEFT JOIN approvals_approvalpacket packet ON packet.id = (
    SELECT p.id FROM approvals_approvalpacket p
    WHERE p.deployment_id = d.id AND p.voided_at IS NULL AND p.status = '{PacketStatus.COMPLETE.value}'
      AND p.evidence_digest = d.evidence_digest AND NOT EXISTS (
        SELECT 1 FROM approvals_packetsignature s JOIN deployments_signoff o ON o.id = s.signoff_id
        WHERE s.packet_id = p.id AND s.status = '{SignatureStatus.SIGNED.value}' AND o.voided_at IS NOT NULL)
    ORDER BY p.created_at DESC LIMIT 1)
LEFT JOIN approvals_packetverification verification ON verification.pdf_sha256 = packet.pdf_sha256"""  # noqa: S608 (code constants only; values are parameters)


def approval_state_from_row(deployment: DeploymentRequest) -> ApprovalState | None:
    """The ApprovalState of a request read with APPROVAL_STATE_COLUMNS/JOINS (a raw query's row)."""
    if getattr(deployment, "approval_verified_sha256", None) is None:
        return None
    verified_at = deployment.approval_verified_at  # type: ignore[attr-defined]
    if isinstance(verified_at, str):  # SQLite hands raw columns back as text
        verified_at = parse_datetime(verified_at)
    if verified_at is not None and timezone.is_naive(verified_at):
        # SQLite keeps UTC without an offset (text, or a naive datetime from its column converter);
        # made aware as the ORM reads it, so both databases give the same value
        verified_at = timezone.make_aware(verified_at, UTC)
    packet_digest = deployment.approval_packet_digest  # type: ignore[attr-defined]
    return ApprovalState(
        pdf_sha256=deployment.approval_pdf_sha256,  # type: ignore[attr-defined]
        pdf_url=packet_url(deployment),
        evidence_digest=deployment.approval_verified_digest or packet_digest,  # type: ignore[attr-defined]
        legal_valid=bool(deployment.approval_legal_valid),  # type: ignore[attr-defined]
        engineering_valid=bool(deployment.approval_engineering_valid),  # type: ignore[attr-defined]
        verified_at=verified_at,
    )


def approval_state(deployment: DeploymentRequest) -> ApprovalState | None:
    """The stored verification of the request's completed current packet (current_packets), or
    None when there is none.
    Two indexed queries; the PDF itself is neither loaded nor parsed."""
    packet = (
        current_packets(deployment).filter(status=PacketStatus.COMPLETE).values("pdf_sha256", "evidence_digest").first()
    )
    if packet is None:
        return None
    verification = (
        PacketVerification.objects.filter(pdf_sha256=packet["pdf_sha256"])
        .values("legal_valid", "engineering_valid", "verified_at", "evidence_digest")
        .first()
    )
    if verification is None:
        return None
    return ApprovalState(
        pdf_sha256=packet["pdf_sha256"],
        pdf_url=packet_url(deployment),
        evidence_digest=verification["evidence_digest"] or packet["evidence_digest"],
        legal_valid=verification["legal_valid"],
        engineering_valid=verification["engineering_valid"],
        verified_at=verification["verified_at"],
    )


def approval_bundle_files() -> Iterator[tuple[str, bytes]]:
    """For the audit bundle: every signed packet (its latest revision) and an index of them. The
    index says whether each is its request's current packet (current_packets): a packet superseded
    by an evidence change keeps its status until the next packet is queued."""
    index = []
    unsigned = (PacketStatus.RENDERED, PacketStatus.RENDERING, PacketStatus.FAILED)
    signed = ApprovalPacket.objects.exclude(status__in=unsigned).select_related("deployment").order_by("id")
    carries_voided = set(
        PacketSignature.objects.filter(status=SignatureStatus.SIGNED, signoff__voided_at__isnull=False).values_list(
            "packet_id", flat=True
        )
    )
    for packet in signed.defer("pdf").iterator():
        name = f"approvals/{packet.pdf_sha256}.pdf"
        yield name, bytes(ApprovalPacket.objects.values_list("pdf", flat=True).get(pk=packet.pk))
        index.append(
            {
                "file": name,
                "pdf_sha256": packet.pdf_sha256,
                "deployment": str(packet.deployment.code),
                "packet": str(packet.code),
                "status": packet.status,
                "evidence_digest": packet.evidence_digest,
                "voided_at": packet.voided_at.isoformat() if packet.voided_at else None,
                "current": packet.voided_at is None
                and packet.evidence_digest == packet.deployment.evidence_digest
                and packet.pk not in carries_voided,
            }
        )
    if index:  # a trail without approvals gets a bundle without an approvals folder
        yield "approvals/index.json", json.dumps(index, indent=2, sort_keys=True).encode()
