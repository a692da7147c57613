"""/healthz: 200 when the database and the broker answer, 503 otherwise."""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import connections
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

logger = logging.getLogger(__name__)


def check_database() -> str | None:
    try:
        with connections["default"].cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:
        return f"{type(exc).__name__}"
    return None


def check_broker() -> str | None:
    from governance.celery import app

    try:
        with app.connection_for_write() as connection:
            connection.ensure_connection(max_retries=1, timeout=2)
    except Exception as exc:
        return f"{type(exc).__name__}"
    return None


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    failures = {name: error for name, error in (("database", check_database()), ("broker", check_broker())) if error}
    checks = {name: ("fail: " + failures[name]) if name in failures else "ok" for name in ("database", "broker")}
    if failures:
        logger.warning("health check failed", extra={"checks": checks})
    body = {"status": "fail" if failures else "ok", "checks": checks, "debug": settings.DEBUG}
    return JsonResponse(body, status=503 if failures else 200)
