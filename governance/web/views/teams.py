"""Teams in the UI: the teams a user manages (every team for an admin, the teams they lead
otherwise), a new team (admins), members and leads added and removed. Writes go through
governance.core.teams, which audits each change; a team the user does not manage is not found."""

from __future__ import annotations

from typing import cast

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Prefetch
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from governance.core.errors import ApplicationError, NotFoundError
from governance.core.models import Team
from governance.core.roles import Role, has_role
from governance.core.teams import (
    team_create,
    team_lead_remove,
    team_member_add,
    team_member_remove,
    teams_managed_by,
)
from governance.web.forms import TeamForm, TeamMemberForm, apply_error
from governance.web.views.common import act, roles_required


def _user(request: HttpRequest) -> User:
    return cast(User, request.user)


def _managed(request: HttpRequest) -> list[Team]:
    """403 for a user who manages no team: the page has nothing for them."""
    users = Prefetch("leads", queryset=User.objects.order_by("username").only("username"))
    managed: list[Team] = list(
        teams_managed_by(request.user).annotate(member_count=Count("members")).prefetch_related(users)
    )
    if not managed and not has_role(request.user, Role.ADMIN):
        raise PermissionDenied
    return managed


def _list(request: HttpRequest, form: TeamForm, status: int = 200) -> HttpResponse:
    context = {"teams": _managed(request), "form": form, "may_create": has_role(request.user, Role.ADMIN)}
    return render(request, "web/teams.html", context, status=status)


@roles_required()
def teams(request: HttpRequest) -> HttpResponse:
    return _list(request, TeamForm())


@require_POST
@roles_required(Role.ADMIN)
def team_new(request: HttpRequest) -> HttpResponse:
    form = TeamForm(request.POST)
    if form.is_valid():
        try:
            team = team_create(name=form.cleaned_data["name"], actor=_user(request))
        except ApplicationError as exc:
            apply_error(form, exc)
        else:
            return HttpResponseRedirect(reverse("web:team", args=[team.code]))
    return _list(request, form, status=400)


def _team(request: HttpRequest, code: str) -> Team:
    team = teams_managed_by(request.user).filter(code=code).first()
    if team is None:
        raise NotFoundError("no such team")
    return team


@roles_required()
def team(request: HttpRequest, code: str) -> HttpResponse:
    found = _team(request, code)
    leads = set(found.leads.values_list("pk", flat=True))
    members = [
        {"username": user.username, "name": user.get_full_name(), "lead": user.pk in leads}
        for user in found.members.order_by("username").only("username", "first_name", "last_name")
    ]
    return render(request, "web/team.html", {"team": found, "members": members, "form": TeamMemberForm()})


def _member_action(request: HttpRequest, code: str, *, lead: bool, remove: bool) -> HttpResponse:
    found = _team(request, code)
    form = TeamMemberForm(request.POST)
    back = reverse("web:team", args=[found.code])
    if not form.is_valid():
        return act(request, lambda: _refuse(form), "", back)
    username, actor = form.cleaned_data["username"], _user(request)
    if remove and lead:
        done = _("%(user)s is no longer a lead of %(team)s.")
        return act(
            request,
            lambda: team_lead_remove(team=found, username=username, actor=actor),
            _fill(done, username, found),
            back,
        )
    if remove:
        done = _("%(user)s was removed from %(team)s.")
        return act(
            request,
            lambda: team_member_remove(team=found, username=username, actor=actor),
            _fill(done, username, found),
            back,
        )
    lead = lead or form.cleaned_data["lead"]
    done = _("%(user)s is now a lead of %(team)s.") if lead else _("%(user)s was added to %(team)s.")
    return act(
        request,
        lambda: team_member_add(team=found, username=username, actor=actor, lead=lead),
        _fill(done, username, found),
        back,
    )


def _fill(text: str, username: str, team: Team) -> str:
    return text % {"user": username.strip(), "team": team.name}


def _refuse(form: TeamMemberForm) -> None:
    """The form's own errors, reported like a service's refusal (the page shows messages)."""
    problems = "; ".join(f"{name}: {' '.join(str(e) for e in errors)}" for name, errors in form.errors.items())
    raise ApplicationError(problems)


@require_POST
@roles_required()
def team_member_add_view(request: HttpRequest, code: str) -> HttpResponse:
    return _member_action(request, code, lead=False, remove=False)


@require_POST
@roles_required()
def team_member_remove_view(request: HttpRequest, code: str) -> HttpResponse:
    return _member_action(request, code, lead=False, remove=True)


@require_POST
@roles_required()
def team_lead_add_view(request: HttpRequest, code: str) -> HttpResponse:
    return _member_action(request, code, lead=True, remove=False)


@require_POST
@roles_required()
def team_lead_remove_view(request: HttpRequest, code: str) -> HttpResponse:
    return _member_action(request, code, lead=True, remove=True)
