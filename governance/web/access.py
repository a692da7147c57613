"""Who the signed-in user is to the UI: their roles and whether they manage CI tokens (every page
needs both: the role check and the navigation). The authentication backend reads them with the user
(governance.core.backends); for a user found another way, one query here."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group
from django.db.models import Exists

from governance.core.backends import LEADS_CACHE
from governance.core.models import Team
from governance.core.roles import ROLES_CACHE, Role, has_role, user_roles


def load(user: Any) -> None:
    """Fill the role cache and the team-lead flag with one query (the groups, each carrying the
    flag); a user without any group has no role, and no page to see."""
    if not getattr(user, "is_authenticated", False) or getattr(user, ROLES_CACHE, None) is not None:
        return
    leads = Exists(Team.leads.through.objects.filter(user_id=user.pk))
    rows = list(Group.objects.filter(user=user).annotate(leads=leads).values_list("name", "leads"))
    setattr(user, ROLES_CACHE, {name for name, _ in rows if name in Role.values})
    setattr(user, LEADS_CACHE, any(lead for _, lead in rows))


def roles(user: Any) -> set[str]:
    load(user)
    return user_roles(user)


def may_manage_tokens(user: Any) -> bool:
    """An admin, or the lead of a team (as the gate service allows issuing a CI token)."""
    if not getattr(user, "is_authenticated", False):
        return False
    if has_role(user, Role.ADMIN):
        return True
    cached = getattr(user, LEADS_CACHE, None)
    if cached is None:
        cached = Team.objects.filter(leads=user).exists()
        setattr(user, LEADS_CACHE, cached)
    return bool(cached)
