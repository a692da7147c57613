"""Reads of the audit trail."""

from __future__ import annotations

from datetime import datetime

from django.db.models import QuerySet

from governance.audit.models import AuditCheckpoint, AuditEvent


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


def audit_checkpoints() -> QuerySet[AuditCheckpoint]:
    return AuditCheckpoint.objects.order_by("seq", "id")
