from __future__ import annotations

from typing import Any

from celery import shared_task


@shared_task(name="core.ping", soft_time_limit=10, time_limit=20)
def ping(payload: str) -> dict[str, str]:
    """Round-trip check used by /healthz tooling and the worker test."""
    import os

    return {"echo": payload, "worker_pid": str(os.getpid())}


@shared_task(name="core.outbox_flush", soft_time_limit=60, time_limit=120)
def outbox_flush_task(on_start: bool = False) -> dict[str, int]:
    """Beat: send again the outbox rows the broker never took or no worker acknowledged."""
    from governance.core.outbox import outbox_flush

    return outbox_flush(on_start=on_start)


def outbox_flush_on_start(sender: Any = None, **kwargs: Any) -> None:
    """worker_ready: a restarted worker sends at once what a killed worker held."""
    outbox_flush_task.delay(on_start=True)
