"""Reads of capacity plans, with object scoping in the query, and the findings a plan yields."""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet

from governance.capacity.models import CapacityPlan
from governance.core.errors import NotFoundError
from governance.core.roles import Role, has_role

DEPLOYMENT_SUBJECT = "deployments.deploymentrequest"


# The status of a subject that is not submitted yet (deployments' Status.DRAFT; not imported: a lower layer).
_DRAFT = "draft"


def capacity_plans_visible_to(user: Any) -> QuerySet[CapacityPlan]:
    """Scoped like the subject: auditors and admins see every plan; requesters the plans they or a
    teammate requested; reviewers the plans of submitted requests (never a draft's)."""
    plans = CapacityPlan.objects.all()
    if has_role(user, Role.AUDITOR, Role.ADMIN):
        return plans
    if not getattr(user, "is_authenticated", False):
        return plans.none()
    condition = Q(requested_by=user)
    if has_role(user, Role.REQUESTER):
        condition |= Q(requested_by__teams__members=user)
    if has_role(user, Role.LEGAL_REVIEWER, Role.ENGINEERING_REVIEWER):
        condition |= Q(deployment__isnull=False) & ~Q(deployment__status=_DRAFT)
    return plans.filter(condition).distinct()


def capacity_plan_get(user: Any, code: Any) -> CapacityPlan:
    found = capacity_plans_visible_to(user).filter(code=code).first()
    if found is None:
        raise NotFoundError("no such capacity plan")
    return found
