from __future__ import annotations

from celery import shared_task

from governance.capacity.services import capacity_plan_compute


@shared_task(name="capacity.compute_plan")
def capacity_plan_compute_task(plan_id: int) -> str:
    return capacity_plan_compute(plan_id=plan_id).status
