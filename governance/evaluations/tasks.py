"""Thin Celery tasks around the job services. Polling re-schedules itself; no worker ever sleeps."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from governance.evaluations.evals import evals_reconcile
from governance.evaluations.services import NextStep, jobrun_poll, jobrun_submit, jobs_resume


def _follow(run_id: int, step: NextStep) -> None:
    if step.poll_in is not None:
        jobrun_poll_task.apply_async((run_id,), countdown=step.poll_in)
    if step.resubmit_in is not None:
        jobrun_submit_task.apply_async((run_id,), countdown=step.resubmit_in)


@shared_task(name="jobs.submit", soft_time_limit=120, time_limit=180)
def jobrun_submit_task(run_id: int) -> None:
    _follow(run_id, jobrun_submit(run_id=run_id))


@shared_task(name="jobs.poll", soft_time_limit=60, time_limit=120)
def jobrun_poll_task(run_id: int) -> None:
    _follow(run_id, jobrun_poll(run_id=run_id))


@shared_task(name="jobs.resume", soft_time_limit=60, time_limit=120)
def jobs_resume_task(on_start: bool = False) -> dict[str, list[int]]:
    found = jobs_resume(on_start=on_start)
    found["verdicts"] = evals_reconcile()  # eval runs whose job ended but whose verdict was missed
    for run_id in found["poll"]:
        jobrun_poll_task.delay(run_id)
    for run_id in found["submit"]:
        jobrun_submit_task.delay(run_id)
    return found


def resume_polling_on_start(sender: Any = None, **kwargs: Any) -> None:
    jobs_resume_task.delay(on_start=True)
