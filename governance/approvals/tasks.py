"""Approval packet tasks, on the heavy queue (governance.celery.route_task): rendering a packet
and verifying an upload take seconds of CPU and must never hold a web worker or a shared lock."""

from __future__ import annotations

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings

from governance.approvals.services import (
    packet_complete,
    packet_render_timed_out,
    verification_job_run,
    verification_job_timed_out,
    verification_jobs_expire,
)
from governance.approvals.services.verifications import VERIFY_HARD_EXTRA_S


@shared_task(
    name="approvals.packet_complete",
    soft_time_limit=settings.APPROVALS_RENDER_SOFT_TIME_LIMIT_S,
    time_limit=settings.APPROVALS_RENDER_SOFT_TIME_LIMIT_S + 30,
)
def packet_complete_task(packet_id: int) -> str:
    try:
        return packet_complete(packet_id=packet_id)
    except SoftTimeLimitExceeded:
        return packet_render_timed_out(packet_id=packet_id, seconds=settings.APPROVALS_RENDER_SOFT_TIME_LIMIT_S)


@shared_task(
    name="approvals.verify_upload",
    soft_time_limit=settings.APPROVALS_VERIFY_SOFT_TIME_LIMIT_S,
    time_limit=settings.APPROVALS_VERIFY_SOFT_TIME_LIMIT_S + VERIFY_HARD_EXTRA_S,
)
def verify_upload_task(job_id: int) -> str:
    try:
        return verification_job_run(job_id=job_id)
    except SoftTimeLimitExceeded:
        return verification_job_timed_out(job_id=job_id, seconds=settings.APPROVALS_VERIFY_SOFT_TIME_LIMIT_S)


@shared_task(name="approvals.verifications_expire", soft_time_limit=60, time_limit=90)
def verifications_expire_task() -> dict[str, int]:
    return verification_jobs_expire()
