"""Every write to deployment requests. Each runs in one transaction, locks the request row
(select_for_update) and writes its audit events in that transaction; Celery work and e-mail
are queued with transaction.on_commit."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.mail import send_mail
from django.db import transaction
from django.utils import timezone

from governance.artifacts.models import ModelArtifact
from governance.audit.actions import AuditAction
from governance.audit.services import audit_record
from governance.capacity.models import CapacityPlan
from governance.capacity.services import capacity_findings, capacity_plan_request
from governance.core.canonical import canonical_sha256
from governance.core.errors import ApplicationError, ConflictError, PermissionDeniedError, invalid_input
from governance.core.roles import Role, has_role
from governance.deployments.choices import (
    EDITABLE,
    TRANSITIONS,
    ObligationStatus,
    ReviewRole,
    ReviewVerdict,
    Status,
)
from governance.deployments.models import DeploymentRequest, ObligationItem, ReviewDecision, UsageReport, Waiver
from governance.deployments.selectors import latest_capacity_plan
from governance.evaluations.evals import eval_evidence, eval_findings
from governance.licenses.engine import ENGINE_VERSION
from governance.licenses.facts import FactsError
from governance.licenses.selectors import license_evaluate
from governance.licenses.services import license_evaluation_store

logger = logging.getLogger(__name__)

Actor = User | str
SYSTEM = "system:deployments"
# Hooks run after a request is submitted or its serving plan changes (the eval-run app adds one).
SUBMIT_HOOKS: list[Callable[[DeploymentRequest, Any], None]] = []


def _lock(request: DeploymentRequest) -> DeploymentRequest:
    return DeploymentRequest.objects.select_for_update().select_related("artifact", "team").get(pk=request.pk)


def _transition(request: DeploymentRequest, to: str, actor: Actor, reason: str) -> None:
    """The only place a status changes. The row must be locked by the caller's transaction."""
    if to not in TRANSITIONS[request.status]:
        raise ConflictError(
            f"a {request.status} request cannot become {to}",
            extra={
                "fields": {
                    "status": [f"allowed from {request.status}: {', '.join(TRANSITIONS[request.status]) or 'none'}"]
                }
            },
        )
    previous = request.status
    request.status = to
    now = timezone.now()
    if to == Status.SUBMITTED:
        request.submitted_at = now
    if to == Status.APPROVED:
        request.approved_at = now
        request.approval_expires_at = now + timedelta(days=settings.DEPLOYMENT_APPROVAL_VALIDITY_DAYS)
        request.flagged, request.flag_reason = False, ""
    request.save(update_fields=["status", "submitted_at", "approved_at", "approval_expires_at", "flagged",
                                "flag_reason", "updated_at"])  # fmt: skip
    audit_record(
        actor=actor,
        action=AuditAction.DEPLOYMENT_TRANSITIONED,
        obj=request,
        data={"from": previous, "to": to, "reason": reason, "evidence_digest": request.evidence_digest},
    )


# --- validation -------------------------------------------------------------------------------


def validate_facts(facts: Any) -> None:
    """The same rules as POST /api/v1/licenses/evaluate."""
    from governance.licenses.facts import normalize_facts
    from governance.licenses.selectors import fx_table

    try:
        normalize_facts(facts, known_currencies=fx_table().currencies)
    except FactsError as exc:
        raise ApplicationError(
            "Invalid input. " + "; ".join(f"{k}: {v}" for k, v in exc.fields.items()),
            extra={"fields": dict(exc.fields.items())},
        ) from None


def planner_inputs(request: DeploymentRequest) -> dict[str, Any]:
    artifact = request.artifact
    plan = request.serving_plan
    inputs: dict[str, Any] = {
        "model": artifact.architecture_key or artifact.config,
        "precision": plan["precision"],
        "gpu": plan["gpu"],
        "max_model_len": plan.get("max_model_len"),
        "concurrency": plan.get("concurrency", 1),
        "gpu_memory_utilization": plan.get("gpu_memory_utilization", 0.9),
        "kv_dtype": plan.get("kv_dtype", "bf16"),
        "model_path": artifact.source_repo,
    }
    for name in ("tp", "pp", "ep", "dp"):
        if plan.get(name):
            inputs[name] = plan[name]
    return inputs


# --- evidence -----------------------------------------------------------------------------------


def _evaluate(request: DeploymentRequest, actor: Actor) -> list[dict[str, Any]]:
    """Evaluate the facts under the current version of every license in the artifact's lineage."""
    results = []
    for pinned in request.artifact.license_versions():
        version, evaluation = license_evaluate(pinned.license.key, request.facts)
        license_evaluation_store(version=version, subject=request, evaluation=evaluation, actor=actor)
        results.append(
            {
                "license": version.license.key,
                "version": version.version,
                "text_sha256": version.digest,
                "decision": evaluation.decision,
                "engine_version": ENGINE_VERSION,
                "findings": [finding.as_dict() for finding in evaluation.findings],
            }
        )
    return results


def _active_waivers(request: DeploymentRequest, now: datetime) -> list[Waiver]:
    return list(request.waivers.filter(expires_at__gt=now).order_by("created_at"))


def _is_waived(license_key: str, finding: dict[str, Any], waivers: list[Waiver]) -> bool:
    return any(
        w.license_key == license_key and w.finding_code == finding["code"] and w.clause in ("", finding["clause"])
        for w in waivers
    )


def _sync_obligations(request: DeploymentRequest, evaluations: list[dict[str, Any]]) -> None:
    wanted: dict[str, tuple[str, dict[str, Any]]] = {}
    for evaluation in evaluations:
        for finding in evaluation["findings"]:
            if finding["severity"] == "obligation":
                fingerprint = canonical_sha256(
                    [evaluation["license"], finding["code"], finding["clause"], finding["params"]]
                )
                wanted[fingerprint] = (evaluation["license"], finding)
    existing = {item.fingerprint: item for item in request.obligations.all()}
    for fingerprint, (license_key, finding) in wanted.items():
        item = existing.get(fingerprint)
        if item is None:
            ObligationItem.objects.create(
                request=request,
                license_key=license_key,
                finding_code=finding["code"],
                clause=finding["clause"],
                params=finding["params"],
                message=finding["message"],
                fingerprint=fingerprint,
            )
        elif item.status == ObligationStatus.SUPERSEDED:
            item.status = ObligationStatus.OPEN
            item.save(update_fields=["status", "updated_at"])
    for fingerprint, item in existing.items():
        if fingerprint not in wanted and item.status != ObligationStatus.SUPERSEDED:
            item.status = ObligationStatus.SUPERSEDED
            item.save(update_fields=["status", "updated_at"])


def _capacity_evidence(request: DeploymentRequest) -> dict[str, Any] | None:
    stored = latest_capacity_plan(request)
    if stored is None:
        return None
    return {"plan": str(stored.code), "status": stored.status, "fits": stored.fits, "result": stored.result,
            "planner_version": stored.planner_version}  # fmt: skip


def build_evidence(request: DeploymentRequest, evaluations: list[dict[str, Any]]) -> dict[str, Any]:
    """The evidence document (DESIGN.md): its canonical SHA-256 is the evidence digest."""
    now = timezone.now()
    artifact: ModelArtifact = request.artifact
    return {
        "request": {
            "code": str(request.code),
            "team": request.team.name,
            "product_name": request.product_name,
            "environments": request.environments,
            "facts": request.facts,
            "target_cluster": request.target_cluster,
        },
        "artifact": {
            "code": str(artifact.code),
            "name": artifact.name,
            "source_repo": artifact.source_repo,
            "revision": artifact.revision,
            "weights_digest": artifact.weights_digest,
            "derivation": artifact.derivation,
            "parent": str(artifact.parent.code) if artifact.parent else None,
        },
        "licenses": evaluations,
        "waivers": [
            {
                "license": w.license_key,
                "code": w.finding_code,
                "clause": w.clause,
                "reason": w.reason,
                "expires_at": w.expires_at.isoformat(),
            }
            for w in _active_waivers(request, now)
        ],
        "obligations": [
            {
                "license": o.license_key,
                "code": o.finding_code,
                "clause": o.clause,
                "status": o.status,
                "how_met": o.how_met,
            }
            for o in request.obligations.exclude(status=ObligationStatus.SUPERSEDED).order_by("fingerprint")
        ],
        "capacity_plan": _capacity_evidence(request),
        "eval_results": eval_evidence(request),
        "serving_envelope": request.serving_plan,
    }


def _refresh(request: DeploymentRequest, actor: Actor, reason: str) -> bool:
    """Re-evaluate and recompute the evidence (row locked). When the digest changes, reviewers'
    decisions on the old digest are voided and an approved request returns to review.
    Returns True when the evidence changed."""
    evaluations = _evaluate(request, actor)
    _sync_obligations(request, evaluations)
    evidence = build_evidence(request, evaluations)
    digest = canonical_sha256(evidence)
    if digest == request.evidence_digest:
        return False
    previous = request.evidence_digest
    request.evidence, request.evidence_digest = evidence, digest
    request.save(update_fields=["evidence", "evidence_digest", "updated_at"])
    now = timezone.now()
    for decision in request.decisions.filter(voided_at__isnull=True).exclude(evidence_digest=digest):
        decision.voided_at, decision.void_reason = now, reason
        decision.save(update_fields=["voided_at", "void_reason", "updated_at"])
        audit_record(
            actor=actor,
            action=AuditAction.SIGNOFF_VOIDED,
            obj=request,
            data={"role": decision.role, "reviewer": decision.reviewer.username, "reason": reason},
        )
    audit_record(actor=actor, action=AuditAction.DEPLOYMENT_REEVALUATED, obj=request,
                 data={"reason": reason, "previous_digest": previous, "evidence_digest": digest,
                       "decisions": {e["license"]: e["decision"] for e in evaluations}})  # fmt: skip
    if request.status == Status.APPROVED:
        _transition(request, Status.IN_REVIEW, actor, f"evidence changed: {reason}")
    return True


def _queue_capacity_plan(request: DeploymentRequest, actor: Actor) -> CapacityPlan:
    return capacity_plan_request(inputs=planner_inputs(request), actor=actor if isinstance(actor, User) else None,
                                 subject=request)  # fmt: skip


# --- requester actions --------------------------------------------------------------------------


def _require_team_requester(request: DeploymentRequest, actor: User) -> None:
    if not has_role(actor, Role.REQUESTER) or not request.team.members.filter(pk=actor.pk).exists():
        raise PermissionDeniedError("only a requester of the owning team can do this")


def deployment_create(*, actor: User, data: dict[str, Any]) -> DeploymentRequest:
    validate_facts(data["facts"])
    team, artifact = data["team"], data["artifact"]
    if not team.members.filter(pk=actor.pk).exists():
        raise invalid_input("team", "you are not a member of this team")
    with transaction.atomic():
        request = DeploymentRequest.objects.create(
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
            obj=request,
            data={"artifact": str(artifact.code), "product_name": request.product_name},
        )
        _refresh(_lock(request), actor, "created")
    return DeploymentRequest.objects.get(pk=request.pk)


EVIDENCE_FIELDS = ("facts", "serving_plan", "artifact", "product_name", "environments", "target_cluster")


def deployment_update(*, request: DeploymentRequest, actor: User, changes: dict[str, Any]) -> DeploymentRequest:
    if "facts" in changes:
        validate_facts(changes["facts"])
    with transaction.atomic():
        request = _lock(request)
        _require_team_requester(request, actor)
        if request.status not in EDITABLE:
            raise ConflictError(
                f"a {request.status} request cannot be edited; open a new request",
                extra={"fields": {"status": [request.status]}},
            )
        changed = [name for name in EVIDENCE_FIELDS if name in changes and getattr(request, name) != changes[name]]
        if not changed:
            return request
        for name in changed:
            setattr(request, name, changes[name])
        request.save()
        audit_record(actor=actor, action=AuditAction.DEPLOYMENT_UPDATED, obj=request, data={"fields": changed})
        reason = "edited: " + ", ".join(changed)
        if request.status == Status.SUBMITTED:
            _transition(request, Status.IN_REVIEW, actor, reason)
        _refresh(request, actor, reason)
        if request.status != Status.DRAFT and {"serving_plan", "artifact"} & set(changed):
            _queue_capacity_plan(request, actor)
            for hook in SUBMIT_HOOKS:
                hook(request, actor)
    return DeploymentRequest.objects.get(pk=request.pk)


def deployment_submit(*, request: DeploymentRequest, actor: User) -> DeploymentRequest:
    with transaction.atomic():
        request = _lock(request)
        _require_team_requester(request, actor)
        _transition(request, Status.SUBMITTED, actor, "submitted for review")
        _refresh(request, actor, "submitted")
        _queue_capacity_plan(request, actor)
        for hook in SUBMIT_HOOKS:
            hook(request, actor)
    return DeploymentRequest.objects.get(pk=request.pk)


def obligation_acknowledge(*, item: ObligationItem, actor: User, how_met: str) -> ObligationItem:
    if not how_met.strip():
        raise invalid_input("how_met", "say how the obligation is met (e.g. where the notice is displayed)")
    with transaction.atomic():
        request = _lock(item.request)
        _require_team_requester(request, actor)
        item = ObligationItem.objects.select_for_update().get(pk=item.pk)
        if item.status not in (ObligationStatus.OPEN, ObligationStatus.REJECTED, ObligationStatus.ACKNOWLEDGED):
            raise ConflictError(f"a {item.status} obligation cannot be acknowledged")
        item.status, item.how_met, item.acknowledged_by = ObligationStatus.ACKNOWLEDGED, how_met.strip(), actor
        item.save(update_fields=["status", "how_met", "acknowledged_by", "updated_at"])
        audit_record(
            actor=actor,
            action=AuditAction.OBLIGATION_ACKNOWLEDGED,
            obj=request,
            data={"obligation": str(item.code), "code": item.finding_code, "how_met": item.how_met},
        )
        _refresh(request, actor, f"obligation {item.finding_code} acknowledged")
    return item


# --- reviewer actions ---------------------------------------------------------------------------


def _require_reviewer(request: DeploymentRequest, actor: User, *roles: str) -> None:
    if not has_role(actor, *roles):
        raise PermissionDeniedError(f"this needs the role {' or '.join(roles)}")
    if actor.pk == request.requester_id:
        raise PermissionDeniedError("nobody reviews their own request (separation of duties)")


def deployment_start_review(*, request: DeploymentRequest, actor: User) -> DeploymentRequest:
    with transaction.atomic():
        request = _lock(request)
        _require_reviewer(request, actor, Role.LEGAL_REVIEWER, Role.ENGINEERING_REVIEWER)
        _transition(request, Status.IN_REVIEW, actor, "review started")
    return request


def obligation_review(*, item: ObligationItem, actor: User, accept: bool, comment: str = "") -> ObligationItem:
    with transaction.atomic():
        request = _lock(item.request)
        _require_reviewer(request, actor, Role.LEGAL_REVIEWER)
        item = ObligationItem.objects.select_for_update().get(pk=item.pk)
        if item.status != ObligationStatus.ACKNOWLEDGED:
            raise ConflictError(
                "only an acknowledged obligation can be accepted or rejected",
                extra={"fields": {"status": [item.status]}},
            )
        item.status = ObligationStatus.ACCEPTED if accept else ObligationStatus.REJECTED
        item.reviewed_by, item.review_comment = actor, comment
        item.save(update_fields=["status", "reviewed_by", "review_comment", "updated_at"])
        audit_record(
            actor=actor,
            action=AuditAction.OBLIGATION_REVIEWED,
            obj=request,
            data={"obligation": str(item.code), "accepted": accept, "comment": comment},
        )
        _refresh(request, actor, f"obligation {item.finding_code} {item.status}")
    return item


def waiver_grant(
    *,
    request: DeploymentRequest,
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
        request = _lock(request)
        _require_reviewer(request, actor, Role.LEGAL_REVIEWER)
        present = any(
            e["license"] == license_key and f["code"] == finding_code and clause in ("", f["clause"])
            for e in (request.evidence or {}).get("licenses", [])
            for f in e["findings"]
        )
        if not present:
            raise invalid_input("finding_code", f"no finding {finding_code} of {license_key} on this request")
        waiver = Waiver.objects.create(
            request=request,
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
            obj=request,
            data={
                "license": license_key,
                "code": finding_code,
                "clause": clause,
                "reason": waiver.reason,
                "expires_at": expires_at.isoformat(),
            },
        )
        _refresh(request, actor, f"waiver for {finding_code} granted")
    return waiver


def deployment_blockers(request: DeploymentRequest, role: str | None = None) -> list[dict[str, Any]]:
    """What stands between this request and approval (the gate uses the same list)."""
    blockers: list[dict[str, Any]] = []
    now = timezone.now()
    if role in (None, ReviewRole.LEGAL):
        waivers = _active_waivers(request, now)
        for evaluation in (request.evidence or {}).get("licenses", []):
            for finding in evaluation["findings"]:
                if finding["severity"] in ("blocker", "approval") and not _is_waived(
                    evaluation["license"], finding, waivers
                ):
                    blockers.append(
                        {
                            "code": finding["code"],
                            "license": evaluation["license"],
                            "message": finding["message"],
                            "severity": finding["severity"],
                        }
                    )
        for item in request.obligations.exclude(status__in=[ObligationStatus.ACCEPTED, ObligationStatus.SUPERSEDED]):
            blockers.append(
                {
                    "code": "obligation.not_accepted",
                    "license": item.license_key,
                    "message": f"{item.finding_code} ({item.clause}) is {item.status}",
                    "severity": "blocker",
                }
            )
    if role in (None, ReviewRole.ENGINEERING):
        stored = latest_capacity_plan(request)
        if stored is None:
            blockers.append({"code": "capacity.missing", "message": "no capacity plan yet", "severity": "blocker"})
        else:
            blockers.extend(capacity_findings(stored))
        blockers.extend(eval_findings(request))
    return blockers


def deployment_review(
    *,
    request: DeploymentRequest,
    actor: User,
    verdict: str,
    evidence_digest: str,
    role: str | None = None,
    comment: str = "",
) -> DeploymentRequest:
    with transaction.atomic():
        request = _lock(request)
        _require_reviewer(request, actor, Role.LEGAL_REVIEWER, Role.ENGINEERING_REVIEWER)
        roles = [r for r, group in ((ReviewRole.LEGAL, Role.LEGAL_REVIEWER),
                                     (ReviewRole.ENGINEERING, Role.ENGINEERING_REVIEWER)) if has_role(actor, group)]  # fmt: skip
        if role is None and len(roles) == 1:
            role = roles[0]
        if role not in roles:
            raise invalid_input("role", f"you review as one of: {', '.join(roles)}")
        if request.status != Status.IN_REVIEW:
            raise ConflictError(
                f"a {request.status} request is not in review", extra={"fields": {"status": [request.status]}}
            )
        if evidence_digest != request.evidence_digest:
            raise ConflictError(
                "the evidence changed since you looked; review it again",
                extra={"fields": {"evidence_digest": [f"current is {request.evidence_digest}"]}},
            )
        if verdict == ReviewVerdict.APPROVE:
            blockers = deployment_blockers(request, role)
            if blockers:
                raise ConflictError(f"{len(blockers)} blocker(s) stand in the way", extra={"blockers": blockers})
        request.decisions.filter(role=role, voided_at__isnull=True).update(
            voided_at=timezone.now(), void_reason="superseded by a newer decision"
        )
        ReviewDecision.objects.create(
            request=request,
            role=role,
            verdict=verdict,
            reviewer=actor,
            evidence_digest=request.evidence_digest,
            comment=comment,
        )
        audit_record(
            actor=actor,
            action=AuditAction.SIGNOFF_RECORDED,
            obj=request,
            data={"role": role, "verdict": verdict, "evidence_digest": request.evidence_digest},
        )
        if verdict == ReviewVerdict.REJECT:
            _transition(request, Status.REJECTED, actor, f"{role} rejected: {comment}")
        else:
            approved_roles = set(
                request.decisions.filter(voided_at__isnull=True, verdict=ReviewVerdict.APPROVE,
                                         evidence_digest=request.evidence_digest).values_list("role", flat=True)
            )  # fmt: skip
            if approved_roles == {ReviewRole.LEGAL, ReviewRole.ENGINEERING}:
                _transition(request, Status.APPROVED, actor, "legal and engineering approved")
    return DeploymentRequest.objects.get(pk=request.pk)


def deployment_revoke(*, request: DeploymentRequest, actor: User, reason: str) -> DeploymentRequest:
    if not reason.strip():
        raise invalid_input("reason", "say why the approval is revoked")
    with transaction.atomic():
        request = _lock(request)
        _require_reviewer(request, actor, Role.LEGAL_REVIEWER, Role.ADMIN)
        _transition(request, Status.REVOKED, actor, reason.strip())
    return request


# --- usage, expiry, re-evaluation (machines and beat) ---------------------------------------------


def usage_report_record(
    *,
    request: DeploymentRequest,
    actor: User | None,
    month: str,
    monthly_active_users: int,
    revenue: dict[str, Any] | None,
) -> UsageReport:
    """Record a month's usage; re-evaluate; flag the request when a license threshold is crossed."""
    with transaction.atomic():
        request = _lock(request)
        before = {(e["license"], f["code"], f["severity"]) for e in (request.evidence or {}).get("licenses", [])
                  for f in e["findings"]}  # fmt: skip
        facts = dict(request.facts)
        facts["monthly_active_users"] = monthly_active_users
        if revenue is not None:
            facts["monthly_revenue"] = {"amount": revenue["amount"], "currency": revenue["currency"]}
        validate_facts(facts)
        request.facts = facts
        request.save(update_fields=["facts", "updated_at"])
        report = UsageReport.objects.create(
            request=request,
            month=month,
            monthly_active_users=monthly_active_users,
            revenue_amount=Decimal(str(revenue["amount"])) if revenue else None,
            revenue_currency=revenue["currency"] if revenue else "",
            reported_by=actor,
        )
        actor_ref: Actor = actor if actor is not None else "system:usage"
        _refresh(request, actor_ref, f"usage report {month}")
        evidence = request.evidence or {}
        after = {(e["license"], f["code"], f["severity"]) for e in evidence.get("licenses", []) for f in e["findings"]}
        crossed = sorted(f"{lic}:{code}:{sev}" for lic, code, sev in after - before
                         if sev in ("blocker", "approval", "obligation") and code != "facts.assumed")  # fmt: skip
        report.crossed = crossed
        report.save(update_fields=["crossed", "updated_at"])
        audit_record(
            actor=actor_ref,
            action=AuditAction.DEPLOYMENT_USAGE_REPORTED,
            obj=request,
            data={"month": month, "monthly_active_users": monthly_active_users, "revenue": revenue, "crossed": crossed},
        )
        if crossed:
            request.flagged = True
            request.flag_reason = f"usage {month} crossed license terms: {', '.join(crossed)}"
            request.save(update_fields=["flagged", "flag_reason", "updated_at"])
            transaction.on_commit(lambda: _notify_reviewers(request, request.flag_reason))
    return report


def _notify_reviewers(request: DeploymentRequest, message: str) -> None:
    recipients = list(
        User.objects.filter(groups__name__in=[Role.LEGAL_REVIEWER, Role.ENGINEERING_REVIEWER], is_active=True)
        .exclude(email="")
        .values_list("email", flat=True)
        .distinct()
    )
    if not recipients:
        return
    try:
        send_mail(f"[governance] {request.product_name} needs review", message, None, recipients)
    except OSError:
        logger.exception("could not notify reviewers", extra={"deployment": str(request.code)})


def deployments_expire_approvals(*, now: datetime | None = None) -> int:
    now = now or timezone.now()
    count = 0
    for pk in DeploymentRequest.objects.filter(status=Status.APPROVED, approval_expires_at__lte=now).values_list(
        "pk", flat=True
    ):
        with transaction.atomic():
            request = DeploymentRequest.objects.select_for_update().get(pk=pk)
            if request.status == Status.APPROVED and request.approval_expires_at and request.approval_expires_at <= now:
                _transition(request, Status.EXPIRED, SYSTEM, "approval validity ended")
                count += 1
    return count


def waivers_expire(*, now: datetime | None = None) -> int:
    """Record expired waivers (audit) and re-open their findings by refreshing the evidence."""
    now = now or timezone.now()
    count = 0
    for waiver_id in Waiver.objects.filter(expired_recorded_at__isnull=True, expires_at__lte=now).values_list(
        "pk", flat=True
    ):
        with transaction.atomic():
            waiver = Waiver.objects.select_for_update().get(pk=waiver_id)
            if waiver.expired_recorded_at is not None:
                continue
            request = _lock(waiver.request)
            waiver.expired_recorded_at = now
            waiver.save(update_fields=["expired_recorded_at", "updated_at"])
            audit_record(
                actor=SYSTEM,
                action=AuditAction.WAIVER_EXPIRED,
                obj=request,
                data={"license": waiver.license_key, "code": waiver.finding_code},
            )
            if request.status not in (Status.REJECTED, Status.REVOKED, Status.EXPIRED):
                _refresh(request, SYSTEM, f"waiver for {waiver.finding_code} expired")
            count += 1
    return count


def deployments_reevaluate(*, license_key: str | None = None, request_ids: list[int] | None = None) -> int:
    """Re-evaluate live requests (e.g. after a new license version): evidence changes send approved
    requests back to review."""
    live = DeploymentRequest.objects.filter(status__in=[Status.SUBMITTED, Status.IN_REVIEW, Status.APPROVED])
    if request_ids is not None:
        live = live.filter(pk__in=request_ids)
    changed = 0
    for request in live.select_related("artifact"):
        if license_key and license_key not in {v.license.key for v in request.artifact.license_versions()}:
            continue
        with transaction.atomic():
            locked = _lock(request)
            reason = f"license {license_key} re-evaluation" if license_key else "license re-evaluation"
            if _refresh(locked, SYSTEM, reason):
                changed += 1
    return changed


def on_capacity_plan_computed(stored: CapacityPlan) -> None:
    """Capacity-app hook: a computed plan is evidence of its request."""
    if stored.subject_type != DeploymentRequest._meta.label_lower:
        return
    request = DeploymentRequest.objects.filter(code=stored.subject_id).first()
    if request is None or request.status in (Status.REJECTED, Status.REVOKED, Status.EXPIRED):
        return
    with transaction.atomic():
        _refresh(_lock(request), "system:capacity", f"capacity plan {stored.status}")


def on_eval_finished(evaluation: Any) -> None:
    """Eval hook: a finished eval run is evidence of its request."""
    request = evaluation.request
    if request is None or request.status in (Status.REJECTED, Status.REVOKED, Status.EXPIRED):
        return
    with transaction.atomic():
        _refresh(_lock(request), "system:evals", f"{evaluation.scheme} eval {evaluation.status}")
