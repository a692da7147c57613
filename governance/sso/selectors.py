"""Reads of single sign-on state: the step-up (a fresh sign-in at the provider) this session holds."""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib.auth.models import User
from django.http import HttpRequest

from governance.sso.models import StepUp

# Set by the sign-in callback when a step-up (prompt=login, max_age=0) came back with an
# `auth_time` no older than the step-up request: {"user": pk, "id": the StepUp row's id}. The
# row, not the session, says whether it was used: a session is read by concurrent requests
# before any of them writes it back.
STEP_UP_SESSION_KEY = "sso_step_up"
# Set when a step-up starts: {"user": pk, "at": epoch seconds}.
STEP_UP_REQUEST_SESSION_KEY = "sso_step_up_requested"


def step_up_of_session(request: HttpRequest, user: Any) -> uuid.UUID | None:
    """The id of the step-up `user` did in this session (used or not), or None."""
    session = getattr(request, "session", None)
    record = session.get(STEP_UP_SESSION_KEY) if session is not None else None
    if not isinstance(record, dict) or record.get("user") != getattr(user, "pk", None):
        return None
    try:
        return uuid.UUID(str(record["id"]))
    except (KeyError, ValueError):
        return None


def step_up_get(*, step_up_id: uuid.UUID, user: User) -> StepUp | None:
    """The step-up `step_up_id` of `user` (never another user's), or None."""
    return StepUp.objects.filter(pk=step_up_id, user=user).first()
