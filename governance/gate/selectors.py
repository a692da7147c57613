"""Reads for the gate: the stored state one check needs (a few indexed queries), and the
decision log as each user may see it."""

from __future__ import annotations

from typing import Any

import django_filters
from django.db.models import QuerySet

from governance.core.errors import PermissionDeniedError
from governance.core.models import ApiToken
from governance.core.roles import Role, has_role
from governance.core.tokens import token_covers_deployment, token_covers_environment
from governance.deployments.choices import ReviewVerdict
from governance.deployments.models import DeploymentRequest, ReviewDecision, UsageReport
from governance.deployments.selectors import deployments_visible_to
from governance.gate.choices import Decision
from governance.gate.conditions import GateState, Signature
from governance.gate.models import GateDecision

# The columns the gate reads; the rest of the row (facts, serving plan as typed) stays on disk.
_GATE_COLUMNS = ("code", "team_id", "status", "approved_at", "approval_expires_at", "environments", "evidence",
                 "evidence_digest", "flagged", "flag_reason")  # fmt: skip


def gate_deployment_for_token(token: ApiToken, code: Any, environment: str) -> DeploymentRequest:
    """The request a gate token asks about; 403 when the token was not issued for it (or it does
    not exist: a token learns nothing about requests outside its scope)."""
    deployment = DeploymentRequest.objects.only(*_GATE_COLUMNS).filter(code=code).first()  # unique index on code
    if deployment is None or not token_covers_deployment(token, deployment):
        raise PermissionDeniedError(f"this token is not issued for deployment request {code}")
    if not token_covers_environment(token, environment):
        raise PermissionDeniedError(
            f"this token is not issued for environment {environment!r} (only {', '.join(token.environments)})"
        )
    return deployment


def _signoff_signatures(deployment: DeploymentRequest) -> dict[str, Signature]:
    """Each role's approving sign-off: the live one, else the latest voided one (which covers
    older evidence, so the gate reports it stale). The ReviewDecision FK index serves this."""
    signatures: dict[str, Signature] = {}
    rows = (
        ReviewDecision.objects.filter(request_id=deployment.pk, verdict=ReviewVerdict.APPROVE)
        .order_by("created_at")
        .values_list("role", "evidence_digest", "voided_at")
    )
    live: set[str] = set()
    for role, digest, voided_at in rows:
        if voided_at is None:
            live.add(role)
        elif role in live:
            continue
        signatures[role] = Signature(role=role, valid=True, evidence_digest=digest, voided=voided_at is not None)
    return signatures


def gate_state(deployment: DeploymentRequest) -> tuple[GateState, dict[str, str | None]]:
    """The state the conditions read, and the approval packet reference for the answer."""
    signatures = _signoff_signatures(deployment)
    approval: dict[str, str | None] = {"pdf_url": None, "sha256": None}
    latest = (
        UsageReport.objects.filter(request_id=deployment.pk)
        .order_by("-created_at")
        .values_list("month", "crossed", "created_at")
        .first()
    )
    state = GateState(
        status=deployment.status,
        approval_expires_at=deployment.approval_expires_at,
        approved_at=deployment.approved_at,
        environments=list(deployment.environments or []),
        evidence=deployment.evidence or {},
        evidence_digest=deployment.evidence_digest,
        flagged=deployment.flagged,
        flag_reason=deployment.flag_reason,
        signatures=signatures,
        signature_source="sign-off",
        latest_usage_month=latest[0] if latest else "",
        latest_usage_crossed=list(latest[1] or []) if latest else [],
        latest_usage_at=latest[2] if latest else None,
    )
    return state, approval


def gate_decisions_visible_to(user: Any) -> QuerySet[GateDecision]:
    """Decisions on the requests the user may see (an auditor or admin sees all)."""
    decisions = GateDecision.objects.select_related("deployment")
    if has_role(user, Role.AUDITOR, Role.ADMIN):
        return decisions
    return decisions.filter(deployment__in=deployments_visible_to(user).values("pk"))


class GateDecisionFilter(django_filters.FilterSet):
    deployment = django_filters.UUIDFilter(field_name="deployment__code")
    decision = django_filters.ChoiceFilter(choices=Decision.choices)
    environment = django_filters.CharFilter()
    token = django_filters.CharFilter(field_name="token_prefix", help_text="the token's public prefix")
    since = django_filters.IsoDateTimeFilter(field_name="created_at", lookup_expr="gte")
    until = django_filters.IsoDateTimeFilter(field_name="created_at", lookup_expr="lt")

    class Meta:
        model = GateDecision
        fields = ["deployment", "decision", "environment", "token", "since", "until"]


def ci_tokens_visible_to(user: Any) -> QuerySet[ApiToken]:
    """Team tokens: an admin sees all, a team lead those of the teams they lead."""
    tokens = ApiToken.objects.filter(team__isnull=False).select_related("team")
    if has_role(user, Role.ADMIN):
        return tokens
    return tokens.filter(team__leads=user)
