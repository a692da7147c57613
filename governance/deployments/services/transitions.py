"""The lock, the permission checks and the one function that changes a request's status."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from governance.audit.actions import AuditAction
from governance.audit.services import audit_record
from governance.core.errors import ConflictError, PermissionDeniedError
from governance.core.roles import Role, has_role
from governance.deployments.choices import TRANSITIONS, Status
from governance.deployments.models import Approval, DeploymentRequest
from governance.deployments.readiness import approved_eval
from governance.deployments.services.notifications import notify_status_changed
from governance.evaluations.models import EvalRun

Actor = User | str
SYSTEM = "system:deployments"


def deployment_lock(deployment: DeploymentRequest) -> DeploymentRequest:
    """Lock the request row for the caller's transaction and load it afresh."""
    return (
        DeploymentRequest.objects.select_for_update(of=("self",))
        .select_related("artifact", "team")
        .get(pk=deployment.pk)
    )


def deployment_transition(deployment: DeploymentRequest, to: str, actor: Actor, reason: str) -> None:
    """The only place a status changes. The row must be locked by the caller's transaction."""
    allowed = TRANSITIONS[deployment.status]
    if to not in allowed:
        raise ConflictError(
            f"a {deployment.status} request cannot become {to}",
            extra={"fields": {"status": [f"allowed from {deployment.status}: {', '.join(allowed) or 'none'}"]}},
        )
    previous = deployment.status
    deployment.status = to
    now = timezone.now()
    if to == Status.SUBMITTED:
        deployment.submitted_at = now
    if to == Status.APPROVED:
        deployment.approved_at = now
        deployment.approval_expires_at = now + timedelta(days=settings.DEPLOYMENT_APPROVAL_VALIDITY_DAYS)
        deployment.flagged, deployment.flag_reason = False, ""
    deployment.save(
        update_fields=[
            "status",
            "submitted_at",
            "approved_at",
            "approval_expires_at",
            "flagged",
            "flag_reason",
            "updated_at",
        ]
    )
    data = {"from": previous, "to": to, "reason": reason, "evidence_digest": deployment.evidence_digest}
    relied_on = approved_eval(deployment.evidence or {}) if to == Status.APPROVED else None
    if relied_on is not None:
        data["approved_eval"] = str(relied_on.get("eval"))
    if to == Status.APPROVED:
        # The eval run this approval relies on, stored with it: an engine upgrade's or a new layout's
        # fresh eval is compared with it (deployments.services.evidence, last_approved_eval).
        Approval.objects.create(
            deployment=deployment,
            approved_at=now,
            evidence_digest=deployment.evidence_digest,
            relied_on_eval=EvalRun.objects.filter(code=str(relied_on.get("eval")), request=deployment).first()
            if relied_on is not None
            else None,
        )
    audit_record(actor=actor, action=AuditAction.DEPLOYMENT_TRANSITIONED, obj=deployment, data=data)
    actor_pk = actor.pk if isinstance(actor, User) else None
    notified = deployment  # a caller that tells people itself sets `notified_by_caller` before commit

    def notify() -> None:
        if not getattr(notified, "notified_by_caller", False):
            notify_status_changed(notified, previous, actor_pk, reason)

    transaction.on_commit(notify)


def require_team_requester(deployment: DeploymentRequest, actor: User) -> None:
    if not has_role(actor, Role.REQUESTER) or not deployment.team.members.filter(pk=actor.pk).exists():
        raise PermissionDeniedError("only a requester of the owning team can do this")


def require_reviewer(deployment: DeploymentRequest, actor: User, *roles: str) -> None:
    if not has_role(actor, *roles):
        raise PermissionDeniedError(f"this needs the role {' or '.join(roles)}")
    if actor.pk == deployment.requester_id:
        raise PermissionDeniedError("nobody reviews their own request (separation of duties)")


def deployments_expire_approvals(*, now: datetime | None = None) -> int:
    """Beat: end approvals past their validity."""
    now = now or timezone.now()
    count = 0
    due = DeploymentRequest.objects.filter(status=Status.APPROVED, approval_expires_at__lte=now)
    for pk in due.values_list("pk", flat=True):
        with transaction.atomic():
            deployment = DeploymentRequest.objects.select_for_update().get(pk=pk)
            expires_at = deployment.approval_expires_at
            if deployment.status == Status.APPROVED and expires_at and expires_at <= now:
                deployment_transition(deployment, Status.EXPIRED, SYSTEM, "approval validity ended")
                count += 1
    return count
