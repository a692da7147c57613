"""Reads for the gate: the stored state one check needs (a few indexed queries), and the
decision log as each user may see it."""

from __future__ import annotations

import uuid
from typing import Any

import django_filters
from django.db import connection
from django.db.models import QuerySet

from governance.approvals.selectors import APPROVAL_STATE_COLUMNS, APPROVAL_STATE_JOINS, approval_state_from_row
from governance.core.errors import PermissionDeniedError
from governance.core.filters import UtcIsoDateTimeFilter
from governance.core.models import ApiToken
from governance.core.prepared import fetch_all_prepared, fetch_one_prepared, instance_from_row
from governance.core.roles import Role, has_role
from governance.core.tokens import (
    PREFIX_LENGTH,
    TOKEN_FROM,
    TOKEN_ROW_PREFIXES,
    TOKEN_SELECT,
    api_token_accept,
    token_covers_deployment,
    token_covers_environment,
    token_from_row,
)
from governance.deployments.models import DeploymentRequest
from governance.deployments.readiness import SIGNING_ROLES, ReadinessState, Signature
from governance.deployments.selectors import deployments_visible_to
from governance.gate.choices import GateOutcome
from governance.gate.conditions import GateState
from governance.gate.models import GateDecision

# The gate's read: the request's columns the conditions need, each role's approving sign-off
# (the live one first, else the latest voided one) and the stored
# verification of the completed approval packet (approvals.selectors.APPROVAL_STATE_*), in ONE
# statement. Hand-written because compiling the equivalent ORM subqueries costs more CPU per
# check than the query itself; the unique index on code and the foreign-key indexes of the
# sign-off and usage tables serve it. Plain SQL that PostgreSQL and SQLite both run.
_GATE_SQL = f"""
SELECT d.id, d.code, d.team_id, d.status, d.approval_expires_at, d.environments, d.evidence,
       d.evidence_digest, d.flagged, d.flag_reason,
       legal.evidence_digest AS gate_legal_digest,
       CASE WHEN legal.voided_at IS NULL THEN 0 ELSE 1 END AS gate_legal_voided,
       engineering.evidence_digest AS gate_engineering_digest,
       CASE WHEN engineering.voided_at IS NULL THEN 0 ELSE 1 END AS gate_engineering_voided,{APPROVAL_STATE_COLUMNS}
FROM deployments_deploymentrequest d
LEFT JOIN deployments_signoff legal ON legal.id = (
    SELECT r.id FROM deployments_signoff r
    WHERE r.deployment_id = d.id AND r.role = 'legal' AND r.decision = 'approve'
    ORDER BY CASE WHEN r.voided_at IS NULL THEN 0 ELSE 1 END, r.created_at DESC LIMIT 1)
LEFT JOIN deployments_signoff engineering ON engineering.id = (
    SELECT r.id FROM deployments_signoff r
    WHERE r.deployment_id = d.id AND r.role = 'engineering' AND r.decision = 'approve'
    ORDER BY CASE WHEN r.voided_at IS NULL THEN 0 ELSE 1 END, r.created_at DESC LIMIT 1){APPROVAL_STATE_JOINS}
WHERE d.code = %s
"""  # noqa: S608 (code constants only; values are parameters)


def gate_deployment_for_token(
    token: ApiToken, code: Any, environment: str, preloaded: tuple[Any, DeploymentRequest | None] | None = None
) -> DeploymentRequest:
    """The request a gate token asks about, with the state the gate reads (one query, or none when
    gate_token_and_state read it with the token: `preloaded` is (its code, the request or None));
    403 when the token was not issued for it (or it does not exist: a token learns nothing about
    requests outside its scope)."""
    try:
        code = uuid.UUID(str(code))
    except ValueError:
        code = None
    if preloaded is not None and code is not None and preloaded[0] == code:
        deployment = preloaded[1]
    else:
        row = (
            None
            if code is None
            else fetch_one_prepared(_GATE_SQL, [code if connection.vendor == "postgresql" else code.hex])
        )
        deployment = None if row is None else _deployment_from_row(row)
    if deployment is None or not token_covers_deployment(token, deployment):
        raise PermissionDeniedError(f"this token is not issued for deployment request {code}")
    if not token_covers_environment(token, environment):
        raise PermissionDeniedError(
            f"this token is not issued for environment {environment!r} (only {', '.join(token.environments)})"
        )
    return deployment


# The gate's token and its read in ONE statement (PostgreSQL): each token row with the clear
# token's prefix, its user, and the state of the request the body names (LATERAL: NULLs when there
# is no such request). The token is then checked by core.tokens.api_token_accept like any other;
# coverage (team, requests, environments) by gate_deployment_for_token.
_GATE_TOKEN_SQL = f"""
SELECT {TOKEN_SELECT}, g.*
FROM {TOKEN_FROM}
LEFT JOIN LATERAL ({_GATE_SQL.replace("%s", "%(code)s")}) g ON TRUE
WHERE t.prefix = %(prefix)s
"""  # noqa: S608 (model columns only; values are parameters)


def gate_token_and_state(clear_text: str, code: uuid.UUID) -> tuple[ApiToken | None, DeploymentRequest | None]:
    """The live token for `clear_text` (None: unknown, revoked, expired or its user inactive) and
    the request `code` with the gate's state (None: no such request), in one round trip. Only
    for PostgreSQL (LATERAL); the token is not yet checked for scope or coverage."""
    candidates = [
        (token_from_row(row), row)
        for row in fetch_all_prepared(_GATE_TOKEN_SQL, {"prefix": clear_text[:PREFIX_LENGTH], "code": code})
    ]
    token = api_token_accept([token for token, _ in candidates], clear_text)
    if token is None:
        return None, None
    row = next(row for candidate, row in candidates if candidate is token)
    if row["id"] is None:
        return token, None
    state = {key: value for key, value in row.items() if not key.startswith(TOKEN_ROW_PREFIXES)}
    return token, _deployment_from_row(state)


def _deployment_from_row(row: dict[str, Any]) -> DeploymentRequest:
    """The request's model instance from the read's columns (the others deferred); the gate's
    extra columns become attributes, as a raw queryset would set them."""
    deployment = instance_from_row(DeploymentRequest, row)
    for name, value in row.items():
        if name not in _REQUEST_COLUMNS:
            setattr(deployment, name, value)
    return deployment


_REQUEST_COLUMNS = frozenset(field.column for field in DeploymentRequest._meta.concrete_fields)


def gate_state(deployment: DeploymentRequest) -> tuple[GateState, dict[str, str | None]]:
    """The state the conditions read (all loaded by gate_deployment_for_token's one statement, the
    stored verification of the signed approval packet included: the PDF is not parsed), and the
    packet reference for the answer. The readiness part is what deployments.selectors'
    deployment_readiness_state builds with the ORM (a parity test runs both on the same data)."""
    verified = approval_state_from_row(deployment)
    signatures: dict[str, Signature] = {}
    for role in SIGNING_ROLES:
        digest = getattr(deployment, f"gate_{role}_digest", None)
        if digest is not None:
            voided = bool(getattr(deployment, f"gate_{role}_voided", 0))
            signatures[role] = Signature(role=role, evidence_digest=digest, voided=voided)
    packet_valid = (
        None
        if verified is None
        else {
            role: bool(getattr(verified, f"{role}_valid"))
            and role in signatures
            and verified.evidence_digest == signatures[role].evidence_digest
            for role in SIGNING_ROLES
        }
    )
    approval: dict[str, str | None] = {
        "pdf_url": verified.pdf_url if verified else None,
        "sha256": verified.pdf_sha256 if verified else None,
    }
    state = GateState(
        status=deployment.status,
        approval_expires_at=deployment.approval_expires_at,
        environments=list(deployment.environments or []),
        readiness=ReadinessState(
            evidence=deployment.evidence or {},
            evidence_digest=deployment.evidence_digest,
            signatures=signatures,
            flagged=deployment.flagged,
            flag_reason=deployment.flag_reason,
        ),
        packet_valid=packet_valid,
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
    decision = django_filters.ChoiceFilter(choices=GateOutcome.choices)
    environment = django_filters.CharFilter()
    token = django_filters.CharFilter(field_name="token_prefix", help_text="the token's public prefix")
    since = UtcIsoDateTimeFilter(field_name="created_at", lookup_expr="gte")
    until = UtcIsoDateTimeFilter(field_name="created_at", lookup_expr="lt")

    class Meta:
        model = GateDecision
        fields = ["deployment", "decision", "environment", "token", "since", "until"]


def ci_tokens_visible_to(user: Any) -> QuerySet[ApiToken]:
    """Team tokens: an admin sees all, a team lead those of the teams they lead."""
    tokens = ApiToken.objects.filter(team__isnull=False).select_related("team")
    if has_role(user, Role.ADMIN):
        return tokens
    return tokens.filter(team__leads=user)
