"""Monthly usage reports (billing, CI or the team): they update the facts, and crossing a license
threshold flags the request and tells the reviewers."""

from __future__ import annotations

import logging
from decimal import Decimal
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from governance.audit.actions import AuditAction
from governance.audit.services import audit_record
from governance.core.errors import ConflictError
from governance.core.services import write_service
from governance.deployments.choices import Status
from governance.deployments.models import DeploymentRequest, UsageReport
from governance.deployments.services.evidence import deployment_evidence_refresh, finding_keys, validate_facts
from governance.deployments.services.notifications import notify_threshold_crossed
from governance.deployments.services.transitions import Actor, deployment_lock
from governance.licenses.choices import FACTS_ASSUMED, Severity

logger = logging.getLogger(__name__)

USAGE_STATUSES = (Status.SUBMITTED, Status.IN_REVIEW, Status.APPROVED)
# Severities a reviewer must hear about when usage newly triggers them.
FLAGGED_SEVERITIES = (Severity.BLOCKER, Severity.APPROVAL, Severity.OBLIGATION)


@write_service
def usage_report_record(
    *,
    deployment: DeploymentRequest,
    actor: User | None,
    month: str,
    monthly_active_users: int,
    revenue: dict[str, Any] | None,
) -> UsageReport:
    """Record a month's usage; re-evaluate; flag the request when a license threshold is crossed.
    Only a live request takes usage: a draft is not deployed, and a closed request's facts are
    the record of what was decided."""
    with transaction.atomic():
        deployment = deployment_lock(deployment)
        if deployment.status not in USAGE_STATUSES:
            raise ConflictError(
                f"a {deployment.status} request takes no usage reports",
                extra={"fields": {"status": [f"usage is reported on {', '.join(USAGE_STATUSES)} requests"]}},
            )
        before = finding_keys((deployment.evidence or {}).get("licenses", []))
        facts = dict(deployment.facts)
        facts["monthly_active_users"] = monthly_active_users
        if revenue is not None:
            facts["monthly_revenue"] = {"amount": revenue["amount"], "currency": revenue["currency"]}
        validate_facts(facts)
        deployment.facts = facts
        deployment.save(update_fields=["facts", "updated_at"])
        report = UsageReport.objects.create(
            request=deployment,
            month=month,
            monthly_active_users=monthly_active_users,
            revenue_amount=Decimal(str(revenue["amount"])) if revenue else None,
            revenue_currency=revenue["currency"] if revenue else "",
            reported_by=actor,
        )
        actor_ref: Actor = actor if actor is not None else "system:usage"
        # A report that changes no finding is recorded, but voids nobody's sign-off.
        deployment_evidence_refresh(deployment, actor_ref, f"usage report {month}", only_if_findings_change=True)
        crossed = sorted(
            {
                f"{license_key}:{code}:{severity}"
                for license_key, code, severity, _clause in finding_keys(
                    (deployment.evidence or {}).get("licenses", [])
                )
                - before
                if severity in FLAGGED_SEVERITIES and code != FACTS_ASSUMED
            }
        )
        report.crossed = crossed
        report.save(update_fields=["crossed", "updated_at"])
        audit_record(
            actor=actor_ref,
            action=AuditAction.DEPLOYMENT_USAGE_REPORTED,
            obj=deployment,
            data={"month": month, "monthly_active_users": monthly_active_users, "revenue": revenue, "crossed": crossed},
        )
        if crossed:
            deployment.flagged = True
            deployment.flag_reason = f"usage {month} crossed license terms: {', '.join(crossed)}"
            deployment.save(update_fields=["flagged", "flag_reason", "updated_at"])
            # One message about the crossing, not a second one about the return to review.
            deployment.notified_by_caller = True  # type: ignore[attr-defined]
            flagged = deployment
            transaction.on_commit(lambda: notify_threshold_crossed(flagged, flagged.flag_reason))
    return report
