"""Issuing and checking API tokens, and the one vocabulary of token scopes.

The clear token is shown once, at issue time; only its SHA-256 is stored. A token without
scopes acts as its user (the user's roles decide). A token with scopes is a machine credential:
it reaches only the endpoints of its scopes (`SCOPE_ENDPOINTS`, checked at authentication, so a
view nobody listed is refused to it) and only the requests its team and limits cover.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth.models import User
from django.db import models, transaction
from django.utils import timezone

from governance.core.errors import invalid_input
from governance.core.models import ApiToken, Team
from governance.core.prepared import fetch_all_prepared, instance_from_row
from governance.core.signals import api_token_issued, api_token_revoked

TOKEN_PREFIX = "gov_"  # noqa: S105  (a public marker, not a secret)
PREFIX_LENGTH = 12
LAST_USED_RESOLUTION = timedelta(minutes=1)


class TokenScope(models.TextChoices):
    GATE_CHECK = "gate:check", "Ask the CI gate whether a rollout may proceed"
    USAGE_WRITE = "usage:write", "Post monthly usage reports"


# Every scope and what it is for (the command's help and the admin list them). A scope not listed
# is refused at issue time: a typo would otherwise make a token that silently grants nothing.
TOKEN_SCOPES: dict[str, str] = {str(scope.value): str(scope.label) for scope in TokenScope}

# What each scope reaches, as (URL name, HTTP method). Every other endpoint answers 403 to a
# scoped token: a new view is closed to machines until it is listed here.
SCOPE_ENDPOINTS: dict[str, frozenset[tuple[str, str]]] = {
    TokenScope.GATE_CHECK: frozenset(
        {
            ("v1:gate-check", "POST"),
            # the pipeline starts its canary's analysis and reads it (governance/canary/api.py)
            ("v1:canary-analyses", "POST"),
            ("v1:canary-analysis", "GET"),
            # the same decision for Argo Rollouts, Flagger and GitHub (governance/gate/adapters.py)
            ("v1:gate-argo", "POST"),
            ("v1:gate-flagger", "POST"),
            ("v1:gate-github", "POST"),
        }
    ),
    TokenScope.USAGE_WRITE: frozenset({("v1:deployment-usage", "POST")}),
}
ENVIRONMENT_PATTERN = r"^[a-z][a-z0-9-]{0,39}$"


@dataclass(frozen=True, slots=True)
class IssuedToken:
    token: ApiToken
    clear_text: str


def _digest(clear_text: str) -> str:
    return hashlib.sha256(clear_text.encode()).hexdigest()


def validate_scopes(scopes: Iterable[str]) -> list[str]:
    """The scopes, deduplicated and sorted; an unknown one is a 400 naming the field."""
    wanted = sorted(set(scopes))
    unknown = [scope for scope in wanted if scope not in TokenScope.values]
    if unknown:
        raise invalid_input("scopes", f"unknown scope(s) {', '.join(unknown)}; known: {', '.join(TokenScope.values)}")
    return wanted


def api_token_issue(
    *,
    user: User,
    name: str,
    scopes: Iterable[str] | None = None,
    expires_at: datetime | None = None,
    team: Team | None = None,
    deployment_codes: Iterable[str] = (),
    environments: Iterable[str] = (),
    created_by: User | None = None,
    actor: User | str | None = None,
) -> IssuedToken:
    """Issue a token for `user`; `actor` (default: the system) is who issued it, on the trail."""
    clear_text = TOKEN_PREFIX + secrets.token_urlsafe(32)
    with transaction.atomic():
        token = ApiToken.objects.create(
            user=user,
            name=name,
            prefix=clear_text[:PREFIX_LENGTH],
            digest=_digest(clear_text),
            scopes=validate_scopes(scopes or []),
            expires_at=expires_at,
            team=team,
            deployment_codes=sorted({str(code) for code in deployment_codes}),
            environments=sorted(set(environments)),
            created_by=created_by,
        )
        api_token_issued.send(sender=ApiToken, token=token, actor=actor or created_by or "system")
    return IssuedToken(token=token, clear_text=clear_text)


def api_token_revoke(*, token: ApiToken, actor: User | str) -> ApiToken:
    """Revoke once; the revocation is on the trail with who did it."""
    with transaction.atomic():
        locked = ApiToken.objects.select_for_update().get(pk=token.pk)
        if locked.revoked_at is None:
            locked.revoked_at = timezone.now()
            locked.save(update_fields=["revoked_at", "updated_at"])
            api_token_revoked.send(sender=ApiToken, token=locked, actor=actor)
    return locked


# The token lookup, hand-written and prepared (core.prepared) because it runs before every API
# call: compiling the ORM's select_related query cost more CPU than the rest of a small request.
# Each row with the clear token's prefix (a prefix may repeat) and its user's columns, named
# `tok_<column>` and `usr_<column>`; the gate extends it with its own read (TOKEN_SELECT, TOKEN_FROM).
TOKEN_SELECT = ", ".join(
    [f"t.{field.column} AS tok_{field.column}" for field in ApiToken._meta.concrete_fields]
    + [f"u.{field.column} AS usr_{field.column}" for field in User._meta.concrete_fields]
)
TOKEN_FROM = "core_apitoken t JOIN auth_user u ON u.id = t.user_id"  # noqa: S105 (SQL, not a secret)
_TOKEN_SQL = f"SELECT {TOKEN_SELECT} FROM {TOKEN_FROM} WHERE t.prefix = %(prefix)s"  # noqa: S608 (columns only)
TOKEN_ROW_PREFIXES = ("tok_", "usr_")


def api_token_resolve(clear_text: str) -> ApiToken | None:
    """The live token matching `clear_text`, or None (unknown, revoked or expired)."""
    if not api_token_well_formed(clear_text):
        return None
    rows = fetch_all_prepared(_TOKEN_SQL, {"prefix": clear_text[:PREFIX_LENGTH]})
    return api_token_accept([token_from_row(row) for row in rows], clear_text)


def token_from_row(row: dict[str, Any]) -> ApiToken:
    """The token (its user loaded) from a row of TOKEN_SELECT's columns."""
    token: ApiToken = instance_from_row(ApiToken, row, "tok_")
    token.user = instance_from_row(User, row, "usr_")
    return token


# What api_token_issue makes: the marker and URL-safe base64 (secrets.token_urlsafe). Anything else
# is nobody's token and never reaches the database (a NUL there would be a database error, a 500).
_WELL_FORMED = re.compile(rf"{TOKEN_PREFIX}[A-Za-z0-9_-]{{1,{128 - len(TOKEN_PREFIX)}}}")


def api_token_well_formed(clear_text: str) -> bool:
    return _WELL_FORMED.fullmatch(clear_text) is not None


def api_token_accept(candidates: Iterable[ApiToken], clear_text: str) -> ApiToken | None:
    """The live token among `candidates` (the rows with `clear_text`'s prefix, each with its
    user loaded), or None. The one check every reader of tokens goes through (api_token_resolve,
    and the gate's combined read)."""
    digest = _digest(clear_text)
    now = timezone.now()
    for candidate in candidates:
        if not hmac.compare_digest(candidate.digest, digest):
            continue
        if candidate.revoked_at is not None or (candidate.expires_at and candidate.expires_at <= now):
            return None
        if not candidate.user.is_active:
            return None
        # Write at most once a minute per token: a write on every request would serialize readers.
        if candidate.last_used_at is None or now - candidate.last_used_at > LAST_USED_RESOLUTION:
            ApiToken.objects.filter(pk=candidate.pk).update(last_used_at=now)
        return candidate
    return None


def token_reaches_endpoint(token: ApiToken, url_name: str | None, method: str) -> bool:
    """An unscoped token acts as its user; a scoped one reaches only its scopes' endpoints."""
    if not token.scopes:
        return True
    return any((url_name, method.upper()) in SCOPE_ENDPOINTS.get(scope, frozenset()) for scope in token.scopes)


def token_covers_deployment(token: ApiToken, deployment: Any) -> bool:
    """Whether a scoped token was issued for this deployment request: its team (the user's
    teams for a token issued without one) and, when limited, one of its listed requests."""
    if token.team_id is not None:
        if deployment.team_id != token.team_id:
            return False
    elif not token.user.teams.filter(pk=deployment.team_id).exists():
        return False
    return not token.deployment_codes or str(deployment.code) in token.deployment_codes


def token_covers_environment(token: ApiToken, environment: str) -> bool:
    return not token.environments or environment in token.environments
