"""Sign-off attempts from the API and the web form: one budget per reviewer, and django-axes'
lockout. A sign-off re-enters the password, so it is a login attempt as far as guessing goes: a
wrong password counts as a failed login (AccessAttempt, same limit and cool-off), and an account
locked out may neither sign nor log in. The refusal is audited like every other sign-off refusal."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from django.conf import settings
from django.contrib.auth.models import User
from django.contrib.auth.signals import user_login_failed
from django.http import HttpRequest
from rest_framework.throttling import UserRateThrottle

from governance.approvals.choices import RefusalCode
from governance.core.errors import ApplicationError

T = TypeVar("T")


class SignOffRateThrottle(UserRateThrottle):
    """Attempts per reviewer (SIGNOFF_THROTTLE_RATE). The API views use it as a DRF throttle and the
    web form calls it directly: one cache key per user, so the two share one budget."""

    scope = "signoff"

    def get_rate(self) -> str:
        return str(settings.SIGNOFF_RATE)


def signoff_budget_allows(request: HttpRequest) -> bool:
    """Spend one attempt of the reviewer's budget (the web form; the API's throttle does this itself)."""
    return SignOffRateThrottle().allow_request(request, None)  # type: ignore[arg-type]


def _credentials(user: User) -> dict[str, str]:
    return {"username": user.get_username()}


def signoff_attempt(request: HttpRequest, user: User, attempt: Callable[[], T], refuse_locked: Callable[[], Any]) -> T:
    """Run one sign-off `attempt` for `user`: refused (through `refuse_locked`, which audits and
    raises) while django-axes holds the account locked out; a wrong password is a failed login."""
    from axes.handlers.proxy import AxesProxyHandler

    AxesProxyHandler.update_request(request)
    if AxesProxyHandler.is_locked(request, _credentials(user)):
        refuse_locked()
    try:
        return attempt()
    except ApplicationError as error:
        if error.extra.get("code") == RefusalCode.WRONG_PASSWORD:
            user_login_failed.send(sender=__name__, credentials=_credentials(user), request=request)
        raise
