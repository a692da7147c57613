"""Capacity plan tasks. Computing a plan is heavy work: it is routed to the heavy queue
(governance.celery.route_task), so a burst of big plans never delays the other tasks."""

from __future__ import annotations

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded

from governance.capacity.services import capacity_plan_compute, capacity_plan_timed_out, capacity_plans_resume

# The planner answers in well under a second for bounded inputs (serializers.py, planner/hf_config.py);
# the hard limit must stay below CAPACITY_PLAN_LEASE_S.
PLAN_SOFT_TIME_LIMIT_S = 60


@shared_task(name="capacity.compute_plan", soft_time_limit=PLAN_SOFT_TIME_LIMIT_S, time_limit=90)
def capacity_plan_compute_task(plan_id: int) -> str:
    try:
        return capacity_plan_compute(plan_id=plan_id).status
    except SoftTimeLimitExceeded:
        return capacity_plan_timed_out(plan_id=plan_id, seconds=PLAN_SOFT_TIME_LIMIT_S).status


@shared_task(name="capacity.resume", soft_time_limit=60, time_limit=120)
def capacity_plans_resume_task() -> list[int]:
    return capacity_plans_resume()
