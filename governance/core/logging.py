"""Request-scoped context for log lines: every line carries the id of the HTTP request it serves; and
Celery's routine lines of the periodic loops kept at DEBUG."""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Callable

request_id_var: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")


def current_request_id() -> str:
    return request_id_var.get()


class RequestIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id_var.get()
        return True


# Celery's routine lines, by their format: a task received and succeeded (worker), sent (beat).
_ROUTINE_FORMATS = ("Task %(name)s[%(id)s] received", "Task %(name)s[%(id)s] succeeded", "Scheduler: Sending due task")


class PeriodicTaskRoutineFilter(logging.Filter):
    """Celery logs every task received and succeeded, and beat every task it sends, at INFO; the
    periodic loops (outbox flush, job and plan resume, quantize reconcile: RESUME_INTERVAL_S, 15 s)
    wrote a dozen such lines every 15 s and buried what matters, such as `make run`'s demo passwords.
    For beat-scheduled tasks those lines go to DEBUG; their failures and retries keep their level, and
    what a loop does (a job resubmitted) its own code logs. Attached to Celery's loggers."""

    def __init__(self, task_names: Callable[[], frozenset[str]]) -> None:
        super().__init__()
        self._task_names = task_names

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.INFO or not str(record.msg).startswith(_ROUTINE_FORMATS):
            return True
        args = record.args
        task = args.get("name") if isinstance(args, dict) else args[1] if isinstance(args, tuple) and args[1:] else None
        if task not in self._task_names():
            return True
        record.levelno, record.levelname = logging.DEBUG, logging.getLevelName(logging.DEBUG)
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


def beat_task_names() -> frozenset[str]:
    from django.conf import settings

    return frozenset(str(entry["task"]) for entry in settings.CELERY_BEAT_SCHEDULE.values())


def quiet_periodic_task_routine() -> None:
    """Worker and beat: the routine lines of beat-scheduled tasks at DEBUG (see the filter)."""
    routine = PeriodicTaskRoutineFilter(beat_task_names)
    for name in ("celery.worker.strategy", "celery.app.trace", "celery.beat"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, PeriodicTaskRoutineFilter) for f in logger.filters):
            logger.addFilter(routine)
