"""The approval packet: what goes into it and queueing its render for the current evidence digest.
The PDF itself is made in packet_render.py (WeasyPrint) by the heavy worker (packet_jobs.py).

Nothing here reacts to an evidence change: the deployments app voids the sign-offs of the old
digest (deployments.services.evidence, a direct call), and a packet of any other digest, or one
carrying a voided sign-off's signature, is superseded by definition (approvals.selectors.
current_packets); packet_queue records that (`void`) when it queues the packet that replaces it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone, translation

from governance.approvals.choices import PacketStatus
from governance.approvals.models import ApprovalPacket
from governance.approvals.selectors import current_packets, live_packet, meaning_templates
from governance.audit.models import AuditCheckpoint
from governance.audit.selectors import audit_checkpoints
from governance.audit.services import audit_checkpoint_create, format_time
from governance.core.errors import ConflictError, PermissionDeniedError
from governance.core.roles import Role, has_role
from governance.deployments.choices import Status
from governance.deployments.models import DeploymentRequest
from governance.deployments.readiness import blocks_signing
from governance.deployments.selectors import deployment_readiness
from governance.deployments.services import deployment_lock

if TYPE_CHECKING:
    from governance.approvals.packet_render import PacketInput

# packet_render (WeasyPrint) is imported where it is used: it takes seconds to import, and every request
# and every management command loads this module through the URL configuration.

from governance.approvals.services.certificates import Actor
from governance.core.services import write_service


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


def _eval_clusters(evidence: dict[str, Any]) -> dict[str, str]:
    """Each eval's cluster by its code: the packet names where the eval that backs it ran."""
    from governance.evaluations.models import EvalRun

    codes = [item["eval"] for item in evidence.get("eval_results", []) if item.get("eval")]
    runs = EvalRun.objects.filter(code__in=codes).select_related("cluster").only("code", "cluster__name")
    return {str(run.code): run.cluster.name for run in runs if run.cluster_id}


def _latest_checkpoint() -> AuditCheckpoint | None:
    """A checkpoint over the trail as it stands (signed now when the head moved), for the packet."""
    return audit_checkpoint_create() or audit_checkpoints().last()


def packet_facts(packet: ApprovalPacket, **extra: Any) -> dict[str, Any]:
    """What the audit trail says about a packet revision (rendered, signed)."""
    return {"packet": str(packet.code), "pdf_sha256": packet.pdf_sha256, **extra}


def packet_input(deployment: DeploymentRequest) -> PacketInput:
    from governance.approvals.packet_render import PacketInput

    evidence = deployment.evidence or {}
    with translation.override(deployment.language):  # the meaning texts in the packet's language
        signatures = meaning_templates(settings.APPROVALS_ORGANISATION)
    return PacketInput(
        deployment_code=str(deployment.code),
        evidence_digest=deployment.evidence_digest,
        evidence=evidence,
        eval_categories=_eval_categories(evidence),
        eval_clusters=_eval_clusters(evidence),
        audit_checkpoint=_checkpoint_dict(_latest_checkpoint()),
        signatures=signatures,
        organisation=settings.APPROVALS_ORGANISATION,
        blockers=tuple(reason.as_blocker() for reason in blocks_signing(deployment_readiness(deployment))),
        language=deployment.language,
    )


def packet_queue(*, deployment: DeploymentRequest, actor: Actor) -> tuple[ApprovalPacket, bool]:
    """The live packet for the request's current evidence digest; when there is none, a new row in
    `rendering` and the heavy task that renders it (outbox, sent after commit). Nothing is rendered
    here: the caller holds the request row lock, and a render takes seconds. Returns the packet and
    whether it was queued now."""
    from governance.core.outbox import outbox_enqueue

    packet = live_packet(deployment)
    if packet is not None:
        return packet, False
    # The superseded packets still marked live (another digest, or a voided sign-off's signature in
    # the PDF: the evidence went A -> B -> A) are marked void now; the one_live_packet constraint
    # needs that for the same digest, and the audit bundle's index shows it.
    current = current_packets(deployment).values("pk")
    for stale in ApprovalPacket.objects.filter(deployment=deployment, voided_at__isnull=True).exclude(pk__in=current):
        _void_packet(stale, "the evidence changed")
    packet = ApprovalPacket.objects.create(
        deployment=deployment,
        evidence_digest=deployment.evidence_digest,
        status=PacketStatus.RENDERING,
        pdf=b"",
        pdf_sha256="",
    )
    outbox_enqueue(PACKET_TASK, packet.pk)
    return packet, True


PACKET_TASK = "approvals.packet_complete"


@write_service
def packet_render_for_review(*, deployment: DeploymentRequest, actor: User) -> ApprovalPacket:
    """A reviewer asks for the packet before signing (the UI shows it with the meaning text); it is
    rendered by the heavy worker when the current evidence has none yet."""
    if not has_role(actor, Role.LEGAL_REVIEWER, Role.ENGINEERING_REVIEWER, Role.ADMIN):
        raise PermissionDeniedError("only reviewers render approval packets")
    with transaction.atomic():
        deployment = deployment_lock(deployment)
        if deployment.status != Status.IN_REVIEW:
            raise ConflictError(
                f"a {deployment.status} request is not in review", extra={"fields": {"status": [deployment.status]}}
            )
        packet, _ = packet_queue(deployment=deployment, actor=actor)
        return packet


def _void_packet(packet: ApprovalPacket, reason: str) -> None:
    packet.voided_at, packet.void_reason = timezone.now(), reason
    if packet.status not in (PacketStatus.REJECTED, PacketStatus.FAILED):
        packet.status = PacketStatus.VOID
    packet.save(update_fields=["voided_at", "void_reason", "status", "updated_at"])
