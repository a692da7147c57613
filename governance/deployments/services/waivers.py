"""Waivers: a legal reviewer accepts a finding for a while; when the waiver ends the finding is back."""

from __future__ import annotations

from datetime import datetime

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from governance.audit.actions import AuditAction
from governance.audit.services import audit_record, write_service
from governance.core.errors import invalid_input
from governance.core.roles import Role
from governance.deployments.models import DeploymentRequest, Waiver
from governance.deployments.services.evidence import CLOSED, deployment_evidence_refresh
from governance.deployments.services.transitions import SYSTEM, deployment_lock, require_reviewer


@write_service
def waiver_grant(
    *,
    deployment: DeploymentRequest,
    actor: User,
    license_key: str,
    finding_code: str,
    clause: str,
    reason: str,
    expires_at: datetime,
) -> Waiver:
    if not reason.strip():
        raise invalid_input("reason", "a waiver needs a reason")
    if expires_at <= timezone.now():
        raise invalid_input("expires_at", "must be in the future")
    with transaction.atomic():
        deployment = deployment_lock(deployment)
        require_reviewer(deployment, actor, Role.LEGAL_REVIEWER)
        present = any(
            evaluation["license"] == license_key
            and finding["code"] == finding_code
            and clause in ("", finding["clause"])
            for evaluation in (deployment.evidence or {}).get("licenses", [])
            for finding in evaluation["findings"]
        )
        if not present:
            raise invalid_input("finding_code", f"no finding {finding_code} of {license_key} on this request")
        waiver = Waiver.objects.create(
            request=deployment,
            license_key=license_key,
            finding_code=finding_code,
            clause=clause,
            reason=reason.strip(),
            expires_at=expires_at,
            granted_by=actor,
        )
        audit_record(
            actor=actor,
            action=AuditAction.WAIVER_GRANTED,
            obj=deployment,
            data={
                "license": license_key,
                "code": finding_code,
                "clause": clause,
                "reason": waiver.reason,
                "expires_at": expires_at.isoformat(),
            },
        )
        deployment_evidence_refresh(deployment, actor, f"waiver for {finding_code} granted")
    return waiver


def waivers_expire(*, now: datetime | None = None) -> int:
    """Record expired waivers (audit) and re-open their findings by refreshing the evidence."""
    now = now or timezone.now()
    count = 0
    due = Waiver.objects.filter(expired_recorded_at__isnull=True, expires_at__lte=now)
    for waiver_id, request_id in due.values_list("pk", "request_id"):
        with transaction.atomic():
            # The lock order: the request row before the rows that hang off it.
            deployment = deployment_lock(DeploymentRequest(pk=request_id))
            waiver = Waiver.objects.select_for_update().get(pk=waiver_id)
            if waiver.expired_recorded_at is not None:
                continue
            waiver.expired_recorded_at = now
            waiver.save(update_fields=["expired_recorded_at", "updated_at"])
            audit_record(
                actor=SYSTEM,
                action=AuditAction.WAIVER_EXPIRED,
                obj=deployment,
                data={"license": waiver.license_key, "code": waiver.finding_code},
            )
            if deployment.status not in CLOSED:
                deployment_evidence_refresh(deployment, SYSTEM, f"waiver for {waiver.finding_code} expired")
            count += 1
    return count
