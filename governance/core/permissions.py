"""DRF permissions built on roles. Object scoping happens in selectors (an unauthorised object is not found)."""

from __future__ import annotations

from typing import Any, ClassVar

from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from governance.core.roles import has_role, user_roles


class HasAnyRole(BasePermission):
    """Default: an authenticated user holding at least one role of the service."""

    message = "You need a role in this service (requester, reviewer, auditor or admin)."

    def has_permission(self, request: Request, view: Any) -> bool:
        return bool(request.user and request.user.is_authenticated and user_roles(request.user))


class RolePermission(BasePermission):
    """Subclass with `roles = (Role.X, ...)`; an authenticated user with one of them passes."""

    roles: ClassVar[tuple[str, ...]] = ()

    @property
    def message(self) -> str:
        return f"This needs one of the roles: {', '.join(self.roles)}."

    def has_permission(self, request: Request, view: Any) -> bool:
        return bool(request.user and request.user.is_authenticated and has_role(request.user, *self.roles))


def role_permission(*roles: str) -> type[RolePermission]:
    return type("RolePermission_" + "_".join(roles), (RolePermission,), {"roles": tuple(roles)})
