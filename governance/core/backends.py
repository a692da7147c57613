"""The authentication backend: Django's ModelBackend, whose per-request user look-up also reads the
user's roles and whether they lead a team, so a page's role check costs no query of its own."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import connection

from governance.core.prepared import fetch_one_prepared, instance_from_row
from governance.core.roles import ROLES_CACHE, Role

# Whether the user leads a team (they manage its CI tokens); read by governance.web.access.
LEADS_CACHE = "_web_leads_a_team"

_COLUMNS = [field.column for field in User._meta.concrete_fields]
_ROLE = (
    "EXISTS(SELECT 1 FROM auth_user_groups m INNER JOIN auth_group g ON g.id = m.group_id"
    " WHERE m.user_id = u.id AND g.name = %s)"
)
# The user's row, one EXISTS per role (a short, fixed list) and one for leading a team. Hand-written
# and prepared (core.prepared): PostgreSQL plans it once per connection and the ORM compiles nothing
# per request, which together cost more than the query. Role names are parameters.
_SELECTED = ", ".join(f"u.{column}" for column in _COLUMNS) + "".join(
    f", {_ROLE} AS role_{index}" for index in range(len(Role.values))
)
_USER_SQL = f"""
SELECT {_SELECTED}, EXISTS(SELECT 1 FROM core_team_leads l WHERE l.user_id = u.id) AS leads_a_team
FROM auth_user u WHERE u.id = %s
"""  # noqa: S608 (constants only; values are parameters)


class RoleModelBackend(ModelBackend):
    def get_user(self, user_id: Any) -> Any:
        """The active user with `user_id` (as ModelBackend finds them), on PostgreSQL with their
        roles and team-lead flag cached on it (governance.core.roles, governance.web.access) by the
        same query. Elsewhere (SQLite, whose raw rows need the ORM's converters) ModelBackend's
        look-up, the role check querying on its own."""
        if connection.vendor != "postgresql":
            return super().get_user(user_id)
        try:
            pk = User._meta.pk.to_python(user_id)
        except ValidationError:
            return None
        row = fetch_one_prepared(_USER_SQL, [*Role.values, pk])
        if row is None:
            return None
        user = instance_from_row(User, row)
        if not self.user_can_authenticate(user):
            return None
        setattr(user, ROLES_CACHE, {role for index, role in enumerate(Role.values) if row[f"role_{index}"]})
        setattr(user, LEADS_CACHE, bool(row["leads_a_team"]))
        return user
