"""Writes of single sign-on: the user a provider account signs in as, and their roles and teams
from the group claim. Role and team changes are audited by the m2m receivers (user.roles_changed,
team.members_changed) with `system:sso` as the actor; the mapping itself (claim groups -> roles,
teams) as a user.changed event whenever it changed something."""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import Group, User
from django.db import transaction
from django.utils import timezone

from governance.audit.actions import AuditAction
from governance.audit.services import audit_record
from governance.core.context import acting_as
from governance.core.models import Team
from governance.core.roles import Role
from governance.core.services import write_service
from governance.sso.claims import claim_groups, map_groups
from governance.sso.models import ExternalIdentity, StepUp

logger = logging.getLogger(__name__)
SSO_ACTOR = "system:sso"


CI_ACCOUNT_PREFIX = "ci-"  # the gate's CI service accounts (gate.services._ci_service_user)
RENAMED_PREFIX = "sso-"  # what a provider account named like one signs in as


def _username(claims: Mapping[str, Any]) -> str:
    """The provider's preferred user name when it is free; else made unique with a hash of the
    subject. Both comparisons ignore case: no provider account is named `CI-…` beside the CI
    accounts, or `SSO-CI-…` beside a renamed `sso-ci-…`, names that read as the same account."""
    wanted = str(claims.get("preferred_username") or claims.get("email") or "user").split("@")[0][:100] or "user"
    if wanted.casefold().startswith(CI_ACCOUNT_PREFIX):  # never a CI service account's name, in any case
        wanted = f"{RENAMED_PREFIX}{wanted}"
    if not User.objects.filter(username__iexact=wanted).exists():
        return wanted
    suffix = hashlib.sha256(f"{claims.get('iss')}|{claims.get('sub')}".encode()).hexdigest()[:10]
    return f"{wanted}-{suffix}"


@write_service
def sso_user_create(*, issuer: str, claims: Mapping[str, Any]) -> User:
    """A user for a provider account seen for the first time, with the roles its groups map to.
    The user has no usable password: under SSO they sign in (and re-authenticate) at the provider."""
    with transaction.atomic():
        user = User(username=_username(claims))
        user.set_unusable_password()
        _copy_profile(user, claims)
        user.save()
        ExternalIdentity.objects.create(user=user, issuer=issuer, subject=str(claims["sub"]))
        sso_user_sync(user=user, claims=claims, created=True)
    return user


def _copy_profile(user: User, claims: Mapping[str, Any]) -> list[str]:
    """Name and e-mail from the claims (they appear in the printed name of a signature)."""
    given = str(claims.get("given_name") or "")
    family = str(claims.get("family_name") or "")
    if not (given or family) and claims.get("name"):
        given, _, family = str(claims["name"]).partition(" ")
    wanted = {"first_name": given[:150], "last_name": family[:150], "email": str(claims.get("email") or "")[:254]}
    changed = [field for field, value in wanted.items() if value and getattr(user, field) != value]
    for field in changed:
        setattr(user, field, wanted[field])
    return changed


@write_service
def sso_user_sync(*, user: User, claims: Mapping[str, Any], created: bool = False) -> User:
    """Roles and mapped teams follow the group claim at every sign-in: a group removed at the
    provider removes the role here at the next sign-in. Roles are the provider's to grant under
    SSO (a role given in the admin is replaced); teams outside the team map are left alone."""
    access = map_groups(
        claim_groups(claims, settings.OIDC_GROUPS_CLAIM), settings.OIDC_ROLE_GROUPS, settings.OIDC_TEAM_GROUPS
    )
    with transaction.atomic(), acting_as(SSO_ACTOR):
        changed_fields = _copy_profile(user, claims)
        if changed_fields:
            user.save(update_fields=changed_fields)
        before_roles = set(user.groups.filter(name__in=Role.values).values_list("name", flat=True))
        if before_roles != access.roles:
            wanted = [Group.objects.get_or_create(name=role)[0] for role in sorted(access.roles)]
            others = list(user.groups.exclude(name__in=Role.values))
            user.groups.set([*others, *wanted])  # audited as user.roles_changed
        mapped_teams = set(settings.OIDC_TEAM_GROUPS.values())
        teams = {team.name: team for team in Team.objects.filter(name__in=mapped_teams)}
        missing = sorted(access.teams - set(teams))
        if missing:
            logger.warning("sso: mapped teams do not exist: %s", ", ".join(missing))
        before_teams = set(user.teams.filter(name__in=mapped_teams).values_list("name", flat=True))
        for name in sorted((access.teams & set(teams)) - before_teams):
            teams[name].members.add(user)  # audited as team.members_changed
        for name in sorted(before_teams - access.teams):
            teams[name].members.remove(user)
        after_teams = set(user.teams.filter(name__in=mapped_teams).values_list("name", flat=True))
        ExternalIdentity.objects.filter(user=user).update(last_login_at=timezone.now())
        if created or before_roles != access.roles or before_teams != after_teams:
            audit_record(
                actor=SSO_ACTOR,
                action=AuditAction.USER_CHANGED,
                obj=("auth.user", user.get_username()),
                data={
                    "source": "sso",
                    "created": created,
                    "claim": settings.OIDC_GROUPS_CLAIM,
                    "groups": list(access.groups),
                    "roles": {"before": sorted(before_roles), "after": sorted(access.roles)},
                    "teams": {"before": sorted(before_teams), "after": sorted(after_teams)},
                },
            )
    return user


@write_service
def step_up_record(*, user: User, auth_time: datetime) -> StepUp:
    """A step-up the sign-in callback accepted (the same user, a fresh `auth_time`): one signature's
    worth. The user's step-ups too old to sign anything any more are dropped with it."""
    with transaction.atomic():
        too_old = timezone.now() - timedelta(seconds=settings.SSO_STEP_UP_MAX_AGE_S + 60)
        StepUp.objects.filter(user=user, created_at__lt=too_old).delete()
        return StepUp.objects.create(user=user, auth_time=auth_time)


def step_up_take(*, step_up_id: uuid.UUID, user: User) -> bool:
    """Take `user`'s unused step-up `step_up_id` for one signature, in the caller's transaction
    (the sign-off's). One conditional UPDATE (`... WHERE used_at IS NULL`): of concurrent takes on
    PostgreSQL one updates the row and the others wait on its row lock, then find it used once
    that transaction commits (or unused, and take it, if it rolled back). False: used already,
    or not theirs."""
    taken = StepUp.objects.filter(pk=step_up_id, user=user, used_at__isnull=True).update(used_at=timezone.now())
    return taken == 1
