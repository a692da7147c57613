"""Teams, their members and leads: created by admins, managed by admins and the team's own leads.

The audit app records every change through signals (core sits below it): `team_created`, and
Django's m2m signals for members and leads, with the actor declared by `acting_as`. Each change
locks the team row first, so the audit chain head (taken by the receivers) is the last lock.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import QuerySet

from governance.core.context import acting_as
from governance.core.errors import PermissionDeniedError, invalid_input
from governance.core.models import Team
from governance.core.names import printed_name_problem
from governance.core.roles import Role, has_role
from governance.core.signals import team_created

TEAM_NAME_MAX = Team._meta.get_field("name").max_length or 120


def teams_managed_by(user: Any) -> QuerySet[Team]:
    """Every team for an admin; the teams a user leads otherwise (none for anyone else). The
    object permission is this query: a team outside it is not found."""
    if not getattr(user, "is_authenticated", False):
        return Team.objects.none()
    if has_role(user, Role.ADMIN):
        return Team.objects.all()
    return Team.objects.filter(leads=user)


def team_create(*, name: str, actor: User) -> Team:
    """An admin creates a team (empty: members and leads are added next)."""
    if not has_role(actor, Role.ADMIN):
        raise PermissionDeniedError("only an administrator creates teams")
    name = " ".join(name.split())  # no leading, trailing or doubled spaces: names are compared as typed
    if not name:
        raise invalid_input("name", "give the team a name")
    if len(name) > TEAM_NAME_MAX:
        raise invalid_input("name", f"at most {TEAM_NAME_MAX} characters")
    if (problem := printed_name_problem(name)) is not None:
        raise invalid_input("name", problem)  # the packet prints the team's name
    exists = invalid_input("name", f"a team named {name!r} exists already")
    if Team.objects.filter(name__iexact=name).exists():  # "Platform" next to "platform" is a typo
        raise exists
    try:
        with transaction.atomic():
            team = Team.objects.create(name=name)
            team_created.send(sender=Team, team=team, actor=actor)
    except IntegrityError:  # two admins creating the same name at once: the unique index decides
        raise exists from None
    return team


def _locked(team: Team, actor: User) -> Team:
    """The team, locked, when `actor` manages it; a team they do not manage is not found."""
    locked = teams_managed_by(actor).select_for_update(of=("self",)).filter(pk=team.pk).first()
    if locked is None:
        raise PermissionDeniedError("you manage neither this team nor every team")
    return locked


def _user(username: str, *, active: bool = True) -> User:
    """The user named; one being added must be active (a deactivated account is not brought back)."""
    users = User.objects.filter(username=username.strip())
    user = (users.filter(is_active=True) if active else users).first()
    if user is None:
        raise invalid_input("username", f"no {'active ' if active else ''}user named {username.strip()!r}")
    return user


def team_member_add(*, team: Team, username: str, actor: User, lead: bool = False) -> User:
    """Add a member (and, with `lead`, make them a lead: a lead is always a member)."""
    user = _user(username)
    with transaction.atomic(), acting_as(actor):
        locked = _locked(team, actor)
        if not locked.members.filter(pk=user.pk).exists():
            locked.members.add(user)
        if lead and not locked.leads.filter(pk=user.pk).exists():
            locked.leads.add(user)
    return user


def team_member_remove(*, team: Team, username: str, actor: User) -> User:
    """Remove a member, and their lead with it (a lead outside the team would manage it from outside)."""
    user = _user(username, active=False)
    with transaction.atomic(), acting_as(actor):
        locked = _locked(team, actor)
        if not locked.members.filter(pk=user.pk).exists():
            raise invalid_input("username", f"{user.username!r} is not a member of {locked.name}")
        if locked.leads.filter(pk=user.pk).exists():
            locked.leads.remove(user)
        locked.members.remove(user)
    return user


def team_lead_remove(*, team: Team, username: str, actor: User) -> User:
    """Take a lead's role away; they stay a member."""
    user = _user(username, active=False)
    with transaction.atomic(), acting_as(actor):
        locked = _locked(team, actor)
        if not locked.leads.filter(pk=user.pk).exists():
            raise invalid_input("username", f"{user.username!r} is not a lead of {locked.name}")
        locked.leads.remove(user)
    return user
