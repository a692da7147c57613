"""A request's life: created, edited and submitted by its team's requesters, reviewed by legal and
engineering (separation of duties), revoked. Every write locks the row and audits in the same transaction."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from governance.audit.actions import AuditAction
from governance.audit.services import audit_record
from governance.core.errors import ConflictError, invalid_input
from governance.core.roles import Role, has_role
from governance.deployments.choices import EDITABLE, ReviewRole, ReviewVerdict, Status
from governance.deployments.models import DeploymentRequest, ReviewDecision
from governance.deployments.selectors import deployment_blockers
from governance.deployments.services.evidence import capacity_plan_queue, deployment_evidence_refresh, validate_facts
from governance.deployments.services.transitions import (
    deployment_lock,
    deployment_transition,
    require_reviewer,
    require_team_requester,
)
from governance.deployments.signals import deployment_submitted

EVIDENCE_FIELDS = ("facts", "serving_plan", "artifact", "product_name", "environments", "target_cluster")
# Which group a reviewer needs to sign off in each review role.
REVIEW_GROUPS = ((ReviewRole.LEGAL, Role.LEGAL_REVIEWER), (ReviewRole.ENGINEERING, Role.ENGINEERING_REVIEWER))


def deployment_create(*, actor: User, data: dict[str, Any]) -> DeploymentRequest:
    validate_facts(data["facts"])
    team, artifact = data["team"], data["artifact"]
    if not team.members.filter(pk=actor.pk).exists():
        raise invalid_input("team", "you are not a member of this team")
    with transaction.atomic():
        deployment = DeploymentRequest.objects.create(
            team=team,
            requester=actor,
            artifact=artifact,
            product_name=data["product_name"],
            environments=data.get("environments", []),
            facts=data["facts"],
            serving_plan=data["serving_plan"],
            target_cluster=data.get("target_cluster", ""),
        )
        audit_record(
            actor=actor,
            action=AuditAction.DEPLOYMENT_CREATED,
            obj=deployment,
            data={"artifact": str(artifact.code), "product_name": deployment.product_name},
        )
        deployment_evidence_refresh(deployment_lock(deployment), actor, "created")
    return DeploymentRequest.objects.get(pk=deployment.pk)


def deployment_update(*, deployment: DeploymentRequest, actor: User, changes: dict[str, Any]) -> DeploymentRequest:
    if "facts" in changes:
        validate_facts(changes["facts"])
    with transaction.atomic():
        deployment = deployment_lock(deployment)
        require_team_requester(deployment, actor)
        if deployment.status not in EDITABLE:
            raise ConflictError(
                f"a {deployment.status} request cannot be edited; open a new request",
                extra={"fields": {"status": [deployment.status]}},
            )
        changed = [name for name in EVIDENCE_FIELDS if name in changes and getattr(deployment, name) != changes[name]]
        if not changed:
            return deployment
        for name in changed:
            setattr(deployment, name, changes[name])
        deployment.save()
        audit_record(actor=actor, action=AuditAction.DEPLOYMENT_UPDATED, obj=deployment, data={"fields": changed})
        reason = "edited: " + ", ".join(changed)
        if deployment.status == Status.SUBMITTED:
            deployment_transition(deployment, Status.IN_REVIEW, actor, reason)
        deployment_evidence_refresh(deployment, actor, reason)
        if deployment.status != Status.DRAFT and {"serving_plan", "artifact"} & set(changed):
            capacity_plan_queue(deployment, actor)
            deployment_submitted.send(sender=DeploymentRequest, deployment=deployment, actor=actor)
    return DeploymentRequest.objects.get(pk=deployment.pk)


def deployment_submit(*, deployment: DeploymentRequest, actor: User) -> DeploymentRequest:
    with transaction.atomic():
        deployment = deployment_lock(deployment)
        require_team_requester(deployment, actor)
        deployment_transition(deployment, Status.SUBMITTED, actor, "submitted for review")
        deployment_evidence_refresh(deployment, actor, "submitted")
        capacity_plan_queue(deployment, actor)
        deployment_submitted.send(sender=DeploymentRequest, deployment=deployment, actor=actor)
    return DeploymentRequest.objects.get(pk=deployment.pk)


def deployment_start_review(*, deployment: DeploymentRequest, actor: User) -> DeploymentRequest:
    with transaction.atomic():
        deployment = deployment_lock(deployment)
        require_reviewer(deployment, actor, Role.LEGAL_REVIEWER, Role.ENGINEERING_REVIEWER)
        deployment_transition(deployment, Status.IN_REVIEW, actor, "review started")
    return deployment


def deployment_review(
    *,
    deployment: DeploymentRequest,
    actor: User,
    verdict: str,
    evidence_digest: str,
    role: str | None = None,
    comment: str = "",
) -> DeploymentRequest:
    with transaction.atomic():
        deployment = deployment_lock(deployment)
        require_reviewer(deployment, actor, Role.LEGAL_REVIEWER, Role.ENGINEERING_REVIEWER)
        roles = [review_role for review_role, group in REVIEW_GROUPS if has_role(actor, group)]
        if role is None and len(roles) == 1:
            role = roles[0]
        if role not in roles:
            raise invalid_input("role", f"you review as one of: {', '.join(roles)}")
        if deployment.status != Status.IN_REVIEW:
            raise ConflictError(
                f"a {deployment.status} request is not in review", extra={"fields": {"status": [deployment.status]}}
            )
        if evidence_digest != deployment.evidence_digest:
            raise ConflictError(
                "the evidence changed since you looked; review it again",
                extra={"fields": {"evidence_digest": [f"current is {deployment.evidence_digest}"]}},
            )
        if verdict == ReviewVerdict.APPROVE:
            blockers = deployment_blockers(deployment, role)
            if blockers:
                raise ConflictError(f"{len(blockers)} blocker(s) stand in the way", extra={"blockers": blockers})
        deployment.decisions.filter(role=role, voided_at__isnull=True).update(
            voided_at=timezone.now(), void_reason="superseded by a newer decision"
        )
        ReviewDecision.objects.create(
            request=deployment,
            role=role,
            verdict=verdict,
            reviewer=actor,
            evidence_digest=deployment.evidence_digest,
            comment=comment,
        )
        audit_record(
            actor=actor,
            action=AuditAction.SIGNOFF_RECORDED,
            obj=deployment,
            data={"role": role, "verdict": verdict, "evidence_digest": deployment.evidence_digest},
        )
        if verdict == ReviewVerdict.REJECT:
            deployment_transition(deployment, Status.REJECTED, actor, f"{role} rejected: {comment}")
        else:
            standing = deployment.decisions.filter(
                voided_at__isnull=True, verdict=ReviewVerdict.APPROVE, evidence_digest=deployment.evidence_digest
            )
            if set(standing.values_list("role", flat=True)) == {ReviewRole.LEGAL, ReviewRole.ENGINEERING}:
                deployment_transition(deployment, Status.APPROVED, actor, "legal and engineering approved")
    return DeploymentRequest.objects.get(pk=deployment.pk)


def deployment_revoke(*, deployment: DeploymentRequest, actor: User, reason: str) -> DeploymentRequest:
    if not reason.strip():
        raise invalid_input("reason", "say why the approval is revoked")
    with transaction.atomic():
        deployment = deployment_lock(deployment)
        require_reviewer(deployment, actor, Role.LEGAL_REVIEWER, Role.ADMIN)
        deployment_transition(deployment, Status.REVOKED, actor, reason.strip())
    return deployment
