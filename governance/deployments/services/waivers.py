"""Waivers: a legal reviewer accepts a finding for a while; when the waiver ends the finding is back.

A finding of severity `blocker` (a prohibited use, a territorial or non-commercial term) is not one
reviewer's to waive: the first legal reviewer proposes the waiver with the licensor's written
permission attached (its SHA-256 goes into the evidence), and it is in force only once a second,
distinct legal reviewer confirms it. Other waivers are in force when granted."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from governance.audit.actions import AuditAction
from governance.audit.services import audit_record
from governance.core.errors import ConflictError, PermissionDeniedError, invalid_input
from governance.core.names import printed_name_problem
from governance.core.roles import Role
from governance.core.services import write_service
from governance.deployments.choices import TERMINAL
from governance.deployments.models import DeploymentRequest, Waiver
from governance.deployments.services.evidence import deployment_evidence_refresh
from governance.deployments.services.notifications import notify_waiver_proposed
from governance.deployments.services.transitions import SYSTEM, deployment_lock, require_reviewer
from governance.licenses.choices import Severity


@dataclass(frozen=True, slots=True)
class PermissionDocument:
    """The licensor's written permission, as uploaded."""

    name: str
    content: bytes

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.content).hexdigest()


def _matching_findings(deployment: DeploymentRequest, license_key: str, finding_code: str, clause: str) -> list[Any]:
    return [
        finding
        for evaluation in (deployment.evidence or {}).get("licenses", [])
        if evaluation["license"] == license_key
        for finding in evaluation["findings"]
        if finding["code"] == finding_code and clause in ("", finding["clause"])
    ]


def _check_permission(permission: PermissionDocument | None) -> PermissionDocument:
    field = "permission_document"
    if permission is None:
        raise invalid_input(field, "a waiver of a blocker needs the licensor's written permission attached")
    if not permission.content:
        raise invalid_input(field, "the uploaded document is empty")
    limit = settings.APPROVALS_MAX_UPLOAD_BYTES
    if len(permission.content) > limit:
        raise invalid_input(field, f"larger than {limit} bytes")
    if not permission.name.strip() or len(permission.name) > 255:
        raise invalid_input(field, "needs a file name of at most 255 characters")
    if (problem := printed_name_problem(permission.name)) is not None:
        raise invalid_input(field, f"the file name {problem}")  # the packet prints it
    return permission


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
    permission: PermissionDocument | None = None,
) -> Waiver:
    """Grant a waiver, or for a blocker propose one (in force after `waiver_confirm`)."""
    if not reason.strip():
        raise invalid_input("reason", "a waiver needs a reason")
    if expires_at <= timezone.now():
        raise invalid_input("expires_at", "must be in the future")
    with transaction.atomic():
        deployment = deployment_lock(deployment)
        require_reviewer(deployment, actor, Role.LEGAL_REVIEWER)
        matched = _matching_findings(deployment, license_key, finding_code, clause)
        if not matched:
            raise invalid_input("finding_code", f"no finding {finding_code} of {license_key} on this request")
        blocker = any(finding["severity"] == Severity.BLOCKER for finding in matched)
        if blocker and not clause:
            clauses = sorted({finding["clause"] for finding in matched})
            raise invalid_input(
                "clause", f"a waiver of a blocker names the clause it waives (one of: {'; '.join(clauses)})"
            )
        if blocker or permission is not None:
            permission = _check_permission(permission)
        waiver = Waiver.objects.create(
            request=deployment,
            license_key=license_key,
            finding_code=finding_code,
            clause=clause,
            severity=Severity.BLOCKER if blocker else matched[0]["severity"],
            reason=reason.strip(),
            expires_at=expires_at,
            granted_by=actor,
            needs_confirmation=blocker,
            permission_name=permission.name if permission else "",
            permission_size=len(permission.content) if permission else None,
            permission_sha256=permission.sha256 if permission else "",
            permission_content=permission.content if permission else None,
        )
        data = {
            "waiver": str(waiver.code),
            "license": license_key,
            "code": finding_code,
            "clause": clause,
            "severity": waiver.severity,
            "reason": waiver.reason,
            "expires_at": expires_at.isoformat(),
            "permission": waiver_permission(waiver),
        }
        if blocker:
            audit_record(actor=actor, action=AuditAction.WAIVER_PROPOSED, obj=deployment, data=data)
            proposed = waiver
            transaction.on_commit(lambda: notify_waiver_proposed(proposed))
        else:
            audit_record(actor=actor, action=AuditAction.WAIVER_GRANTED, obj=deployment, data=data)
            deployment_evidence_refresh(deployment, actor, f"waiver for {finding_code} granted")
    return waiver


@write_service
def waiver_confirm(*, deployment: DeploymentRequest, waiver: Waiver, actor: User) -> Waiver:
    """A second legal reviewer puts a proposed waiver of a blocker in force."""
    with transaction.atomic():
        deployment = deployment_lock(deployment)
        require_reviewer(deployment, actor, Role.LEGAL_REVIEWER)
        waiver = Waiver.objects.select_for_update().get(pk=waiver.pk, request=deployment)
        if not waiver.needs_confirmation:
            raise ConflictError("this waiver is not of a blocker and needs no confirmation")
        if waiver.confirmed_at is not None:
            raise ConflictError(f"this waiver was already confirmed by {waiver.confirmed_by}")
        if waiver.expires_at <= timezone.now():
            raise ConflictError("this waiver has expired; propose a new one")
        if not waiver.permission_sha256:
            raise ConflictError(
                "this waiver has no licensor's permission attached (granted before two reviewers were required); "
                "propose it again with the permission document"
            )
        if waiver.granted_by_id == actor.pk:
            raise PermissionDeniedError(
                "the legal reviewer who proposed a waiver of a blocker cannot confirm it; a second legal reviewer must"
            )
        waiver.confirmed_by, waiver.confirmed_at = actor, timezone.now()
        waiver.save(update_fields=["confirmed_by", "confirmed_at", "updated_at"])
        audit_record(
            actor=actor,
            action=AuditAction.WAIVER_CONFIRMED,
            obj=deployment,
            data={
                "waiver": str(waiver.code),
                "license": waiver.license_key,
                "code": waiver.finding_code,
                "clause": waiver.clause,
                "proposed_by": waiver.granted_by.username,
                "permission": waiver_permission(waiver),
            },
        )
        deployment_evidence_refresh(deployment, actor, f"waiver for {waiver.finding_code} confirmed")
    return waiver


def waiver_permission(waiver: Waiver) -> dict[str, Any] | None:
    """What the evidence, the API and the audit trail say about the attached permission."""
    if not waiver.permission_sha256:
        return None
    return {"name": waiver.permission_name, "size": waiver.permission_size, "sha256": waiver.permission_sha256}


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
            if deployment.status not in TERMINAL:
                deployment_evidence_refresh(deployment, SYSTEM, f"waiver for {waiver.finding_code} expired")
            count += 1
    return count
