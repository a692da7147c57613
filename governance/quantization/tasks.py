"""Thin Celery tasks: completion normally follows the job's end (a signal); this one catches up on
runs whose completion was missed."""

from __future__ import annotations

from celery import shared_task

from governance.quantization.selectors import quantize_runs_unfinished_with_final_jobs
from governance.quantization.services import quantize_run_complete


@shared_task(name="quantize.reconcile", soft_time_limit=120, time_limit=180)
def quantize_runs_reconcile_task() -> list[int]:
    done = quantize_runs_unfinished_with_final_jobs()
    for run_id in done:
        quantize_run_complete(run_id=run_id)
    return done
