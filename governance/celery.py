"""The Celery app. Tasks are thin: they take ids, load rows and call a service."""

from __future__ import annotations

import os
from typing import Any

from celery import Celery

from governance.core.localenv import load_local_env
from governance.core.logging import quiet_periodic_task_routine

if "DJANGO_SETTINGS_MODULE" not in os.environ:  # the celery CLI from a checkout; never inside tests or Django
    load_local_env()  # reads the same .env as manage.py (the environment wins)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "governance.settings")

HEAVY_TASKS = frozenset({"capacity.compute_plan", "approvals.packet_complete", "approvals.verify_upload"})


def route_task(name: str, args: Any, kwargs: Any, options: Any, task: Any = None, **kw: Any) -> dict[str, str] | None:
    """Heavy planner and PDF work goes to its own queue (CELERY_HEAVY_QUEUE, its own worker), everything
    else to the default queue: a user's burst of big plans never delays the others' tasks."""
    from django.conf import settings

    if name in HEAVY_TASKS:
        return {"queue": settings.CELERY_HEAVY_QUEUE}
    return None


app = Celery("governance")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
quiet_periodic_task_routine()  # the periodic loops' received/succeeded/sent lines at DEBUG
