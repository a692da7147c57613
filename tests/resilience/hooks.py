"""Loaded into the fault suite's worker only (`celery worker --include tests.resilience.hooks`).

A test writes FAULT_HOLD_DIR/<task name>; the next run of that task in this worker writes
`<task name>.held` and stops there (sleeps) so that the test can SIGKILL the worker at that point.
The hold file is removed first, so the redelivered run after the restart goes through. Capacity
plans are held after the worker claimed the plan (inside the compute service), the other tasks as
they start."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from celery.signals import task_prerun

HOLD_DIR = Path(os.environ.get("FAULT_HOLD_DIR", "/nonexistent"))


def _hold_here(name: str) -> None:
    marker = HOLD_DIR / name
    if marker.exists():
        marker.unlink()
        (HOLD_DIR / f"{name}.held").write_text(str(os.getpid()))
        time.sleep(600)  # until killed


def _hold_after_claim() -> None:
    """Wrap the planner call the compute service makes once it holds the plan's claim."""
    from governance.capacity import services

    original = services.capacity_plan_run
    if getattr(original, "fault_hook", False):
        return

    def held(inputs: Any, **kwargs: Any) -> Any:
        _hold_here("capacity.compute_plan")
        return original(inputs, **kwargs)

    held.fault_hook = True  # type: ignore[attr-defined]
    services.capacity_plan_run = held


def _on_prerun(sender: Any = None, task: Any = None, **kwargs: Any) -> None:
    if task is None:
        return
    if task.name == "capacity.compute_plan":
        _hold_after_claim()  # in the pool process that runs it (Django is set up by now)
    else:
        _hold_here(task.name)


task_prerun.connect(_on_prerun, weak=False)
