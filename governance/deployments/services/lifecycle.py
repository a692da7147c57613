"""A request's life: created, edited and submitted by its team's requesters, put in review, revoked.
The review decision itself is a signed sign-off in the approvals app (`governance.approvals.services.sign_off`). Every write locks the row and audits in the same transaction."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import translation

from governance.artifacts.selectors import artifact_usable_by
from governance.artifacts.weights import precision_conflict
from governance.audit.actions import AuditAction
from governance.audit.services import audit_record
from governance.core.errors import ConflictError, invalid_input
from governance.core.services import write_service
from governance.deployments.choices import EDITABLE, Status
from governance.deployments.models import DeploymentRequest
from governance.deployments.moves import Move, require_move
from governance.deployments.services.evidence import capacity_plan_queue, deployment_evidence_refresh, validate_facts
from governance.deployments.services.transitions import (
    deployment_lock,
    deployment_transition,
    require_team_requester,
)
from governance.evaluations.selectors import artifact_weights_precision

EVIDENCE_FIELDS = ("facts", "serving_plan", "artifact", "product_name", "environments", "target_cluster")


def request_language(chosen: str | None) -> str:
    """The approval packet's language: the one chosen, else the language the requester is using now
    (LocaleMiddleware set it from the UI's switcher or the API call's Accept-Language), as one of
    settings.LANGUAGES' codes."""
    supported = {code for code, _name in settings.LANGUAGES}
    for candidate in (chosen, translation.get_language()):
        if not candidate:
            continue
        try:
            code = translation.get_supported_language_variant(candidate)
        except LookupError:
            continue
        if code in supported:
            return code
    return str(settings.LANGUAGE_CODE)


def require_servable_precision(deployment: DeploymentRequest) -> None:
    """A request serves its weights at the precision they are stored in (read from the checkpoint,
    artifacts.weights), or quantizes BF16 weights at load; anything else is refused, naming both."""
    conflict = precision_conflict(
        artifact_weights_precision(deployment.artifact), str(deployment.serving_plan.get("precision", ""))
    )
    if conflict:
        raise invalid_input("serving_plan.precision", conflict)


@write_service
def deployment_create(*, actor: User, data: dict[str, Any]) -> DeploymentRequest:
    validate_facts(data["facts"])
    team, artifact = data["team"], data["artifact"]
    if not team.members.filter(pk=actor.pk).exists():
        raise invalid_input("team", "you are not a member of this team")
    if not artifact_usable_by(artifact, team):
        raise invalid_input("artifact", "belongs to another team and is not shared with yours")
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
            language=request_language(data.get("language")),
        )
        audit_record(
            actor=actor,
            action=AuditAction.DEPLOYMENT_CREATED,
            obj=deployment,
            data={"artifact": str(artifact.code), "product_name": deployment.product_name},
        )
        deployment_evidence_refresh(deployment_lock(deployment), actor, "created")
    return DeploymentRequest.objects.get(pk=deployment.pk)


@write_service
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
        if "artifact" in changed and not artifact_usable_by(changes["artifact"], deployment.team):
            raise invalid_input("artifact", "belongs to another team and is not shared with yours")
        for name in changed:
            setattr(deployment, name, changes[name])
        if deployment.status != Status.DRAFT and {"serving_plan", "artifact"} & set(changed):
            require_servable_precision(deployment)
        deployment.save()
        audit_record(actor=actor, action=AuditAction.DEPLOYMENT_UPDATED, obj=deployment, data={"fields": changed})
        reason = "edited: " + ", ".join(changed)
        if deployment.status == Status.SUBMITTED:
            deployment_transition(deployment, Status.IN_REVIEW, actor, reason)
        # The new plan is queued first, so the evidence says it is computing (capacity.pending)
        # rather than keeping the old plan's verdict.
        if deployment.status != Status.DRAFT and {"serving_plan", "artifact"} & set(changed):
            capacity_plan_queue(deployment, actor)
        deployment_evidence_refresh(deployment, actor, reason)
    return DeploymentRequest.objects.get(pk=deployment.pk)


@write_service
def deployment_submit(*, deployment: DeploymentRequest, actor: User) -> DeploymentRequest:
    with transaction.atomic():
        deployment = deployment_lock(deployment)
        require_move(deployment, actor, Move.SUBMIT)
        require_servable_precision(deployment)
        deployment_transition(deployment, Status.SUBMITTED, actor, "submitted for review")
        capacity_plan_queue(deployment, actor)  # first: the evidence then says the plan is computing
        deployment_evidence_refresh(deployment, actor, "submitted")
    return DeploymentRequest.objects.get(pk=deployment.pk)


@write_service
def deployment_start_review(*, deployment: DeploymentRequest, actor: User) -> DeploymentRequest:
    with transaction.atomic():
        deployment = deployment_lock(deployment)
        require_move(deployment, actor, Move.START_REVIEW)
        deployment_transition(deployment, Status.IN_REVIEW, actor, "review started")
    return deployment


@write_service
def deployment_withdraw(*, deployment: DeploymentRequest, actor: User, reason: str = "") -> DeploymentRequest:
    """A draft or submitted request taken back before review: it leaves every queue for good
    (a new request starts again). Nothing is deleted: the request and its audit trail stay."""
    with transaction.atomic():
        deployment = deployment_lock(deployment)
        require_move(deployment, actor, Move.WITHDRAW)  # its requester while in the team, or a team lead
        if deployment.status not in (Status.DRAFT, Status.SUBMITTED):
            raise ConflictError(
                f"a {deployment.status} request cannot be withdrawn (only a draft or a submitted one)",
                extra={"fields": {"status": [deployment.status]}},
            )
        deployment_transition(deployment, Status.WITHDRAWN, actor, reason.strip() or "withdrawn")
    return deployment


@write_service
def deployment_revoke(*, deployment: DeploymentRequest, actor: User, reason: str) -> DeploymentRequest:
    if not reason.strip():
        raise invalid_input("reason", "say why the approval is revoked")
    with transaction.atomic():
        deployment = deployment_lock(deployment)
        require_move(deployment, actor, Move.REVOKE)
        deployment_transition(deployment, Status.REVOKED, actor, reason.strip())
    return deployment
