"""Every change of who may do what, and every admin change, lands on the audit trail; the admin
cannot bypass the services (nor bulk-delete deployment requests)."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.forms import MultiWidget
from django.test import Client, RequestFactory
from django.urls import reverse

from governance.audit.actions import AuditAction
from governance.audit.models import AuditEvent
from governance.core.admin_base import AuditedModelAdmin
from governance.core.models import ApiToken, Team
from governance.core.roles import Role
from governance.core.tokens import api_token_issue
from governance.deployments.models import DeploymentRequest
from governance.evaluations.models import Cluster
from governance.licenses.models import LicenseTerm, LicenseVersion
from tests.conftest import Personas


def _events(action: AuditAction) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(action=action).order_by("seq"))


@pytest.fixture
def superuser(db: None) -> User:
    return User.objects.create_superuser("root", "root@example.org", "pw-root-123")


@pytest.fixture
def admin_client(superuser: User) -> Client:
    client = Client()
    client.force_login(superuser)
    return client


def _form_data(response: Any) -> dict[str, Any]:
    """The POST a browser would send back for an admin change page, unchanged."""
    data: dict[str, Any] = {}
    for form in [response.context["adminform"].form]:
        for name, field in form.fields.items():
            value = form.initial.get(name, field.initial)
            if isinstance(field.widget, MultiWidget):  # e.g. date_joined as date + time inputs
                parts = field.widget.decompress(value)
                assert parts is not None
                for index, part in enumerate(parts):
                    if part is not None:
                        data[f"{name}_{index}"] = part
            elif isinstance(value, list | tuple | set):
                data[name] = [getattr(v, "pk", v) for v in value]
            elif value is not None:
                data[name] = getattr(value, "pk", value)
    for inline in response.context["inline_admin_formsets"]:
        formset = inline.formset
        for name, value in formset.management_form.initial.items():
            data[f"{formset.prefix}-{name}"] = value
        for form in formset.forms:
            for name, field in form.fields.items():
                value = form.initial.get(name, field.initial)
                if value is not None:
                    data[form.add_prefix(name)] = field.prepare_value(value)  # JSON fields as text
    return data


def test_logins_and_failed_logins_are_recorded(personas: Personas) -> None:
    client = Client()
    assert client.post("/accounts/login/", {"username": "legal", "password": "wrong"}).status_code == 200
    assert client.post("/accounts/login/", {"username": "legal", "password": "pw-legal"}).status_code == 302
    failed, ok = _events(AuditAction.USER_LOGIN_FAILED), _events(AuditAction.USER_LOGIN)
    assert [(e.actor_name, e.data["username"]) for e in failed] == [("anonymous", "legal")]
    assert "wrong" not in failed[0].body  # the password tried is never kept
    assert [(e.actor_name, e.object_id) for e in ok] == [("legal", "legal")]


def test_token_issue_and_admin_revoke_are_recorded(personas: Personas, admin_client: Client) -> None:
    issued = api_token_issue(user=personas.auditor, name="ci", scopes=["gate:check"], actor=personas.admin)
    event = _events(AuditAction.API_TOKEN_ISSUED)[-1]
    assert (event.actor_name, event.data["user"], event.data["scopes"]) == ("adm", "aud", ["gate:check"])
    assert issued.token.digest not in event.body
    assert issued.clear_text not in event.body
    response = admin_client.post(
        reverse("admin:core_apitoken_changelist"),
        {"action": "revoke", "_selected_action": [issued.token.pk]},
    )
    assert response.status_code == 302
    issued.token.refresh_from_db()
    assert issued.token.revoked_at is not None
    revoked = _events(AuditAction.API_TOKEN_REVOKED)
    assert [(e.actor_name, e.object_id) for e in revoked] == [("root", str(issued.token.code))]
    # The admin cannot un-revoke or edit a token behind the service's back.
    token_admin = admin.site._registry[ApiToken]
    request = RequestFactory().get("/")
    request.user = User.objects.get(username="root")
    assert not token_admin.has_change_permission(request, issued.token)


def test_role_and_team_changes_are_recorded_with_the_admin_as_actor(personas: Personas, admin_client: Client) -> None:
    before = AuditEvent.objects.count()
    user = personas.requester
    url = reverse("admin:auth_user_change", args=[user.pk])
    data = _form_data(admin_client.get(url))
    legal = Group.objects.get(name=Role.LEGAL_REVIEWER)
    data["groups"] = [*data.get("groups", []), legal.pk]
    assert admin_client.post(url, data).status_code == 302
    roles = [e for e in _events(AuditAction.USER_ROLES_CHANGED) if e.seq > before]
    assert [(e.actor_name, e.object_id, e.data) for e in roles] == [("root", "req", {"added": [Role.LEGAL_REVIEWER]})]
    changed = [e for e in _events(AuditAction.ADMIN_OBJECT_CHANGED) if e.seq > before]
    assert changed
    assert "password" not in changed[0].data["fields"]

    personas.team.members.remove(user)
    Group.objects.get(name=Role.REQUESTER).user_set.remove(personas.other_requester)
    team_events = _events(AuditAction.TEAM_MEMBERS_CHANGED)
    assert (team_events[-1].object_id, team_events[-1].data) == (str(personas.team.code), {"removed": ["req"]})
    assert _events(AuditAction.USER_ROLES_CHANGED)[-1].data == {"removed": [Role.REQUESTER]}


def test_membership_changes_are_recorded_from_either_side_and_on_clear(personas: Personas) -> None:
    """One event per owner (the user for roles, the team for members), whichever side the change
    was made from; clear() names everything it removed."""
    user, team = personas.other_requester, personas.team
    user.teams.add(team)
    members = sorted(team.members.values_list("username", flat=True))
    team.members.clear()
    events = [(e.object_id, e.data) for e in _events(AuditAction.TEAM_MEMBERS_CHANGED)[-2:]]
    assert events == [(str(team.code), {"added": [user.username]}), (str(team.code), {"removed": members})]

    before = AuditEvent.objects.count()
    Group.objects.get(name=Role.AUDITOR).user_set.add(user, personas.requester)
    held = sorted(user.groups.values_list("name", flat=True))
    user.groups.clear()
    events = [(e.object_id, e.data) for e in _events(AuditAction.USER_ROLES_CHANGED) if e.seq > before]
    assert sorted(events[:2]) == [(name, {"added": [Role.AUDITOR.value]}) for name in ("req", "req2")]
    assert events[2:] == [(user.username, {"removed": held})]


def test_admin_deletion_is_recorded(personas: Personas, admin_client: Client) -> None:
    cluster = Cluster.objects.create(name="lab", executor="local", remote_root="/tmp/lab")
    url = reverse("admin:evaluations_cluster_delete", args=[cluster.pk])
    assert admin_client.post(url, {"post": "yes"}).status_code == 302
    assert not Cluster.objects.filter(pk=cluster.pk).exists()
    deleted = _events(AuditAction.ADMIN_OBJECT_DELETED)
    assert [(e.actor_name, e.object_type, e.object_id) for e in deleted] == [
        ("root", "evaluations.cluster", str(cluster.code))
    ]
    team = Team.objects.create(name="temp")
    response = admin_client.post(
        reverse("admin:core_team_changelist"),
        {"action": "delete_selected", "_selected_action": [team.pk], "post": "yes"},
    )
    assert response.status_code == 302
    assert _events(AuditAction.ADMIN_OBJECT_DELETED)[-1].data == {"object": "temp", "bulk": True}


def test_license_term_deletion_in_the_admin_is_recorded(personas: Personas, admin_client: Client) -> None:
    call_command("load_license_catalog", stdout=StringIO())
    version = LicenseVersion.objects.filter(evaluations__isnull=True).order_by("pk").first()
    assert version is not None
    assert not version.is_locked
    term = version.terms.order_by("position").first()
    assert term is not None
    url = reverse("admin:licenses_licenseversion_change", args=[version.pk])
    data = _form_data(admin_client.get(url))
    prefix = next(key for key, value in data.items() if key.endswith("-id") and value == term.pk)[: -len("-id")]
    data[f"{prefix}-DELETE"] = "on"
    response = admin_client.post(url, data)
    errors = response.context and [response.context["adminform"].form.errors] + [
        f.errors for inline in response.context["inline_admin_formsets"] for f in inline.formset.forms if f.errors
    ]
    assert response.status_code == 302, errors
    assert not LicenseTerm.objects.filter(pk=term.pk).exists()
    deleted = _events(AuditAction.LICENSE_TERM_DELETED)
    assert [(e.actor_name, e.data["term"], e.data["clause"]) for e in deleted] == [("root", term.code, term.clause)]


def _may_write(model_admin: admin.ModelAdmin, request: Any) -> bool:
    return any(
        check(request)
        for check in (
            model_admin.has_add_permission,
            model_admin.has_change_permission,
            model_admin.has_delete_permission,
        )
    )


def test_every_admin_either_audits_or_cannot_write(superuser: User) -> None:
    request = RequestFactory().get("/")
    request.user = superuser
    silent = [
        model._meta.label
        for model, model_admin in admin.site._registry.items()
        if not isinstance(model_admin, AuditedModelAdmin) and _may_write(model_admin, request)
    ]
    assert silent == []


def test_deployment_requests_cannot_be_deleted_single_or_bulk(superuser: User) -> None:
    request = RequestFactory().get("/")
    request.user = superuser
    deployment_admin = admin.site._registry[DeploymentRequest]
    assert not deployment_admin.has_delete_permission(request)
    assert "delete_selected" not in deployment_admin.get_actions(request)
