"""Reads shared by every app: which team a user acts for."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from governance.core.errors import invalid_input
from governance.core.models import Team


def teams_of(user: Any) -> QuerySet[Team]:
    return Team.objects.filter(members=user)


def team_by_name(name: str) -> Team | None:
    return Team.objects.filter(name=name).first()


def team_choose(user: Any, name: str | None) -> Team:
    """The team a user acts for: the one named (they must be a member), else their only team.
    Raises a 400 naming the field `team` otherwise."""
    teams = teams_of(user)
    if name:
        team = teams.filter(name=name).first()
        if team is None:
            raise invalid_input("team", "you are not a member of this team")
        return team
    if teams.count() != 1:
        raise invalid_input("team", "give the team (you belong to several or none)")
    return teams.get()
