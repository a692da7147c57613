"""Transactional outbox: the only way a write service hands work to Celery.

    with transaction.atomic():
        run.save()
        outbox_enqueue("jobs.submit", run.pk)

The row is part of the transaction: the task exists exactly when the change does. It is sent once
the transaction commits; a broker that is down then (kombu's OperationalError, redis' ConnectionError)
leaves the row unsent and the request still answers with its saved change. Beat (core.outbox_flush)
sends unsent rows again, and rows sent but not acknowledged within OUTBOX_LEASE_S (a worker killed
mid-task, a message lost with the broker); a worker that starts sends every unacknowledged row at
once (the work a killed worker held is not waited out). The worker acknowledges a row when its task
returns (task_postrun, state SUCCESS); a task that raised is sent again by beat, up to
OUTBOX_MAX_ATTEMPTS sends in all. Tasks sent this way must be idempotent: each claims its own row
(a job run, a plan) before working, so a duplicate delivery does nothing."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import models, transaction
from django.db.models import F
from django.utils import timezone

from governance.core.models import OutboxMessage

logger = logging.getLogger(__name__)

HEADER = "outbox_id"  # the message header that carries the row's id to the worker


def outbox_enqueue(task: str, *args: Any, **kwargs: Any) -> OutboxMessage:
    """Write the task row in the caller's transaction and send it after commit."""
    message = OutboxMessage.objects.create(task=task, args=list(args), kwargs=kwargs)
    transaction.on_commit(lambda: outbox_send(message.pk))
    return message


def outbox_send(message_id: int) -> bool:
    """Send one row to the broker. False (and the row left for beat) when the broker refuses."""
    from governance.celery import app

    message = OutboxMessage.objects.filter(pk=message_id, acked_at__isnull=True).first()
    if message is None:
        return False
    try:
        app.send_task(message.task, args=message.args, kwargs=message.kwargs, headers={HEADER: message.pk})
    except Exception as exc:  # any broker failure: the row is saved, beat sends it later
        OutboxMessage.objects.filter(pk=message.pk).update(
            attempts=F("attempts") + 1, last_error=f"send: {type(exc).__name__}"[:300]
        )
        logger.warning("outbox: %s not sent; beat re-sends it", message.task, extra={"outbox": message.pk})
        return False
    OutboxMessage.objects.filter(pk=message.pk).update(sent_at=timezone.now(), attempts=F("attempts") + 1)
    return True


def outbox_due(*, now: datetime | None = None, on_start: bool = False) -> list[int]:
    """Rows to send again: never sent (after a grace for the after-commit send still under way) or
    sent and unacknowledged past the lease. On a worker's start: every unacknowledged row."""
    now = now or timezone.now()
    pending = OutboxMessage.objects.filter(acked_at__isnull=True, attempts__lt=settings.OUTBOX_MAX_ATTEMPTS)
    if not on_start:
        pending = pending.filter(
            models.Q(sent_at__isnull=True, created_at__lte=now - timedelta(seconds=settings.OUTBOX_SEND_GRACE_S))
            | models.Q(sent_at__lte=now - timedelta(seconds=settings.OUTBOX_LEASE_S))
        )
    return list(pending.order_by("created_at").values_list("pk", flat=True)[: settings.OUTBOX_FLUSH_BATCH])


def outbox_flush(*, on_start: bool = False) -> dict[str, int]:
    """Beat (and a starting worker): send the due rows again."""
    due = outbox_due(on_start=on_start)
    sent = sum(outbox_send(pk) for pk in due)
    return {"due": len(due), "sent": sent}


def outbox_ack(message_id: Any, *, error: str = "") -> None:
    """The worker's acknowledgement: the task finished (error empty) or raised (kept for a re-send)."""
    try:
        pk = int(message_id)
    except (TypeError, ValueError):
        return
    if error:
        OutboxMessage.objects.filter(pk=pk, acked_at__isnull=True).update(last_error=error[:300])
    else:
        OutboxMessage.objects.filter(pk=pk, acked_at__isnull=True).update(acked_at=timezone.now(), last_error="")


def on_task_postrun(sender: Any = None, task: Any = None, state: str | None = None, **kwargs: Any) -> None:
    """Celery's task_postrun: acknowledge the outbox row the message came from, if any."""
    request = getattr(task, "request", None)
    message_id = getattr(request, HEADER, None) or (getattr(request, "headers", None) or {}).get(HEADER)
    if message_id is None:
        return
    retval = kwargs.get("retval")
    outbox_ack(message_id, error="" if state == "SUCCESS" else f"task: {type(retval).__name__}")
