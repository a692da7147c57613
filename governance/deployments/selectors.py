"""Reads, with object permissions applied in the query: what a user may not see is not found."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.db.models import Q, QuerySet
from django.utils import timezone

from governance.capacity.models import CapacityPlan
from governance.capacity.selectors import capacity_findings
from governance.core.errors import NotFoundError, invalid_input
from governance.core.models import ApiToken
from governance.core.roles import Role, has_role
from governance.core.tokens import token_covers_deployment
from governance.deployments.choices import ObligationStatus, ReviewRole, Status
from governance.deployments.models import DeploymentRequest, ObligationItem, Waiver
from governance.evaluations.evals import eval_findings
from governance.licenses.choices import Severity

# Severities of a license finding that stand in the way of approval unless waived.
BLOCKING_SEVERITIES = (Severity.BLOCKER, Severity.APPROVAL)


def deployments_visible_to(user: Any) -> QuerySet[DeploymentRequest]:
    deployments = DeploymentRequest.objects.select_related("team", "artifact", "requester")
    if has_role(user, Role.AUDITOR, Role.ADMIN):
        return deployments
    condition = Q(pk__in=[])
    if has_role(user, Role.LEGAL_REVIEWER, Role.ENGINEERING_REVIEWER):
        condition |= ~Q(status=Status.DRAFT)  # reviewers see what was submitted, any team
    if has_role(user, Role.REQUESTER):
        condition |= Q(team__members=user)
    return deployments.filter(condition).distinct()


def deployments_list(user: Any, filters: Mapping[str, str]) -> QuerySet[DeploymentRequest]:
    """The list API's query: `status`, `team` (name), `product` (substring), `flagged` (true/false)."""
    deployments = deployments_visible_to(user)
    if filters.get("status"):
        if filters["status"] not in Status.values:
            raise invalid_input("status", f"must be one of {', '.join(Status.values)}")
        deployments = deployments.filter(status=filters["status"])
    if filters.get("team"):
        deployments = deployments.filter(team__name=filters["team"])
    if filters.get("product"):
        deployments = deployments.filter(product_name__icontains=filters["product"])
    if filters.get("flagged") in ("true", "false"):
        deployments = deployments.filter(flagged=filters["flagged"] == "true")
    return deployments.order_by("-created_at")


def deployments_hidden_from(sender: Any, user: Any, **kwargs: Any) -> dict[str, list[str]]:
    """Answers the audit trail's `audit_objects_hidden`: requests this user would get 404 for."""
    hidden = DeploymentRequest.objects.exclude(pk__in=deployments_visible_to(user).values("pk"))
    return {DeploymentRequest._meta.label_lower: [str(code) for code in hidden.values_list("code", flat=True)]}


def deployment_get(user: Any, code: Any) -> DeploymentRequest:
    found = deployments_visible_to(user).filter(code=code).first()
    if found is None:
        raise NotFoundError("no such deployment request")
    return found


def deployment_get_for_usage(user: Any, code: Any, *, token: ApiToken | None) -> DeploymentRequest:
    """Usage reports come from billing/CI with a scoped token (authentication let it reach the
    usage endpoint only with usage:write), for the team and requests it was issued for; or from
    a requester of the owning team."""
    if token is not None and token.scopes:
        found = DeploymentRequest.objects.filter(code=code).first()
        if found is not None and not token_covers_deployment(token, found):
            found = None
    else:
        found = deployments_visible_to(user).filter(code=code, team__members=user).first()
    if found is None:
        raise NotFoundError("no such deployment request")
    return found


def obligation_get(deployment: DeploymentRequest, code: Any) -> ObligationItem:
    """An obligation of a request the caller already may see (deployment_get)."""
    found = deployment.obligations.filter(code=code).first()
    if found is None:
        raise NotFoundError("no such obligation on this request")
    return found


def latest_capacity_plan(deployment: DeploymentRequest) -> CapacityPlan | None:
    return (
        CapacityPlan.objects.filter(subject_type=deployment._meta.label_lower, subject_id=str(deployment.code))
        .order_by("-created_at")
        .first()
    )


def active_waivers(deployment: DeploymentRequest, now: datetime | None = None) -> list[Waiver]:
    """Unexpired waivers in force: a proposed waiver of a blocker counts only once a second legal
    reviewer confirmed it."""
    return list(
        deployment.waivers.filter(expires_at__gt=now or timezone.now())
        .filter(Q(needs_confirmation=False) | Q(confirmed_at__isnull=False))
        .select_related("granted_by", "confirmed_by")
        .order_by("created_at")
    )


def waiver_get(deployment: DeploymentRequest, code: Any) -> Waiver:
    """A waiver of a request the caller already may see (deployment_get)."""
    found = deployment.waivers.filter(code=code).first()
    if found is None:
        raise NotFoundError("no such waiver on this request")
    return found


def finding_is_waived(license_key: str, finding: dict[str, Any], waivers: list[Waiver]) -> bool:
    """A waiver names the license and finding code, and optionally the clause."""
    return any(
        w.license_key == license_key and w.finding_code == finding["code"] and w.clause in ("", finding["clause"])
        for w in waivers
    )


def deployment_blockers(deployment: DeploymentRequest, role: str | None = None) -> list[dict[str, Any]]:
    """What stands between this request and approval (the gate uses the same list)."""
    blockers: list[dict[str, Any]] = []
    if role in (None, ReviewRole.LEGAL):
        waivers = active_waivers(deployment)
        for evaluation in (deployment.evidence or {}).get("licenses", []):
            for finding in evaluation["findings"]:
                if finding["severity"] not in BLOCKING_SEVERITIES:
                    continue
                if finding_is_waived(evaluation["license"], finding, waivers):
                    continue
                blockers.append(
                    {
                        "code": finding["code"],
                        "license": evaluation["license"],
                        "message": finding["message"],
                        "severity": finding["severity"],
                    }
                )
        settled = [ObligationStatus.ACCEPTED, ObligationStatus.SUPERSEDED]
        for item in deployment.obligations.exclude(status__in=settled):
            blockers.append(
                {
                    "code": "obligation.not_accepted",
                    "license": item.license_key,
                    "message": f"{item.finding_code} ({item.clause}) is {item.status}",
                    "severity": "blocker",
                }
            )
    if role in (None, ReviewRole.ENGINEERING):
        stored = latest_capacity_plan(deployment)
        if stored is None:
            blockers.append({"code": "capacity.missing", "message": "no capacity plan yet", "severity": "blocker"})
        else:
            blockers.extend(capacity_findings(stored))
        blockers.extend(eval_findings(deployment))
    return blockers
