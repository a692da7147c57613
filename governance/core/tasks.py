from __future__ import annotations

from celery import shared_task


@shared_task(name="core.ping", soft_time_limit=10, time_limit=20)
def ping(payload: str) -> dict[str, str]:
    """Round-trip check used by /healthz tooling and the worker test."""
    import os

    return {"echo": payload, "worker_pid": str(os.getpid())}
