"""Obligations: the team says how it meets one; a legal reviewer accepts or rejects that."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db import transaction

from governance.audit.actions import AuditAction
from governance.audit.services import audit_record
from governance.core.errors import ConflictError, PermissionDeniedError, invalid_input
from governance.core.roles import Role
from governance.core.services import write_service
from governance.deployments.choices import ObligationStatus
from governance.deployments.models import ObligationItem
from governance.deployments.services.evidence import deployment_evidence_refresh
from governance.deployments.services.transitions import deployment_lock, require_reviewer, require_team_requester

ACKNOWLEDGEABLE = (ObligationStatus.OPEN, ObligationStatus.REJECTED, ObligationStatus.ACKNOWLEDGED)


@write_service
def obligation_acknowledge(*, item: ObligationItem, actor: User, how_met: str) -> ObligationItem:
    if not how_met.strip():
        raise invalid_input("how_met", "say how the obligation is met (e.g. where the notice is displayed)")
    with transaction.atomic():
        deployment = deployment_lock(item.request)
        require_team_requester(deployment, actor)
        item = ObligationItem.objects.select_for_update().get(pk=item.pk)
        if item.status not in ACKNOWLEDGEABLE:
            raise ConflictError(f"a {item.status} obligation cannot be acknowledged")
        item.status, item.how_met, item.acknowledged_by = ObligationStatus.ACKNOWLEDGED, how_met.strip(), actor
        item.save(update_fields=["status", "how_met", "acknowledged_by", "updated_at"])
        audit_record(
            actor=actor,
            action=AuditAction.OBLIGATION_ACKNOWLEDGED,
            obj=deployment,
            data={"obligation": str(item.code), "code": item.finding_code, "how_met": item.how_met},
        )
        deployment_evidence_refresh(deployment, actor, f"obligation {item.finding_code} acknowledged")
    return item


@write_service
def obligation_review(*, item: ObligationItem, actor: User, accept: bool, comment: str = "") -> ObligationItem:
    with transaction.atomic():
        deployment = deployment_lock(item.request)
        require_reviewer(deployment, actor, Role.LEGAL_REVIEWER)
        item = ObligationItem.objects.select_for_update().get(pk=item.pk)
        if item.acknowledged_by_id == actor.pk:
            raise PermissionDeniedError("you acknowledged this obligation; another legal reviewer accepts it")
        if item.status != ObligationStatus.ACKNOWLEDGED:
            raise ConflictError(
                "only an acknowledged obligation can be accepted or rejected",
                extra={"fields": {"status": [item.status]}},
            )
        item.status = ObligationStatus.ACCEPTED if accept else ObligationStatus.REJECTED
        item.reviewed_by, item.review_comment = actor, comment
        item.save(update_fields=["status", "reviewed_by", "review_comment", "updated_at"])
        audit_record(
            actor=actor,
            action=AuditAction.OBLIGATION_REVIEWED,
            obj=deployment,
            data={"obligation": str(item.code), "accepted": accept, "comment": comment},
        )
        deployment_evidence_refresh(deployment, actor, f"obligation {item.finding_code} {item.status}")
    return item
