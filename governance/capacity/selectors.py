"""Reads of capacity plans, with object scoping in the query, and the findings a plan yields."""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet

from governance.capacity.models import CapacityPlan, CapacityPlanStatus
from governance.core.errors import NotFoundError
from governance.core.roles import Role, has_role


def capacity_plans_visible_to(user: Any) -> QuerySet[CapacityPlan]:
    """Reviewers, auditors and admins see every plan; others the plans they or a teammate requested."""
    plans = CapacityPlan.objects.all()
    if has_role(user, Role.LEGAL_REVIEWER, Role.ENGINEERING_REVIEWER, Role.AUDITOR, Role.ADMIN):
        return plans
    if not getattr(user, "is_authenticated", False):
        return plans.none()
    return plans.filter(Q(requested_by=user) | Q(requested_by__teams__members=user)).distinct()


def capacity_plan_get(user: Any, code: Any) -> CapacityPlan:
    found = capacity_plans_visible_to(user).filter(code=code).first()
    if found is None:
        raise NotFoundError("no such capacity plan")
    return found


def capacity_findings(stored: CapacityPlan) -> list[dict[str, Any]]:
    """What the gate and reviewers see: a plan that does not fit (or failed) blocks the deployment."""
    if stored.status == CapacityPlanStatus.PENDING:
        return [{"code": "capacity.pending", "severity": "blocker", "message": "The capacity plan is still computing."}]
    if stored.status == CapacityPlanStatus.FAILED:
        return [
            {"code": "capacity.failed", "severity": "blocker", "message": f"The capacity plan failed: {stored.error}"}
        ]
    if not stored.fits:
        reasons = [
            note for note in (stored.result or {}).get("notes", []) if note.startswith(("Rejected", "No layout"))
        ]
        return [
            {
                "code": "capacity.does_not_fit",
                "severity": "blocker",
                "message": "The serving plan does not fit the target GPUs.",
                "params": {"reasons": reasons[:3]},
            }
        ]
    return []
