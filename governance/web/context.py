"""Template context for every page: the navigation the user's roles allow."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest
from django.urls import get_script_prefix, get_urlconf, reverse
from django.utils.translation import gettext_lazy as _

from governance.core.roles import Role
from governance.web import access

# Not a role: admins and the leads of a team manage CI tokens, and teams' members and leads.
TOKEN_MANAGERS = "token-managers"  # noqa: S105  (a navigation key, not a secret)
# (url name, label, roles that see it; empty: any role)
NAVIGATION = (
    ("web:dashboard", _("Dashboard"), ()),
    ("web:requests", _("Requests"), ()),
    ("web:wizard", _("New request"), (Role.REQUESTER,)),
    ("web:licenses", _("Licenses"), ()),
    ("web:clusters", _("Clusters"), ()),
    ("web:audit", _("Audit"), (Role.AUDITOR, Role.ADMIN, Role.LEGAL_REVIEWER, Role.ENGINEERING_REVIEWER)),
    ("web:tokens", _("CI tokens"), (TOKEN_MANAGERS,)),
    ("web:teams", _("Teams"), (TOKEN_MANAGERS,)),
    ("web:verify", _("Verify a PDF"), ()),
)
# The navigation's URLs depend only on the URLconf and the script prefix: reversed once each.
_urls: dict[tuple[Any, str], list[str]] = {}


def _navigation_urls() -> list[str]:
    key = (get_urlconf(), get_script_prefix())
    if key not in _urls:
        _urls[key] = [reverse(name) for name, _label, _roles in NAVIGATION]
    return _urls[key]


def navigation(request: HttpRequest) -> dict[str, Any]:
    roles = access.roles(request.user) if hasattr(request, "user") else set()
    # how people sign in here: the login page offers single sign-on and/or the password form
    sign_in = {"sso_enabled": settings.SSO_ENABLED, "local_login_enabled": settings.LOCAL_LOGIN_ENABLED}
    if not roles:
        return {"navigation": [], "manages_tokens": False, **sign_in}
    manages_tokens = access.may_manage_tokens(request.user)
    if manages_tokens:
        roles = {*roles, TOKEN_MANAGERS}
    path = request.path
    items = []
    for (_name, label, allowed), url in zip(NAVIGATION, _navigation_urls(), strict=True):
        if allowed and not roles & set(allowed):
            continue
        current = path == url if url == "/" else path.startswith(url)
        items.append({"url": url, "label": label, "current": current})
    return {"navigation": items, "manages_tokens": manages_tokens, **sign_in}
