from __future__ import annotations

from celery import shared_task

from governance.audit.services import audit_checkpoint_create


@shared_task(name="audit.checkpoint", soft_time_limit=300, time_limit=360)
def audit_checkpoint_task() -> int | None:
    """Beat: sign the chain head when it moved since the last checkpoint."""
    checkpoint = audit_checkpoint_create()
    return checkpoint.seq if checkpoint else None
