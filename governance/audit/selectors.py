"""Reads of the audit trail."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db.models import Count, QuerySet

from governance.audit.models import AuditCheckpoint, AuditEvent
from governance.core.visibility import hidden_objects


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
    """The one restriction of audit events, for the API and the web pages alike: auditors and
    admins see every event; anyone else never sees the events of an object they would get 404 for
    (a reviewer and another team's draft). The apps owning those objects registered their
    visibility selectors with core.visibility (they sit above this app); that read fails closed."""
    from governance.core.roles import Role, has_role

    if has_role(user, Role.AUDITOR, Role.ADMIN):
        return events
    for object_type, object_ids in hidden_objects(user).items():
        if isinstance(object_ids, QuerySet) or object_ids:  # a query is a subquery: never run here
            events = events.exclude(object_type=object_type, object_id__in=object_ids)
    return events


def audit_events_of_actions(actions: Sequence[int], since: datetime, until: datetime) -> QuerySet[AuditEvent]:
    """The events of `actions` in [since, until), in chain order (the period report)."""
    return AuditEvent.objects.filter(occurred_at__gte=since, occurred_at__lt=until, action__in=actions).order_by("seq")


def audit_data_counts(action: int, *keys: str) -> list[tuple[Any, ...]]:
    """How many events of `action` hold each combination of the values at `keys` of their data
    (`/metrics`: sign-offs by role and decision, refusals by code), as (value, ..., count) rows."""
    fields = [f"data__{key}" for key in keys]
    return list(
        AuditEvent.objects.filter(action=action).values_list(*fields).annotate(n=Count("pk")).values_list(*fields, "n")
    )


def audit_checkpoints() -> QuerySet[AuditCheckpoint]:
    return AuditCheckpoint.objects.order_by("seq", "id")
