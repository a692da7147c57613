"""The canary analysis as a Celery job: bounded (soft time limit, each HTTP call's timeout, at most
CANARY_MAX_CASES cases), resumable (beat resends a pending or stalled analysis; a rerun starts its
checks over and leaves a finished one alone) and audited (services)."""

from __future__ import annotations

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings

from governance.canary.services import (
    canary_analyses_resume,
    canary_analysis_run,
    canary_analysis_timed_out,
    fleet_check_run,
)

SOFT_LIMIT_S = settings.CANARY_ANALYSIS_SOFT_TIME_LIMIT_S


@shared_task(name="canary.run", soft_time_limit=SOFT_LIMIT_S, time_limit=SOFT_LIMIT_S + 30)
def canary_analysis_run_task(analysis_id: int) -> str:
    try:
        return str(canary_analysis_run(analysis_id=analysis_id).status)
    except SoftTimeLimitExceeded:
        return str(canary_analysis_timed_out(analysis_id=analysis_id, seconds=SOFT_LIMIT_S).status)


@shared_task(name="canary.resume", soft_time_limit=60, time_limit=120)
def canary_analyses_resume_task() -> list[int]:
    return canary_analyses_resume()


@shared_task(name="canary.fleet_check", soft_time_limit=240, time_limit=300)
def fleet_check_task() -> dict[str, int]:
    """Beat (FLEET_CHECK_INTERVAL_S): re-check every promoted deployment against its plan."""
    checks = fleet_check_run()
    return {"checked": len(checks), "alerts": sum(1 for c in checks if c.status == "alert")}
