"""Receivers: role changes (Django group membership) issue or revoke signing certificates; the
audit bundle asks for the signed packets. An evidence change is not received here: the deployments
app voids the sign-offs itself, and a packet of an old digest is superseded by definition
(approvals.selectors.current_packets)."""

from __future__ import annotations

from functools import partial
from typing import Any

from django.contrib.auth.models import Group, User
from django.db import transaction
from django.db.models.signals import m2m_changed
from django.dispatch import receiver

from governance.approvals.choices import ROLE_GROUPS
from governance.core.roles import ROLES_CACHE

_SIGNING_GROUPS = set(ROLE_GROUPS.values())


@receiver(m2m_changed, sender=User.groups.through)
def _role_changed(
    sender: Any, instance: Any, action: str, reverse: bool, pk_set: set[int] | None, **kwargs: Any
) -> None:
    if action not in ("post_add", "post_remove", "post_clear"):
        return
    if reverse:  # group.user_set.add(...)
        if instance.name not in _SIGNING_GROUPS:
            return
        users = list(User.objects.filter(pk__in=pk_set or ()))
    else:
        if action != "post_clear" and not Group.objects.filter(pk__in=pk_set or (), name__in=_SIGNING_GROUPS).exists():
            return
        users = [instance]
    from governance.approvals.services import certificates_sync

    for user in users:
        user.__dict__.pop(ROLES_CACHE, None)  # the role cache is stale now
        # Revocation now, in this transaction: the CRL must list it before anyone can sign again.
        certificates_sync(user=user, actor="system:roles", issue=False)
        # Issuing generates an RSA key (slow): after commit; sign_off issues lazily if this never ran.
        transaction.on_commit(partial(certificates_sync, user=user, actor="system:roles"))


def on_bundle_files(sender: Any, **kwargs: Any) -> Any:
    from governance.approvals.selectors import approval_bundle_files

    return approval_bundle_files()
