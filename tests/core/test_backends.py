"""The authentication backend reads the user's roles and team-lead flag with the user (one query on
PostgreSQL): the same user, roles and flag as the ORM reads them, and nobody for an inactive or
unknown id."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import Group, User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from governance.core.backends import LEADS_CACHE, RoleModelBackend
from governance.core.roles import ROLES_CACHE, Role, user_roles
from governance.web import access
from tests.conftest import Personas, make_user


def _fresh_roles(user: User) -> tuple[set[str], bool]:
    """The roles and team-lead flag as the ORM reads them, on a user loaded without the backend."""
    plain = ModelBackend().get_user(user.pk)
    assert plain is not None
    access.load(plain)
    return user_roles(plain), access.may_manage_tokens(plain)


@pytest.mark.django_db
def test_the_backend_loads_the_same_user_with_roles_and_lead_flag(personas: Personas) -> None:
    personas.team.leads.add(personas.requester)
    both = make_user("both", Role.LEGAL_REVIEWER, Role.ENGINEERING_REVIEWER)
    both.groups.add(Group.objects.get_or_create(name="not-a-role")[0])
    backend = RoleModelBackend()
    for user in (personas.requester, personas.legal, personas.admin, personas.outsider, both):
        loaded = backend.get_user(user.pk)
        assert loaded is not None
        plain = ModelBackend().get_user(user.pk)
        assert plain is not None
        for field in User._meta.concrete_fields:
            assert getattr(loaded, field.attname) == getattr(plain, field.attname), field.name
        assert user_roles(loaded) == _fresh_roles(user)[0]
        assert access.may_manage_tokens(loaded) == _fresh_roles(user)[1]
    assert user_roles(backend.get_user(both.pk)) == {Role.LEGAL_REVIEWER, Role.ENGINEERING_REVIEWER}
    assert access.may_manage_tokens(backend.get_user(personas.requester.pk)) is True
    assert access.may_manage_tokens(backend.get_user(personas.legal.pk)) is False


@pytest.mark.django_db
def test_no_user_for_an_inactive_or_unknown_id(personas: Personas) -> None:
    backend = RoleModelBackend()
    personas.legal.is_active = False
    personas.legal.save(update_fields=["is_active"])
    assert backend.get_user(personas.legal.pk) is None
    assert backend.get_user(10**9) is None


@pytest.mark.postgres
@pytest.mark.django_db
def test_on_postgresql_the_roles_come_with_the_user_in_one_query(personas: Personas) -> None:
    personas.team.leads.add(personas.requester)
    with CaptureQueriesContext(connection) as captured:
        user: Any = RoleModelBackend().get_user(personas.requester.pk)
        assert user_roles(user) == {Role.REQUESTER}
        assert access.may_manage_tokens(user)
    assert len(captured) == 1
    assert getattr(user, ROLES_CACHE) == {Role.REQUESTER}
    assert getattr(user, LEADS_CACHE) is True
    # a page: the session, then the user with the roles, and no role query of its own
    client = Client()
    client.force_login(personas.requester)
    with CaptureQueriesContext(connection) as page:
        assert client.get("/verify/").status_code == 200
    assert not [q for q in page.captured_queries if "auth_group" in q["sql"] and "EXISTS" not in q["sql"]]
