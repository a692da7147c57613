"""Reads of the audit trail."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import QuerySet

from governance.audit.models import AuditCheckpoint, AuditEvent
from governance.core.signals import audit_objects_hidden


def audit_events_filter(
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    actor: str | None = None,
    action: int | None = None,
    object_type: str | None = None,
    object_id: str | None = None,
) -> QuerySet[AuditEvent]:
    events = AuditEvent.objects.all()
    if since is not None:
        events = events.filter(occurred_at__gte=since)
    if until is not None:
        events = events.filter(occurred_at__lt=until)
    if actor:
        events = events.filter(actor_name=actor)
    if action is not None:
        events = events.filter(action=action)
    if object_type:
        events = events.filter(object_type=object_type)
    if object_id:
        events = events.filter(object_id=object_id)
    return events.order_by("seq")


def audit_events_visible_to(user: Any, events: QuerySet[AuditEvent]) -> QuerySet[AuditEvent]:
    """Auditors and admins see every event; anyone else never sees the events of an object they
    would get 404 for (a reviewer and another team's draft). The apps owning those objects answer
    the `audit_objects_hidden` signal (they sit above this app)."""
    from governance.core.roles import Role, has_role

    if has_role(user, Role.AUDITOR, Role.ADMIN):
        return events
    for _receiver, hidden in audit_objects_hidden.send(sender=AuditEvent, user=user):
        if not isinstance(hidden, dict):
            continue
        for object_type, object_ids in hidden.items():
            events = events.exclude(object_type=object_type, object_id__in=list(object_ids))
    return events


def audit_checkpoints() -> QuerySet[AuditCheckpoint]:
    return AuditCheckpoint.objects.order_by("seq", "id")
