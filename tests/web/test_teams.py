"""Teams managed in the UI: admins create teams and manage any team's members and leads; a team's
lead manages that team only (another team is not found). Every change is on the audit trail with
who made it; a bad name or an unknown user is shown on the form, never a 500."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.test import Client

from governance.audit.actions import AuditAction
from governance.audit.models import AuditEvent
from governance.core.models import Team
from tests.conftest import Personas, make_user


def _client(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _events(action: AuditAction, team: Team) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(action=action, object_id=str(team.code)).order_by("seq"))


def test_an_admin_creates_a_team_and_manages_its_members_and_leads(personas: Personas) -> None:
    admin = _client(personas.admin)
    listed = admin.get("/teams/")
    assert listed.status_code == 200
    page = listed.content.decode()
    assert "platform" in page
    assert "research" in page
    made = admin.post("/teams/new", {"name": "inference"})
    assert made.status_code == 302
    team = Team.objects.get(name="inference")
    assert made["Location"] == f"/teams/{team.code}/"
    [created] = _events(AuditAction.TEAM_CREATED, team)
    assert created.actor_name == personas.admin.username
    assert admin.post(f"/teams/{team.code}/members", {"username": "req"}).status_code == 302
    assert admin.post(f"/teams/{team.code}/leads", {"username": "req2"}).status_code == 302
    assert set(team.members.values_list("username", flat=True)) == {"req", "req2"}  # a lead is a member
    assert list(team.leads.values_list("username", flat=True)) == ["req2"]
    members = _events(AuditAction.TEAM_MEMBERS_CHANGED, team)
    assert [e.data for e in members] == [{"added": ["req"]}, {"added": ["req2"]}]
    assert {e.actor_name for e in members} == {personas.admin.username}
    [leads] = _events(AuditAction.TEAM_LEADS_CHANGED, team)
    assert (leads.actor_name, leads.data) == (personas.admin.username, {"added": ["req2"]})
    detail = admin.get(f"/teams/{team.code}/").content.decode()
    assert "req2" in detail
    # removing a member removes their lead too
    assert admin.post(f"/teams/{team.code}/members/remove", {"username": "req2"}).status_code == 302
    assert not team.leads.exists()
    assert list(team.members.values_list("username", flat=True)) == ["req"]


def test_a_lead_manages_their_team_and_not_another(personas: Personas) -> None:
    personas.team.leads.add(personas.requester)
    lead = _client(personas.requester)
    newcomer = make_user("newcomer")
    assert lead.get("/teams/").status_code == 200
    assert "research" not in lead.get("/teams/").content.decode()
    assert lead.get(f"/teams/{personas.team.code}/").status_code == 200
    assert lead.post(f"/teams/{personas.team.code}/members", {"username": "newcomer"}).status_code == 302
    assert personas.team.members.filter(pk=newcomer.pk).exists()
    [event] = _events(AuditAction.TEAM_MEMBERS_CHANGED, personas.team)[-1:]
    assert (event.actor_name, event.data) == (personas.requester.username, {"added": ["newcomer"]})
    other = personas.other_team
    assert lead.get(f"/teams/{other.code}/").status_code == 404
    for action in ("members", "members/remove", "leads", "leads/remove"):
        assert lead.post(f"/teams/{other.code}/{action}", {"username": "newcomer"}).status_code == 404
    assert not other.members.filter(pk=newcomer.pk).exists()
    assert lead.post("/teams/new", {"name": "mine"}).status_code == 403
    assert not Team.objects.filter(name="mine").exists()


def test_people_who_lead_no_team_are_refused(personas: Personas) -> None:
    for user in (personas.requester, personas.legal, personas.auditor):
        client = _client(user)
        assert client.get("/teams/").status_code == 403
        assert client.post(f"/teams/{personas.team.code}/members", {"username": "legal"}).status_code in (403, 404)
    assert not personas.team.members.filter(pk=personas.legal.pk).exists()


def test_bad_input_is_shown_on_the_form(personas: Personas) -> None:
    admin = _client(personas.admin)
    duplicate = admin.post("/teams/new", {"name": "platform"})
    assert duplicate.status_code == 400
    assert "already" in duplicate.content.decode()
    blank = admin.post("/teams/new", {"name": "  "})
    assert blank.status_code == 400
    unknown = admin.post(f"/teams/{personas.team.code}/members", {"username": "nobody"}, follow=True)
    assert unknown.status_code == 200
    assert "nobody" in unknown.content.decode()
    assert Team.objects.count() == 2


def test_the_navigation_offers_teams_to_admins_and_leads_only(personas: Personas) -> None:
    assert 'href="/teams/"' in _client(personas.admin).get("/").content.decode()
    assert 'href="/teams/"' not in _client(personas.requester).get("/").content.decode()
    personas.team.leads.add(personas.requester)
    assert 'href="/teams/"' in _client(personas.requester).get("/").content.decode()


def test_the_team_pages_in_chinese(personas: Personas) -> None:
    admin = _client(personas.admin)
    admin.post("/i18n/setlang/", {"language": "zh-hans", "next": "/"})
    listed = admin.get("/teams/").content.decode()
    assert "全部团队" in listed
    assert "创建团队" in listed
    detail = admin.get(f"/teams/{personas.team.code}/").content.decode()
    assert "成员与负责人" in detail
    assert "Add a member" not in detail
    wizard = _client(personas.requester)
    wizard.post("/i18n/setlang/", {"language": "zh-hans", "next": "/"})
    page = wizard.get("/requests/new").content.decode()
    assert "必填 name, memory_mib" in page  # translated per request, filled in
