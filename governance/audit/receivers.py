"""Audit events for changes announced by signals: logins (Django), role and team membership
changes (Django's m2m signals), token issue/revoke and admin saves and deletions (core).

They come through Django's signals because every path (login views, the admin, a shell) must
leave a trace, not only the paths that go through our services. Each receiver runs inside the
transaction of the change it records. Membership signals carry no user: the actor is whoever
the admin view (or a service) declared with `acting_as`, else "system".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import Group, User
from django.contrib.auth.signals import user_logged_in, user_logged_out, user_login_failed
from django.db.models import Model
from django.db.models.signals import m2m_changed
from django.dispatch import receiver
from django.http import HttpRequest

from governance.audit.actions import AuditAction
from governance.audit.services import audit_record
from governance.core.context import current_actor
from governance.core.models import ApiToken, Team
from governance.core.signals import (
    admin_object_deleted,
    admin_object_saved,
    api_token_issued,
    api_token_revoked,
    team_created,
)

_VERBS = {"post_add": "added", "post_remove": "removed", "pre_clear": "removed"}


def _client(request: HttpRequest | None) -> dict[str, str]:
    return {} if request is None else {"path": request.path, "ip": request.META.get("REMOTE_ADDR", "")}


def _user_ref(user: User) -> tuple[str, str]:
    return ("auth.user", user.get_username())


@receiver(user_logged_in, dispatch_uid="audit-user-logged-in")
def audit_login(sender: Any, request: HttpRequest | None, user: User, **kwargs: Any) -> None:
    audit_record(actor=user, action=AuditAction.USER_LOGIN, obj=_user_ref(user), data=_client(request))


@receiver(user_logged_out, dispatch_uid="audit-user-logged-out")
def audit_logout(sender: Any, request: HttpRequest | None, user: User | None, **kwargs: Any) -> None:
    if user is not None:
        audit_record(actor=user, action=AuditAction.USER_LOGOUT, obj=_user_ref(user))


@receiver(user_login_failed, dispatch_uid="audit-user-login-failed")
def audit_login_failed(
    sender: Any, credentials: dict[str, Any], request: HttpRequest | None = None, **kwargs: Any
) -> None:
    # Only the name tried: Django masks the password in `credentials`, and nothing else of it is kept.
    username = str(credentials.get("username", ""))[:150]
    audit_record(
        actor="anonymous",
        action=AuditAction.USER_LOGIN_FAILED,
        obj=("auth.user", username),
        data={"username": username, **_client(request)},
    )


@dataclass(frozen=True)
class _Membership:
    """A many-to-many relation whose changes are audited on the timeline of one side, the owner
    (a user's roles, a team's members), whichever side the change was made from."""

    owner: type[Model]
    member: type[Model]
    members: str  # the owner's accessor for its members
    owners: str  # the member's accessor for its owners
    member_name: str  # the field that names a member in the event
    action: AuditAction
    ref: Callable[[Any], Any]  # the event's object, from the owner


_ROLES = _Membership(User, Group, "groups", "user_set", "name", AuditAction.USER_ROLES_CHANGED, _user_ref)
_TEAM_MEMBERS = _Membership(Team, User, "members", "teams", "username", AuditAction.TEAM_MEMBERS_CHANGED, lambda t: t)
_TEAM_LEADS = _Membership(Team, User, "leads", "led_teams", "username", AuditAction.TEAM_LEADS_CHANGED, lambda t: t)


def _changed_pks(instance: Model, action: str, pk_set: set[Any] | None, related_name: str) -> set[Any]:
    if action == "pre_clear":  # clear() sends no pk_set: what is removed is everything related now
        return set(getattr(instance, related_name).values_list("pk", flat=True))
    return set(pk_set or ())


def _audit_membership(
    relation: _Membership, instance: Model, action: str, reverse: bool, pk_set: set[Any] | None
) -> None:
    """One event per owner whose members changed, naming the members added or removed."""
    verb = _VERBS.get(action)
    if verb is None:
        return
    changes: list[tuple[Model, list[str]]]
    if not reverse:  # owner.members.add(...): the instance is the owner
        if not isinstance(instance, relation.owner):
            raise TypeError(f"{relation.owner.__name__} membership signal from a {type(instance).__name__}")
        pks = _changed_pks(instance, action, pk_set, relation.members)
        members = relation.member._default_manager.filter(pk__in=pks)
        names = sorted(members.values_list(relation.member_name, flat=True))
        changes = [(instance, names)] if names else []
    else:  # member.owners.add(...): the instance is the member
        if not isinstance(instance, relation.member):
            raise TypeError(f"{relation.member.__name__} membership signal from a {type(instance).__name__}")
        pks = _changed_pks(instance, action, pk_set, relation.owners)
        name = getattr(instance, relation.member_name)
        changes = [(owner, [name]) for owner in relation.owner._default_manager.filter(pk__in=pks)]
    for owner, names in changes:
        audit_record(actor=current_actor(), action=relation.action, obj=relation.ref(owner), data={verb: names})


@receiver(m2m_changed, sender=User.groups.through, dispatch_uid="audit-user-roles")
def audit_roles_changed(
    sender: Any, instance: Model, action: str, reverse: bool, pk_set: set[Any] | None, **kwargs: Any
) -> None:
    """One event per user whose roles changed (user.groups.add(...) or group.user_set.add(...))."""
    _audit_membership(_ROLES, instance, action, reverse, pk_set)


@receiver(m2m_changed, sender=Team.members.through, dispatch_uid="audit-team-members")
def audit_team_members_changed(
    sender: Any, instance: Model, action: str, reverse: bool, pk_set: set[Any] | None, **kwargs: Any
) -> None:
    """One event per team whose members changed, on the team's timeline."""
    _audit_membership(_TEAM_MEMBERS, instance, action, reverse, pk_set)


@receiver(m2m_changed, sender=Team.leads.through, dispatch_uid="audit-team-leads")
def audit_team_leads_changed(
    sender: Any, instance: Model, action: str, reverse: bool, pk_set: set[Any] | None, **kwargs: Any
) -> None:
    """Leads issue a team's CI tokens and manage its members: who made whom a lead is on the trail too."""
    _audit_membership(_TEAM_LEADS, instance, action, reverse, pk_set)


@receiver(team_created, dispatch_uid="audit-team-created")
def audit_team_created(sender: Any, team: Team, actor: Any, **kwargs: Any) -> None:
    audit_record(actor=actor, action=AuditAction.TEAM_CREATED, obj=team, data={"name": team.name})


def _token_facts(token: ApiToken, **extra: Any) -> dict[str, Any]:
    """What the audit trail says about an API token: its prefix identifies it; the clear text and
    digest never go here."""
    return {
        "user": token.user.get_username(),
        "name": token.name,
        "prefix": token.prefix,
        "team": token.team.name if token.team else None,
        **extra,
    }


@receiver(api_token_issued, dispatch_uid="audit-token-issued")
def audit_token_issued(sender: Any, token: ApiToken, actor: Any, **kwargs: Any) -> None:
    expires_at = token.expires_at.isoformat() if token.expires_at else None
    facts = _token_facts(
        token,
        scopes=token.scopes,
        deployments=token.deployment_codes,
        environments=token.environments,
        expires_at=expires_at,
    )
    audit_record(actor=actor, action=AuditAction.API_TOKEN_ISSUED, obj=token, data=facts)


@receiver(api_token_revoked, dispatch_uid="audit-token-revoked")
def audit_token_revoked(sender: Any, token: ApiToken, actor: Any, **kwargs: Any) -> None:
    audit_record(actor=actor, action=AuditAction.API_TOKEN_REVOKED, obj=token, data=_token_facts(token))


def _admin_ref(obj: Model) -> tuple[str, str]:
    public_id = getattr(obj, "code", None) or getattr(obj, "key", None) or getattr(obj, "username", None) or obj.pk
    return obj._meta.label_lower, str(public_id)


@receiver(admin_object_saved, dispatch_uid="audit-admin-saved")
def audit_admin_saved(sender: Any, obj: Model, actor: Any, created: bool, fields: list[str], **kwargs: Any) -> None:
    data = {"created": created, "fields": fields, "object": str(obj)}
    audit_record(actor=actor, action=AuditAction.ADMIN_OBJECT_CHANGED, obj=_admin_ref(obj), data=data)


@receiver(admin_object_deleted, dispatch_uid="audit-admin-deleted")
def audit_admin_deleted(sender: Any, obj: Model, actor: Any, bulk: bool, **kwargs: Any) -> None:
    data: dict[str, Any] = {"object": str(obj)}
    if bulk:
        data["bulk"] = True
    audit_record(actor=actor, action=AuditAction.ADMIN_OBJECT_DELETED, obj=_admin_ref(obj), data=data)
