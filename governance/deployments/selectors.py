"""Reads, with object permissions applied in the query: what a user may not see is not found."""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet

from governance.capacity.models import CapacityPlan
from governance.core.errors import NotFoundError
from governance.core.roles import Role, has_role
from governance.deployments.choices import Status
from governance.deployments.models import DeploymentRequest


def deployments_visible_to(user: Any) -> QuerySet[DeploymentRequest]:
    requests = DeploymentRequest.objects.select_related("team", "artifact", "requester")
    if has_role(user, Role.AUDITOR, Role.ADMIN):
        return requests
    condition = Q(pk__in=[])
    if has_role(user, Role.LEGAL_REVIEWER, Role.ENGINEERING_REVIEWER):
        condition |= ~Q(status=Status.DRAFT)  # reviewers see what was submitted, any team
    if has_role(user, Role.REQUESTER):
        condition |= Q(team__members=user)
    return requests.filter(condition).distinct()


def deployment_get(user: Any, code: Any) -> DeploymentRequest:
    found = deployments_visible_to(user).filter(code=code).first()
    if found is None:
        raise NotFoundError("no such deployment request")
    return found


def latest_capacity_plan(request: DeploymentRequest) -> CapacityPlan | None:
    return (
        CapacityPlan.objects.filter(subject_type=request._meta.label_lower, subject_id=str(request.code))
        .order_by("-created_at")
        .first()
    )
