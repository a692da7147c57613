"""The roles of the service. Each is a Django group, created by migration 0002."""

from __future__ import annotations

from typing import Any

from django.db import models


class Role(models.TextChoices):
    REQUESTER = "requester", "Requester"
    LEGAL_REVIEWER = "legal_reviewer", "Legal reviewer"
    ENGINEERING_REVIEWER = "engineering_reviewer", "Engineering reviewer"
    AUDITOR = "auditor", "Auditor"
    ADMIN = "admin", "Administrator"


# A user's roles are cached on the user object under this name (filled by the first role check, or
# with the user by governance.core.backends.RoleModelBackend); drop it when the user's groups change.
ROLES_CACHE = "_governance_roles"


def user_roles(user: Any) -> set[str]:
    if not user.is_authenticated:
        return set()
    cached: set[str] | None = getattr(user, ROLES_CACHE, None)
    if cached is None:
        names = user.groups.values_list("name", flat=True)
        cached = {name for name in names if name in Role.values}
        setattr(user, ROLES_CACHE, cached)
    return cached


def has_role(user: Any, *roles: str) -> bool:
    return bool(user_roles(user) & set(roles))
