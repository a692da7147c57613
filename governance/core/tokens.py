"""Issuing and checking API tokens. The clear token is shown once, at issue time."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.contrib.auth.models import User
from django.utils import timezone

from governance.core.models import ApiToken

TOKEN_PREFIX = "gov_"  # noqa: S105  (a public marker, not a secret)
PREFIX_LENGTH = 12
LAST_USED_RESOLUTION = timedelta(minutes=1)
# Every scope a token may carry, and what it allows. A scope not listed here is refused at issue
# time: a typo would otherwise make a token that silently grants nothing (or, later, something else).
TOKEN_SCOPES: dict[str, str] = {
    "usage:write": "post monthly usage reports to any deployment request (billing)",
}


@dataclass(frozen=True, slots=True)
class IssuedToken:
    token: ApiToken
    clear_text: str


def _digest(clear_text: str) -> str:
    return hashlib.sha256(clear_text.encode()).hexdigest()


def api_token_issue(
    *, user: User, name: str, scopes: list[str] | None = None, expires_at: datetime | None = None
) -> IssuedToken:
    unknown = sorted(set(scopes or []) - TOKEN_SCOPES.keys())
    if unknown:
        raise ValueError(f"scopes: unknown {', '.join(unknown)}; known: {', '.join(sorted(TOKEN_SCOPES))}")
    clear_text = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user,
        name=name,
        prefix=clear_text[:PREFIX_LENGTH],
        digest=_digest(clear_text),
        scopes=list(scopes or []),
        expires_at=expires_at,
    )
    return IssuedToken(token=token, clear_text=clear_text)


def api_token_resolve(clear_text: str) -> ApiToken | None:
    """The live token matching `clear_text`, or None (unknown, revoked or expired)."""
    if not clear_text.startswith(TOKEN_PREFIX) or len(clear_text) > 128:
        return None
    digest = _digest(clear_text)
    now = timezone.now()
    for candidate in ApiToken.objects.select_related("user").filter(prefix=clear_text[:PREFIX_LENGTH]):
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
