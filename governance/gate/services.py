"""Writes of the gate: CI tokens (issue, revoke) and the decision log. Each writes its audit
event in the same transaction; a gate decision is committed before it is answered."""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from governance.audit.actions import AuditAction
from governance.audit.services import ReferenceChangedError, audit_record_with_insert
from governance.canary.selectors import canary_gate_reasons
from governance.core.errors import ApplicationError, ConflictError, PermissionDeniedError, invalid_input
from governance.core.models import ApiToken, Team
from governance.core.roles import Role, has_role, user_roles
from governance.core.services import write_service
from governance.core.tokens import ENVIRONMENT_PATTERN, TokenScope, api_token_issue, api_token_revoke, validate_scopes
from governance.deployments.models import DeploymentRequest
from governance.gate.choices import GateOutcome
from governance.gate.conditions import GateCheck, evaluate
from governance.gate.models import GateDecision
from governance.gate.selectors import gate_deployment_for_token, gate_state

CI_TOKEN_MAX_LIFETIME = timedelta(days=366)
# What a CI token may hold: the gate and usage reports, nothing else.
CI_SCOPES = frozenset({TokenScope.GATE_CHECK, TokenScope.USAGE_WRITE})


NOT_TOKEN_MANAGER = "only an admin or a lead of this team manages its CI tokens"  # noqa: S105 - a message


def _require_token_manager(actor: User, team: Team) -> None:
    if has_role(actor, Role.ADMIN) or team.leads.filter(pk=actor.pk).exists():
        return
    raise PermissionDeniedError(NOT_TOKEN_MANAGER)


def _ci_service_user(team: Team) -> User:
    """The role-less, password-less user a team's CI tokens act as (never a person's account,
    so a token outlives staff changes and carries none of a person's roles)."""
    username = f"ci-{team.code.hex[:12]}"
    user, created = User.objects.get_or_create(username=username, defaults={"first_name": f"CI of {team.name}"[:150]})
    if created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
    elif user.has_usable_password() or user_roles(user) or user.is_staff or user.is_superuser:
        raise ConflictError(f"the user {username} exists and is not a CI service user")
    return user


@write_service
def ci_token_issue(
    *,
    actor: User,
    team: Team,
    name: str,
    expires_at: datetime,
    scopes: Iterable[str] = (TokenScope.GATE_CHECK,),
    deployment_codes: Iterable[Any] = (),
    environments: Iterable[str] = (),
) -> tuple[ApiToken, str]:
    """A team's CI token; returns the row and the clear token (shown once, never stored)."""
    _require_token_manager(actor, team)  # before any validation: others learn nothing from the errors
    wanted = validate_scopes(scopes)
    if not wanted:
        raise invalid_input("scopes", "give at least one scope")
    if set(wanted) - CI_SCOPES:
        raise invalid_input("scopes", f"a CI token holds only {', '.join(sorted(CI_SCOPES))}")
    now = timezone.now()
    if expires_at <= now:
        raise invalid_input("expires_at", "must be in the future")
    if expires_at > now + CI_TOKEN_MAX_LIFETIME:
        raise invalid_input("expires_at", f"at most {CI_TOKEN_MAX_LIFETIME.days} days ahead")
    environments = sorted(set(environments))
    for environment in environments:
        if not re.match(ENVIRONMENT_PATTERN, environment):
            raise invalid_input("environments", f"{environment!r} is not an environment name")
    codes = sorted({str(code) for code in deployment_codes})
    if codes:
        found = set(
            str(c) for c in DeploymentRequest.objects.filter(team=team, code__in=codes).values_list("code", flat=True)
        )
        missing = [code for code in codes if code not in found]
        if missing:
            raise invalid_input("deployments", f"not requests of team {team.name}: {', '.join(missing)}")
    with transaction.atomic():
        # api_token_issue records api_token.issued (team, scopes, limits) through core's signal.
        issued = api_token_issue(
            user=_ci_service_user(team),
            name=name,
            scopes=wanted,
            expires_at=expires_at,
            team=team,
            deployment_codes=codes,
            environments=environments,
            created_by=actor,
            actor=actor,
        )
    return issued.token, issued.clear_text


@write_service
def ci_token_revoke(*, actor: User, token: ApiToken) -> ApiToken:
    """Revoke a team CI token at once. The token row is locked first and the audit chain head last
    (write_service defers the append), the order a gate check's log takes them in, so a burst of
    checks with the token never deadlocks it; were PostgreSQL still to pick it as a victim, the
    boundary runs it again. Once it has answered, no check with the token is logged or allowed."""
    with transaction.atomic():
        token = ApiToken.objects.select_for_update(of=("self",)).select_related("team").get(pk=token.pk)
        if token.team is None:
            raise PermissionDeniedError("only team CI tokens are revoked here")
        _require_token_manager(actor, token.team)
        if token.revoked_at is not None:
            raise ConflictError("this token is already revoked")
        token = api_token_revoke(token=token, actor=actor)  # records api_token.revoked
    return token


# A decision is logged only while the token and the request still hold what it was decided from:
# how often a request changed under a check may make it decide again before answering 503.
GATE_DECIDE_ATTEMPTS = 3


class GateTokenRevokedError(ApplicationError):
    """The token was revoked (or its user removed) between its check and the decision's log."""

    status = 401


def gate_decide(
    *, token: ApiToken, deployment: DeploymentRequest, check: GateCheck
) -> tuple[GateDecision, dict[str, str | None]]:
    """Decide from stored state, then log the decision and its audit event in one statement.
    An exception here (an unwritable log included) must reach the caller before any answer.

    The log locks the token and request rows before the audit chain head (the documented order)
    and writes only while they hold what was read: a token revoked meanwhile answers
    GateTokenRevokedError (its revoke is on the chain before anything this check could log); a
    request changed meanwhile (an edit's evidence refresh, a transition) is read and decided again."""
    for attempt in range(1, GATE_DECIDE_ATTEMPTS + 1):
        try:
            return _gate_decide_once(token, deployment, check)
        except ReferenceChangedError as changed:
            if changed.field != "deployment":
                raise GateTokenRevokedError("this token was revoked while the check ran") from None
            if attempt == GATE_DECIDE_ATTEMPTS:
                raise
            deployment = gate_deployment_for_token(token, deployment.code, check.environment)
    raise AssertionError("unreachable")  # pragma: no cover


def _gate_decide_once(
    token: ApiToken, deployment: DeploymentRequest, check: GateCheck
) -> tuple[GateDecision, dict[str, str | None]]:
    state, approval = gate_state(deployment)
    required = settings.GATE_REQUIRE_ENGINE_VERSION
    reasons = [reason.as_dict() for reason in evaluate(state, check, timezone.now(), require_engine_version=required)]
    # The canary stage (governance/canary/risk.py): a high-risk production rollout needs a passed canary.
    reasons += [
        reason.as_dict()
        for reason in canary_gate_reasons(
            deployment=deployment,
            environment=check.environment,
            artifact_digest=check.artifact_digest,
            serving=check.serving,
        )
    ]
    outcome = GateOutcome.DENY if reasons else GateOutcome.ALLOW
    decision = GateDecision(
        deployment=deployment,
        token=token,
        token_name=token.name,
        token_prefix=token.prefix,
        environment=check.environment,
        decision=outcome,
        reasons=reasons,
        artifact_digest=check.artifact_digest,
        serving=check.serving,
        evidence_digest=state.readiness.evidence_digest,
        approval_pdf_sha256=approval["sha256"] or "",
    )
    # The decision row and its audit event in one statement (one round trip, its own transaction):
    # both are written, or neither and the caller answers 503 (or decides again, above).
    audit_record_with_insert(
        decision,
        actor=token.user,
        action=AuditAction.GATE_DECISION,
        obj=deployment,
        data={
            "decision_id": str(decision.code),
            "decision": outcome,
            "environment": check.environment,
            "reasons": [r["code"] for r in reasons],
            "artifact_digest": check.artifact_digest,
            "serving": check.serving,
            "evidence_digest": state.readiness.evidence_digest,
            "token": {"name": token.name, "prefix": token.prefix},
        },
        unchanged={
            "token": {"revoked_at": None},
            # what the conditions read from the request row (the rest of the evidence is in its digest)
            "deployment": {
                "status": deployment.status,
                "evidence_digest": deployment.evidence_digest,
                "flagged": deployment.flagged,
                "approval_expires_at": deployment.approval_expires_at,
            },
        },
    )
    return decision, approval
