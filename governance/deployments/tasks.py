from __future__ import annotations

from celery import shared_task

from governance.deployments.services import deployments_expire_approvals, deployments_reevaluate, waivers_expire


@shared_task(name="deployments.expire", soft_time_limit=240, time_limit=300)
def deployments_expire_task() -> dict[str, int]:
    """Beat: end approvals past their validity and re-open findings whose waiver expired."""
    return {"approvals": deployments_expire_approvals(), "waivers": waivers_expire()}


@shared_task(name="deployments.reevaluate_license", soft_time_limit=540, time_limit=600)
def deployments_reevaluate_license_task(license_key: str) -> int:
    return deployments_reevaluate(license_key=license_key)
