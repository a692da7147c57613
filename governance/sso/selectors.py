"""Reads of single sign-on state kept in the session: a step-up re-authentication at the provider."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.http import HttpRequest

# Set by the sign-in callback when a step-up (prompt=login, max_age=0) came back with an
# `auth_time` no older than the step-up request: {"user": pk, "auth_time": epoch seconds}.
STEP_UP_SESSION_KEY = "sso_step_up"
# Set when a step-up starts: {"user": pk, "at": epoch seconds}.
STEP_UP_REQUEST_SESSION_KEY = "sso_step_up_requested"


def step_up_auth_time(request: HttpRequest, user: Any) -> datetime | None:
    """When `user` last re-authenticated at the provider in this session (a step-up), or None."""
    session = getattr(request, "session", None)
    record = session.get(STEP_UP_SESSION_KEY) if session is not None else None
    if not isinstance(record, dict) or record.get("user") != getattr(user, "pk", None):
        return None
    try:
        return datetime.fromtimestamp(int(record["auth_time"]), tz=UTC)
    except (KeyError, TypeError, ValueError, OverflowError):
        return None


def step_up_consume(request: HttpRequest) -> None:
    """One step-up, one signature (21 CFR 11: each signing re-authenticates)."""
    session = getattr(request, "session", None)
    if session is not None:
        session.pop(STEP_UP_SESSION_KEY, None)
