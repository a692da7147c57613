"""Approval packet tasks, on the heavy queue (governance.celery.route_task): rendering a packet
takes seconds of CPU and must never hold a web worker or a shared lock."""

from __future__ import annotations

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings

from governance.approvals.services import packet_complete, packet_render_timed_out


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
